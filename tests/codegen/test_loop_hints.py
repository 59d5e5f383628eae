"""What LLVM's unroller is told about loops (loom/codegen/llvm/loop_hints.py): long loops that
only copy whole vectors get `llvm.loop.unroll.disable`, loops with pragma unroll_explicit False
`llvm.loop.unroll.full` (and C's `#pragma GCC unroll`), every other loop is left to LLVM;
results do not change."""

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


def row_sums_schedule(explicit: bool | None):
    """B[i] = sum of A[i, :16], the reduction split by 4, its inner steps unrolled (by loom, or
    with pragma unroll_explicit False by the back-end compiler)."""
    A = loom.te.placeholder((8, 16), "float32", name="A")
    k = loom.te.reduce_axis(16, name="k")
    B = loom.te.compute((8,), lambda i: loom.te.sum(A[i, k], axis=k), name="B")
    s = loom.te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=4)
    s[B].unroll(ki)
    if explicit is not None:
        s[B].pragma(ki, "unroll_explicit", explicit)
    return s, [A, B]


def row_sums(target: str, explicit: bool | None):
    """The built row sums, checked against numpy."""
    mod = loom.build(*row_sums_schedule(explicit), target=target, name="row_sums")
    a = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    b = np.zeros(8, np.float32)
    mod["row_sums"](a, b)
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5, atol=1e-5)
    return mod


def test_unroll_explicit_false_has_llvm_unroll_the_loop_completely():
    """The loop reaches LLVM with `llvm.loop.unroll.full`, which unrolls it: the optimized IR
    adds four elements per iteration of the outer step loop, as when loom unrolls it."""
    target = as_target("llvm")
    mod = loom.lower(*row_sums_schedule(False), name="row_sums", target=target)
    text = str(generate(mod, target, module_signatures(mod, target.alignment)))
    assert '!{ !"llvm.loop.unroll.full" }' in text
    by_loom = row_sums("llvm", None).get_source("ll")
    by_llvm = row_sums("llvm", False).get_source("ll")
    assert by_llvm.count("fadd") == by_loom.count("fadd") >= 4
    assert row_sums("llvm", True).get_source("ll").count("fadd") == by_loom.count("fadd")


def test_unroll_explicit_false_asks_the_c_compiler_to_unroll():
    source = row_sums("c", False).get_source("c")
    assert "#pragma GCC unroll 4" in source
    assert "#pragma GCC unroll" not in row_sums("c", None).get_source("c")
