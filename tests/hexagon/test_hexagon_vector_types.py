"""The vector code loom gives LLVM's Hexagon back end, and what it does with the rest.

LLVM 22 aborts the process on some vector code for Hexagon: `int8x2` arithmetic with a
truncated splat ("Do not know how to scalarize the result of this operator"), multiplication of
`int64x48` ("Invalid cast!"), a `vselect` between vectors of predicates ("Cannot select"); a
6-lane `int8` vector loop crashed the device runtime, and a 128-lane gather `X[i % 8]` computed
wrong lanes under qemu-hexagon. loom's vectorizer gives Hexagon only power-of-two vectors of at
least 32 bits, contiguous unmasked loads and stores, and no select between predicate vectors:
it splits a loop into a power-of-two vector and the rest, or runs it serially; hand-written IR
with such code is refused. Each program below aborted, crashed or computed wrong lanes before.
"""

import numpy as np
import pytest

import loom
from loom import te
from loom.abi.dtype import dtype
from loom.backend.hexagon import vector_problem, vector_supported
from loom.ir import expr as E
from loom.ir.buffer import decl_buffer
from loom.ir.function import PrimFunc
from loom.ir.visitor import post_order_visit

TARGET = loom.target.hexagon("v66", hvx=128)
SCALAR_TARGET = loom.target.hexagon("v66", hvx=0)
CPU_TARGET = "llvm -mtriple=x86_64-linux-gnu -mcpu=znver4 -mattr=+avx512f"
"""A CPU with 64-byte registers, whatever this machine's: its vectorizer keeps a loop of up
to four registers of its narrowest element (vectorize_loop.VECTOR_REGISTERS) as one vector,
and 24 int64 lanes are three of them. With AVX2's 32-byte registers they are six: the host
target ("llvm") of an AVX2 machine runs them as 16 + 8 lanes, like Hexagon but because of
their length, not of what its back end can emit. Only lowered, never run."""


@pytest.mark.parametrize(
    "text, supported",
    [
        ("int8x4", True),
        ("int8x2", False),
        ("uint8x128", True),
        ("int16x2", True),
        ("int32x6", False),
        ("int64x16", True),
        ("int64x48", False),
        ("boolx2", True),
        ("boolx3", False),
        ("float32x8", True),
    ],
)
def test_the_rule_is_power_of_two_lanes_of_at_least_32_bits(text, supported):
    assert vector_supported(dtype(text)) is supported


def vector_types(mod) -> set[str]:
    found = set()

    def record(n):
        dt = getattr(n, "dtype", None)
        if dt is not None and dt.lanes > 1:
            found.add(str(dt))

    for func in mod:
        post_order_visit(func.body, record)
    return found


def square_plus_half(n: int, dt: str):
    A = te.placeholder((n,), dtype=dt, name="A")
    B = te.compute((n,), lambda i: A[i] * A[i] + (A[i] >> 1), name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    return s, [A, B]


@pytest.mark.parametrize(
    "n, dt, expected",
    [
        (24, "int64", {"int64x16", "int64x8"}),
        (6, "int8", {"int8x4"}),  # and the last two lanes serially
        (2, "int8", set()),
        (7, "int16", {"int16x4", "int16x2"}),
    ],
)
def test_the_vectorizer_splits_or_serializes_what_hexagon_cannot_emit(n, dt, expected):
    s, args = square_plus_half(n, dt)
    vectors = vector_types(loom.lower(s, args, target=TARGET))
    assert {v for v in vectors if not v.startswith("int32")} == expected
    assert all(vector_supported(dtype(v)) for v in vectors)
    # a CPU keeps one vector of all the lanes
    assert f"{dt}x{n}" in vector_types(loom.lower(s, args, target=CPU_TARGET))


@pytest.mark.parametrize("target", [TARGET, SCALAR_TARGET], ids=["hvx128", "hvx0"])
@pytest.mark.parametrize("n, dt", [(48, "int64"), (6, "int8"), (2, "int8"), (7, "int16")])
def test_split_vectors_run_and_match_numpy(dev, target, n, dt):
    s, args = square_plus_half(n, dt)
    mod = loom.build(s, args, target=target, name="f")
    rng = np.random.default_rng(n)
    info = np.iinfo(dt)
    a = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    b = np.zeros(n, dt)
    mod.to_device(dev)["f"](a, b)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(b, a * a + (a >> 1))


def gathered(n: int = 128):
    X = te.placeholder((n,), dtype="uint8", name="X")
    Y = te.compute((n,), lambda i: X[i % 8] + X[i], name="Y")
    s = te.create_schedule(Y.op)
    s[Y].vectorize(Y.op.axis[0])
    return s, [X, Y]


def predicate_choices(n: int = 128):
    # a select between predicate vectors whose condition comes from int32 lanes, and an
    # if_then_else whose taken side reads memory (a masked load): LLVM made each a vselect of
    # <128 x i1>, which its Hexagon back end cannot select
    W = te.placeholder((n,), dtype="int32", name="W")
    X = te.placeholder((n,), dtype="uint8", name="X")

    def f(i):
        a = te.select(W[i] > 0, X[i] > 150, X[i] < 50)
        b = te.if_then_else(te.cast(W[i % 8], "bool"), X[i] >= 20, te.equal(i, 53))
        return te.select(a, te.const(241, "uint8"), te.select(b, te.const(7, "uint8"), X[i]))

    Y = te.compute((n,), f, name="Y")
    s = te.create_schedule(Y.op)
    s[Y].vectorize(Y.op.axis[0])
    return s, [W, X, Y]


def test_gathers_and_predicate_choices_run_serially_on_hexagon_only():
    for s, args in (gathered(), predicate_choices()):
        assert vector_types(loom.lower(s, args, target=TARGET)) == set()
        assert "uint8x128" in vector_types(loom.lower(s, args, target="llvm"))


def test_a_gather_runs_and_matches_numpy(dev):
    mod = loom.build(*gathered(), target=TARGET, name="f")
    x = np.random.default_rng(1).integers(0, 256, 128, dtype="uint8")
    y = np.zeros(128, "uint8")
    mod.to_device(dev)["f"](x, y)
    np.testing.assert_array_equal(y, x[np.arange(128) % 8] + x)


def test_predicate_choices_run_and_match_numpy(dev):
    mod = loom.build(*predicate_choices(), target=TARGET, name="f")
    rng = np.random.default_rng(0)
    w = rng.integers(-2, 3, 128).astype("int32")
    x = rng.integers(0, 256, 128, dtype="uint8")
    y = np.zeros(128, "uint8")
    mod.to_device(dev)["f"](w, x, y)
    i = np.arange(128)
    a = np.where(w > 0, x > 150, x < 50)
    b = np.where(w[i % 8] != 0, x >= 20, i == 53)
    np.testing.assert_array_equal(y, np.where(a, 241, np.where(b, 7, x)))


def ramp(base: int, stride: int, lanes: int):
    return E.Ramp(E.IntImm(base, "int32"), E.IntImm(stride, "int32"), lanes)


@pytest.mark.parametrize(
    "lanes, load_stride, message",
    [
        (2, 1, r"vectors of int8x2"),
        (4, 2, r"a gather or scatter"),
    ],
)
def test_hand_written_vector_code_hexagon_cannot_have_is_refused(lanes, load_stride, message):
    A, B = decl_buffer((8,), "int8", "A"), decl_buffer((8,), "int8", "B")
    value = A.load([ramp(0, load_stride, lanes)]) * E.Broadcast(E.IntImm(3, "int8"), lanes)
    body = B.store(value, [ramp(0, 1, lanes)])
    with pytest.raises(loom.LoomError, match=rf"function f: Hexagon code cannot have {message}"):
        loom.build(PrimFunc("f", (A, B), body), target=TARGET)
    assert vector_problem(body) is None  # the statement itself is fine; its parts are not


SELECTS = """
define <4 x i1> @f(<4 x i1> %c, <4 x i1> %a, i1 %s) {
  %v = select <4 x i1> %c, <4 x i1> <i1 true, i1 false, i1 false, i1 true>, <4 x i1> %a
  %w = select i1 %s, <4 x i1> %v, <4 x i1> zeroinitializer
  %x = select <4 x i1> %w, <4 x i32> zeroinitializer, <4 x i32> splat (i32 1)
  ret <4 x i1> %w
}

define <4 x i1> @g(<4 x i1> %0, <4 x i1> %1) {
  %3 = select <4 x i1> %0, <4 x i1> %1, <4 x i1> zeroinitializer
  %4 = select <4 x i1> %3, <4 x i1> %0, <4 x i1> %1
  ret <4 x i1> %4
}
"""


def test_selects_between_predicate_vectors_become_logic_after_optimization():
    import llvmlite.binding as llvm

    from loom.backend.hexagon.llvm_fixups import split_predicate_selects

    fixed = split_predicate_selects(SELECTS)
    llvm.parse_assembly(fixed).verify()
    assert "%v = select" not in fixed and "%w = select" not in fixed
    assert "%x = select <4 x i1> %w, <4 x i32>" in fixed  # a select of other values stays
    assert fixed.count(" = or <4 x i1> ") == 4
    assert "%3 = or <4 x i1>" in fixed  # a numbered value keeps its number
