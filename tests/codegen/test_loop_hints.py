"""Loops LLVM is told not to unroll (loom/codegen/llvm/loop_hints.py): long loops that only copy
whole vectors get `llvm.loop.unroll.disable`, every other loop is left to LLVM; results do not
change."""

import numpy as np
import pytest

import loom
from loom.codegen.llvm.loop_hints import MIN_ITERATIONS, no_unroll
from loom.codegen.llvm.module import generate
from loom.codegen.signature import module_signatures
from loom.ir import op
from loom.ir.buffer import decl_buffer
from loom.ir.expr import Broadcast, IntImm, Ramp, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.stmt import For, ForKind, seq
from loom.target import as_target

LANES = 64  # 256 bytes of float32 per row


def copy_rows(rows: int, scale: float | None = None, columns: int = LANES) -> PrimFunc:
    """B[r, :] = A[r, :columns] (times `scale` when given) from rows of A twice as long (a copy
    LLVM cannot turn into one memcpy), one whole-row vector per iteration."""
    A = decl_buffer((rows * 2 * columns,), "float32", "A")
    B = decl_buffer((rows * columns,), "float32", "B")
    r = Var("r")
    value = A[Ramp(r * (2 * columns), IntImm(1), columns)]
    if scale is not None:
        value = value * Broadcast(op.const(scale, "float32"), columns)
    row = Ramp(r * columns, IntImm(1), columns)
    loop = For(r, op.const(0), op.const(rows), ForKind.SERIAL, B.store(value, [row]))
    return PrimFunc("copy_rows", (A, B), loop)


def loop_of(func: PrimFunc) -> For:
    return func.body


def test_long_whole_vector_copies_are_not_unrolled():
    assert no_unroll(loop_of(copy_rows(MIN_ITERATIONS)))
    assert no_unroll(loop_of(copy_rows(1024)))


def test_every_other_loop_is_left_to_llvm():
    assert not no_unroll(loop_of(copy_rows(MIN_ITERATIONS - 1)))  # LLVM may unroll it fully
    assert not no_unroll(loop_of(copy_rows(256, scale=2.0)))  # computes, not only copies
    assert not no_unroll(loop_of(copy_rows(256, columns=16)))  # 64 bytes an iteration
    A, B = decl_buffer((256,), "float32", "A"), decl_buffer((256,), "float32", "B")
    i = Var("i")
    scalar = For(i, op.const(0), op.const(256), ForKind.SERIAL, B.store(A[i], [i]))
    assert not no_unroll(scalar)
    n = Var("n")
    symbolic = For(n, op.const(0), n, ForKind.SERIAL, loop_of(copy_rows(1)).body)
    assert not no_unroll(symbolic)  # an extent that is not a constant
    half = loop_of(copy_rows(1, columns=32)).body  # 128 bytes
    r = loop_of(copy_rows(1, columns=32)).loop_var
    assert not no_unroll(For(r, op.const(0), op.const(64), ForKind.SERIAL, half))
    # a body of several copies counts what they move together
    assert no_unroll(For(r, op.const(0), op.const(64), ForKind.SERIAL, seq(half, half)))
    mixed = seq(half, half, loop_of(copy_rows(1, scale=2.0, columns=32)).body)
    assert not no_unroll(For(r, op.const(0), op.const(64), ForKind.SERIAL, mixed))


def _llvm_ir(func: PrimFunc) -> str:
    target = as_target("llvm")
    mod = loom.lower(IRModule((func,)), target=target)
    return str(generate(mod, target, module_signatures(mod, target.alignment)))


def test_the_latch_of_a_hinted_loop_carries_its_own_loop_id():
    text = _llvm_ir(copy_rows(128))
    assert '!{ !"llvm.loop.unroll.disable" }' in text
    assert text.count("!llvm.loop !") == 1
    (line,) = [x for x in text.splitlines() if "!llvm.loop !" in x]
    loop_id = line.rsplit(" ", 1)[1]
    assert f"{loop_id} = !{{ {loop_id}, !" in text  # self-referential, as LLVM requires
    assert "!llvm.loop" not in _llvm_ir(copy_rows(MIN_ITERATIONS - 1))


@pytest.mark.parametrize("rows", [MIN_ITERATIONS - 1, 128, 1024])
def test_results_are_those_of_a_copy(rows):
    mod = loom.build(copy_rows(rows), target="llvm", name="copy_rows")
    a = np.arange(rows * 2 * LANES, dtype=np.float32)
    b = np.zeros(rows * LANES, np.float32)
    mod["copy_rows"](a, b)
    np.testing.assert_array_equal(b.reshape(rows, LANES), a.reshape(rows, 2 * LANES)[:, :LANES])


def test_llvm_keeps_a_hinted_loop_rolled():
    source = loom.build(copy_rows(1024), target="llvm", name="copy_rows").get_source("ll")
    assert source.count(f"load <{LANES} x float>") == 1  # one row an iteration: not unrolled
