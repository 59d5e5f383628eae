"""One function of a module calling another through its entry point (`call_func`), with
buffers and scalars of every kind, on llvm and c; a callee's failure status reaches the caller."""

import numpy as np
import pytest

import loom
from loom.ir import op
from loom.ir.buffer import decl_buffer
from loom.ir.expr import Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.stmt import NOP, AssertStmt, For

N = 8


def module():
    a, out = decl_buffer((N,), "float32", "a"), decl_buffer((N,), "float32", "out")
    scale, shift, flip = Var("scale", "float32"), Var("shift", "int64"), Var("flip", "bool")
    i = Var("i", "int32")
    value = a[i] * scale + op.cast(shift, "float32")
    body = For(
        i, op.const(0), op.const(N), "serial", out.store(op.select(flip, -value, value), (i,))
    )
    kernel = PrimFunc("kernel", (a, scale, shift, flip, out), body)
    x, y = decl_buffer((N,), "float32", "x"), decl_buffer((N,), "float32", "y")
    call = op.call_func(
        "kernel",
        x.data,
        op.const(2.0, "float32"),
        op.const(3, "int64"),
        op.const(True, "bool"),
        y.data,
    )
    main = PrimFunc("main", (x, y), AssertStmt(op.equal(call, 0), None, NOP))
    return IRModule((main, kernel))


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_a_call_passes_buffers_and_scalars(target):
    f = loom.build(module(), target=target)
    x = np.arange(N, dtype="float32")
    y = np.zeros(N, "float32")
    f["main"](x, y)
    np.testing.assert_array_equal(y, -(x * 2 + 3))


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_a_callee_failure_ends_the_caller_with_its_message(target):
    n = Var("n", "int32")
    kernel = PrimFunc("kernel", (n,), AssertStmt(op.less(n, 5), "n is too big", NOP))
    main = PrimFunc(
        "main", (), AssertStmt(op.equal(op.call_func("kernel", op.const(7)), 0), None, NOP)
    )
    f = loom.build(IRModule((main, kernel)), target=target)
    with pytest.raises(loom.LoomError, match="n is too big"):
        f["main"]()
