"""The two modes of `loom.ir.interpret` agree: the default compiled mode (generated Python with
shortcuts, `loom.ir.pycodegen`) and the plain tree-walking evaluator `loom.ir.evaluate`, the
specification. They must give the same results and raise the same kind of error; the shortcuts
must give `loom.ir.semantics`' answers."""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loom
from loom.errors import InterpreterError, LoomError
from loom.ir import Buffer, IntImm, PrimFunc, Var, decl_buffer, dtype, interpret, op, semantics
from loom.ir import expr as E
from loom.ir.evaluate import evaluate
from loom.ir.expr import Broadcast, Let, Ramp
from loom.ir.interpret import Pointer, Storage
from loom.ir.pycodegen import _Intervals
from loom.ir.stmt import (
    Allocate,
    AssertStmt,
    DeferStmt,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    seq,
)
from loom.ir.visitor import post_order_visit
from tests.cases import CASES
from tests.random_programs import draw_program

MODES = ("compiled", "tree")
RANDOM = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))


# -- running a program in both modes --------------------------------------------------------------
def run(func, args, mode, **kwargs):
    """(the arguments after the run, the type of the error raised or None)."""
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    try:
        interpret(func, *args, mode=mode, **kwargs)
    except LoomError as err:  # InterpreterError is one
        return args, type(err)
    return args, None


def same_array(x: np.ndarray, y: np.ndarray) -> bool:
    """Equal elements, NaN equal to NaN, and 0.0 distinct from -0.0."""
    if x.dtype.kind != "f":
        return np.array_equal(x, y)
    nan = np.isnan(x)
    return bool(
        (nan == np.isnan(y)).all()
        and (x[~nan] == y[~nan]).all()
        and (np.signbit(x[~nan]) == np.signbit(y[~nan])).all()
    )


def assert_modes_agree(func, args, **kwargs):
    """Both modes raise the same kind of error, or none and leave the same arrays; returns the
    arguments after the compiled run and its error."""
    (compiled, error), (tree, tree_error) = (run(func, args, mode, **kwargs) for mode in MODES)
    assert error is tree_error, f"compiled mode raised {error}, tree mode {tree_error}"
    if error is None:
        for k, (got, want) in enumerate(zip(tree, compiled)):
            if isinstance(want, np.ndarray):
                assert same_array(got, want), f"argument {k}: tree {got}, compiled {want}"
    return compiled, error


def loop(var: Var, extent, body, start=0, kind=ForKind.SERIAL) -> For:
    return For(var, op.const(start, var.dtype), op.convert(extent), kind, body)


def test_bad_mode_is_refused():
    I = decl_buffer((1,), "int32", "I")
    func = PrimFunc("f", (I,), I.store(op.const(1), [0]))
    with pytest.raises(ValueError, match=r"mode.*'compiled'.*'tree'.*'fast'"):
        interpret(func, np.zeros(1, np.int32), mode="fast")


# -- every case of the catalogue, and random programs --------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_modes_agree_on_cases(case):
    sch, args = case.make()
    mod = loom.lower(sch, args, name="kernel")
    _, error = assert_modes_agree(mod, case.inputs(np.random.default_rng(7)))
    assert error is None


@RANDOM
@given(st.data())
def test_modes_agree_on_random_programs(data):
    prog = draw_program(data.draw)
    mod = loom.lower(prog.schedule, prog.args, name="random")
    assert_modes_agree(mod, prog.inputs)


# -- special values through every operation ------------------------------------------------------
INT_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
INTEGERS = INT_DTYPES[1:]
FLOAT_DTYPES = ["float16", "float32", "float64"]
INT_OPS = ["Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max"]
INT_OPS += ["BitAnd", "BitOr", "BitXor", "ShiftLeft", "ShiftRight"]
FLOAT_OPS = ["Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max"]


def special_values(name: str) -> list:
    dt = dtype(name)
    if dt.is_float:
        tiny = {16: 2.0**-24, 32: 2.0**-149, 64: 5e-324}[dt.bits]  # the smallest subnormal
        big = {16: 65504.0, 32: 3.4028234663852886e38, 64: 1.7976931348623157e308}[dt.bits]
        values = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, tiny, -tiny, big, -big]
        return [*values, math.inf, -math.inf, math.nan]
    if dt.is_bool:
        return [False, True]
    lo, hi = dt.min_value(), dt.max_value()
    candidates = [lo, lo + 1, -7, -2, -1, 0, 1, 2, 3, 7, dt.bits - 1, dt.bits, hi - 1, hi]
    return sorted({v for v in candidates if lo <= v <= hi})


def ops_of(name: str) -> list[str]:
    return FLOAT_OPS if dtype(name).is_float else INT_OPS


def known_semantics_bug(op_name: str, dt, x, y) -> bool:
    """semantics.float_floormod raises OverflowError, not InterpreterError, when a / b overflows
    (see test_float_floormod_of_an_infinite_quotient)."""
    if op_name != "FloorMod" or not dt.is_float or y == 0 or not math.isfinite(x):
        return False
    return math.isfinite(y) and abs(x) / abs(y) == math.inf


def store_one(value: E.PrimExpr, params) -> PrimFunc:
    out = decl_buffer((1,), value.dtype, "C")
    return PrimFunc("f", (*params, out), out.store(value, [0]))


def result(func, args) -> np.ndarray | type:
    """Run both modes; the result (an array of one element), or InterpreterError."""
    out, error = assert_modes_agree(func, [*args, np.zeros(1, func.params[-1].dtype.numpy)])
    assert error in (None, InterpreterError)
    return error or out[-1]


def check_against_semantics(got, dt, compute, what: str) -> None:
    """`got` (a result) is semantics' answer `compute()` in `dt`, or both are InterpreterError."""
    try:
        want = np.array([compute()], dt.numpy)
    except InterpreterError:
        assert got is InterpreterError, f"{what}: got {got}, semantics raises"
        return
    assert got is not InterpreterError, f"{what}: raised, semantics gives {want}"
    assert same_array(got, want), f"{what}: got {got}, semantics gives {want}"


@pytest.mark.parametrize("dt", INT_DTYPES + FLOAT_DTYPES)
def test_special_values_through_every_binary_op(dt):
    """Variable operands: the general paths."""
    d = dtype(dt)
    x, y = Var("x", d), Var("y", d)
    for op_name in ops_of(dt):
        func = store_one(getattr(E, op_name)(x, y), (x, y))
        for a in special_values(dt):
            for b in special_values(dt):
                if not known_semantics_bug(op_name, d, a, b):
                    result(func, [a, b])


@pytest.mark.parametrize("dt", INT_DTYPES + FLOAT_DTYPES)
def test_special_values_by_constant_operands(dt):
    """A constant right operand (a divisor, a shift amount) takes pycodegen's inline shortcuts;
    each must give semantics' answer, for positive and negative constants, 0 and -1."""
    d = dtype(dt)
    x = Var("x", d)
    values = special_values(dt)
    for op_name in ops_of(dt):
        for c in values:
            constant = E.FloatImm(c, d) if d.is_float else IntImm(c, d)
            func = store_one(getattr(E, op_name)(x, constant), (x,))
            for a in values:
                if not known_semantics_bug(op_name, d, a, c):
                    check_against_semantics(
                        result(func, [a]),
                        d,
                        functools.partial(semantics.binary, op_name, a, c, d),
                        f"{op_name}({a}, {c}) in {dt}",
                    )


@pytest.mark.parametrize("src", INT_DTYPES + FLOAT_DTYPES)
def test_special_values_through_every_cast(src):
    s = dtype(src)
    x = Var("x", s)
    for dst in INT_DTYPES + FLOAT_DTYPES:
        d = dtype(dst)
        func = store_one(E.Cast(d, x), (x,))
        for a in special_values(src):
            check_against_semantics(
                result(func, [a]),
                d,
                functools.partial(semantics.cast, a, s, d),
                f"cast({a}) from {src} to {dst}",
            )


def test_float_floormod_of_an_infinite_quotient_is_undefined():
    """A float64 FloorMod whose quotient a / b overflows has no defined result (docs/ir.md): like
    every undefined result it raises InterpreterError."""
    with pytest.raises(InterpreterError, match="the quotient overflows"):
        semantics.binary("FloorMod", 1e308, 1e-308, dtype("float64"))


@pytest.mark.parametrize(
    "value, src",
    [(2**60 + 2**36 + 1, "int64"), (-(2**60) - 2**36 - 1, "int64"), (2**64 - 1, "uint64")],
)
@pytest.mark.parametrize("dst", ["float32", "float16"])
def test_wide_integers_round_once_to_narrow_floats(value, src, dst):
    """As C and numpy convert: rounded once, to the nearest float32/float16, not first to a
    double (2**60 + 2**36 + 1 would become 2**60)."""
    with np.errstate(over="ignore"):  # beyond float16's range: inf, as C gives
        expected = float(np.array(value, dtype=src).astype(dst))
    assert semantics.cast(value, dtype(src), dtype(dst)) == expected


# -- the interval analysis behind pycodegen's shortcuts ------------------------------------------
def window_starts(d) -> list[int]:
    """Starts of windows of 8 values at the bottom, around 0 and at the top of the dtype."""
    lo, hi = d.min_value(), d.max_value()
    return sorted({lo, max(lo, -4), 0, hi - 7})


def window(d, k: Var, start: int) -> E.PrimExpr:
    """start + k for the loop variable k in [0, 8): a value the interval analysis knows."""
    return E.Add(E.Cast(d, k), IntImm(start, d))


@pytest.mark.parametrize("dt", INTEGERS)
def test_interval_proven_shortcuts_at_the_edges_of_the_dtype(dt):
    """C[k] = (start + k) op c, where the analysis knows the left operand's exact range: pycodegen
    drops wraps and picks inline operators from it. Both modes must give semantics' answer."""
    d, k = dtype(dt), Var("k")
    out = decl_buffer((8,), d, "C")
    for start in window_starts(d):
        for op_name in INT_OPS:
            for c in special_values(dt):
                value = getattr(E, op_name)(window(d, k, start), IntImm(c, d))
                func = PrimFunc("window", (out,), loop(k, 8, out.store(value, [k])))
                (got,), error = assert_modes_agree(func, [np.zeros(8, d.numpy)])
                what = f"{op_name}({start} + k, {c}) in {dt}"
                try:
                    want = [semantics.binary(op_name, start + v, c, d) for v in range(8)]
                except InterpreterError:
                    assert error is InterpreterError, what
                    continue
                assert error is None and got.tolist() == want, f"{what}: {got}, not {want}"


@pytest.mark.parametrize("src", INTEGERS)
def test_interval_proven_casts(src):
    """pycodegen drops a cast whose operand provably fits the target."""
    s, k = dtype(src), Var("k")
    for dst in INT_DTYPES + FLOAT_DTYPES:
        d = dtype(dst)
        out = decl_buffer((8,), d, "C")
        for start in window_starts(s):
            func = PrimFunc("f", (out,), loop(k, 8, out.store(E.Cast(d, window(s, k, start)), [k])))
            (got,), _ = assert_modes_agree(func, [np.zeros(8, d.numpy)])
            want = np.array([semantics.cast(start + v, s, d) for v in range(8)], d.numpy)
            assert same_array(got, want), f"cast({start} + k) from {src} to {dst}"


@pytest.mark.parametrize("dt", INTEGERS)
def test_interval_analysis_is_sound_on_every_operation(dt):
    """Every value of `a op b`, a select, a ramp or a cast of operands with known intervals (as
    `loom.ir.evaluate` computes it) lies in the interval the analysis gives it: the
    precondition of the compiled mode's shortcuts."""
    d, k = dtype(dt), Var("k")
    windows = [window(d, k, start) for start in window_starts(d)]
    leaves = windows + [IntImm(c, d) for c in special_values(dt)]
    exprs = [getattr(E, name)(a, b) for name in INT_OPS for a in leaves for b in leaves]
    exprs += [E.Select(E.LT(a, b), b, a) for a in leaves for b in leaves]
    exprs += [Ramp(a, b, 4) for a in leaves for b in leaves]
    sums = [E.Add(a, b) for a in windows for b in leaves]  # some of which wrap
    exprs += [E.Cast(dtype(t), a) for t in INT_DTYPES for a in leaves + sums]
    assert_sound(exprs, k, {})


def assert_sound(exprs, k: Var, values: dict) -> None:
    """Every integer expression in `exprs` lies in its interval, for k in [0, 8)."""
    intervals = _Intervals()
    intervals.bind(k, (0, 7))
    for e in exprs:
        if not e.dtype.is_integer:
            continue
        lo, hi = intervals.of(e)
        for v in range(8):
            try:
                value = evaluate(e, {**values, k: v})
            except InterpreterError:
                continue
            for lane in value if e.dtype.is_vector else [value]:
                assert lo <= lane <= hi, f"{e} at k={v}: {lane} is outside [{lo}, {hi}]"


@st.composite
def int_expressions(draw, d, k: Var, x: E.PrimExpr, depth: int = 3):
    """A random integer expression of dtype `d` over windows of k, the loaded value `x` and
    constants (often near the ends of the dtype)."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        kind = draw(st.sampled_from(["window", "window", "constant", "load"]))
        if kind == "constant":
            return IntImm(draw(st.sampled_from(special_values(str(d)))), d)
        if kind == "load":
            return x
        return window(d, k, draw(st.sampled_from(window_starts(d))))
    kind = draw(st.sampled_from([*INT_OPS, "Select", "Cast"]))
    a = draw(int_expressions(d, k, x, depth - 1))
    if kind == "Cast":  # through another integer type and back
        return E.Cast(d, E.Cast(dtype(draw(st.sampled_from(INTEGERS))), a))
    b = draw(int_expressions(d, k, x, depth - 1))
    if kind == "Select":
        return E.Select(E.LT(a, b), b, a)
    return getattr(E, kind)(a, b)


@RANDOM
@given(st.data())
def test_interval_analysis_is_sound_on_random_expressions(data):
    d = dtype(data.draw(st.sampled_from(INTEGERS)))
    X, k = decl_buffer((8,), d, "X"), Var("k")
    e = data.draw(int_expressions(d, k, X[k]))
    values = data.draw(st.lists(st.sampled_from(special_values(str(d))), min_size=8, max_size=8))
    parts: list = []
    post_order_visit(e, parts.append)
    assert_sound(parts, k, {X.data: Pointer(Storage("X", d, values))})


@RANDOM
@given(st.data())
def test_modes_agree_on_random_integer_expressions(data):
    """Values, and indices: the bounds check of an access the analysis proves inside is left out."""
    d = dtype(data.draw(st.sampled_from(INTEGERS)))
    X, Y = decl_buffer((8,), d, "X"), decl_buffer((16,), d, "Y")
    out, k = decl_buffer((8,), d, "C"), Var("k")
    e = data.draw(int_expressions(d, k, X[k]))
    values = data.draw(st.lists(st.sampled_from(special_values(str(d))), min_size=8, max_size=8))
    args = [np.array(values, d.numpy), np.arange(16).astype(d.numpy), np.zeros(8, d.numpy)]
    for value in (
        e,
        Y[E.Cast(dtype("int32"), E.FloorMod(e, IntImm(16, d)))],
        Y[E.Cast(dtype("int32"), e)],
    ):
        func = PrimFunc("f", (X, Y, out), loop(k, 8, out.store(value, [k])))
        assert_modes_agree(func, args)


# -- small programs, one or two constructs each --------------------------------------------------
@dataclasses.dataclass
class Program:
    name: str
    func: PrimFunc
    args: list
    error: type | None = None  # what both modes raise
    externs: dict | None = None


def _fill(p: Pointer, count: int, value: int) -> int:
    for k in range(count):
        p[k] = value
    return count


def _twice(values: tuple) -> tuple:
    return tuple(2 * v for v in values)


def _programs() -> list[Program]:
    A, B = decl_buffer((10,), "float32", "A"), decl_buffer((12,), "float32", "B")
    I, M = decl_buffer((8,), "int32", "I"), decl_buffer((3, 4), "int32", "M")
    i, n, x, p = Var("i"), Var("n"), Var("x"), Var("p", "handle")
    u, t = Var("u", "float32x4"), Var("t", "int32x4")
    T, view = decl_buffer((n,), "int32", "T"), Buffer("view", "int32", (4,), p)
    a, b = np.arange(10, dtype=np.float32) - 3, np.full(12, 7.0, np.float32)
    ints, m = np.arange(8, dtype=np.int32), np.arange(12, dtype=np.int32).reshape(3, 4)
    out: list[Program] = []

    def add(name, params, body, args, error=None, externs=None) -> None:
        out.append(Program(name, PrimFunc("f", tuple(params), body), args, error, externs))

    IE = InterpreterError
    # vectors: lanes 10 and 11 of idx are outside A
    idx = Ramp(i * 4, op.const(1), 4)
    inside = op.less(idx, Broadcast(op.const(10), 4))
    zeros = Broadcast(op.const(0.0), 4)
    lazy = op.if_then_else(inside, A.load([idx]), zeros)
    add("lazy-vector-lanes", [A, B], loop(i, 3, B.store(lazy, [idx])), [a, b])
    lazy_let = op.if_then_else(inside, Let(u, A.load([idx]), u + u), zeros)
    add("lazy-vector-let", [A, B], loop(i, 3, B.store(lazy_let, [idx])), [a, b])
    whole = op.if_then_else(
        inside, Let(u, A.load([idx]), op.call_extern(u.dtype, "twice", u)), zeros
    )
    body = loop(i, 3, B.store(whole, [idx]))
    add("lazy-vector-let-for-an-extern", [A, B], body, [a, b], IE, {"twice": _twice})
    add(
        "lazy-vector-extern",
        [A, B],
        loop(i, 2, B.store(whole, [idx])),
        [a, b],
        None,
        {"twice": _twice},
    )
    body = loop(i, 3, B.store(A.load([idx], inside), [idx], inside))
    add("predicated", [A, B], body, [a, b])
    add("out-of-bounds-vector-read", [A, B], loop(i, 3, B.store(A.load([idx]), [idx])), [a, b], IE)
    t_body = Let(t, I.load([idx]) * Broadcast(op.const(3), 4), t + t) + Broadcast(x, 4)
    body = loop(i, 2, LetStmt(x, i * 2, I.store(t_body, [idx])))
    add("let-and-let-stmt", [I], body, [ints])
    f_ramp = Ramp(op.const(0.5), op.const(0.1), 4) * Broadcast(op.const(3.0), 4)
    add("float-ramp", [B], B.store(f_ramp, [Ramp(op.const(0), op.const(1), 4)]), [b])
    # lazy and eager selection
    select = op.select(op.less(i, 9), A[i + 1], A[i])
    add("select-reads-both-sides", [A, B], loop(i, 10, B.store(select, [i])), [a, b], IE)
    lazy = op.if_then_else(op.less(i, 9), A[i + 1], A[i])
    add("if-then-else-reads-one-side", [A, B], loop(i, 10, B.store(lazy, [i])), [a, b])
    body = loop(i, 8, IfThenElse(op.less(i, 3), I.store(i, [i]), I.store(-i, [i])))
    add("if-statement", [I], body, [ints])
    # errors
    add("out-of-bounds-write", [A, B], loop(i, 13, B.store(A[0], [i])), [a, b], IE)
    body = loop(i, 2, I.store(M[0, i + 3], [i]))
    add("index-outside-its-dimension", [M, I], body, [m, ints], IE)
    body = loop(i, 2, I.store(M[1, i - 1], [i]))
    add("negative-index-of-a-dimension", [M, I], body, [m, ints], IE)
    body = loop(i, 8, I.store(op.truncdiv(op.const(100), I[i]), [i]))
    add("division-by-zero", [I], body, [ints], IE)
    add("invalid-cast", [A, I], I.store(op.cast(A[0] / op.const(0.0), "int32"), [0]), [a, ints], IE)
    body = AssertStmt(op.less(n, 4), "n must be below 4", I.store(n, [0]))
    add("assert", [n, I], body, [5, ints], IE)
    add("unbound-variable", [I], I.store(Var("m"), [0]), [ints], IE)
    small = Var("s", "int8")
    body = loop(small, op.const(10, "int8"), I.store(op.const(0), [0]), start=120)
    add("loop-variable-overflows", [I], body, [ints], IE)
    # loops, allocations, defer
    kinds = [ForKind.PARALLEL, ForKind.VECTORIZED, ForKind.UNROLLED]
    body = seq(*[loop(i, 8, I.store(I[i] * 2 + k, [i]), kind=kind) for k, kind in enumerate(kinds)])
    add("loop-kinds", [I], body, [ints])
    fill_t = seq(loop(i, n - 1, T.store(i, [i])), loop(i, n, I.store(T[i], [i])))
    body = Allocate(T, DeferStmt(I.store(op.const(-1), [7]), fill_t))
    add("allocate-junk-and-defer", [n, I], body, [5, ints])
    body = DeferStmt(I.store(op.const(-1), [0]), I.store(op.const(1), [8]))
    add("defer-runs-on-error", [I], body, [ints], IE)
    # externs and pointers
    address = op.call_intrin("handle", "address_of", I[2])
    fill_both = seq(
        I.store(op.call_extern("int32", "fill", address, 3, 7), [0]),
        Evaluate(op.call_extern("int32", "fill", I.data, 1, -5)),
    )
    add("extern-and-address-of", [I], fill_both, [ints], None, {"fill": _fill})
    body = Evaluate(op.call_extern("int32", "fill", address, 7, 1))
    add("extern-writes-past-the-end", [I], body, [ints], IE, {"fill": _fill})
    body = IfThenElse(E.LT(IntImm(1), IntImm(0)), Evaluate(op.call_extern("int32", "gone")))
    add("missing-extern", [I], body, [ints], LoomError)
    body = LetStmt(p, address, loop(i, 4, view.store(view[i] + i, [i])))
    add("pointer-view", [I], body, [ints])
    body = LetStmt(p, address, loop(i, 7, view.store(i, [i])))
    add("pointer-view-past-the-end", [I], body, [ints], IE)
    is_null = op.call_intrin("bool", "isnullptr", p)
    body = IfThenElse(is_null, I.store(op.const(-1), [0]), I.store(view[1], [0]))
    add("null-pointer", [p, I], body, [None, ints])
    add("pointer-argument", [p, I], body, [Pointer(Storage("ext", dtype("int32"), [4, 5])), ints])
    add("null-pointer-read", [p, I], I.store(view[1], [0]), [None, ints], IE)
    math_ = op.math_call("sqrt", op.abs_(A[i])) + op.math_call("exp", A[i])
    add("math-and-fabs", [A, B], loop(i, 10, B.store(math_, [i])), [a, b])
    return out


PROGRAMS = _programs()


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_modes_agree_on_programs(program):
    _, error = assert_modes_agree(program.func, program.args, externs=program.externs)
    assert error is program.error


def program(name: str) -> Program:
    return next(p for p in PROGRAMS if p.name == name)


def test_tree_mode_reads_only_the_taken_lanes():
    """Lanes 10 and 11 of the load are outside A, but not taken."""
    prog = program("lazy-vector-lanes")
    (a, b), error = run(prog.func, prog.args, "tree")
    assert error is None
    np.testing.assert_array_equal(b, np.concatenate([a, [0, 0]]))


def test_tree_mode_runs_the_cleanup_of_a_failing_defer():
    prog = program("defer-runs-on-error")
    (i,), error = run(prog.func, prog.args, "tree")
    assert error is InterpreterError and i[0] == -1
