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

from loom.ir.expr import BufferLoad, FloatImm, IntImm, Let, PrimExpr, StringImm, Var
from loom.ir.stmt import Allocate, BufferStore, For, LetStmt, Stmt

_BINDING_FIELDS = frozenset({"loop_var", "var"})
_IR = (PrimExpr, Stmt)


_FIELDS: dict[type, tuple[str, ...]] = {
    # leaves, the most common nodes: a name, a value, a dtype, never a child
    Var: (),
    IntImm: (),
    FloatImm: (),
    StringImm: (),
}


def _fields(cls: type) -> tuple[str, ...]:
    """The fields of `cls` that may hold children (its compared fields less binding ones)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(n for n in cls._child_fields if n not in _BINDING_FIELDS)
    return names


def children(node: Any) -> tuple:
    """The child expressions and statements of a node, in field order."""
    d = getattr(node, "__dict__", None)
    if d is not None:
        kids = d.get("_children")
        if kids is not None:
            return kids
    names = _FIELDS.get(type(node))
    if names is None:
        names = _fields(type(node))
    out = []
    for name in names:
        value = getattr(node, name)
        if isinstance(value, _IR):
            out.append(value)
        elif isinstance(value, tuple):
            for v in value:
                if isinstance(v, _IR):
                    out.append(v)
    kids = tuple(out)
    if d is not None:  # an IR node never changes: its children are found once (every walk)
        d["_children"] = kids
    return kids


def _method(visitor: type, node: type, default: str) -> Callable:
    """The unbound `visit_<node class>` of a visitor class, or its `default`, found once per
    pair of classes (dispatch was a tenth of lowering's time) and kept in a table on the visitor
    class itself, which goes with the class (passes define visitor classes inside functions)."""
    table = visitor.__dict__.get("_visit_methods")
    if table is None:
        table = {}
        visitor._visit_methods = table
    method = getattr(visitor, "visit_" + node.__name__, None) or getattr(visitor, default)
    table[node] = method
    return method


_KINDS: dict[frozenset, frozenset] = {}  # each distinct set of node classes once


def node_kinds(node: Any) -> frozenset[type]:
    """The classes of `node` and of every node under it (children only), found once per node
    (an IR node never changes) and kept on it."""
    d = node.__dict__
    kinds = d.get("_kinds")
    if kinds is None:
        kinds = frozenset((type(node),))
        for child in children(node):
            kinds = kinds | node_kinds(child)
        kinds = _KINDS.setdefault(kinds, kinds)
        d["_kinds"] = kinds
    return kinds


def _relevance(visitor: type, base: type, walk: str) -> dict | bool:
    """For a visitor class that only reacts through its `visit_<Class>` methods (it overrides
    neither `visit` nor the generic walk), a table: set of node classes -> whether a subtree
    made of them holds no node it has a method for (walking it cannot matter). False for any
    other visitor class. Kept on the class."""
    table = visitor.__dict__.get("_skippable")
    if table is None:
        own = ("visit", walk, "_mutate_tuple")
        if any(getattr(visitor, n, None) is not getattr(base, n, None) for n in own):
            table = False
        else:
            table = {}
        visitor._skippable = table
        visitor._handled = frozenset(n[6:] for n in dir(visitor) if n.startswith("visit_"))
    return table


def _skips(visitor: type, table: dict, node: Any) -> bool:
    """True if no node under `node` has a method of `visitor` (a pass that rewrites loops then
    skips every expression, and every statement subtree without a loop)."""
    d = getattr(node, "__dict__", None)
    if d is None:
        return False
    kinds = d.get("_kinds") or node_kinds(node)
    skip = table.get(kinds)
    if skip is None:
        handled = visitor._handled
        skip = table[kinds] = not any(k.__name__ in handled for k in kinds)
    return skip


class Visitor:
    """Walks a tree; override `visit_<Class>` methods."""

    def visit(self, node: Any) -> None:
        cls = type(self)
        table = cls.__dict__.get("_skippable")
        if table is None:
            table = _relevance(cls, Visitor, "generic_visit")
        if table is not False and _skips(cls, table, node):
            return
        try:
            method = cls.__dict__["_visit_methods"][type(node)]
        except KeyError:
            method = _method(cls, type(node), "generic_visit")
        method(self, node)

    def generic_visit(self, node: Any) -> None:
        for child in children(node):
            self.visit(child)


class Mutator:
    """Rebuilds a tree bottom-up; a node whose children did not change is returned as is."""

    def visit(self, node: Any) -> Any:
        cls = type(self)
        table = cls.__dict__.get("_skippable")
        if table is None:
            table = _relevance(cls, Mutator, "generic_mutate")
        if table is not False and _skips(cls, table, node):
            return node
        try:
            method = cls.__dict__["_visit_methods"][type(node)]
        except KeyError:
            method = _method(cls, type(node), "generic_mutate")
        return method(self, node)

    def generic_mutate(self, node: Any) -> Any:
        names = _FIELDS.get(type(node))
        if names is None:
            names = _fields(type(node))
        changes = {}
        for name in names:
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


def visit_each_once(node: Any, fn: Callable[[Any], None]) -> None:
    """Call `fn` once on each distinct node object under `node`, children first and in the
    order of `post_order_visit`, skipping a subtree already visited where it occurs again: for
    collectors of sets (an unrolled body shares its subtrees many times)."""
    seen: set[int] = set()

    def walk(n: Any) -> None:
        seen.add(id(n))
        for child in children(n):
            if id(child) not in seen:
                walk(child)
        fn(n)

    walk(node)


def visit_kinds_once(node: Any, kinds: frozenset[type], fn: Callable[[Any], None]) -> None:
    """`visit_each_once` for the nodes whose class is in `kinds` only: `fn` is called on them,
    children first, and a subtree holding none of them (`node_kinds`, kept on each node) is
    not entered. For collectors of statements (loops, lets, allocations) in bodies that are
    mostly expressions."""
    seen: set[int] = set()

    def walk(n: Any) -> None:
        seen.add(id(n))
        for child in children(n):
            if id(child) not in seen and not kinds.isdisjoint(node_kinds(child)):
                walk(child)
        if type(n) in kinds:
            fn(n)

    if not kinds.isdisjoint(node_kinds(node)):
        walk(node)


_NO_VARS: frozenset = frozenset()


def child_vars(node: Any) -> frozenset:
    """The variables under `node` reached as children (not binding positions, not buffers'
    data), found once per node (an IR node never changes) and kept on it."""
    d = node.__dict__
    found = d.get("_child_vars")
    if found is None:
        if type(node) is Var:
            found = frozenset((node,))
        else:
            kids = children(node)
            if not kids:
                found = _NO_VARS
            elif len(kids) == 1:
                found = child_vars(kids[0])
            else:
                found = frozenset().union(*[child_vars(k) for k in kids])
        d["_child_vars"] = found
    return found


class _Substituter(Mutator):
    def __init__(self, mapping: Mapping[Var, PrimExpr]):
        self.mapping = mapping
        self.replaced = frozenset(mapping)
        self.done: dict[int, Any] = {}  # id(node) -> its result: shared subtrees once

    def visit(self, node: Any) -> Any:
        # Only the paths to a replaced variable are rebuilt: an unrolled loop substitutes its
        # variable into a large body once per copy.
        if self.replaced.isdisjoint(child_vars(node)):
            return node
        key = id(node)
        new = self.done.get(key)
        if new is None:
            new = self.done[key] = super().visit(node)
        return new

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

    visit_each_once(node, record)
    return used - bound


def uses_var(node: Any, var: Var) -> bool:
    """True if `var` occurs in `node` (as a value, or as the data of an accessed buffer)."""
    found = False

    def check(n: Any) -> None:
        nonlocal found
        if _vars_of(n) == var:
            found = True

    visit_each_once(node, check)
    return found


class _Renamer(_Substituter):
    """Substitutes variables by variables, at their uses and where they are bound."""

    visit = Mutator.visit  # a renamed binding may be one the body never uses

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
