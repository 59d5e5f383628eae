"""The reference interpreter against numpy and against `loom.ir.semantics`."""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest

import loom
from loom import te
from loom.abi.dtype import dtype
from loom.errors import InterpreterError, LoomError
from loom.ir import expr as E
from loom.ir import op, semantics
from loom.ir.buffer import Buffer, decl_buffer
from loom.ir.expr import Broadcast, Let, Ramp, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.interpret import Pointer, Storage, interpret, python_source
from loom.ir.stmt import (
    Allocate,
    AssertStmt,
    AttrStmt,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    seq,
)


# -- helpers -------------------------------------------------------------------------------------
def loop(var: Var, extent, body, start=0, kind=ForKind.SERIAL) -> For:
    return For(var, op.const(start, var.dtype), op.convert(extent), kind, body)


def elementwise(fn, dt: str, n: int, out_dt: str | None = None) -> PrimFunc:
    """C[i] = fn(A[i], B[i]) for i < n."""
    a, b = decl_buffer((n,), dt, "A"), decl_buffer((n,), dt, "B")
    c = decl_buffer((n,), out_dt or dt, "C")
    i = Var("i")
    return PrimFunc("elementwise", (a, b, c), loop(i, n, c.store(fn(a[i], b[i]), [i])))


def ramp(base, lanes: int, stride: int = 1) -> Ramp:
    return Ramp(op.convert(base), op.const(stride), lanes)


def same(x, y) -> bool:
    """Equal values, NaN equal to NaN, and 0.0 distinct from -0.0."""
    if isinstance(x, float) or isinstance(y, float):
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return x == y and math.copysign(1, x) == math.copysign(1, y)
    return x == y


def random_array(dt: str, shape, rng) -> np.ndarray:
    np_dt = np.dtype(dt)
    if np_dt.kind == "f":
        return (rng.standard_normal(shape) * 10).astype(np_dt)
    if np_dt.kind == "b":
        return rng.integers(0, 2, shape).astype(np_dt)
    info = np.iinfo(np_dt)
    return rng.integers(info.min, info.max, shape, dtype=np_dt, endpoint=True)


# -- elementwise arithmetic against numpy --------------------------------------------------------
@pytest.mark.parametrize(
    "dt", ["int8", "uint8", "int16", "int32", "uint32", "int64", "float16", "float32", "float64"]
)
@pytest.mark.parametrize("name", ["add", "sub", "mul"])
def test_elementwise_matches_numpy(dt, name):
    rng = np.random.default_rng(0)
    n = 257
    a, b = random_array(dt, n, rng), random_array(dt, n, rng)
    c = np.zeros(n, dt)
    fn = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y}[name]
    interpret(elementwise(fn, dt, n), a, b, c)
    with np.errstate(over="ignore"):
        expected = fn(a, b)
    np.testing.assert_array_equal(c, expected)


@pytest.mark.parametrize("dt", ["float16", "float32", "float64"])
def test_float_division_matches_numpy(dt):
    rng = np.random.default_rng(1)
    a, b = random_array(dt, 100, rng), random_array(dt, 100, rng)
    b[:3] = 0
    a[0] = 0
    c = np.zeros(100, dt)
    interpret(elementwise(op.div, dt, 100), a, b, c)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(c, a / b)


def test_int8_wraps_like_numpy():
    a = np.array([127, -128, 100, -100], np.int8)
    b = np.array([1, -1, 100, -100], np.int8)
    c = np.zeros(4, np.int8)
    interpret(elementwise(op.add, "int8", 4), a, b, c)
    assert c.tolist() == [-128, 127, -56, 56]


# -- every binary operation against semantics.binary ---------------------------------------------
INT_EDGES = {
    "int8": [-128, -127, -7, -1, 0, 1, 3, 7, 126, 127],
    "uint8": [0, 1, 2, 7, 128, 254, 255],
    "int32": [-(2**31), -(2**31) + 1, -1000, -7, -1, 0, 1, 3, 31, 1000, 2**31 - 1],
    "uint32": [0, 1, 3, 31, 2**31, 2**32 - 1],
    "int64": [-(2**63), -5, -1, 0, 1, 5, 63, 2**63 - 1],
    "uint64": [0, 1, 5, 63, 2**63, 2**64 - 1],
}
FLOAT_EDGES = [0.0, -0.0, 1.0, -1.5, 2.5, 1e-3, 3.0e38, -3.0e38, math.inf, -math.inf, math.nan]
INT_OPS = ["Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max"]
INT_OPS += ["BitAnd", "BitOr", "BitXor", "ShiftLeft", "ShiftRight"]
FLOAT_OPS = ["Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max"]


def defined_pairs(name: str, dt, values):
    """Pairs of values and the semantics result, for the pairs where the operation is defined."""
    pairs, expected = [], []
    for x, y in itertools.product(values, repeat=2):
        try:
            expected.append(semantics.binary(name, x, y, dt))
        except InterpreterError:
            continue
        except (ValueError, OverflowError):  # semantics: float (floor)mod of NaN/inf raises
            continue
        pairs.append((x, y))
    return pairs, expected


def check_binary(name: str, dt_name: str, values) -> None:
    dt = dtype(dt_name)
    pairs, expected = defined_pairs(name, dt, values)
    n = len(pairs)
    a = np.array([p[0] for p in pairs], dt.numpy)
    b = np.array([p[1] for p in pairs], dt.numpy)
    c = np.zeros(n, dt.numpy)
    interpret(elementwise(lambda x, y: getattr(E, name)(x, y), dt_name, n), a, b, c)
    for (x, y), got, want in zip(pairs, c.tolist(), expected):
        assert same(got, want), f"{name}({x}, {y}) in {dt_name}: got {got}, want {want}"


@pytest.mark.parametrize("dt", list(INT_EDGES))
@pytest.mark.parametrize("name", INT_OPS)
def test_integer_ops_match_semantics(name, dt):
    check_binary(name, dt, INT_EDGES[dt])


@pytest.mark.parametrize("dt", ["float16", "float32", "float64"])
@pytest.mark.parametrize("name", FLOAT_OPS)
def test_float_ops_match_semantics(name, dt):
    values = [semantics.round_float(v, dtype(dt)) for v in FLOAT_EDGES]
    check_binary(name, dt, values)


@pytest.mark.parametrize("name", ["Div", "Mod", "FloorDiv", "FloorMod", "ShiftLeft", "ShiftRight"])
@pytest.mark.parametrize("divisor", [-7, -1, 1, 2, 3, 7])
def test_constant_operand_ops_match_semantics(name, divisor):
    """Constant right operands take inline fast paths; they must agree with semantics."""
    dt = dtype("int32")
    values = INT_EDGES["int32"]
    if name.startswith("Shift") and divisor < 0:
        return
    a = np.array(values, np.int32)
    c = np.zeros(len(values), np.int32)
    A, C = decl_buffer((len(values),), "int32", "A"), decl_buffer((len(values),), "int32", "C")
    i = Var("i")
    value = getattr(E, name)(A[i], op.const(divisor, "int32"))
    interpret(PrimFunc("f", (A, C), loop(i, len(values), C.store(value, [i]))), a, c)
    assert c.tolist() == [semantics.binary(name, x, divisor, dt) for x in values]


def test_index_arithmetic_that_overflows_still_wraps():
    """Range analysis drops wrap-around only where it is provably not needed."""
    n = 300
    C = decl_buffer((n,), "int32", "C")
    D = decl_buffer((n,), "int8", "D")
    i = Var("i")
    body = seq(
        C.store(i * 10_000_000 + 7, [i]),
        D.store(op.cast(i, "int8") + op.const(100, "int8"), [i]),
    )
    c, d = np.zeros(n, np.int32), np.zeros(n, np.int8)
    interpret(PrimFunc("f", (C, D), loop(i, n, body)), c, d)
    idx = np.arange(n, dtype=np.int64)
    assert c.tolist() == [semantics.wrap_int(int(k) * 10_000_000 + 7, dtype("int32")) for k in idx]
    assert d.tolist() == (idx.astype(np.int8) + np.int8(100)).tolist()


def test_casts_follow_semantics():
    n = 6
    A = decl_buffer((n,), "float32", "A")
    I8 = decl_buffer((n,), "int8", "I8")
    U8 = decl_buffer((n,), "uint8", "U8")
    F16 = decl_buffer((n,), "float16", "F16")
    BL = decl_buffer((n,), "bool", "BL")
    i = Var("i")
    body = seq(
        I8.store(op.cast(op.cast(A[i], "int32"), "int8"), [i]),
        U8.store(op.cast(op.cast(A[i], "int32"), "uint8"), [i]),
        F16.store(op.cast(A[i], "float16"), [i]),
        BL.store(op.cast(A[i], "bool"), [i]),
    )
    a = np.array([0.0, 1.9, -1.9, 300.7, -129.5, 70000.0], np.float32)
    i8, u8 = np.zeros(n, np.int8), np.zeros(n, np.uint8)
    f16, bl = np.zeros(n, np.float16), np.zeros(n, bool)
    with np.errstate(over="ignore"):
        interpret(PrimFunc("f", (A, I8, U8, F16, BL), loop(i, n, body)), a, i8, u8, f16, bl)
        np.testing.assert_array_equal(f16, a.astype(np.float16))
    trunc = np.trunc(a).astype(np.int64)
    assert i8.tolist() == [semantics.wrap_int(int(v), dtype("int8")) for v in trunc]
    assert u8.tolist() == [semantics.wrap_int(int(v), dtype("uint8")) for v in trunc]
    assert bl.tolist() == (a != 0).tolist()


def test_math_intrinsics_round_to_the_dtype():
    n = 5
    A, B = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")
    C = decl_buffer((n,), "float32", "C")
    i = Var("i")
    body = seq(
        B.store(op.math_call("exp", A[i]), [i]),
        C.store(op.abs_(A[i]) + op.math_call("sqrt", op.abs_(A[i])), [i]),
    )
    a = np.array([0.0, 1.0, -2.5, 10.0, 0.1], np.float32)
    b, c = np.zeros(n, np.float32), np.zeros(n, np.float32)
    interpret(PrimFunc("f", (A, B, C), loop(i, n, body)), a, b, c)
    f32 = dtype("float32")
    assert b.tolist() == [semantics.round_float(math.exp(x), f32) for x in a.tolist()]
    np.testing.assert_array_equal(c, np.abs(a) + np.sqrt(np.abs(a)))


def test_bool_logic():
    n = 4
    A, B = decl_buffer((n,), "bool", "A"), decl_buffer((n,), "bool", "B")
    C = decl_buffer((n,), "bool", "C")
    i = Var("i")
    value = op.logical_or(op.logical_and(A[i], op.logical_not(B[i])), op.bitwise_xor(A[i], B[i]))
    a, b = np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool)
    c = np.zeros(n, bool)
    interpret(PrimFunc("f", (A, B, C), loop(i, n, C.store(value, [i]))), a, b, c)
    np.testing.assert_array_equal(c, (a & ~b) | (a ^ b))


# -- loop nests, views, allocations --------------------------------------------------------------
def matmul(m: int, n: int, k: int, dt: str = "float32") -> PrimFunc:
    A, B = decl_buffer((m, k), dt, "A"), decl_buffer((k, n), dt, "B")
    C = decl_buffer((m, n), dt, "C")
    i, j, r = Var("i"), Var("j"), Var("k")
    body = loop(
        i,
        m,
        loop(
            j,
            n,
            seq(
                C.store(op.const(0, dt), [i, j]),
                loop(r, k, C.store(C[i, j] + A[i, r] * B[r, j], [i, j])),
            ),
        ),
    )
    return PrimFunc("matmul", (A, B, C), body)


def reference_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sum over k in order, rounding to the dtype after every operation."""
    c = np.zeros((a.shape[0], b.shape[1]), a.dtype)
    for r in range(a.shape[1]):
        c = (c + a[:, r : r + 1] * b[r : r + 1, :]).astype(a.dtype)
    return c


@pytest.mark.parametrize("dt", ["float32", "int32", "int8"])
def test_matmul_with_reduction(dt):
    rng = np.random.default_rng(2)
    a, b = random_array(dt, (7, 13), rng), random_array(dt, (13, 5), rng)
    c = np.full((7, 5), 3, dt)
    interpret(matmul(7, 5, 13, dt), a, b, c)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(c, reference_matmul(a, b))


def test_matmul_64_speed():
    """Not a timed assertion: prints how long a 64x64x64 matmul takes to interpret."""
    rng = np.random.default_rng(3)
    a, b = random_array("float32", (64, 64), rng), random_array("float32", (64, 64), rng)
    c = np.zeros((64, 64), np.float32)
    f = matmul(64, 64, 64)
    python_source(f)  # compile outside the timing
    start = time.perf_counter()
    interpret(f, a, b, c)
    print(f"\n64x64x64 float32 matmul interpreted in {time.perf_counter() - start:.3f} s")
    np.testing.assert_array_equal(c, reference_matmul(a, b))


def test_flat_view_shares_storage_with_2d_parameter():
    A = decl_buffer((3, 4), "float32", "A")
    flat = Buffer("A_flat", "float32", (12,), A.data)
    B = decl_buffer((3, 4), "float32", "B")
    i, j = Var("i"), Var("j")
    body = seq(
        loop(i, 12, flat.store(flat[i] * op.const(2.0), [i])),  # writes through the view
        loop(i, 3, loop(j, 4, B.store(A[i, j] + op.const(1.0), [i, j]))),  # reads the 2-d one
    )
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.zeros((3, 4), np.float32)
    expected_a = a * 2
    interpret(PrimFunc("f", (A, B), body), a, b)
    np.testing.assert_array_equal(a, expected_a)
    np.testing.assert_array_equal(b, expected_a + 1)


def test_allocate_intermediate_buffer():
    n = 10
    A, B = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")
    T = decl_buffer((2, 5), "float32", "T", scope="local")
    T_flat = Buffer("T_flat", "float32", (10,), T.data, scope="local")
    i, j = Var("i"), Var("j")
    body = Allocate(
        T,
        seq(
            loop(i, 2, loop(j, 5, T.store(A[i * 5 + j] * op.const(3.0), [i, j]))),
            loop(i, n, B.store(T_flat[i] + op.const(1.0), [i])),
        ),
    )
    a = np.arange(n, dtype=np.float32)
    b = np.zeros(n, np.float32)
    interpret(PrimFunc("f", (A, B), body), a, b)
    np.testing.assert_array_equal(b, a * 3 + 1)


@pytest.mark.parametrize(
    ("dt", "junk"),
    [("float32", None), ("int32", 0x5A5A5A5A), ("int8", 0x5A), ("uint16", 0x5A5A), ("bool", True)],
)
def test_reading_allocated_memory_before_writing_shows_junk(dt, junk):
    n = 4
    B = decl_buffer((n,), dt, "B")
    T = decl_buffer((n,), dt, "T")
    i = Var("i")
    body = Allocate(T, loop(i, n, B.store(T[i], [i])))
    b = np.zeros(n, dt)
    interpret(PrimFunc("f", (B,), body), b)
    if junk is None:
        assert np.isnan(b).all()
    else:
        assert b.tolist() == [junk] * n


def test_let_and_let_stmt():
    n = 8
    A, B = decl_buffer((n,), "int32", "A"), decl_buffer((n,), "int32", "B")
    i, x, y = Var("i"), Var("x"), Var("y")
    value = Let(x, A[i] * 3, x + x)  # 6 * a
    body = loop(i, n, LetStmt(y, value + i, B.store(y - op.const(1), [i])))
    a = np.arange(n, dtype=np.int32) - 3
    b = np.zeros(n, np.int32)
    interpret(PrimFunc("f", (A, B), body), a, b)
    np.testing.assert_array_equal(b, 6 * a + np.arange(n) - 1)


def test_scalar_parameters():
    A, B = decl_buffer((16,), "float32", "A"), decl_buffer((16,), "float32", "B")
    n, scale, i = Var("n"), Var("scale", "float32"), Var("i")
    body = loop(i, n, B.store(A[i] * scale, [i]))
    f = PrimFunc("scale", (A, n, scale, B), body)
    a = np.arange(16, dtype=np.float32)
    b = np.zeros(16, np.float32)
    interpret(f, a, np.int64(10), 0.1, b)
    expected = np.zeros(16, np.float32)
    expected[:10] = a[:10] * np.float32(0.1)
    np.testing.assert_array_equal(b, expected)


def test_control_flow_and_attributes():
    n = 6
    B = decl_buffer((n,), "int32", "B")
    i = Var("i")
    body = loop(
        i,
        n,
        AttrStmt(
            "pragma_note",
            op.const(1),
            IfThenElse(op.less(i, 3), B.store(i, [i]), B.store(-i, [i])),
        ),
    )
    b = np.zeros(n, np.int32)
    interpret(PrimFunc("f", (B,), AssertStmt(op.const(True), "never", body)), b)
    assert b.tolist() == [0, 1, 2, -3, -4, -5]


def test_if_then_else_evaluates_only_the_taken_side_and_select_both():
    n = 8
    A, B = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")
    i = Var("i")
    lazy = op.if_then_else(op.less(i, n - 1), A[i + 1], op.const(-1.0))
    a = np.arange(n, dtype=np.float32)
    b = np.zeros(n, np.float32)
    interpret(PrimFunc("f", (A, B), loop(i, n, B.store(lazy, [i]))), a, b)
    assert b.tolist() == [1, 2, 3, 4, 5, 6, 7, -1]
    eager = op.select(op.less(i, n - 1), A[i + 1], op.const(-1.0))
    with pytest.raises(InterpreterError, match="read of A"):
        interpret(PrimFunc("g", (A, B), loop(i, n, B.store(eager, [i]))), a, b)


# -- vectors --------------------------------------------------------------------------------------
def test_vector_ramp_load_store_and_broadcast():
    n, lanes = 16, 4
    A, B = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")
    s, i = Var("s", "float32"), Var("i")
    idx = ramp(i * lanes, lanes)
    body = loop(i, n // lanes, B.store(A.load([idx]) * Broadcast(s, lanes), [idx]))
    a = np.arange(n, dtype=np.float32)
    b = np.zeros(n, np.float32)
    interpret(PrimFunc("f", (A, s, B), body), a, 1.5, b)
    np.testing.assert_array_equal(b, a * np.float32(1.5))


def test_vector_strided_ramp_transposes():
    A, B = decl_buffer((16,), "int32", "A"), decl_buffer((16,), "int32", "B")
    i = Var("i")
    body = loop(i, 4, B.store(A.load([ramp(i * 4, 4)]), [ramp(i, 4, stride=4)]))
    a = np.arange(16, dtype=np.int32)
    b = np.zeros(16, np.int32)
    interpret(PrimFunc("f", (A, B), body), a, b)
    np.testing.assert_array_equal(b.reshape(4, 4), a.reshape(4, 4).T)


def test_vector_gather_and_scatter():
    n = 8
    A, Idx = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "int32", "Idx")
    G, S = decl_buffer((n,), "float32", "G"), decl_buffer((n,), "float32", "S")
    i = Var("i")
    idx = ramp(i * 4, 4)
    body = loop(
        i,
        2,
        seq(
            G.store(A.load([Idx.load([idx])]), [idx]),
            S.store(A.load([idx]), [Idx.load([idx])]),
        ),
    )
    perm = np.array([3, 0, 7, 1, 6, 2, 5, 4], np.int32)
    a = np.arange(n, dtype=np.float32) * 10
    g, s = np.zeros(n, np.float32), np.zeros(n, np.float32)
    interpret(PrimFunc("f", (A, Idx, G, S), body), a, perm, g, s)
    np.testing.assert_array_equal(g, a[perm])
    expected = np.zeros(n, np.float32)
    expected[perm] = a
    np.testing.assert_array_equal(s, expected)


def test_vector_predicated_store_and_load_with_tail():
    n, lanes = 10, 4
    A, B = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")
    C = decl_buffer((12,), "float32", "C")
    i = Var("i")
    idx = ramp(i * lanes, lanes)
    inside = op.less(idx, Broadcast(op.const(n), lanes))
    body = loop(
        i,
        3,
        seq(
            B.store(A.load([idx], inside) + Broadcast(op.const(1.0), lanes), [idx], inside),
            C.store(A.load([idx], inside), [idx]),  # masked lanes of a load read as 0
        ),
    )
    a = np.arange(n, dtype=np.float32) + 1
    b, c = np.zeros(n, np.float32), np.full(12, 7.0, np.float32)
    interpret(PrimFunc("f", (A, B, C), body), a, b, c)
    np.testing.assert_array_equal(b, a + 1)
    np.testing.assert_array_equal(c, np.concatenate([a, [0, 0]]))


def test_vector_if_then_else_guards_out_of_bounds_lanes():
    n, lanes = 10, 4
    A, B = decl_buffer((n,), "float32", "A"), decl_buffer((12,), "float32", "B")
    i = Var("i")
    idx = ramp(i * lanes, lanes)
    inside = op.less(idx, Broadcast(op.const(n), lanes))
    guarded = op.if_then_else(inside, A.load([idx]), op.const(-1.0, "float32x4"))
    a = np.arange(n, dtype=np.float32)
    b = np.zeros(12, np.float32)
    interpret(PrimFunc("f", (A, B), loop(i, 3, B.store(guarded, [idx]))), a, b)
    np.testing.assert_array_equal(b, np.concatenate([a, [-1, -1]]))
    unguarded = PrimFunc("g", (A, B), loop(i, 3, B.store(A.load([idx]), [idx])))
    with pytest.raises(InterpreterError, match=r"read of A.*element 10"):
        interpret(unguarded, a, b)


def test_vector_select_with_scalar_condition_and_int8_lanes():
    A, B = decl_buffer((8,), "int8", "A"), decl_buffer((8,), "int8", "B")
    i = Var("i")
    idx = ramp(i * 4, 4)
    x = A.load([idx])
    value = op.select(op.less(i, 1), x + Broadcast(op.const(100, "int8"), 4), x)
    a = np.array([27, 28, -1, 0, 100, 100, 100, 100], np.int8)
    b = np.zeros(8, np.int8)
    interpret(PrimFunc("f", (A, B), loop(i, 2, B.store(value, [idx]))), a, b)
    assert b.tolist() == [127, -128, 99, 100, 100, 100, 100, 100]


def test_vector_let_stmt_and_let_in_lazy_branch():
    A, B = decl_buffer((8,), "int32", "A"), decl_buffer((8,), "int32", "B")
    i, v, t = Var("i"), Var("v", "int32x4"), Var("t", "int32x4")
    idx = ramp(i * 4, 4)
    lazy_let = Let(t, A.load([idx]) * Broadcast(op.const(2), 4), t + t)
    cond = op.less(idx, Broadcast(op.const(6), 4))
    value = op.if_then_else(cond, lazy_let, Broadcast(op.const(0), 4))
    body = loop(i, 2, LetStmt(v, value, B.store(v + Broadcast(op.const(1), 4), [idx])))
    a = np.arange(8, dtype=np.int32)
    b = np.zeros(8, np.int32)
    interpret(PrimFunc("f", (A, B), body), a, b)
    assert b.tolist() == [1, 5, 9, 13, 17, 21, 1, 1]


def test_vector_math_and_cast_lanewise():
    A, B = decl_buffer((4,), "float32", "A"), decl_buffer((4,), "int32", "B")
    x = A.load([ramp(0, 4)])
    body = B.store(
        op.cast(op.math_call("floor", x * Broadcast(op.const(2.0), 4)), "int32"), [ramp(0, 4)]
    )
    a = np.array([0.3, -0.3, 1.26, -2.5], np.float32)
    b = np.zeros(4, np.int32)
    interpret(PrimFunc("f", (A, B), body), a, b)
    assert b.tolist() == [0, -1, 2, -5]


# -- externs and pointers -------------------------------------------------------------------------
def test_extern_call_receives_values():
    n = 5
    A, B = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")
    i = Var("i")
    value = op.call_extern("float32", "affine", A[i], op.const(2.0), i)
    f = PrimFunc("f", (A, B), loop(i, n, B.store(value, [i])))
    a = np.arange(n, dtype=np.float32)
    b = np.zeros(n, np.float32)
    interpret(f, a, b, externs={"affine": lambda x, s, k: x * s + k + 0.1})
    f32 = dtype("float32")
    assert b.tolist() == [semantics.round_float(2 * k + k + 0.1, f32) for k in range(n)]


def test_extern_writes_through_address_of_and_data_pointer():
    A, B = decl_buffer((8,), "int32", "A"), decl_buffer((8,), "int32", "B")
    calls = []

    def fill(p: Pointer, count: int, value: int) -> int:
        calls.append((p, count))
        for k in range(count):
            p[k] = value
        return 0

    def is_null(p) -> bool:
        return p is None

    body = seq(
        Evaluate(
            op.call_extern("int32", "fill", op.call_intrin("handle", "address_of", A[2]), 3, 7)
        ),
        Evaluate(op.call_extern("int32", "fill", B.data, 2, -1)),
        AssertStmt(op.logical_not(op.call_intrin("bool", "isnullptr", B.data)), "B is null", seq()),
    )
    a, b = np.zeros(8, np.int32), np.zeros(8, np.int32)
    interpret(PrimFunc("f", (A, B), body), a, b, externs={"fill": fill, "null": is_null})
    assert a.tolist() == [0, 0, 7, 7, 7, 0, 0, 0]
    assert b.tolist() == [-1, -1, 0, 0, 0, 0, 0, 0]
    assert calls[0][0].offset == 2 and len(calls[0][0]) == 6


def test_let_bound_pointer_views_part_of_a_buffer():
    A, B = decl_buffer((8,), "float32", "A"), decl_buffer((4,), "float32", "B")
    p = Var("p", "handle")
    window = Buffer("window", "float32", (4,), p)
    i = Var("i")
    body = LetStmt(
        p,
        op.call_intrin("handle", "address_of", A[4]),
        loop(i, 4, B.store(window[i], [i])),
    )
    a = np.arange(8, dtype=np.float32)
    b = np.zeros(4, np.float32)
    interpret(PrimFunc("f", (A, B), body), a, b)
    np.testing.assert_array_equal(b, a[4:])
    past = LetStmt(
        p, op.call_intrin("handle", "address_of", A[6]), loop(i, 4, B.store(window[i], [i]))
    )
    with pytest.raises(InterpreterError, match="read of window"):
        interpret(PrimFunc("g", (A, B), past), a, b)


def test_null_pointer_guarded_by_isnullptr():
    p = Var("p", "handle")
    window = Buffer("window", "float32", (4,), p)
    B = decl_buffer((1,), "float32", "B")
    is_null = op.call_intrin("bool", "isnullptr", p)
    read = B.store(window[0], [0])
    f = PrimFunc("f", (p, B), IfThenElse(is_null, B.store(op.const(-1.0), [0]), read))
    b = np.zeros(1, np.float32)
    interpret(f, None, b)
    assert b[0] == -1
    interpret(f, Pointer(Storage("ext", dtype("float32"), [5.0])), b)
    assert b[0] == 5
    with pytest.raises(InterpreterError, match="null pointer"):
        interpret(PrimFunc("g", (p, B), read), None, b)


def test_zero_dim_buffer_and_symbolic_allocation():
    S = decl_buffer((), "float64", "S")
    s = np.array(2.5)
    interpret(PrimFunc("f", (S,), S.store(S.load([]) * op.const(2.0, "float64"), [])), s)
    assert s == 5.0
    n, i = Var("n"), Var("i")
    A, T = decl_buffer((8,), "int32", "A"), decl_buffer((n,), "int32", "T")
    body = Allocate(T, seq(loop(i, n, T.store(i * 2, [i])), loop(i, n, A.store(T[i] + 1, [i]))))
    a = np.zeros(8, np.int32)
    interpret(PrimFunc("g", (n, A), body), 5, a)
    assert a.tolist() == [1, 3, 5, 7, 9, 0, 0, 0]


def test_missing_extern_names_the_symbol():
    B = decl_buffer((1,), "int32", "B")
    f = PrimFunc("f", (B,), B.store(op.call_extern("int32", "nowhere"), [0]))
    with pytest.raises(LoomError, match="nowhere"):
        interpret(f, np.zeros(1, np.int32))


# -- modules and sources ---------------------------------------------------------------------------
def test_module_entry_selection():
    f1 = elementwise(op.add, "int32", 2).replace(name="add")
    f2 = elementwise(op.sub, "int32", 2).replace(name="sub")
    a, b, c = np.array([5, 6], np.int32), np.array([1, 2], np.int32), np.zeros(2, np.int32)
    mod = IRModule((f1, f2))
    interpret(mod, a, b, c, entry="sub")
    assert c.tolist() == [4, 4]
    interpret(IRModule((f1,)), a, b, c)
    assert c.tolist() == [6, 8]
    with pytest.raises(LoomError, match=r"\['add', 'sub'\]"):
        interpret(mod, a, b, c)
    with pytest.raises(LoomError, match="mul"):
        interpret(mod, a, b, c, entry="mul")


def test_python_source_is_readable_python():
    text = python_source(matmul(4, 4, 4))
    assert text.startswith("def ")
    assert "for v_k in range(4):" in text
    compile(text, "<test>", "exec")


# -- errors ----------------------------------------------------------------------------------------
def shifted_copy(shift: int, n: int = 8, store_shift: int = 0) -> PrimFunc:
    A, B = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")
    i = Var("i")
    return PrimFunc("copy", (A, B), loop(i, n, B.store(A[i + shift], [i + store_shift])))


def run_copy(f: PrimFunc, n: int = 8):
    interpret(f, np.zeros(n, np.float32), np.zeros(n, np.float32))


def test_out_of_bounds_read():
    with pytest.raises(InterpreterError, match=r"read of A\[8\].*element 8.*8 elements"):
        run_copy(shifted_copy(1))


def test_out_of_bounds_write():
    with pytest.raises(InterpreterError, match=r"write of B\[8\]"):
        run_copy(shifted_copy(0, store_shift=1))


def test_negative_index_does_not_wrap():
    with pytest.raises(InterpreterError, match=r"read of A\[-1\]"):
        run_copy(shifted_copy(-1))


def test_nd_access_checks_each_dimension():
    A, B = decl_buffer((4, 4), "float32", "A"), decl_buffer((4, 4), "float32", "B")
    i, j = Var("i"), Var("j")
    body = loop(i, 4, loop(j, 4, B.store(A[i, j + 1], [i, j])))  # flat offset stays inside
    with pytest.raises(InterpreterError, match=r"A\[0, 4\]: index 4 is outside dimension 1"):
        interpret(
            PrimFunc("f", (A, B), body), np.zeros((4, 4), np.float32), np.zeros((4, 4), np.float32)
        )


def test_integer_division_by_zero():
    a, b = np.array([1, 2], np.int32), np.array([1, 0], np.int32)
    with pytest.raises(InterpreterError, match="division by zero"):
        interpret(elementwise(op.truncdiv, "int32", 2), a, b, np.zeros(2, np.int32))


def test_invalid_float_to_int_cast():
    A, B = decl_buffer((1,), "float32", "A"), decl_buffer((1,), "int32", "B")
    f = PrimFunc("f", (A, B), B.store(op.cast(A[0], "int32"), [0]))
    with pytest.raises(InterpreterError, match="nan"):
        interpret(f, np.array([np.nan], np.float32), np.zeros(1, np.int32))


def test_assert_failure_raises_with_its_message():
    n = Var("n")
    B = decl_buffer((1,), "int32", "B")
    f = PrimFunc("f", (n, B), AssertStmt(op.less(n, 4), "n must be below 4", B.store(n, [0])))
    b = np.zeros(1, np.int32)
    interpret(f, 3, b)
    assert b[0] == 3
    with pytest.raises(InterpreterError, match="n must be below 4"):
        interpret(f, 5, b)


def test_outputs_written_before_an_error_stay_written():
    A, B = decl_buffer((4,), "int32", "A"), decl_buffer((4,), "int32", "B")
    i = Var("i")
    f = PrimFunc("f", (A, B), loop(i, 4, B.store(op.truncdiv(op.const(12), A[i]), [i])))
    b = np.zeros(4, np.int32)
    with pytest.raises(InterpreterError):
        interpret(f, np.array([1, 2, 0, 3], np.int32), b)
    assert b.tolist() == [12, 6, 0, 0]


def test_unbound_variable_is_refused():
    B = decl_buffer((1,), "int32", "B")
    with pytest.raises(InterpreterError, match="variable m"):
        interpret(PrimFunc("f", (B,), B.store(Var("m"), [0])), np.zeros(1, np.int32))


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((np.zeros(8, np.float32),), TypeError, r"takes 2 arguments, got 1"),
        ((np.zeros(8, np.float64), np.zeros(8, np.float32)), TypeError, r"'A'.*dtype float32"),
        ((np.zeros(9, np.float32), np.zeros(8, np.float32)), ValueError, r"'A'.*shape \(8,\)"),
        ((np.zeros(16, np.float32)[::2], np.zeros(8, np.float32)), ValueError, "C-contiguous"),
        (([0.0] * 8, np.zeros(8, np.float32)), TypeError, r"'A'.*numpy array.*list"),
    ],
)
def test_wrong_arguments(args, error, message):
    with pytest.raises(error, match=message):
        interpret(shifted_copy(0), *args)


def test_read_only_array_is_refused():
    a = np.zeros(8, np.float32)
    b = np.zeros(8, np.float32)
    b.flags.writeable = False
    with pytest.raises(ValueError, match=r"'B'.*read-only"):
        interpret(shifted_copy(0), a, b)


def test_overlapping_arrays_are_refused():
    base = np.zeros(12, np.float32)
    with pytest.raises(ValueError, match="overlap"):
        interpret(shifted_copy(0), base[:8], base[4:])


def test_scalar_argument_checks():
    n, B = Var("n", "int8"), decl_buffer((1,), "int8", "B")
    f = PrimFunc("f", (n, B), B.store(n, [0]))
    with pytest.raises(ValueError, match=r"'n'.*\[-128, 127\].*300"):
        interpret(f, 300, np.zeros(1, np.int8))
    with pytest.raises(TypeError, match=r"'n'.*integer"):
        interpret(f, 1.5, np.zeros(1, np.int8))


def test_lowered_kernel_reading_past_its_buffer_raises():
    """The interpreter refuses an out-of-bounds read instead of returning garbage, so tests can
    tell a wrong kernel from a right one."""
    from loom.ir import IntImm, PrimFunc, Var, decl_buffer
    from loom.ir.stmt import For as ForLoop

    a = decl_buffer((8,), "float32", "A")
    b = decl_buffer((8,), "float32", "B")
    i = Var("i")
    body = ForLoop(i, IntImm(0), IntImm(8), "serial", b.store(a[i + 1], (i,)))  # reads A[8]
    with pytest.raises(InterpreterError, match=r"A"):
        interpret(
            PrimFunc("shifted", (a, b), body), np.zeros(8, np.float32), np.zeros(8, np.float32)
        )


@pytest.mark.parametrize("mode", ["compiled", "tree"])
def test_legalized_division_checks_its_divisor_in_both_modes(mode):
    """IR lowered for a target (legalized: the divisor check is a `require`) still runs in the
    interpreter, and a zero divisor fails with the message native code gives."""
    A = te.placeholder((4,), name="A", dtype="int32")
    B = te.placeholder((4,), name="B", dtype="int32")
    C = te.compute((4,), lambda i: A[i] // B[i], name="C")
    mod = loom.lower(te.create_schedule(C.op), [A, B, C], name="div", target="llvm")
    assert "require(" in str(mod)
    a = np.array([7, -7, 9, 0], np.int32)
    c = np.zeros(4, np.int32)
    interpret(mod, a, np.array([2, 2, -4, 1], np.int32), c, mode=mode)
    np.testing.assert_array_equal(c, [3, -4, -3, 0])
    with pytest.raises(InterpreterError, match="integer division by zero in div"):
        interpret(mod, a, np.array([1, 0, 1, 1], np.int32), c, mode=mode)


@pytest.mark.parametrize("mode", ["compiled", "tree"])
def test_reinterpret_reads_the_bits_as_another_type(mode):
    x = decl_buffer((1,), "float32", name="x")
    y = decl_buffer((1,), "uint32", name="y")
    bits = E.Call("uint32", "reinterpret", (x[0],))
    func = PrimFunc("bits", (x, y), y.store(bits, [0]))
    out = np.zeros(1, np.uint32)
    interpret(func, np.array([-1.5], np.float32), out, mode=mode)
    assert out[0] == np.array([-1.5], np.float32).view(np.uint32)[0]
