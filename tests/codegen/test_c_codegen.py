"""The C code generator (target "c"): every program that builds with LLVM builds with C and
gives the same results.

Differential tests: the cases of tests/cases.py against numpy, random programs against the
interpreter (integers exactly, floats within 1e-5), every integer operation on every integer
dtype against the interpreter and LLVM bit for bit, float operations against the interpreter
bit for bit (libm functions within an ulp or two). Then what the C module shares with the LLVM
one: the calling checks, run-time errors and their cleanups, parallel loops, runtime memory
(VTCM) and fixed-address memory (a scratchpad), and the generated source itself.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loom
from loom import LoomError, te
from loom.abi.dtype import dtype
from loom.codegen.c import compile_c, generate_c
from loom.codegen.c.compile import C_FLAGS, compile_c_object
from loom.codegen.signature import signature_of
from loom.demo import examples_dir, load_example
from loom.ir import expr as E
from loom.ir import op
from loom.ir.buffer import decl_buffer
from loom.ir.expr import Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.interpret import interpret
from loom.ir.stmt import For, ForKind, LetStmt, seq
from loom.memory import scratchpad_emu
from loom.runtime.native_lib import find_tool
from loom.target import Target
from tests.cases import CASES
from tests.codegen.test_calling import (  # noqa: F401  (run again here, on a C-built `axpy`)
    test_call_with_scalar,
    test_misaligned_arrays_are_copied_and_written_back,
    test_non_contiguous_view,
    test_output_sharing_memory_with_input_is_refused,
    test_read_only_output,
    test_too_few_arguments,
    test_wrong_dtype,
    test_wrong_scalar_and_non_array,
    test_wrong_shape,
)
from tests.programs import SCRATCHPAD_BASE
from tests.random_programs import draw_program

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def loop(var: Var, extent: int, body, kind=ForKind.SERIAL) -> For:
    return For(var, op.const(0, var.dtype), op.const(extent, var.dtype), kind, body)


# -- the shared cases and random programs --------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_matches_numpy(case):
    sch, args = case.make()
    mod = loom.build(sch, args, target="c", name="kernel")
    arrays = case.inputs(np.random.default_rng(7))
    expected = case.reference(*[a.copy() for a in arrays])
    mod["kernel"](*arrays)
    for got, want in zip(arrays, expected):
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_program_matches_interpreter_and_llvm(data):
    """C against the interpreter; on integer programs also against LLVM, bit for bit."""
    prog = draw_program(data.draw)
    lowered = loom.lower(prog.schedule, prog.args, name="random")
    c_inputs = [a.copy() for a in prog.inputs]
    llvm_inputs = [a.copy() for a in prog.inputs]
    interpret(lowered, *prog.inputs)
    mod = loom.build(prog.schedule, prog.args, target="c", name="random")
    mod["random"](*c_inputs)
    got, want = c_inputs[-1], prog.inputs[-1]
    message = "\n".join(prog.description) + "\n" + mod.get_source("c")
    if prog.dtype == "float32":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=message)
    else:
        np.testing.assert_array_equal(got, want, err_msg=message)
        loom.build(lowered, target="llvm")["random"](*llvm_inputs)
        assert got.tobytes() == llvm_inputs[-1].tobytes(), message


# -- semantics, operation by operation -----------------------------------------------------------
def _int_program(name: str, n: int) -> tuple[PrimFunc, int]:
    """OUT[k, i] = operation k of A[i], B[i] (B non-zero) and S[i] (a shift amount)."""
    dt = dtype(name)
    A, B, S = (decl_buffer((n,), name, x) for x in "ABS")
    i = Var("i")
    a, b, s = A[i], B[i], S[i]
    ops = [
        *(cls(a, b) for cls in (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod)),
        *(cls(a, b) for cls in (E.Min, E.Max, E.BitAnd, E.BitOr, E.BitXor)),
        E.ShiftLeft(a, s),
        E.ShiftRight(a, s),
        E.Sub(E.IntImm(0, dt), a),
        E.Select(E.LT(a, b), a, b),
        E.Cast(dt, E.LE(a, b)),
        E.Cast(dt, E.NE(a, b)),
        E.Cast(dt, E.Cast("bool", a)),
        E.Div(a, E.IntImm(7, dt)),
        E.FloorDiv(a, E.IntImm(3, dt)),
        E.FloorMod(a, E.IntImm(3, dt)),
        E.Mul(a, E.IntImm(dt.max_value(), dt)),
        E.Add(a, E.IntImm(dt.min_value(), dt)),
        *(E.Cast(dt, E.Cast(other, a)) for other in INT_DTYPES),
    ]
    OUT = decl_buffer((len(ops), n), name, "OUT")
    body = seq(*[OUT.store(v, [k, i]) for k, v in enumerate(ops)])
    return PrimFunc("ints", (A, B, S, OUT), loop(i, n, body)), len(ops)


def _int_inputs(name: str, n: int, rng) -> list[np.ndarray]:
    dt = dtype(name)
    lo, hi = dt.min_value(), dt.max_value()
    special = [v for v in (lo, lo + 1, -1, 0, 1, 2, 7, hi - 1, hi) if lo <= v <= hi]
    a = rng.integers(lo, hi, n, dtype=dt.numpy, endpoint=True)
    a[: len(special)] = special
    b = rng.permutation(a)
    b[b == 0] = 3
    b[:3] = [-1 if dt.is_int else 1, hi, 1]  # INT_MIN / -1 wraps
    return [a, b, rng.integers(0, dt.bits, n).astype(dt.numpy)]


@pytest.mark.parametrize("name", INT_DTYPES)
def test_every_integer_operation_matches_interpreter_and_llvm_bit_for_bit(name):
    n = 48
    func, rows = _int_program(name, n)
    inputs = _int_inputs(name, n, np.random.default_rng(1))
    results = {}
    for how in ("interpreter", "c", "llvm"):
        out = np.zeros((rows, n), dtype(name).numpy)
        if how == "interpreter":
            interpret(func, *inputs, out)
        else:
            loom.build(func, target=how)["ints"](*inputs, out)
        results[how] = out
    for k in range(rows):
        np.testing.assert_array_equal(results["c"][k], results["interpreter"][k], f"op {k}")
        np.testing.assert_array_equal(results["c"][k], results["llvm"][k], f"op {k}")


_MATH = ["exp", "exp2", "log", "log2", "log10", "sqrt", "tanh", "sigmoid", "erf", "sin"]
_MATH += ["cos", "fabs", "floor", "ceil", "trunc", "round", "pow"]


def _float_program(name: str, n: int) -> tuple[PrimFunc, int, int]:
    """EXACT[k, i]: arithmetic, comparisons, casts (all rounded as the IR says); MATH[k, i]:
    libm functions."""
    dt = dtype(name)
    A, B = (decl_buffer((n,), name, x) for x in "AB")
    i = Var("i")
    a, b = A[i], B[i]

    def small_int(target: str, offset: float) -> E.PrimExpr:  # lazy: no cast of NaN or inf
        fits = E.LT(E.Call(dt, "fabs", (a,)), E.FloatImm(100.0, dt))
        value = E.Cast(dt, E.Cast(target, E.Add(a, E.FloatImm(offset, dt))))
        return E.Call(dt, "if_then_else", (fits, value, E.FloatImm(-1.0, dt)))

    exact = [
        *(cls(a, b) for cls in (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod)),
        E.Min(a, b),
        E.Max(a, b),
        E.Select(E.LT(a, b), a, b),
        *(E.Cast(dt, cls(a, b)) for cls in (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE)),
        E.Cast(dt, E.Cast("bool", a)),
        *(E.Cast(dt, E.Cast(other, a)) for other in ("float16", "float32", "float64")),
        E.Add(a, E.FloatImm(0.1, dt)),
        E.Sub(a, E.FloatImm(-0.0, dt)),
        E.Mul(a, E.FloatImm(float("inf"), dt)),
        E.Add(E.Mul(a, b), E.FloatImm(0.1, dt)),  # not contracted into an FMA
        small_int("int8", 0.0),
        small_int("uint16", 200.0),
        small_int("int64", -3.0),
    ]
    approx = [E.Call(dt, f, (a, b) if f == "pow" else (b if f == "cos" else a,)) for f in _MATH]
    EXACT = decl_buffer((len(exact), n), name, "EXACT")
    MATH = decl_buffer((len(approx), n), name, "MATH")
    body = seq(
        *[EXACT.store(v, [k, i]) for k, v in enumerate(exact)],
        *[MATH.store(v, [k, i]) for k, v in enumerate(approx)],
    )
    return PrimFunc("floats", (A, B, EXACT, MATH), loop(i, n, body)), len(exact), len(approx)


@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_float_operations_match_interpreter(name):
    """Arithmetic bit for bit (signed zeros, NaN and inf included: min/max propagate a NaN in
    b, `!=` is true for NaN, float16 rounds after every operation, float32 is not contracted
    into FMA); libm's functions within a relative 1e-6 (float16: 1e-3)."""
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1.5, -2.5, 0.5, 3.0, 1e-3, -7.25]
    special += [100.0, 6e4, 1e-7]
    n = 96
    rng = np.random.default_rng(2)
    npd = dtype(name).numpy
    a = np.array([special[k % len(special)] for k in range(n)], npd)
    b = np.array([special[(7 * k + k // len(special)) % len(special)] for k in range(n)], npd)
    a[-24:], b[-24:] = rng.uniform(-10, 10, 24), rng.uniform(-10, 10, 24)
    func, rows, math_rows = _float_program(name, n)
    results = {}
    for how in ("interpreter", "c"):
        exact, approx = np.zeros((rows, n), npd), np.zeros((math_rows, n), npd)
        if how == "interpreter":
            with np.errstate(all="ignore"):
                interpret(func, a, b, exact, approx)
        else:
            loom.build(func, target="c")["floats"](a, b, exact, approx)
        results[how] = exact, approx
    got, want = results["c"][0], results["interpreter"][0]
    for k in range(rows):
        np.testing.assert_array_equal(got[k], want[k], f"op {k}")
        same_sign = (np.signbit(got[k]) == np.signbit(want[k])) | np.isnan(got[k])
        assert same_sign.all(), f"op {k}: sign of zero differs at {np.nonzero(~same_sign)}"
    got, want = results["c"][1], results["interpreter"][1]
    rtol = {"float16": 1e-3, "float32": 1e-6, "float64": 1e-14}[name]
    for k, fn in enumerate(_MATH):
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=0, err_msg=fn)


def test_constants_are_exact():
    values = {
        "int8": [-128, 127],
        "int16": [-32768, 32767],
        "int32": [-(2**31), 2**31 - 1],
        "int64": [-(2**63), 2**63 - 1],
        "uint8": [0, 255],
        "uint16": [0, 65535],
        "uint32": [2**31, 2**32 - 1],
        "uint64": [2**63, 2**64 - 1],
        "float16": [65504.0, 6e-8, 0.1, -0.0, float("-inf"), float("nan")],
        "float32": [0.1, 1e-45, 3.4028234663852886e38, -0.0, float("inf"), float("-nan")],
        "float64": [0.1, 5e-324, -1.7976931348623157e308, -0.0, float("-inf"), float("nan")],
    }
    buffers = {name: decl_buffer((len(v),), name, f"B_{name}") for name, v in values.items()}
    body = seq(
        *[
            buffers[name].store(op.const(v, name), [k])
            for name, vs in values.items()
            for k, v in enumerate(vs)
        ]
    )
    func = PrimFunc("constants", tuple(buffers.values()), body)
    arrays = [np.zeros(len(v), dtype(name).numpy) for name, v in values.items()]
    loom.build(func, target="c")["constants"](*arrays)
    for (name, vs), got in zip(values.items(), arrays):
        with np.errstate(over="ignore"):
            want = np.array(vs, dtype(name).numpy)
        np.testing.assert_array_equal(got, want, name)
        assert (np.signbit(got) == np.signbit(want)).all(), name


def test_bool_buffers_and_a_bool_scalar():
    n = 8
    A, C = decl_buffer((n,), "bool", "A"), decl_buffer((n,), "bool", "C")
    B, D = decl_buffer((n,), "int32", "B"), decl_buffer((n,), "int32", "D")
    flag = Var("flag", "bool")
    i = Var("i")
    body = seq(
        C.store(E.Or(E.And(A[i], flag), E.Not(E.GT(B[i], E.IntImm(0)))), [i]),
        D.store(E.Add(E.Cast("int32", A[i]), E.Cast("int32", E.BitXor(A[i], flag))), [i]),
    )
    func = PrimFunc("logic", (A, B, flag, C, D), loop(i, n, body))
    a = np.array([0, 1, 0, 1, 1, 0, 1, 0], bool)
    b = np.array([1, 1, -1, -1, 0, 5, 2, 0], np.int32)
    mod = loom.build(func, target="c")
    for f in (False, True):
        c, d = np.zeros(n, bool), np.zeros(n, np.int32)
        mod["logic"](a, b, f, c, d)
        np.testing.assert_array_equal(c, (a & f) | ~(b > 0))
        np.testing.assert_array_equal(d, a.astype(np.int32) + (a ^ f))


def test_if_then_else_is_lazy_and_select_is_not():
    n = 6
    A, B, C = (decl_buffer((n,), "int32", x) for x in "ABC")
    i = Var("i")
    nonzero = E.NE(B[i], E.IntImm(0))
    lazy = E.Call("int32", "if_then_else", (nonzero, E.Div(A[i], B[i]), E.IntImm(-1)))
    eager = E.Select(nonzero, E.Div(A[i], B[i]), E.IntImm(-1))
    a = np.array([7, -7, 9, 4, 5, 6], np.int32)
    b = np.array([2, 0, -4, 0, 1, 3], np.int32)
    c = np.zeros(n, np.int32)
    loom.build(PrimFunc("lazy", (A, B, C), loop(i, n, C.store(lazy, [i]))), target="c")(a, b, c)
    np.testing.assert_array_equal(c, [3, -1, -2, -1, 5, 2])
    mod = loom.build(PrimFunc("eager", (A, B, C), loop(i, n, C.store(eager, [i]))), target="c")
    with pytest.raises(LoomError, match=r"eager failed .*integer division by zero in eager"):
        mod(a, b, c)


def test_reads_and_calls_happen_in_the_order_of_the_ir():
    """A load before a call that overwrites the loaded memory reads the old value; a load
    after it, the new one (the call's result is saved in a temporary, and so is the load
    evaluated before it)."""
    n = 4
    A, B = decl_buffer((n,), "int32", "A"), decl_buffer((n,), "int32", "B")
    OUT = decl_buffer((2, n), "int32", "OUT")
    i = Var("i")

    def zero(X):  # memset(&X[i], 0, 4) == NULL, as an int32 (0)
        address = E.Call("handle", "address_of", (X[i],))
        call = E.Call("handle", "memset", (address, E.IntImm(0), E.IntImm(4, "uint64")), "extern")
        return E.Cast("int32", E.Call("bool", "isnullptr", (call,)))

    body = seq(OUT.store(E.Add(A[i], zero(A)), [0, i]), OUT.store(E.Add(zero(B), B[i]), [1, i]))
    mod = loom.build(PrimFunc("order", (A, B, OUT), loop(i, n, body)), target="c")
    a, b = np.arange(1, 5, dtype=np.int32), np.arange(1, 5, dtype=np.int32)
    out = np.zeros((2, n), np.int32)
    mod(a, b, out)
    np.testing.assert_array_equal(out, [[1, 2, 3, 4], [0, 0, 0, 0]])
    np.testing.assert_array_equal(a, 0)


def test_names_are_unique_c_identifiers():
    """Two variables named i, variables named like C keywords and a math.h macro, a dotted
    buffer name."""
    n = 3
    A = decl_buffer((n, n), "int32", "A.in")
    B = decl_buffer((n, n), "int32", "out")
    i, j = Var("i"), Var("i")
    kw, fr, macro = Var("int"), Var("for"), Var("M_PI")
    value = E.Let(kw, E.Mul(A[i, j], E.IntImm(10)), E.Let(macro, fr, E.Add(kw, macro)))
    body = loop(i, n, loop(j, n, LetStmt(fr, E.Add(i, j), B.store(value, [i, j]))))
    func = PrimFunc("names", (A, B), body)
    a = np.arange(9, dtype=np.int32).reshape(3, 3)
    want, got = np.zeros_like(a), np.zeros_like(a)
    interpret(func, a, want)
    mod = loom.build(func, target="c")
    mod(a, got)
    np.testing.assert_array_equal(got, want)
    source = mod.get_source("c")
    assert "for (int32_t i_1 = 0;" in source and "int_1" in source and "for_1" in source
    assert "A_in" in source and "v_M_PI" in source


# -- calling, errors and cleanups ----------------------------------------------------------------
@pytest.fixture(scope="module")
def axpy():
    """The calling checks of test_calling.py (imported above) run on this C-built module."""
    A = te.placeholder((16, 8), name="A")
    B = te.placeholder((16, 8), name="B")
    alpha = te.var("alpha", "float32")
    C = te.compute((16, 8), lambda i, j: A[i, j] * alpha + B[i, j], name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(C.op.axis[1])
    return loom.build(s, [A, B, alpha, C], name="axpy", target="c")


def test_axpy_is_a_c_module(axpy):
    assert axpy.type_key == "c" and "c" in axpy.sources and "ir" in axpy.sources


def test_division_by_zero_is_an_error_and_the_module_still_works():
    A = te.placeholder((4,), name="A", dtype="int32")
    B = te.placeholder((4,), name="B", dtype="int32")
    C = te.compute((4,), lambda i: A[i] // B[i], name="C")
    mod = loom.build(te.create_schedule(C.op), [A, B, C], name="div", target="c")
    a, c = np.array([7, -7, 9, 1], np.int32), np.zeros(4, np.int32)
    mod["div"](a, np.array([2, 2, -4, 1], np.int32), c)
    np.testing.assert_array_equal(c, a // np.array([2, 2, -4, 1]))
    with pytest.raises(LoomError, match=r"div failed .*integer division by zero in div"):
        mod["div"](a, np.array([1, 0, 1, 1], np.int32), c)
    mod["div"](a, np.array([1, 1, 1, 1], np.int32), c)
    np.testing.assert_array_equal(c, a)


def test_int_min_divided_by_minus_one_wraps():
    A = te.placeholder((2,), name="A", dtype="int32")
    B = te.placeholder((2,), name="B", dtype="int32")
    C = te.compute((2,), lambda i: A[i] // B[i] + A[i] % B[i] + A[i] / B[i], name="C")
    mod = loom.build(te.create_schedule(C.op), [A, B, C], name="f", target="c")
    c = np.zeros(2, np.int32)
    mod["f"](np.array([-(2**31), 5], np.int32), np.array([-1, -1], np.int32), c)
    np.testing.assert_array_equal(c, [0, -10])  # INT_MIN + 0 + INT_MIN wraps to 0


def _vtcm_divide():
    """A (in VTCM) // B: an error after an allocation."""
    A = te.placeholder((64,), name="A", dtype="int32")
    B = te.placeholder((64,), name="B", dtype="int32")
    A_buf = te.compute((64,), lambda i: A[i], name="A_buf")
    C = te.compute((64,), lambda i: A_buf[i] // B[i], name="C")
    s = te.create_schedule(C.op)
    s[A_buf].set_scope("local.vtcm")
    return loom.build(s, [A, B, C], name="vdiv", target="c")


def test_errors_run_the_cleanups_of_enclosing_allocations():
    mod = _vtcm_divide()
    assert "HexagonBackendFreeVTCM" in mod.extern_symbols
    a, c = np.arange(64, dtype=np.int32), np.zeros(64, np.int32)
    before = loom.runtime.vtcm_stats()
    mod(a, np.ones(64, np.int32), c)
    b = np.ones(64, np.int32)
    b[40] = 0
    with pytest.raises(LoomError, match=r"integer division by zero in vdiv"):
        mod(a, b, c)
    after = loom.runtime.vtcm_stats()
    assert after["allocations"] - before["allocations"] == 2
    assert after["frees"] - before["frees"] == 2 and after["in_use"] == 0


def test_allocation_failure_is_an_exception_and_nothing_leaks():
    seed = load_example(examples_dir() / "vtcm_seed.py")
    loom.runtime.configure_vtcm(3000)  # room for A_buf (2048 bytes), not for B_buf as well
    try:
        mod = loom.build(*seed.make(), name="alloc_vtcm", target="c")
        with pytest.raises(LoomError, match=r"alloc_vtcm failed .*VTCM: cannot allocate 2048"):
            mod(*seed.inputs(np.random.default_rng(0)))
        stats = loom.runtime.vtcm_stats()
        assert stats["allocations"] == 1 and stats["failures"] == 1
        assert stats["frees"] == 1 and stats["in_use"] == 0  # A_buf freed on the error path
    finally:
        loom.runtime.configure_vtcm(256 * 1024)


def test_vtcm_seed_program():
    seed = load_example(examples_dir() / "vtcm_seed.py")
    mod = loom.build(*seed.make(), name="alloc_vtcm", target="c")
    arrays = seed.inputs(np.random.default_rng(0))
    expected = seed.reference(*[x.copy() for x in arrays])
    before = loom.runtime.vtcm_stats()
    mod["alloc_vtcm"](*arrays)
    after = loom.runtime.vtcm_stats()
    np.testing.assert_array_equal(arrays[2], expected[2])
    assert after["allocations"] - before["allocations"] == 2
    assert after["frees"] - before["frees"] == 2 and after["in_use"] == 0
    assert mod.extern_symbols["HexagonBackendAllocateVTCM"] == "loom_host_runtime"
    assert mod.memories == ("local.vtcm",)


def test_pragma_mvin_mvout_program(spad):
    A = te.placeholder((4, 4, 1, 8), dtype="uint8", name="A")
    A_spad = te.compute(A.shape, lambda *i: A(*i), name="A_spad")
    C = te.compute(A.shape, lambda *i: A_spad(*i), name="C")
    s = te.create_schedule(C.op)
    s[A_spad].set_scope("spad")
    s[A_spad].pragma(s[A_spad].op.axis[0], "mvin")
    s[C].pragma(C.op.axis[0], "mvout")
    mod = loom.build(s, [A, C], name="move", target="c")
    a = np.random.default_rng(0).integers(0, 256, A.shape).astype(np.uint8)
    c = np.zeros_like(a)
    mod["move"](a, c)
    assert scratchpad_emu.read(SCRATCHPAD_BASE, 128) == a.tobytes()
    np.testing.assert_array_equal(c, a)
    assert mod.extern_symbols["mvin"] == "scratchpad_emu"
    assert re.search(r"mvin\(.*\)", mod.get_source("c"))


# -- parallel loops ------------------------------------------------------------------------------
def test_nested_parallel_loops():
    A = te.placeholder((64, 48), name="A")
    B = te.compute((64, 48), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    s[B].parallel(i)
    jo, _ = s[B].split(j, factor=8)
    s[B].parallel(jo)
    mod = loom.build(s, [A, B], name="scale", target="c")
    assert "loom_parallel_launch(scale_task_0" in mod.get_source("c")
    a = np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)
    for _ in range(5):
        b = np.zeros_like(a)
        mod(a, b)
        np.testing.assert_array_equal(b, a * 2)


def test_error_in_a_parallel_task():
    A = te.placeholder((100,), name="A", dtype="int32")
    B = te.placeholder((100,), name="B", dtype="int32")
    C = te.compute((100,), lambda i: A[i] % B[i], name="C")
    s = te.create_schedule(C.op)
    s[C].parallel(C.op.axis[0])
    mod = loom.build(s, [A, B, C], name="pmod", target="c")
    a, b, c = np.arange(100, dtype=np.int32), np.full(100, 7, np.int32), np.zeros(100, np.int32)
    mod(a, b, c)
    np.testing.assert_array_equal(c, a % 7)
    b[77] = 0
    with pytest.raises(LoomError, match=r"pmod failed .*integer division by zero in pmod"):
        mod(a, b, c)


# -- the source, and what the generator refuses --------------------------------------------------
def test_source_has_the_entry_point_and_compiles_cleanly(axpy, tmp_path):
    source = axpy.get_source("c")
    assert source.startswith("/* Generated by loom from the loop IR of axpy")
    assert "int32_t axpy(void *const *args) {" in source
    assert "static int32_t axpy_impl(float *restrict A" in source
    path = tmp_path / "axpy.c"
    path.write_text(source)
    obj = tmp_path / "axpy.o"
    cmd = [find_tool("cc"), "-c", *C_FLAGS, "-Wall", "-Wextra", "-Werror", "-o", str(obj)]
    subprocess.run([*cmd, str(path)], check=True, capture_output=True)
    symbols = subprocess.run(["nm", str(obj)], capture_output=True, text=True).stdout
    assert re.search(r" T axpy$", symbols, re.M)
    assert not re.search(r" T axpy_impl$", symbols, re.M)  # not exported


@pytest.mark.parametrize("name", ["main", "int"])
def test_function_names_c_gives_another_meaning(name, tmp_path):
    """`main` (loom.build's default name) and C keywords are exported under their own name by a
    C function of another name (clang refuses a `main` of the wrong type)."""
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] * 2.0, name="B")
    mod = loom.build(te.create_schedule(B.op), [A, B], target="c", name=name)
    a, b = np.ones(4, np.float32), np.zeros(4, np.float32)
    mod[name](a, b)
    np.testing.assert_array_equal(b, 2.0)
    assert f'__asm__(LOOM_SYMBOL("{name}"))' in mod.get_source("c")
    path = tmp_path / "main.c"
    path.write_text(mod.get_source("c"))
    for cc in ("gcc", "clang"):
        if shutil.which(cc):
            cmd = [cc, "-c", *C_FLAGS, "-Wall", "-Werror", "-o", str(tmp_path / "main.o")]
            subprocess.run([*cmd, str(path)], check=True, capture_output=True)


def test_compiler_error_names_the_source_line():
    with pytest.raises(
        LoomError,
        match=r"(?s)rejected the generated code for broken.*"
        r"broken-[0-9a-f]+\.c:2: return x;.*error",
    ):
        compile_c_object("int f(void) {\n    return x;\n}\n", "broken")


def test_vector_ir_is_refused():
    A, B = decl_buffer((4,), "float32", "A"), decl_buffer((4,), "float32", "B")
    ramp = E.Ramp(E.IntImm(0), E.IntImm(1), 4)
    func = PrimFunc("vec", (A, B), B.store(A.load([ramp]), [ramp]))
    target = Target("c")
    signatures = {"vec": signature_of(func, target.alignment)}
    with pytest.raises(LoomError, match=r"C code needs scalar IR.*vec.*float32x4"):
        generate_c(IRModule((func,)), target, signatures)


def test_stack_limit():
    A = te.placeholder((5, 30), name="A")
    T = te.compute((5, 30), lambda i, j: A[i, j] + 1.0, name="T")
    C = te.compute((5, 30), lambda i, j: T[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[T].set_scope("local")
    with pytest.raises(LoomError, match=r"allocates 600 bytes on the stack .* limit of 256"):
        loom.build(s, [A, C], target="c -stack-limit=256")
    mod = loom.build(s, [A, C], target="c")
    a = np.ones((5, 30), np.float32)
    c = np.zeros_like(a)
    mod(a, c)
    np.testing.assert_array_equal(c, 4.0)
    assert "LOOM_ALIGNED(64) float T[150];" in mod.get_source("c")


def test_compile_c_needs_the_host():
    with pytest.raises(LoomError, match=r"not the host"):
        compile_c(IRModule(()), Target("c -mtriple=aarch64-linux-gnu"))


@pytest.mark.skipif(os.cpu_count() == 1, reason="needs two threads")
def test_parallel_results_with_thread_counts():
    A = te.placeholder((100, 37), name="A")
    k = te.reduce_axis(37, "k")
    R = te.compute((100,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    s[R].parallel(R.op.axis[0])
    mod = loom.build(s, [A, R], name="rowsum", target="c")
    a = np.random.default_rng(1).standard_normal((100, 37)).astype(np.float32)
    try:
        for threads in (1, 2, 64):
            loom.runtime.set_num_threads(threads)
            r = np.zeros(100, np.float32)
            mod(a, r)
            np.testing.assert_allclose(r, a.sum(1), rtol=1e-5, atol=1e-5)
    finally:
        loom.runtime.set_num_threads(os.cpu_count() or 1)
