"""TVM's constructors of the IR nodes whose fields loom orders or types differently.

`tvm.tir.IntImm("int32", 5)` takes the dtype first, `tvm.tir.Allocate` a data variable and
extents, `tvm.tir.AttrStmt` the node first: each class here builds loom's node from TVM's
arguments, and `isinstance(x, tvm.tir.IntImm)` holds for every loom IntImm (the class stands
for loom's in isinstance checks).
"""

from __future__ import annotations

from loom.ir import expr, stmt
from loom.ir import op as irop
from loom.ir.buffer import Buffer
from loom.te.packed_call import checked


class StandsFor(type):
    """The metaclass of a TVM constructor: its instances are those of `loom_class`."""

    loom_class: type

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, cls.loom_class)

    def __subclasscheck__(cls, sub) -> bool:
        return isinstance(sub, type) and issubclass(sub, cls.loom_class)


class IntImm(metaclass=StandsFor):
    """`IntImm(dtype, value)`: an integer constant."""

    loom_class = expr.IntImm

    def __new__(cls, dtype, value, span=None) -> expr.IntImm:
        return expr.IntImm(int(value), dtype)


class FloatImm(metaclass=StandsFor):
    """`FloatImm(dtype, value)`: a float constant."""

    loom_class = expr.FloatImm

    def __new__(cls, dtype, value, span=None) -> expr.FloatImm:
        return expr.FloatImm(float(value), dtype)


class Evaluate(metaclass=StandsFor):
    """`Evaluate(value)`: an expression (or a Python number) evaluated for its effect; a
    `call_packed` whose function fails fails the kernel (`packed_call.checked`)."""

    loom_class = stmt.Evaluate

    def __new__(cls, value, span=None) -> stmt.Stmt:
        return checked(irop.convert(value))


class For(metaclass=StandsFor):
    """`For(loop_var, min_val, extent, kind, body, thread_binding=None, annotations=None)`;
    numbers become constants of the loop variable's dtype."""

    loom_class = stmt.For

    def __new__(
        cls,
        loop_var,
        min_val,
        extent,
        kind,
        body,
        thread_binding=None,
        annotations=None,
        span=None,
    ) -> stmt.For:
        if thread_binding is not None:
            raise ValueError("For: thread_binding is not supported (loom has no GPU threads)")
        dt = loop_var.dtype
        return stmt.For(
            loop_var,
            irop.cast(min_val, dt),
            irop.cast(extent, dt),
            kind,
            body,
            tuple((annotations or {}).items()),
        )


class Allocate(metaclass=StandsFor):
    """`Allocate(buffer_var, dtype, extents, condition, body)`: storage of `extents` elements
    of `dtype` at the handle `buffer_var` during `body` (the condition must be true: loom
    always allocates)."""

    loom_class = stmt.Allocate

    def __new__(
        cls, buffer_var, dtype, extents, condition, body, annotations=None, span=None
    ) -> stmt.Allocate:
        cond = irop.convert(condition)
        if not (isinstance(cond, expr.IntImm) and cond.value):
            raise ValueError("Allocate: only an unconditional allocation (condition True)")
        if isinstance(extents, int | expr.PrimExpr):
            extents = (extents,)
        buffer = Buffer(buffer_var.name, dtype, tuple(extents), buffer_var)
        return stmt.Allocate(buffer, body)


class AttrStmt(metaclass=StandsFor):
    """`AttrStmt(node, attr_key, value, body)`: an annotation on `body`."""

    loom_class = stmt.AttrStmt

    def __new__(cls, node, attr_key, value, body, span=None) -> stmt.AttrStmt:
        if isinstance(node, Buffer):
            node = node.data
        if node is not None and not isinstance(node, expr.Var):
            raise TypeError(f"AttrStmt: node must be a Var, a Buffer or None, got {node!r}")
        return stmt.AttrStmt(attr_key, irop.convert(value), body, node)
