"""Generic traversal of IR trees: a read-only Visitor and a rebuilding Mutator.

Both dispatch on the node's class name: define `visit_For`, `visit_Add`, ... and call
`self.generic_visit(node)` / `self.generic_mutate(node)` to continue into the children. Children
are the expression and statement fields of a node (also inside tuples). Variables in binding
positions (`For.loop_var`, `LetStmt.var`, `Let.var`) and buffers are not children: passes that
care about them handle those nodes explicitly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from loom.ir.expr import BufferLoad, Let, PrimExpr, Var
from loom.ir.stmt import Allocate, BufferStore, For, LetStmt, Stmt

_BINDING_FIELDS = frozenset({"loop_var", "var"})
_IR = (PrimExpr, Stmt)


def children(node: Any) -> list:
    """The child expressions and statements of a node, in field order."""
    out = []
    for name in node._child_fields:
        if name in _BINDING_FIELDS:
            continue
        value = getattr(node, name)
        if isinstance(value, _IR):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(v for v in value if isinstance(v, _IR))
    return out


class Visitor:
    """Walks a tree; override `visit_<Class>` methods."""

    def visit(self, node: Any) -> None:
        getattr(self, "visit_" + type(node).__name__, self.generic_visit)(node)

    def generic_visit(self, node: Any) -> None:
        for child in children(node):
            self.visit(child)


class Mutator:
    """Rebuilds a tree bottom-up; a node whose children did not change is returned as is."""

    def visit(self, node: Any) -> Any:
        return getattr(self, "visit_" + type(node).__name__, self.generic_mutate)(node)

    def generic_mutate(self, node: Any) -> Any:
        changes = {}
        for name in node._child_fields:
            if name in _BINDING_FIELDS:
                continue
            value = getattr(node, name)
            if isinstance(value, _IR):
                new = self.visit(value)
            elif isinstance(value, tuple):
                new = self._mutate_tuple(value)
            else:
                continue
            if new is not value:
                changes[name] = new
        return node.replace(**changes) if changes else node

    def _mutate_tuple(self, items: tuple) -> tuple:
        new = tuple(self.visit(v) if isinstance(v, _IR) else v for v in items)
        return items if all(a is b for a, b in zip(new, items)) else new


def post_order_visit(node: Any, fn: Callable[[Any], None]) -> None:
    """Call `fn` on every expression and statement under `node`, children first."""

    def walk(n: Any) -> None:
        for child in children(n):
            walk(child)
        fn(n)

    walk(node)


class _Substituter(Mutator):
    def __init__(self, mapping: Mapping[Var, PrimExpr]):
        self.mapping = mapping

    def visit_Var(self, v: Var) -> PrimExpr:
        return self.mapping.get(v, v)


def substitute(node: Any, mapping: Mapping[Var, PrimExpr]) -> Any:
    """Replace free occurrences of variables by expressions."""
    if not mapping:
        return node
    return _Substituter(mapping).visit(node)


def _vars_of(n: Any) -> Var | None:
    """The variable a node uses directly: itself, or the data of the buffer it accesses."""

    if isinstance(n, Var):
        return n
    if isinstance(n, BufferLoad | BufferStore):
        return n.buffer.data
    return None


def free_vars(node: Any) -> set[Var]:
    """Variables used in `node`, including the data of buffers it accesses (loop and let
    variables and allocated buffers bound inside are excluded)."""

    used: set[Var] = set()
    bound: set[Var] = set()

    def record(n: Any) -> None:
        v = _vars_of(n)
        if v is not None:
            used.add(v)
        elif isinstance(n, For):
            bound.add(n.loop_var)
        elif isinstance(n, LetStmt | Let):
            bound.add(n.var)
        elif isinstance(n, Allocate):
            bound.add(n.buffer.data)

    post_order_visit(node, record)
    return used - bound


def uses_var(node: Any, var: Var) -> bool:
    """True if `var` occurs in `node` (as a value, or as the data of an accessed buffer)."""
    found = False

    def check(n: Any) -> None:
        nonlocal found
        if _vars_of(n) == var:
            found = True

    post_order_visit(node, check)
    return found


class _Renamer(_Substituter):
    """Substitutes variables by variables, at their uses and where they are bound."""

    def visit_For(self, s):
        new = self.generic_mutate(s)
        var = self.mapping.get(s.loop_var, s.loop_var)
        return new if var is s.loop_var else new.replace(loop_var=var)

    def visit_LetStmt(self, s):
        new = self.generic_mutate(s)
        var = self.mapping.get(s.var, s.var)
        return new if var is s.var else new.replace(var=var)

    visit_Let = visit_LetStmt


def rename_vars(node: Any, mapping: Mapping[Var, Var]) -> Any:
    """Replace variables by other variables everywhere, including loop and let bindings."""
    if not mapping:
        return node
    return _Renamer(mapping).visit(node)
