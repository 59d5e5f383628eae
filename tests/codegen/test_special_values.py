"""Special values through every operation, on every dtype it accepts, on every back end.

Zeros, negative zero, +-inf, NaN, the minimum and maximum integers, -1 divisors, shift amounts
at and beyond the width: every pair of them goes through every binary operation, comparison,
logical operation, math function and cast, on the interpreter, LLVM (scalar and vector code), C
and Hexagon under qemu. Each result must be what docs/ir.md "Semantics" says, computed here by
`loom.ir.semantics` (the definition) for each value: exactly (NaN as NaN, the sign of a zero
result included), libm's functions within 4 ulps. The inputs docs/ir.md leaves undefined are
skipped (`undefined` below names exactly those); integer division by zero, an error, is checked
on its own, lazily (inside an `if_then_else` not taken it must not fail).

One function per dtype holds every operation (one row of operand pairs per operation), so each
back end compiles one module.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import loom
from loom import LoomError
from loom.errors import InterpreterError
from loom.ir import DataType, dtype, semantics
from loom.ir import expr as E
from loom.ir.buffer import decl_buffer
from loom.ir.function import IRModule, PrimFunc
from loom.ir.interpret import interpret
from loom.ir.stmt import For, ForKind, seq

from ..hexagon.conftest import missing_tools

INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64"]
DTYPES = [*INTS, *FLOATS, "bool"]
BACKENDS = ["interpreter", "llvm", "llvm-vector", "c", "hexagon"]
LANES = 8  # of the vector code ("llvm-vector")

ARITHMETIC = ["Add", "Sub", "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max"]
BITWISE = ["BitAnd", "BitOr", "BitXor", "ShiftLeft", "ShiftRight"]
COMPARE = ["EQ", "NE", "LT", "LE", "GT", "GE"]
MATH = ["exp", "exp2", "log", "log2", "log10", "sqrt", "tanh", "sigmoid", "erf", "sin", "cos"]
MATH += ["fabs", "floor", "ceil", "trunc", "round", "pow"]
EXACT_MATH = {"fabs", "floor", "ceil", "trunc", "round", "sqrt"}  # correctly rounded
NEEDS_LIBM = {"sin", "cos", "Mod"}  # of floats (fmod); Hexagon's device runtime has no libm
# float16 and float32: loom's own vector code (codegen/llvm/vecmath.py); float64: libm
OWN_MATH = {"exp", "exp2", "log", "log2", "log10", "tanh", "sigmoid", "erf", "pow"}
DIVISION = {"Div", "Mod", "FloorDiv", "FloorMod"}
SHIFTS = {"ShiftLeft", "ShiftRight"}


def needs_libm(name: str, dt: DataType) -> bool:
    """Whether the operation calls libm on Hexagon (float32 sqrt is a compiler-rt routine)."""
    if not dt.is_float:
        return False
    return name in NEEDS_LIBM or (dt.bits == 64 and name in {*OWN_MATH, "sqrt"})


def apart(name: str, dt: DataType) -> bool:
    """On Hexagon, loom's own math functions run in functions of their own: all of them inlined
    in one loop body make a block that LLVM's Hexagon scheduler takes minutes over."""
    return dt.is_float and name in OWN_MATH


def special_values(dt: DataType) -> list:
    if dt.is_bool:
        return [False, True]
    if dt.is_float:
        big = float(np.finfo(dt.numpy).max)
        tiny = float(np.finfo(dt.numpy).smallest_subnormal)
        finite = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5, 3.0, -3.0, -100.0, big, -big, tiny]
        return [*finite, math.inf, -math.inf, math.nan]
    lo, hi = dt.min_value(), dt.max_value()
    candidates = [lo, lo + 1, -7, -2, -1, 0, 1, 2, 3, 7, dt.bits - 1, dt.bits, hi // 2]
    candidates += [hi // 2 + 1, hi - 1, hi]
    return sorted({v for v in candidates if lo <= v <= hi})


# -- the operations ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Operation:
    name: str  # a node class, an intrinsic, or "cast_<dtype>"
    dtype: DataType  # of the operands
    result: DataType
    unary: bool = False

    @property
    def label(self) -> str:
        return f"{self.name}({self.dtype})"

    def build(self, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        if self.name.startswith("cast_"):
            return E.Cast(self.result, a)
        if self.name == "Not":
            return E.Not(a)
        if self.name in MATH:
            return E.Call(self.dtype, self.name, (a, b) if self.name == "pow" else (a,))
        return getattr(E, self.name)(a, b)

    def undefined(self, a, b, native: bool) -> bool:
        """True for the inputs docs/ir.md "Semantics" leaves undefined (or makes an error)."""
        dt = self.dtype
        if self.name in DIVISION and not dt.is_float and not b:
            return True  # an error: test_integer_division_by_zero_is_an_error
        if self.name in SHIFTS and not 0 <= b < dt.bits:
            return not native  # native code shifts by the amount modulo the width
        if self.name == "FloorMod" and dt.bits == 64 and dt.is_float:
            # the float64 quotient overflows: floor(inf) has no defined floor-mod
            return math.isfinite(a) and math.isfinite(b) and b != 0 and math.isinf(a / b)
        if self.name.startswith("cast_") and dt.is_float and not self.result.is_float:
            if self.result.is_bool:
                return False
            if not math.isfinite(a):
                return True
            return not self.result.min_value() <= math.trunc(a) <= self.result.max_value()
        return False

    def expected(self, a, b):
        """What the semantics say (for native code, a shift by b modulo the width)."""
        dt, name = self.dtype, self.name
        if name.startswith("cast_"):
            return semantics.cast(a, dt, self.result)
        if name in COMPARE:
            return semantics.compare(name, a, b)
        if name == "And":
            return bool(a and b)
        if name == "Or":
            return bool(a or b)
        if name == "Not":
            return not a
        if name == "fabs":
            return abs(a)
        if name in MATH:
            args = (a, b) if name == "pow" else (a,)
            return semantics.round_float(semantics.MATH[name](*args), dt)
        if name in SHIFTS:  # in range, or native code: the amount modulo the width
            b = int(b) & (dt.bits - 1)
        value = semantics.binary(name, int(a) if dt.is_bool else a, int(b) if dt.is_bool else b, dt)
        return bool(value) if dt.is_bool else value


def operations(dt: DataType) -> list[Operation]:
    ops = [Operation(name, dt, dt) for name in ARITHMETIC]
    if not dt.is_float:
        ops += [Operation(name, dt, dt) for name in BITWISE]
    ops += [Operation(name, dt, dtype("bool")) for name in COMPARE]
    if dt.is_bool:
        ops += [Operation("And", dt, dt), Operation("Or", dt, dt), Operation("Not", dt, dt, True)]
    if dt.is_float:
        ops += [Operation(name, dt, dt, name != "pow") for name in MATH]
    ops += [Operation(f"cast_{other}", dt, dtype(other), True) for other in DTYPES]
    return ops


@dataclasses.dataclass
class Program:
    """One function for operand dtype `dt`: row k of X, Y holds the operand pairs of operation
    k; its results go to row `slot[k]` of the output buffer of its result dtype."""

    dt: DataType
    ops: list[Operation]
    pairs: list[list[tuple]]  # per operation, the defined pairs
    n: int
    outputs: list[DataType]  # result dtypes, in parameter order
    suffix: str = ""

    @property
    def name(self) -> str:
        return f"values_{self.dt}{self.suffix}"

    def slot(self, k: int) -> tuple[int, int]:
        """(output buffer, row in it) of operation k."""
        out = self.outputs.index(self.ops[k].result)
        return out, [o.result for o in self.ops[:k]].count(self.ops[k].result)

    def rows(self, result: DataType) -> int:
        return sum(op.result == result for op in self.ops)

    def func(self, vector: bool) -> PrimFunc:
        k_all = len(self.ops)
        X = decl_buffer((k_all, self.n), str(self.dt), "X")
        Y = decl_buffer((k_all, self.n), str(self.dt), "Y")
        outs = [decl_buffer((self.rows(r), self.n), str(r), f"OUT_{r}") for r in self.outputs]
        i = E.Var("i")
        stores = []
        for k, operation in enumerate(self.ops):
            out, row = self.slot(k)
            value = operation.build(X[k, i], Y[k, i])
            stores.append(outs[out].store(value, [row, i]))
        zero = loom.ir.op.const(0)
        if vector:
            io, ii = E.Var("io"), E.Var("ii")
            body = For(
                io,
                zero,
                loom.ir.op.const(self.n // LANES),
                ForKind.SERIAL,
                For(
                    ii,
                    zero,
                    loom.ir.op.const(LANES),
                    ForKind.VECTORIZED,
                    loom.ir.visitor.substitute(seq(*stores), {i: io * LANES + ii}),
                ),
            )
        else:
            body = For(i, zero, loom.ir.op.const(self.n), ForKind.SERIAL, seq(*stores))
        return PrimFunc(self.name, (X, Y, *outs), body)

    def inputs(self) -> list[np.ndarray]:
        x = np.zeros((len(self.ops), self.n), self.dt.numpy)
        y = np.zeros_like(x)
        for k, pairs in enumerate(self.pairs):
            padded = pairs + [pairs[0]] * (self.n - len(pairs))
            x[k], y[k] = zip(*padded)
        return [x, y]

    def output_arrays(self) -> list[np.ndarray]:
        return [np.zeros((self.rows(r), self.n), r.numpy) for r in self.outputs]


def program(name: str, native: bool, libm: bool = True) -> Program:
    dt = dtype(name)
    values = special_values(dt)
    ops = [
        op for op in operations(dt) if libm or not (needs_libm(op.name, dt) or apart(op.name, dt))
    ]
    pairs = []
    for operation in ops:
        candidates = (
            [(a, a) for a in values]
            if operation.unary
            else [(a, b) for a in values for b in values]
        )
        pairs.append([(a, b) for a, b in candidates if not operation.undefined(a, b, native)])
    n = max(len(p) for p in pairs)
    n += -n % LANES
    outputs = list(dict.fromkeys(op.result for op in ops))
    return Program(dt, ops, pairs, n, outputs)


def own_math_programs() -> list[Program]:
    """One function per function of OWN_MATH of float16 and float32 (see `apart`)."""
    found = []
    for name in ("float16", "float32"):
        dt = dtype(name)
        values = special_values(dt)
        for op in sorted(OWN_MATH):
            operation = Operation(op, dt, dt, op != "pow")
            pairs = (
                [(a, a) for a in values]
                if operation.unary
                else [(a, b) for a in values for b in values]
            )
            n = len(pairs) + (-len(pairs) % LANES)
            found.append(Program(dt, [operation], [pairs], n, [dt], suffix=f"_{op}"))
    return found


# -- running them --------------------------------------------------------------------------------
HEXAGON = loom.target.hexagon("v66")


@pytest.fixture(scope="module")
def hexagon_session():
    if missing_tools():
        pytest.skip(f"needs {missing_tools()}: run `make setup` (Debian clang, lld, qemu-user)")
    session = loom.device("hexagon-sim", timeout=300)
    yield session
    session.close()


def run(backend: str, funcs: list[PrimFunc], calls, request) -> None:
    """Build `funcs` into one module for `backend` and run `calls(function_by_name)`."""
    if backend == "interpreter":
        module = IRModule(tuple(funcs))
        calls(lambda name: lambda *args: interpret(module, *args, entry=name))
        return
    target = {"llvm": "llvm", "llvm-vector": "llvm", "c": "c", "hexagon": HEXAGON}[backend]
    built = loom.build(IRModule(tuple(funcs)), target=target)
    if backend == "hexagon":
        built = built.to_device(request.getfixturevalue("hexagon_session"))
    calls(lambda name: built[name])


def same(got, want, dt: DataType, approx: bool) -> bool:
    if dt.is_bool:
        return bool(got) == bool(want)
    if not dt.is_float:
        return int(got) == int(want)
    got, want = float(got), float(want)
    if math.isnan(want) or math.isnan(got):
        return math.isnan(want) and math.isnan(got)
    if got == want:
        return math.copysign(1, got) == math.copysign(1, want)  # -0.0 is not 0.0
    if not approx or math.isinf(want) or want == 0:
        return False
    return abs(got - want) <= 4 * float(np.spacing(np.abs(np.array(want, dt.numpy))))


def mismatches(prog: Program, outputs: list[np.ndarray]) -> list[str]:
    found = []
    for k, operation in enumerate(prog.ops):
        out, row = prog.slot(k)
        approx = operation.name in MATH and operation.name not in EXACT_MATH
        for i, (a, b) in enumerate(prog.pairs[k]):
            want = operation.expected(a, b)
            got = outputs[out][row, i]
            if not same(got, want, operation.result, approx):
                args = f"{a!r}" if operation.unary else f"{a!r}, {b!r}"
                found.append(f"{operation.label}({args}): got {got!r}, want {want!r}")
    return found


@pytest.mark.parametrize("backend", BACKENDS)
def test_special_values_follow_the_semantics(backend, request):
    native = backend != "interpreter"
    programs = [program(name, native, libm=backend != "hexagon") for name in DTYPES]
    if backend == "hexagon":
        programs += own_math_programs()
    funcs = [p.func(vector=backend == "llvm-vector") for p in programs]
    results = {}

    def calls(fn):
        for p in programs:
            outputs = p.output_arrays()
            with np.errstate(all="ignore"):
                fn(p.name)(*p.inputs(), *outputs)
            results[p.name] = outputs

    run(backend, funcs, calls, request)
    found = []
    for p in programs:
        found += mismatches(p, results[p.name])
    assert not found, f"{len(found)} results differ from the semantics on {backend}:\n" + "\n".join(
        found[:60]
    )
    if backend == "hexagon":  # what needs libm does not build (rather than compute wrongly)
        for name in [*sorted(NEEDS_LIBM), "sqrt", "exp"]:
            dt = dtype("float64" if name in ("sqrt", "exp") else "float32")
            func = Program(dt, [Operation(name, dt, dt, name != "pow")], [[(1.0, 1.0)]], 8, [dt])
            with pytest.raises(LoomError, match="needs symbols no runtime library declares"):
                loom.build(func.func(vector=False), target=HEXAGON)


# -- integer division by zero: an error, when evaluated ----------------------------------------
DIVISORS = [*INTS, "bool"]


def division_func(name: str) -> PrimFunc:
    """OUT[i] = the division K selects (0: Div, 1: Mod, 2: FloorDiv, 3: FloorMod, else none) of
    X[i] by Y[i], each inside an if_then_else: only the selected one is evaluated."""
    dt = dtype(name)
    X, Y, OUT = (decl_buffer((2,), name, n) for n in ("X", "Y", "OUT"))
    K = E.Var("K")
    i = E.Var("i")
    x, y = X[i], Y[i]
    value = x
    for k, cls in reversed(list(enumerate([E.Div, E.Mod, E.FloorDiv, E.FloorMod]))):
        value = E.Call(dt, "if_then_else", (loom.ir.op.equal(K, k), cls(x, y), value))
    body = For(i, loom.ir.op.const(0), loom.ir.op.const(2), ForKind.SERIAL, OUT.store(value, [i]))
    return PrimFunc(f"divide_{name}", (X, Y, K, OUT), body)


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "llvm-vector"])
def test_integer_division_by_zero_is_an_error(backend, request):
    failures = []

    def calls(fn):
        for name in DIVISORS:
            dt = dtype(name)
            x = np.array([1, 1], dt.numpy)
            y = np.array([1, 0], dt.numpy)
            for k in range(4):
                out = np.zeros(2, dt.numpy)
                try:
                    fn(f"divide_{name}")(x, y, k, out)
                    failures.append(f"{name} op {k}: no error")
                except (LoomError, InterpreterError) as err:
                    wanted = f"integer division by zero in divide_{name}"
                    if wanted not in str(err) and not (interpreted and "by zero" in str(err)):
                        failures.append(f"{name} op {k}: {err}")
            out = np.zeros(2, dt.numpy)
            fn(f"divide_{name}")(x, y, 4, out)  # no division evaluated: no error
            np.testing.assert_array_equal(out, x)

    interpreted = backend == "interpreter"  # InterpreterError: integer division/modulo by zero
    run(backend, [division_func(n) for n in DIVISORS], calls, request)
    assert not failures, "\n".join(failures)
