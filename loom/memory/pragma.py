"""Pragma rules: a pragma on a copy loop nest becomes one call of a data-movement function.

`s[T].pragma(axis, "mvin")` marks the loop nest below `axis`. If a rule is registered for
"mvin", the pass `lower_pragmas` checks that the nest is a plain copy between two buffers
(`dst[...] = src[...]`, indices affine in the loop variables), describes it as at most
`max_dims` dimensions after merging contiguous ones, and replaces the nest with
`symbol(src_address, dst_address, rows, row_bytes, src_stride_bytes, dst_stride_bytes)`,
each argument converted to the dtype the symbol declares; the call returns 0 or fails with the
runtime's last error. `make_args` replaces that argument list for other conventions.
`src_space` / `dst_space` name the address spaces the copy must read and write (for mvin: from
"host" to the accelerator's), so a device address is never passed where a host pointer is
expected. A guard `i < bound` in the nest (a tile at the edge of a tensor) shortens that loop:
the counts become expressions. A rule whose instruction also converts (an accelerator's mvout
that requantizes) gives `convert(value) -> (source load, params)` to recognize `dst = f(src)`,
and may build its own calls with `make_calls(nest) -> [calls]` (each call's status checked).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from loom.registry import Registry


@dataclasses.dataclass(frozen=True)
class PragmaRule:
    """Lower `pragma(<name>)` copy nests to calls of the extern `symbol`."""

    name: str
    symbol: str
    max_dims: int = 2
    make_args: Callable | None = None  # (CopyNest) -> list of argument expressions
    src_space: str | None = None  # address space of the source buffer's scope (None: any)
    dst_space: str | None = None
    convert: Callable | None = None  # (value) -> (source load, params) for dst = f(src)
    make_calls: Callable | None = None  # (CopyNest) -> the extern calls replacing the nest
    doc: str = ""


def _check(rule) -> None:
    if not isinstance(rule, PragmaRule):
        raise TypeError(f"register_pragma_rule takes a PragmaRule, got {rule!r}")
    if not rule.name.isidentifier():
        raise ValueError(f"pragma names are identifiers, got {rule.name!r}")


RULES: Registry[PragmaRule] = Registry(
    "pragma rule",
    check=_check,
    builtins=("loom.target",),  # the targets' rules
)
register_pragma_rule = RULES.register
unregister_pragma_rule = RULES.unregister
list_pragma_rules = RULES.items
# the rule for a pragma name, or None (other pragmas are hints left to the back end)
get_pragma_rule = RULES.find
