"""Memory scopes, the rules that lower pragmas to data-movement calls, memory pools (`Pool`,
`pin`: where the planning pass puts a program's buffers) and the static memory planner (`plan`:
offsets for buffers with lifetimes; loom/memory/planner)."""

from loom.memory import planner
from loom.memory.planner import plan
from loom.memory.pool import Pin, Pool, pin
from loom.memory.pragma import PragmaRule, get_pragma_rule, list_pragma_rules, register_pragma_rule
from loom.memory.scope import (
    FixedAddress,
    MemoryScope,
    RuntimeAllocator,
    Stack,
    get,
    register,
    unregister,
)
from loom.memory.scope import list_scopes as list

__all__ = [
    "FixedAddress",
    "MemoryScope",
    "Pin",
    "Pool",
    "PragmaRule",
    "RuntimeAllocator",
    "Stack",
    "get",
    "get_pragma_rule",
    "list",
    "list_pragma_rules",
    "pin",
    "plan",
    "planner",
    "register",
    "register_pragma_rule",
    "unregister",
]
