"""TVM's `tvm.tir.ir_builder`: write loop IR imperatively.

```python
ib = tvm.tir.ir_builder.create()
a = ib.buffer_ptr(A)
with ib.for_range(0, n, name="i") as i:
    with ib.if_scope(a[i] < 0):
        a[i] = 0.0
body = ib.get()
```

Statements go into the innermost open scope; a `let` or an `allocate` scopes over everything
emitted after it in its scope. `get()` returns the statement built, in loom's loop IR (accesses
of `tir.decl_buffer`'s buffers, which may start at an element offset, are turned into loom's
by `tvm.tir.PrimFunc` and by tensorize).
"""

from __future__ import annotations

from collections.abc import Callable

from loom.abi.dtype import HANDLE, DataType
from loom.abi.dtype import dtype as parse_dtype
from loom.ir import op
from loom.ir.buffer import Buffer, decl_buffer
from loom.ir.expr import BufferLoad, IntImm, PrimExpr, Ramp, Var
from loom.ir.offset_buffer import OffsetBuffer
from loom.ir.stmt import (
    Allocate,
    AttrStmt,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    Stmt,
    seq,
)
from loom.te.packed_call import checked
from loom.te.tensor import IterVar

_FOR_KINDS = {
    "serial": ForKind.SERIAL,
    "parallel": ForKind.PARALLEL,
    "vectorize": ForKind.VECTORIZED,
    "unroll": ForKind.UNROLLED,
}


class WithScope:
    """A scope opened by `with`: its value is what `as` names; leaving it runs `exit_cb`."""

    def __init__(self, enter_value, exit_cb: Callable[[], None]):
        self._enter_value = enter_value
        self._exit_cb = exit_cb

    def __enter__(self):
        return self._enter_value

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self._exit_cb()


class BufferVar:
    """A buffer to index and assign: `b[i]` is a load, `b[i] = v` emits a store. One index
    into a buffer of several dimensions addresses its flattened elements; a vector
    `content_type` (float32x4) makes index i address lanes [4i, 4i + 4)."""

    def __init__(self, builder: IRBuilder, buffer: Buffer, content_type: str | DataType):
        self._builder = builder
        self._buffer = buffer
        self._content_type = parse_dtype(content_type)
        if self._content_type.element != buffer.dtype:
            raise TypeError(
                f"buffer {buffer.name} holds {buffer.dtype}, not {self._content_type.element}"
            )

    def asobject(self) -> Buffer:
        return self._buffer

    @property
    def dtype(self) -> DataType:
        return self._content_type

    @property
    def data(self) -> Var:
        return self._buffer.data

    def _access(self, index) -> tuple[Buffer, list[PrimExpr]]:
        indices = list(index) if isinstance(index, tuple | list) else [index]
        indices = [op.convert(i.var if isinstance(i, IterVar) else i) for i in indices]
        buffer = self._buffer
        if len(indices) == 1 and buffer.ndim != 1:
            buffer = (
                buffer.get_flattened_buffer()
                if isinstance(buffer, OffsetBuffer)
                else buffer.flattened()
            )
        lanes = self._content_type.lanes
        if lanes > 1:
            base = op.mul(indices[-1], lanes)
            indices[-1] = Ramp(base, IntImm(1, base.dtype), lanes)
        return buffer, indices

    def __getitem__(self, index) -> BufferLoad:
        buffer, indices = self._access(index)
        return buffer.load(indices)

    def __setitem__(self, index, value) -> None:
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = op.const(value, self._content_type)
        value = op.convert(value)
        if value.dtype.element != self._content_type.element:
            raise ValueError(
                f"data type does not match content type {value.dtype} vs "
                f"{self._content_type} (buffer {self._buffer.name})"
            )
        buffer, indices = self._access(index)
        self._builder.emit(BufferStore(buffer, value, tuple(indices)))


class IRBuilder:
    """Builds a statement: `emit`, scopes (`for_range`, `if_scope`, `else_scope`,
    `new_scope`), `let`, `allocate`, `buffer_ptr`, then `get()`."""

    def __init__(self):
        self._seq_stack: list[list] = [[]]
        self.nidx = 0

    def _pop_seq(self) -> Stmt:
        """The open scope's statements: a `let` or `allocate` wraps what follows it."""
        items = self._seq_stack.pop()
        body: list[Stmt] = []
        for item in reversed(items):
            if callable(item):
                body = [item(seq(*reversed(body)))]
            else:
                body.append(item)
        return seq(*reversed(body))

    def emit(self, stmt) -> None:
        """Add a statement (an expression is evaluated for its effect, as an extern call), or
        a function of the rest of the scope (body -> statement)."""
        if isinstance(stmt, PrimExpr):
            stmt = checked(stmt)  # a failing call_packed fails the kernel
        if not isinstance(stmt, Stmt) and not callable(stmt):
            raise TypeError(f"emit takes a Stmt or a PrimExpr, got {stmt!r}")
        self._seq_stack[-1].append(stmt)

    def scope_attr(self, node, attr_key: str, value) -> None:
        """An annotation `attr_key = value` on the rest of the scope (loom's AttrStmt; `node`
        a Var or None)."""
        if isinstance(node, Buffer):
            node = node.data
        if node is not None and not isinstance(node, Var):
            raise TypeError(f"scope_attr: node must be a Var, a Buffer or None, got {node!r}")
        value = op.convert(value)
        self.emit(lambda body: AttrStmt(attr_key, value, body, node))

    def for_range(self, begin, end, name: str = "i", dtype=None, kind: str = "serial"):
        """A loop `for name in [begin, end)`; `with ib.for_range(0, n) as i:` gives its
        variable. kind: "serial", "parallel", "vectorize" or "unroll". The default names are
        i, j, k, then i_0, i_1, ..."""
        if name == "i":
            name = chr(ord(name) + self.nidx) if self.nidx < 3 else f"{name}_{self.nidx - 3}"
            self.nidx += 1
        if kind not in _FOR_KINDS:
            raise ValueError(
                f"for_range {name}: unknown kind {kind!r}; loom has {sorted(_FOR_KINDS)} "
                "(no GPU thread binding)"
            )
        begin, end = op.convert(begin), op.convert(end)
        if dtype is None:
            dtype = "int64" if "int64" in (begin.dtype, end.dtype) else "int32"
        loop_var = Var(name, dtype)
        begin, end = op.cast(begin, loop_var.dtype), op.cast(end, loop_var.dtype)
        extent = end if isinstance(begin, IntImm) and begin.value == 0 else op.sub(end, begin)
        self._seq_stack.append([])

        def exit_cb() -> None:
            self.emit(For(loop_var, begin, extent, _FOR_KINDS[kind], self._pop_seq()))

        return WithScope(loop_var, exit_cb)

    def if_scope(self, cond):
        """Statements run when `cond` holds; an `else_scope` may follow."""
        cond = op.condition(cond, "if_scope condition")
        self._seq_stack.append([])

        def exit_cb() -> None:
            self.emit(IfThenElse(cond, self._pop_seq()))

        return WithScope(None, exit_cb)

    def else_scope(self):
        """The else branch of the `if_scope` just closed."""
        last = self._seq_stack[-1][-1] if self._seq_stack[-1] else None
        if not isinstance(last, IfThenElse) or last.else_case is not None:
            raise RuntimeError("else_scope can only follow an if_scope")
        self._seq_stack[-1].pop()
        self._seq_stack.append([])

        def exit_cb() -> None:
            self.emit(IfThenElse(last.condition, last.then_case, self._pop_seq()))

        return WithScope(None, exit_cb)

    def new_scope(self):
        """A nested scope: a `let` or `allocate` inside it ends with it."""
        self._seq_stack.append([])
        return WithScope(None, lambda: self.emit(self._pop_seq()))

    def let(self, var_name: str | Var, value) -> Var:
        """Bind a new variable (or the Var given) to `value` for the rest of the scope."""
        value = op.convert(value)
        var = var_name if isinstance(var_name, Var) else Var(var_name, value.dtype)
        self.emit(lambda body: LetStmt(var, value, body))
        return var

    def allocate(self, dtype, shape, name: str = "buf", axis_separators=None, scope: str = ""):
        """A buffer of `shape` in memory `scope` ("" is "global") for the rest of the scope."""
        if axis_separators:
            raise ValueError("allocate: axis_separators are not supported")
        buffer = decl_buffer(shape, dtype, name, scope=scope or "global")
        self.emit(lambda body: Allocate(buffer, body))
        return BufferVar(self, buffer, dtype)

    def pointer(self, content_type, name: str = "ptr", scope: str = "") -> BufferVar:
        """A pointer to elements of `content_type`: a 1-d buffer over a new handle variable
        whose length is the variable `<name>_extent` (loom's buffers have a shape)."""
        dt = parse_dtype(content_type)
        buffer = Buffer(name, dt.element, (Var(f"{name}_extent"),), Var(name, HANDLE))
        return BufferVar(self, buffer.replace(scope=scope or "global"), dt)

    def buffer_ptr(self, buf: Buffer, shape=None) -> BufferVar:
        """`buf` to index and assign; with `shape`, a view of its data with that shape."""
        if not isinstance(buf, Buffer):
            raise TypeError(f"buffer_ptr takes a Buffer, got {buf!r}")
        if shape is not None:
            if isinstance(shape, int | PrimExpr):
                shape = (shape,)
            buf = buf.replace(shape=tuple(shape), strides=())  # an OffsetBuffer keeps its offset
        return BufferVar(self, buf, buf.dtype)

    def likely(self, expr) -> PrimExpr:
        return op.likely(expr)

    def get(self) -> Stmt:
        """The statement built."""
        if len(self._seq_stack) != 1:
            raise RuntimeError("ir_builder.get() called inside an open scope")
        stmt = self._pop_seq()
        self._seq_stack.append([])
        return stmt


def create() -> IRBuilder:
    return IRBuilder()
