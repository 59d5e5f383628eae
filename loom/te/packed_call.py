"""`call_packed(name, *buffers)`: compiled code calling a Python function registered with
`loom.register_func` (TVM's `tvm.tir.call_packed`), through loom/runtime/packed_callback.py.

The call is an extern call of `loom_call_packed` with the name, a text giving each buffer's
dtype and shape, and the buffers' data pointers. A te.extern stage whose rule is such a call
checks its status: a function that raised fails the kernel with the function's error.
"""

from __future__ import annotations

from loom.abi.dtype import INT64
from loom.ir import op as irop
from loom.ir.buffer import Buffer
from loom.ir.expr import Call, CallKind, IntImm, PrimExpr
from loom.ir.offset_buffer import OffsetBuffer
from loom.ir.simplify import simplify
from loom.ir.stmt import NOP, AssertStmt, Evaluate, Stmt
from loom.ir.structural import structural_equal
from loom.runtime import packed_callback


def call_packed(name: str, *args: Buffer) -> PrimExpr:
    """A call of the function registered as `name`, passing each buffer as an array (the
    function receives `NDArray`s viewing the buffers' memory). Returns its status (0: done)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"call_packed: the function name must be a non-empty str, got {name!r}")
    if len(args) > packed_callback.MAX_ARGS:
        raise ValueError(
            f"call_packed {name!r}: {len(args)} arguments; loom passes at most "
            f"{packed_callback.MAX_ARGS}"
        )
    types = []
    for k, b in enumerate(args):
        if not isinstance(b, Buffer):
            raise TypeError(
                f"call_packed {name!r}: argument {k} must be a buffer (loom passes arrays "
                f"only), got {b!r}"
            )
        try:
            shape = b.const_shape()
        except ValueError:
            raise TypeError(
                f"call_packed {name!r}: buffer {b.name} has a symbolic shape; loom passes "
                "arrays of constant shape"
            ) from None
        types.append(packed_callback.describe(str(b.dtype), shape))
    packed_callback.ensure_registered()
    null = irop.cast(IntImm(0, INT64), "handle")
    pointers = [_address(name, b) for b in args]
    pointers += [null] * (packed_callback.MAX_ARGS - len(args))
    return irop.call_extern(
        "int32", packed_callback.SYMBOL, name, ";".join(types), len(args), *pointers
    )


def _address(name: str, b: Buffer) -> PrimExpr:
    """Where the array the function receives starts: the buffer's first element (after its
    element offset: a row of a matrix passes that row). The array is compact row-major."""
    if b.strides:
        compact = Buffer(b.name, b.dtype, b.shape, b.data).element_strides()
        if not all(structural_equal(simplify(s), simplify(c)) for s, c in zip(b.strides, compact)):
            raise ValueError(
                f"call_packed {name!r}: buffer {b.name} has the strides {list(b.strides)}; "
                "loom passes compact row-major arrays"
            )
    if isinstance(b, OffsetBuffer):
        return b.access_ptr("rw")
    return b.data


def is_packed_call(e: PrimExpr) -> bool:
    return isinstance(e, Call) and e.kind == CallKind.EXTERN and e.op == packed_callback.SYMBOL


def checked(body: PrimExpr) -> Stmt:
    """A statement evaluating `body`; a packed call's failure status fails the kernel (its
    last error already says why)."""
    if is_packed_call(body):
        return AssertStmt(irop.equal(body, 0), None, NOP)
    return Evaluate(body)
