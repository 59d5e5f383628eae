"""legalize: hand-built IR before the pass and the IR expected after it (TVM's before/expected
style). Floor division and modulo become primitive operations (shifts and masks, truncating
division when the operands allow it, else truncating division corrected by a select), a divisor
that may be zero is checked with `require`, float min/max become selects with the NaN rule, shift
amounts are masked, bool arithmetic goes through uint8, sigmoid is expanded; what is already
primitive is left alone."""

import math

import numpy as np
import pytest

import loom
from loom import LoomError, te
from loom.ir import (
    EQ,
    GE,
    LT,
    NE,
    Add,
    BitAnd,
    Call,
    Cast,
    DataType,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    IntImm,
    IRModule,
    Let,
    Min,
    Mod,
    Or,
    PrimFunc,
    Select,
    ShiftLeft,
    ShiftRight,
    StringImm,
    Sub,
    Var,
    assert_structural_equal,
    decl_buffer,
    dtype,
    to_text,
)
from loom.ir import expr as E
from loom.transform import PassContext, get_pass
from loom.transform.legalize import legalize, legalize_func


def func(store):
    """main(A: int32[16], F: float32[16], P: bool[16], n: int32, x: float32, b: bool) {
    for i in 0..16: store(i, ...) }"""
    A, F, P = (
        decl_buffer((16,), dt, name)
        for dt, name in (("int32", "A"), ("float32", "F"), ("bool", "P"))
    )
    n, x, b = Var("n"), Var("x", "float32"), Var("b", "bool")
    i = Var("i")
    body = For(i, IntImm(0), IntImm(16), "serial", store(i, A, F, P, n, x, b))
    return IRModule((PrimFunc("main", (A, F, P, n, x, b), body),))


def check(before, expected):
    assert_structural_equal(legalize(func(before)), func(expected))


def test_floor_division_by_a_power_of_two_is_a_shift_and_a_mask():
    def before(i, A, F, P, n, x, b):
        return A.store(Add(FloorDiv(i, IntImm(4)), FloorMod(i, IntImm(4))), (i,))

    def expected(i, A, F, P, n, x, b):
        return A.store(Add(ShiftRight(i, IntImm(2)), BitAnd(i, IntImm(3))), (i,))

    check(before, expected)


def test_floor_division_of_non_negative_operands_is_truncating_division():
    def before(i, A, F, P, n, x, b):
        return A.store(Add(FloorDiv(i, IntImm(3)), FloorMod(i, IntImm(3))), (i,))

    def expected(i, A, F, P, n, x, b):
        return A.store(Add(Div(i, IntImm(3)), Mod(i, IntImm(3))), (i,))

    check(before, expected)


def test_floor_division_of_a_possibly_negative_dividend_is_corrected():
    def before(i, A, F, P, n, x, b):
        return A.store(FloorDiv(Sub(i, IntImm(8)), IntImm(3)), (i,))

    def expected(i, A, F, P, n, x, b):
        a, r = Var("a"), Var("r")
        corrected = Sub(Div(a, IntImm(3)), Cast("int32", LT(r, IntImm(0))))
        return A.store(Let(a, Sub(i, IntImm(8)), Let(r, Mod(a, IntImm(3)), corrected)), (i,))

    check(before, expected)


def test_floor_modulo_of_a_possibly_negative_dividend_is_corrected():
    def before(i, A, F, P, n, x, b):
        return A.store(FloorMod(Sub(i, IntImm(8)), IntImm(3)), (i,))

    def expected(i, A, F, P, n, x, b):
        a, r = Var("a"), Var("r")
        corrected = Select(LT(r, IntImm(0)), Add(r, IntImm(3)), r)
        return A.store(Let(a, Sub(i, IntImm(8)), Let(r, Mod(a, IntImm(3)), corrected)), (i,))

    check(before, expected)


def test_divisor_that_may_be_zero_is_checked():
    def before(i, A, F, P, n, x, b):
        return A.store(Div(i, n), (i,))

    def expected(i, A, F, P, n, x, b):
        d = Var("b")
        message = StringImm("integer division by zero in main")
        checked = Call("int32", "require", (NE(n, IntImm(0)), n, message))
        return A.store(Let(d, checked, Div(i, d)), (i,))

    check(before, expected)


def test_float_min_is_a_select_with_the_nan_rule():
    def before(i, A, F, P, n, x, b):
        return F.store(Min(F[i], x), (i,))

    def expected(i, A, F, P, n, x, b):
        a = Var("a", "float32")
        return F.store(Let(a, F[i], Select(Or(LT(x, a), NE(x, x)), x, a)), (i,))

    check(before, expected)


def test_shift_amount_is_masked_unless_known_in_range():
    def before(i, A, F, P, n, x, b):
        return A.store(Add(ShiftLeft(A[i], n), ShiftLeft(A[i], IntImm(3))), (i,))

    def expected(i, A, F, P, n, x, b):
        return A.store(
            Add(ShiftLeft(A[i], BitAnd(n, IntImm(31))), ShiftLeft(A[i], IntImm(3))), (i,)
        )

    check(before, expected)


def test_bool_arithmetic_goes_through_uint8():
    def before(i, A, F, P, n, x, b):
        return P.store(Add(P[i], b), (i,))

    def expected(i, A, F, P, n, x, b):
        return P.store(Cast("bool", Add(Cast("uint8", P[i]), Cast("uint8", b))), (i,))

    check(before, expected)


def test_sigmoid_is_expanded():
    def before(i, A, F, P, n, x, b):
        return F.store(Call("float32", "sigmoid", (F[i],)), (i,))

    def expected(i, A, F, P, n, x, b):
        v, e = Var("x", "float32"), Var("e", "float32")
        one = FloatImm(1.0)
        exp = Call("float32", "exp", (Sub(FloatImm(0.0), Call("float32", "fabs", (v,))),))
        result = Select(GE(v, FloatImm(0.0)), Div(one, Add(one, e)), Div(e, Add(one, e)))
        return F.store(Let(v, F[i], Let(e, exp, result)), (i,))

    check(before, expected)


def test_primitive_operations_are_left_alone():
    def build(i, A, F, P, n, x, b):
        value = Add(Min(A[i], n), Cast("int32", EQ(P[i], b)))
        return A.store(Add(value, Cast("int32", Div(F[i], x))), (i,))

    check(build, build)


# -- more rules, on one store in a loop over i in [0, 8) -----------------------------------------
I32, U8, BOOL = DataType("int", 32), DataType("uint", 8), DataType("bool", 1)
F32, F64 = DataType("float", 32), DataType("float", 64)
MESSAGE = StringImm("integer division by zero in f")


def c(value, dt=I32):
    return FloatImm(value, dt) if dt.is_float else IntImm(value, dt)


def legalized(make, dt=I32, lanes: int = 1, libm: bool = True):
    """(legalized value, A, B, index) of `make(A[index], B[index])` stored to C[index] in a loop
    over i in [0, 8); index is i, or ramp(0, 1, lanes) for vectors."""
    A, B = decl_buffer((8,), str(dt), "A"), decl_buffer((8,), str(dt), "B")
    C = decl_buffer((8,), str(make(A[0], B[0]).dtype.element), "C")
    i = Var("i")
    index = E.Ramp(c(0), c(1), lanes) if lanes > 1 else i
    body = C.store(make(A[index], B[index]), [index])
    func = PrimFunc("f", (A, B, C), For(i, c(0), c(8), "serial", body))
    return legalize_func(func, libm).body.body.value, A, B, index


def require(cond, value):
    return Call(value.dtype, "require", (cond, value, MESSAGE))


def lets(bindings, body):
    for var, value in reversed(bindings):
        body = Let(var, value, body)
    return body


def test_signed_floor_division_by_a_variable_corrects_and_wraps():
    a, b, b1, d, r = (Var(n) for n in ("a", "b", "b", "d", "r"))
    minus_one = EQ(b1, c(-1))
    adjust = E.And(NE(r, c(0)), LT(E.BitXor(r, b1), c(0)))
    quotient = Select(minus_one, Sub(c(0), a), Sub(Div(a, d), Cast(I32, adjust)))
    for cls, result in ((FloorDiv, quotient), (FloorMod, Select(adjust, Add(r, b1), r))):
        got, A, B, i = legalized(cls)
        binds = [(a, A[i]), (b, B[i]), (b1, require(NE(b, c(0)), b))]
        binds += [(d, Select(minus_one, c(1), b1)), (r, Mod(a, d))]
        assert_structural_equal(got, lets(binds, result))


def test_truncating_division_wraps_int_min_by_minus_one():
    a, b, b1, d = Var("a"), Var("b"), Var("b"), Var("d")
    minus_one = EQ(b1, c(-1))
    quotient = Select(minus_one, Sub(c(0), a), Div(a, d))
    for cls, result in ((Div, quotient), (Mod, Mod(a, d))):  # a % 1 is a % -1: 0
        got, A, B, i = legalized(cls)
        binds = [(a, A[i]), (b, B[i]), (b1, require(NE(b, c(0)), b))]
        binds.append((d, Select(minus_one, c(1), b1)))
        assert_structural_equal(got, lets(binds, result))


def test_unsigned_division_only_checks_zero():
    for cls in (Div, FloorDiv):
        got, A, B, i = legalized(cls, U8)
        a, b, b1 = Var("a", U8), Var("b", U8), Var("b", U8)
        binds = [(a, A[i]), (b, B[i]), (b1, require(NE(b, c(0, U8)), b))]
        assert_structural_equal(got, lets(binds, Div(a, b1)))


def test_constant_divisors():
    cases = [
        (lambda a, b: Div(a, c(7)), lambda a: Div(a, c(7))),
        (lambda a, b: Mod(a, c(-7)), lambda a: Mod(a, c(-7))),
        (lambda a, b: Div(a, c(-1)), lambda a: Sub(c(0), a)),
        (lambda a, b: FloorMod(a, c(-1)), lambda a: Mod(a, c(1))),
        (lambda a, b: Div(a, c(0)), lambda a: require(c(0, BOOL), a)),  # fails if evaluated
    ]
    for make, want in cases:
        got, A, _, i = legalized(make)
        assert_structural_equal(got, want(A[i]))
    got, A, _, i = legalized(lambda a, b: FloorMod(a, c(-7)))
    a, r = Var("a"), Var("r")
    want = Select(E.GT(r, c(0)), Add(r, c(-7)), r)  # the remainder takes the divisor's sign
    assert_structural_equal(got, lets([(a, A[i]), (r, Mod(a, c(-7)))], want))


def test_vector_division_legalizes_lane_wise():
    got, A, B, index = legalized(FloorDiv, lanes=4)
    v = I32.with_lanes(4)
    a, b, b1, d, r = (Var(n, v) for n in ("a", "b", "b", "d", "r"))

    def k(x):
        return E.Broadcast(c(x), 4)

    minus_one = EQ(b1, k(-1))
    adjust = E.And(NE(r, k(0)), LT(E.BitXor(r, b1), k(0)))
    binds = [(a, A[index]), (b, B[index]), (b1, require(NE(b, k(0)), b))]
    binds += [(d, Select(minus_one, k(1), b1)), (r, Mod(a, d))]
    result = Select(minus_one, Sub(k(0), a), Sub(Div(a, d), Cast(v, adjust)))
    assert_structural_equal(got, lets(binds, result))


def test_float_floor_division_in_double():
    got, A, B, i = legalized(FloorDiv, F32)
    floor = Call(F64, "floor", (Div(Cast(F64, A[i]), Cast(F64, B[i])),))
    assert_structural_equal(got, Cast(F32, Add(floor, c(0.0, F64))))  # floor(-0.0) is +0.0


def test_float_floor_modulo_in_double_with_the_infinite_divisor_rule():
    got, A, B, i = legalized(FloorMod, F32)
    x, y = Var("x", F64), Var("y", F64)
    zero, inf = c(0.0, F64), c(math.inf, F64)
    product = E.Mul(Add(Call(F64, "floor", (Div(x, y),)), zero), y)
    general = Sub(x, Call(F64, "arithmetic_fence", (product,)))  # never a fused multiply-add
    infinite_y = Or(EQ(y, inf), EQ(y, c(-math.inf, F64)))
    finite_x = E.And(LT(x, inf), E.GT(x, c(-math.inf, F64)))
    keeps_x = Select(E.GT(y, zero), GE(x, zero), E.LE(x, zero))
    want = Select(E.And(infinite_y, finite_x), Select(keeps_x, x, y), general)
    binds = [(x, Cast(F64, A[i])), (y, Cast(F64, B[i]))]
    assert_structural_equal(got, Cast(F32, lets(binds, want)))
    got, A, B, i = legalized(Mod, F32)  # fmod is primitive
    assert_structural_equal(got, Mod(A[i], B[i]))


def test_constant_shift_amounts_out_of_range_are_masked_at_compile_time():
    got, A, _, i = legalized(lambda a, b: ShiftLeft(a, c(40)))
    assert_structural_equal(got, ShiftLeft(A[i], c(8)))
    got, A, B, i = legalized(ShiftRight, U8)
    assert_structural_equal(got, ShiftRight(A[i], BitAnd(B[i], c(7, U8))))


@pytest.mark.parametrize("kind", ["floor", "ceil", "trunc", "round"])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_rounding_without_libm_is_exact(kind, dt):
    """For a target without libm (Hexagon's runtime): through the integer conversion; checked
    here against numpy on the host, special values and ties included."""
    got, _, _, _ = legalized(lambda a, b: Call(dt, kind, (a,)), dtype(dt), libm=False)
    assert f"@{kind}(" not in to_text(got)
    X, Y = decl_buffer((64,), dt, "X"), decl_buffer((64,), dt, "Y")
    i = Var("i")
    store = Y.store(Call(dt, kind, (X[i],)), [i])
    func = PrimFunc("f", (X, Y), For(i, c(0), c(64), "serial", store))
    func = legalize_func(func, libm=False)
    big = float(2 ** (52 if dt == "float64" else 23))
    x = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49, -0.51, 3.0, -7.75, big, -big]
    x += [big - 0.5, -(big - 0.5), big * 4, 1e30, -1e30, math.inf, -math.inf, math.nan]
    x += list(np.random.default_rng(0).uniform(-1e6, 1e6, 64 - len(x)))
    x = np.array(x, dt)
    y = np.zeros_like(x)
    loom.build(func, target="llvm")(x, y)
    want = {"floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": np.round}[kind](x)
    np.testing.assert_array_equal(y, want)
    assert (np.signbit(y) == np.signbit(want))[~np.isnan(want)].all()


# -- in the pipeline ------------------------------------------------------------------------------
def schedule():
    A = te.placeholder((8,), name="A", dtype="float32")
    B = te.placeholder((8,), name="B", dtype="float32")
    C = te.compute((8,), lambda i: loom.ir.op.max_(A[i] % B[i], B[i]) + te.sigmoid(A[i]), name="C")
    return te.create_schedule(C.op), [A, B, C]


def test_runs_when_building_for_a_target_only():
    assert get_pass("legalize") is legalize
    text = str(loom.lower(*schedule(), name="f"))  # the interpreter's IR keeps the semantics
    assert "floormod" in text and "max(" in text and "@sigmoid" in text
    text = str(loom.lower(*schedule(), name="f", target="llvm"))
    assert "floormod" not in text and "max(" not in text and "@sigmoid" not in text


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_code_generators_refuse_what_legalize_removes(target):
    with (
        PassContext(disabled_pass=["legalize"]),
        pytest.raises(LoomError, match=r"Max on float32 .* legalize pass must run first"),
    ):
        loom.build(*schedule(), name="f", target=target)
    A = te.placeholder((8,), name="A", dtype="int32")
    C = te.compute((8,), lambda i: A[i] // A[7 - i], name="C")
    with (
        PassContext(disabled_pass=["legalize"]),
        pytest.raises(LoomError, match=r"FloorDiv on int32 .* legalize pass must run first"),
    ):
        loom.build(te.create_schedule(C.op), [A, C], name="f", target=target)


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_three_mod_infinity_is_three(target):
    A = te.placeholder((4,), name="A", dtype="float32")
    B = te.placeholder((4,), name="B", dtype="float32")
    C = te.compute((4,), lambda i: A[i] % B[i], name="C")
    a = np.array([3.0, -3.0, 3.0, 0.0], np.float32)
    b = np.array([np.inf, np.inf, -np.inf, -np.inf], np.float32)
    out = np.zeros(4, np.float32)
    loom.build(te.create_schedule(C.op), [A, B, C], target=target)(a, b, out)
    np.testing.assert_array_equal(out, [3.0, np.inf, -np.inf, 0.0])


def test_errors_name_the_function_or_the_one_a_parallel_task_came_from():
    A = decl_buffer((4,), "int32", "A")
    i = Var("i")
    store = A.store(Div(c(1), A[i]), [i])
    funcs = [
        PrimFunc("f", (A,), For(i, c(0), c(4), "serial", store)),
        PrimFunc("f_task_0", (A,), For(i, c(0), c(4), "serial", store)).with_attr(
            "parallel_task", "g"
        ),
    ]
    out = legalize(IRModule(tuple(funcs)))
    assert 'by zero in f"' in str(out["f"]) and 'by zero in g"' in str(out["f_task_0"])
