"""LLVM's loop vectorizer is off unless the target asks for it (-llvm-loop-vectorize=1).

LLVM 22's loop vectorizer miscompiles loads whose index is a masked induction variable plus an
offset (`x[(k & 7) + base]` in a reduction is read as the consecutive `x[k + base]`), and takes
time exponential in the length of a chain of min/max selects: loom's IR is well defined in
both (docs/native.md, "What loom asks of LLVM's optimizer"). Each program reported against it
runs here on the default `llvm` target against numpy; the reduced LLVM IR of each problem is kept
as the evidence.
"""

from __future__ import annotations

import ctypes
import platform
import subprocess
import sys
import textwrap

import llvmlite.binding as llvm
import numpy as np
import pytest

import loom
from loom import te
from loom.codegen.llvm.emit import loop_vectorize, optimize
from loom.target import Target


def _run(sch, args, inputs, target="llvm"):
    arrays = [a.copy() for a in inputs]
    loom.build(sch, args, target=target, name="k")["k"](*arrays)
    return arrays


# -- the reported programs -----------------------------------------------------------------------
def _shift_sum(dtype: str, shift: str, K: int = 32):
    """C[i, j] = sum_k X[k % 8, 0, i] >> (X[0, j, k % 4] & 7), X of shape (8, 8, 4)."""
    X = te.placeholder((8, 8, 4), name="X", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")

    def rule(i, j):
        a, amount = X[k % 8, 0, i], X[0, j, k % 4] & 7
        return te.sum(a >> amount if shift == ">>" else a << amount, axis=k)

    C = te.compute((4, 8), rule, name="C")
    return te.create_schedule(C.op), [X, C]


def _shift_sum_numpy(x: np.ndarray, shift: str, K: int = 32) -> np.ndarray:
    kk = np.arange(K)
    a = x[kk % 8, 0, :].astype(np.int64)[:, :, None]  # [k, i, 1]
    amount = (x[0, :, kk % 4].astype(np.int64) & 7)[:, None, :]  # [k, 1, j]
    terms = a >> amount if shift == ">>" else a << amount
    return terms.sum(0).astype(x.dtype)  # wraps like the per-term and per-add wrap


@pytest.mark.parametrize(
    "dtype, shift",
    [("int8", ">>"), ("int16", "<<"), ("int32", ">>"), ("uint32", "<<"), ("int64", ">>")],
)
def test_sum_of_shifts_by_masked_amounts(dtype, shift):
    x = np.random.default_rng(0).integers(0 if "u" in dtype else -100, 100, (8, 8, 4))
    x = x.astype(dtype)
    got = _run(*_shift_sum(dtype, shift), [x, np.zeros((4, 8), dtype)])[1]
    np.testing.assert_array_equal(got, _shift_sum_numpy(x, shift))


def _sum_reordered_outside_data_axis(body, dtype="int8", a_dtype="int8"):
    """T2[i0, i1, i2, i3] = sum_k body(A[i3, i0, k % 8]), shape (7, 8, 2, 1), k < 17, with the
    reduction axis reordered outside the data axis i1."""
    A = te.placeholder((1, 7, 8), name="A", dtype=a_dtype)
    k = te.reduce_axis((0, 17), name="k")
    T2 = te.compute(
        (7, 8, 2, 1), lambda i0, i1, i2, i3: te.sum(body(A[i3, i0, k % 8]), axis=k), name="T2"
    )
    s = te.create_schedule(T2.op)
    s[T2].reorder(k, T2.op.axis[1])
    return s, [A, T2]


def _sum_reordered_numpy(terms: np.ndarray, dtype) -> np.ndarray:
    """terms: [i0, c] = body(A[0, i0, c]) in int64; the sum over k < 17 of terms[:, k % 8]."""
    total = terms[:, np.arange(17) % 8].sum(1).astype(dtype)
    return np.broadcast_to(total[:, None, None, None], (7, 8, 2, 1))


def test_int8_sum_reordered_outside_a_data_axis():
    a = np.random.default_rng(1).integers(-128, 128, (1, 7, 8)).astype(np.int8)
    sch = _sum_reordered_outside_data_axis(lambda x: x.astype("int8"))
    got = _run(*sch, [a, np.zeros((7, 8, 2, 1), np.int8)])[1]
    np.testing.assert_array_equal(got, _sum_reordered_numpy(a[0].astype(np.int64), np.int8))


@pytest.mark.parametrize("opt_level", [1, 2])
def test_int8_sum_reordered_at_every_opt_level(opt_level):
    a = np.random.default_rng(2).integers(-128, 128, (1, 7, 8)).astype(np.int8)
    sch = _sum_reordered_outside_data_axis(lambda x: x.astype("int8"))
    got = _run(*sch, [a, np.zeros((7, 8, 2, 1), np.int8)], f"llvm -opt-level={opt_level}")[1]
    np.testing.assert_array_equal(got, _sum_reordered_numpy(a[0].astype(np.int64), np.int8))


def test_uint8_sum_of_rounded_scaled_casts():
    """A uint8 accumulation of uint8(round(float32(x) * 0.5)) in a reduction."""
    a = np.random.default_rng(3).integers(0, 256, (1, 7, 8)).astype(np.uint8)

    def body(x):
        return te.round(x.astype("float32") * 0.5).astype("uint8")

    sch = _sum_reordered_outside_data_axis(body, "uint8", "uint8")
    got = _run(*sch, [a, np.zeros((7, 8, 2, 1), np.uint8)])[1]
    terms = np.round(a[0].astype(np.float32) * np.float32(0.5)).astype(np.int64)
    np.testing.assert_array_equal(got, _sum_reordered_numpy(terms, np.uint8))


_MIN_CHAIN_PROGRAM = """
import numpy as np
import loom
from loom import te

n = {n}
A = te.placeholder((4, 11), name="A")
k20 = te.reduce_axis((0, n), name="k20")
k21 = te.reduce_axis((0, 4), name="k21")
T2 = te.compute((8, 16), lambda i, j: te.min(A[k21, 10], axis=[k20, k21]), name="T2")
s = te.create_schedule(T2.op)
TL = s.cache_write(T2, "local")
k20l, k21l = s[TL].op.reduce_axis
ko, ki = s[TL].split(k20l, factor=3)
s[TL].unroll(ko)
s[TL].parallel(s[TL].op.axis[0])
mod = loom.build(s, [A, T2], target={target!r})
a = np.random.default_rng(0).standard_normal((4, 11)).astype(np.float32)
t2 = np.zeros((8, 16), np.float32)
mod(a, t2)
np.testing.assert_array_equal(t2, np.full((8, 16), a[:, 10].min(), np.float32))
print("built and right")
"""


def _in_fresh_interpreter(code: str, timeout: float, stdin: str = "") -> str:
    """Run `code` in a new interpreter; a build that takes exponential time fails the test when
    the timeout ends it, instead of hanging pytest."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout} s:\n{code}")
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_min_over_a_split_unrolled_axis_builds():
    """min over k20 < 9, k21 < 4 of A[k21, 10], cache_write, k20's outer part (split by 3)
    unrolled, the local stage parallel over i: with LLVM's loop vectorizer n = 6 took 10 s to
    build and n = 9 more than 100 s."""
    out = _in_fresh_interpreter(_MIN_CHAIN_PROGRAM.format(n=9, target="llvm"), timeout=300)
    assert "built and right" in out


# -- the reduced LLVM IR ------------------------------------------------------------------------
# sum over k < 64 of x[(k & 7) + base]. The loop vectorizer reads x[base .. base + 63] as one
# <64 x i8> vector (as if the index were k + base); its only run-time check is that base + 63
# does not wrap. Found by bisecting LLVM's pipeline with -opt-bisect-limit: the first pass that
# changes the result is loop-vectorize; the reported programs reduce to this loop. Closest known
# report: llvm/llvm-project#156849 ("Miscompile with masked IV").
MASKED_INDEX_LOOP = """
define i8 @f(ptr noalias %x, i32 %base) {
entry:
  br label %loop
loop:
  %k = phi i32 [ 0, %entry ], [ %k.next, %loop ]
  %acc = phi i8 [ 0, %entry ], [ %acc.next, %loop ]
  %col = and i32 %k, 7
  %idx = add i32 %col, %base
  %idx64 = zext i32 %idx to i64
  %ptr = getelementptr i8, ptr %x, i64 %idx64
  %v = load i8, ptr %ptr, align 1
  %acc.next = add i8 %acc, %v
  %k.next = add i32 %k, 1
  %done = icmp eq i32 %k.next, 64
  br i1 %done, label %exit, label %loop
exit:
  ret i8 %acc.next
}
"""

_ENGINES = []  # an execution engine owns its module's code: keep it while the test runs


def _call_masked_index_loop(target: str, x: np.ndarray, base: int) -> int:
    module, tm = optimize(MASKED_INDEX_LOOP, Target(target))
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    engine = llvm.create_mcjit_compiler(module, tm)
    engine.finalize_object()
    _ENGINES.append(engine)
    proto = ctypes.CFUNCTYPE(ctypes.c_int8, ctypes.c_void_p, ctypes.c_int32)
    return proto(engine.get_function_address("f"))(x.ctypes.data, base)


def _masked_index_input():
    x = np.random.default_rng(0).integers(-100, 100, 256).astype(np.int8)
    expected = int(np.int8(x[8 + np.arange(64) % 8].astype(np.int64).sum().astype(np.int8)))
    return x, expected


@pytest.mark.parametrize("target", ["llvm -opt-level=0", "llvm", "llvm -opt-level=1"])
def test_reduced_masked_index_loop_is_right_by_default(target):
    x, expected = _masked_index_input()
    assert _call_masked_index_loop(target, x, 8) == expected


@pytest.mark.skipif(
    llvm.llvm_version_info[0] != 22 or platform.machine() != "x86_64",
    reason="the evidence is for LLVM 22 on x86-64",
)
def test_reduced_masked_index_loop_is_miscompiled_by_llvm_loop_vectorizer():
    """Evidence, not a requirement: if this fails, LLVM no longer miscompiles the loop, and
    -llvm-loop-vectorize could default to 1 again (docs/native.md)."""
    x, expected = _masked_index_input()
    assert _call_masked_index_loop("llvm -llvm-loop-vectorize=1", x, 8) != expected


def min_select_chain(m: int) -> str:
    """A loop storing, at each j, the min (loom's NaN-aware select) of m loads that may alias
    the store, so they stay in the loop: the loop the parallel task of the min program has."""
    lines = [
        "define void @f(ptr %out, ptr %a) {",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %j = phi i64 [ 0, %entry ], [ %j.next, %loop ]",
        "  %p = getelementptr float, ptr %out, i64 %j",
        "  %acc0 = load float, ptr %a, align 4",
    ]
    for t in range(1, m + 1):
        lines += [
            f"  %q{t} = getelementptr float, ptr %a, i64 {t % 4 * 16}",
            f"  %b{t} = load float, ptr %q{t}, align 4",
            f"  %lt{t} = fcmp olt float %b{t}, %acc{t - 1}",
            f"  %nan{t} = fcmp uno float %b{t}, 0.0",
            f"  %c{t} = or i1 %lt{t}, %nan{t}",
            f"  %acc{t} = select i1 %c{t}, float %b{t}, float %acc{t - 1}",
        ]
    lines += [
        f"  store float %acc{m}, ptr %p, align 4",
        "  %j.next = add i64 %j, 1",
        "  %done = icmp eq i64 %j.next, 16",
        "  br i1 %done, label %exit, label %loop",
        "exit:",
        "  ret void",
        "}",
    ]
    return "\n".join(lines) + "\n"


def test_reduced_min_select_chain_optimizes_by_default():
    """With LLVM 22's loop vectorizer, optimizing this takes about twice as long per select
    (m = 20: 1 s, m = 24: 19 s); without it, m = 200 takes milliseconds."""
    code = textwrap.dedent(
        """
        import sys
        from loom.codegen.llvm.emit import optimize
        from loom.target import Target
        optimize(sys.stdin.read(), Target("llvm"))
        print("optimized")
        """
    )
    assert "optimized" in _in_fresh_interpreter(code, timeout=300, stdin=min_select_chain(200))


# -- the option ----------------------------------------------------------------------------------
def _int8_add():
    A = te.placeholder((4, 256), name="A", dtype="int8")
    B = te.placeholder((4, 256), name="B", dtype="int8")
    C = te.compute((4, 256), lambda i, j: A[i, j] * B[i, j] + A[i, j], name="C")
    return te.create_schedule(C.op), [A, B, C]


def test_option_turns_llvm_loop_vectorizer_on():
    on = loom.build(*_int8_add(), target="llvm -llvm-loop-vectorize=1", name="k")
    off = loom.build(*_int8_add(), target="llvm", name="k")
    explicit_off = loom.build(*_int8_add(), target="llvm -llvm-loop-vectorize=0", name="k")
    assert "x i8>" in on.get_source("ll")  # LLVM vectorized the plain loop over j
    for mod in (off, explicit_off):
        assert "x i8>" not in mod.get_source("ll")
    rng = np.random.default_rng(4)
    a, b = (rng.integers(-128, 128, (4, 256)).astype(np.int8) for _ in range(2))
    for mod in (on, off):
        c = np.zeros((4, 256), np.int8)
        mod(a, b, c)
        np.testing.assert_array_equal(c, (a * b + a).astype(np.int8))


def test_option_is_read_from_the_target():
    assert loop_vectorize(Target("llvm")) is False
    assert loop_vectorize(Target("llvm -llvm-loop-vectorize=0")) is False
    assert loop_vectorize(Target("llvm -llvm-loop-vectorize=1")) is True
    assert "-llvm-loop-vectorize=1" in str(Target("llvm -llvm-loop-vectorize=1"))


@pytest.mark.parametrize("value", ["2", "yes", "true", "", "-1"])
def test_option_takes_0_or_1(value):
    target = Target(f"llvm -opt-level=0 -llvm-loop-vectorize={value}")
    with pytest.raises(loom.LoomError, match=r"-llvm-loop-vectorize must be 0 or 1, got"):
        loom.build(*_int8_add(), target=target)


def test_option_belongs_to_the_llvm_kind():
    with pytest.raises(loom.LoomError, match=r"unknown target options \['llvm-loop-vectorize'\]"):
        Target("c -llvm-loop-vectorize=1")
