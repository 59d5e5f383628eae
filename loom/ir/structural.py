"""Structural equality of IR values up to the renaming of bound variables (as TVM's).

IR values compare with `==` field by field, but every `Var` is distinct, so two independently
built programs are never `==`. `structural_equal(a, b)` compares them as programs:

- variables bound inside the compared values are matched by the position of their definition
  (alpha-equivalence): a `For` loop variable, a `LetStmt`/`Let` variable, the data variable of an
  `Allocate`d buffer, the parameters of a `PrimFunc` (scalar variables, the data variables of
  buffer parameters and the bare variables in their shapes and strides). A bound variable must
  have the same dtype as its counterpart; names are not compared;
- free variables must be the same variable on both sides, unless `map_free_vars=True`: then they
  are mapped to each other at first use, consistently and one to one (`x + y` is not `x + x`);
- an `AttrStmt` about a variable that its body binds (a pragma on the loop below it) is matched
  with its counterpart there, and the binding must then agree;
- buffers are compared field by field (name, dtype, shape, strides, scope, alignment) with their
  data variable matched as above; everything else (constants, dtypes, kinds, names of functions,
  attributes, annotations) with `==`.

`assert_structural_equal` raises an AssertionError naming the first differing sub-node by its
path from the compared values (`body.seq[1].value.b`), showing both sub-nodes and both values
printed with `to_text`.
"""

from __future__ import annotations

import math
from typing import Any

from loom.ir.buffer import Buffer
from loom.ir.expr import Let, PrimExpr, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.node import Node
from loom.ir.printer import to_text
from loom.ir.stmt import Allocate, AttrStmt, For, LetStmt, Stmt
from loom.ir.visitor import post_order_visit

__all__ = ["assert_structural_equal", "structural_equal"]

# Fields that define a variable, per node class; the definition takes effect right before the
# node's body (after the loop bounds / the bound value, which cannot refer to it).
_BINDERS: dict[type, str] = {For: "loop_var", LetStmt: "var", Let: "var"}


class _Mismatch(Exception):
    def __init__(self, path: str, reason: str):
        super().__init__(path, reason)
        self.path = path
        self.reason = reason
        self.lhs: Any = None
        self.rhs: Any = None


def _field(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _item(path: str, index: int) -> str:
    return f"{path}[{index}]"


class _Comparer:
    def __init__(self, map_free_vars: bool):
        self.map_free_vars = map_free_vars
        self.lhs_to_rhs: dict[Var, Var] = {}
        self.rhs_to_lhs: dict[Var, Var] = {}

    # -- variables -------------------------------------------------------------------------------
    def define(self, a: Var, b: Var, path: str) -> None:
        """`a` and `b` are defined at corresponding places: map them to each other."""
        if not isinstance(a, Var) or not isinstance(b, Var):
            self.compare(a, b, path)
            return
        if a.dtype != b.dtype:
            raise _Mismatch(
                path, f"variables {a.name} and {b.name} have dtypes {a.dtype} != {b.dtype}"
            )
        mapped, back = self.lhs_to_rhs.get(a), self.rhs_to_lhs.get(b)
        if (mapped is not None and mapped != b) or (back is not None and back != a):
            raise _Mismatch(
                path,
                f"variable {a.name} (lhs) and {b.name} (rhs) are defined here, but "
                f"{a.name} is already matched with {_name(mapped)} and {b.name} with "
                f"{_name(back)}",
            )
        self.lhs_to_rhs[a] = b
        self.rhs_to_lhs[b] = a

    def use(self, a: Var, b: Var, path: str) -> None:
        mapped, back = self.lhs_to_rhs.get(a), self.rhs_to_lhs.get(b)
        if mapped is not None or back is not None:
            if mapped != b or back != a:
                raise _Mismatch(
                    path,
                    f"variable {a.name} (lhs) corresponds to {_name(mapped)}, "
                    f"but the rhs has {b.name} (which corresponds to {_name(back)})",
                )
            return
        if self.map_free_vars:
            self.define(a, b, path)
            return
        if a != b:
            raise _Mismatch(
                path,
                f"free variables {a.name} (lhs) and {b.name} (rhs) are different variables "
                "(pass map_free_vars=True to match free variables)",
            )

    # -- values ----------------------------------------------------------------------------------
    def compare(self, a: Any, b: Any, path: str) -> None:
        if isinstance(a, Node) or isinstance(b, Node):
            if type(a) is not type(b):
                raise _node_mismatch(path, a, b, "node types differ")
            self.within(a, b, path, self.node)
            return
        if isinstance(a, tuple | list) and type(a) is type(b):
            if len(a) != len(b):
                raise _Mismatch(path, f"lengths differ: {len(a)} != {len(b)}")
            for k, (x, y) in enumerate(zip(a, b)):
                self.compare(x, y, _item(path, k))
            return
        if isinstance(a, dict) and type(a) is type(b):
            if a.keys() != b.keys():
                raise _Mismatch(path, f"keys differ: {sorted(a)} != {sorted(b)}")
            for key in a:
                self.compare(a[key], b[key], f"{path}[{key!r}]")
            return
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return
        if type(a) is not type(b) and not (_is_number(a) and _is_number(b)):
            raise _Mismatch(path, f"{a!r} != {b!r} (types {type(a).__name__}, {type(b).__name__})")
        if a != b:
            raise _Mismatch(path, f"{a!r} != {b!r}")

    def within(self, a: Node, b: Node, path: str, compare_fields, **kwargs) -> None:
        """Run `compare_fields(a, b, path)`; a mismatch in a field that is not a node itself is
        reported at `a`'s path, naming the field."""
        try:
            compare_fields(a, b, path, **kwargs)
        except _Mismatch as m:
            if m.lhs is None:  # the innermost differing node
                m.lhs, m.rhs = a, b
                field = m.path[len(path) :].lstrip(".")
                if field:
                    m.reason = f"{type(a).__name__}.{field}: {m.reason}"
                m.path = path
            raise

    def node(self, a: Node, b: Node, path: str) -> None:
        if isinstance(a, Var):
            self.use(a, b, path)
        elif isinstance(a, Buffer):
            self.buffer(a, b, path)
        elif isinstance(a, PrimFunc):
            self.func(a, b, path)
        else:
            if isinstance(a, AttrStmt):
                self.attr_node(a, b, path)
            self.fields(a, b, path)

    def attr_node(self, a: AttrStmt, b: AttrStmt, path: str) -> None:
        """An annotation may be about a variable its body binds (a pragma on the loop below
        it): match the two variables here; the binding itself must then agree."""
        x, y = a.node, b.node
        if not (isinstance(x, Var) and isinstance(y, Var)) or self._known(x, y):
            return
        if x in _bound_vars(a.body) and y in _bound_vars(b.body):
            self.define(x, y, _field(path, "node"))

    def fields(self, a: Node, b: Node, path: str) -> None:
        names = list(a._child_fields)
        binder = _BINDERS.get(type(a))
        if binder is not None:  # define the variable right before the body
            names.remove(binder)
            names.insert(names.index("body"), binder)
        for name in names:
            sub = _field(path, name)
            if name == binder:
                self.define(getattr(a, name), getattr(b, name), sub)
            elif name == "buffer" and isinstance(a, Allocate):  # defines the buffer's data
                self.within(a.buffer, b.buffer, sub, self.buffer, define=True)
            else:
                self.compare(getattr(a, name), getattr(b, name), sub)

    def buffer(self, a: Buffer, b: Buffer, path: str, define: bool = False) -> None:
        """Fields in order; the data variable is defined here (an Allocate, a parameter) or used."""
        if define:
            self.define(a.data, b.data, _field(path, "data"))
        for name in a._child_fields:
            sub = _field(path, name)
            if name == "data":
                if not define:
                    self.use(a.data, b.data, sub)
            else:
                self.compare(getattr(a, name), getattr(b, name), sub)

    def func(self, a: PrimFunc, b: PrimFunc, path: str) -> None:
        self.compare(a.name, b.name, _field(path, "name"))
        params = _field(path, "params")
        if len(a.params) != len(b.params):
            raise _Mismatch(params, f"lengths differ: {len(a.params)} != {len(b.params)}")
        # Every parameter is defined before any is compared: a buffer's shape may use a scalar
        # parameter listed after it.
        for k, (p, q) in enumerate(zip(a.params, b.params)):
            sub = _item(params, k)
            if type(p) is not type(q):
                raise _node_mismatch(sub, p, q, "parameter kinds differ")
            if isinstance(p, Buffer):
                self.define(p.data, q.data, _field(sub, "data"))
            else:
                self.define(p, q, sub)
        for k, (p, q) in enumerate(zip(a.params, b.params)):
            if not isinstance(p, Buffer):
                continue
            sub = _item(params, k)
            for name in ("shape", "strides"):  # bare variables there are defined by the signature
                for j, (x, y) in enumerate(zip(getattr(p, name), getattr(q, name))):
                    if isinstance(x, Var) and isinstance(y, Var) and not self._known(x, y):
                        self.define(x, y, _item(_field(sub, name), j))
            self.within(p, q, sub, self.buffer)
        self.compare(a.body, b.body, _field(path, "body"))
        self.compare(a.attrs, b.attrs, _field(path, "attrs"))

    def _known(self, a: Var, b: Var) -> bool:
        return a in self.lhs_to_rhs or b in self.rhs_to_lhs


def _node_mismatch(path: str, a: Any, b: Any, what: str) -> _Mismatch:
    m = _Mismatch(path, f"{what}: {type(a).__name__} != {type(b).__name__}")
    m.lhs, m.rhs = a, b
    return m


def _bound_vars(s: Stmt) -> set[Var]:
    found: set[Var] = set()

    def record(n: Any) -> None:
        if isinstance(n, For):
            found.add(n.loop_var)
        elif isinstance(n, LetStmt | Let):
            found.add(n.var)
        elif isinstance(n, Allocate):
            found.add(n.buffer.data)

    post_order_visit(s, record)
    return found


def _name(v: Var | None) -> str:
    return "nothing" if v is None else v.name


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _compare(a: Any, b: Any, map_free_vars: bool) -> _Mismatch | None:
    try:
        _Comparer(map_free_vars).compare(a, b, "")
    except _Mismatch as m:
        return m
    return None


def structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    """True if `a` and `b` are the same program up to the names of the variables they bind."""
    return _compare(a, b, map_free_vars) is None


def _text(value: Any) -> str:
    if isinstance(value, Node | PrimExpr | Stmt | IRModule):
        try:
            return to_text(value)
        except Exception as e:  # a malformed value must not hide the mismatch
            return f"<cannot print {type(value).__name__}: {e}>"
    return repr(value)


def assert_structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> None:
    """Raise AssertionError, naming the first differing sub-node, unless
    `structural_equal(a, b, map_free_vars)`."""
    m = _compare(a, b, map_free_vars)
    if m is None:
        return
    lines = [f"IR differs structurally at {m.path or '<root>'}: {m.reason}"]
    if m.lhs is not None:
        lines += [
            "  lhs sub-node: " + _text(m.lhs).replace("\n", "\n    "),
            "  rhs sub-node: " + _text(m.rhs).replace("\n", "\n    "),
        ]
    lines += ["--- lhs ---", _text(a), "--- rhs ---", _text(b)]
    raise AssertionError("\n".join(lines))
