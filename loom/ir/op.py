"""Builders for expressions: Python numbers become constants, operand types are matched the way
TVM users expect, and operations on two constants fold to a constant.

Type matching of a binary operation:
- a Python int or float takes the type of the other operand (a float next to an integer
  expression makes both float32);
- float beats integer, the wider integer beats the narrower, signed beats unsigned;
- a scalar next to a vector is broadcast to the vector's lanes.
"""

from __future__ import annotations

import math
import sys

from loom.abi.dtype import BOOL, FLOAT32, INT32, INT64, DataType, dtype
from loom.ir import semantics
from loom.ir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BitAnd,
    BitOr,
    BitXor,
    Broadcast,
    Call,
    CallKind,
    Cast,
    Div,
    ExprLike,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Select,
    ShiftLeft,
    ShiftRight,
    StringImm,
    Sub,
    install_operators,
)

Number = int | float | bool


def const(value: Number, dt: str | DataType | None = None) -> PrimExpr:
    """A constant. Without a dtype: bool, int32 (int64 if it does not fit) or float32."""
    if isinstance(value, PrimExpr):
        return value if dt is None else cast(value, dt)
    if dt is None:
        if isinstance(value, bool):
            dt = BOOL
        elif isinstance(value, int):
            dt = INT32 if INT32.min_value() <= value <= INT32.max_value() else INT64
        elif isinstance(value, float):
            dt = FLOAT32
        else:
            raise TypeError(f"cannot make a constant of {type(value).__name__} {value!r}")
    dt = dtype(dt)
    scalar = dt.element
    if scalar.is_float:
        c: PrimExpr = FloatImm(semantics.round_float(float(value), scalar), scalar)
    elif scalar.is_integer or scalar.is_bool:
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError(f"constant {value} is not an integer, cannot be {dt}")
            value = int(value)
        c = IntImm(int(value), scalar)
    else:
        raise TypeError(f"cannot make a constant of dtype {dt}")
    return Broadcast(c, dt.lanes) if dt.lanes > 1 else c


def convert(value: PrimExpr | Number) -> PrimExpr:
    """An expression from an expression, an ExprLike or a Python number."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, ExprLike):
        return value.as_expr()
    if isinstance(value, int | float | bool):
        return const(value)
    raise TypeError(f"expected a PrimExpr or a Python number, got {type(value).__name__}")


def _broadcast(e: PrimExpr, lanes: int) -> PrimExpr:
    if e.dtype.lanes == lanes:
        return e
    if e.dtype.lanes != 1:
        raise TypeError(f"cannot combine {e.dtype} with a {lanes}-lane vector")
    return Broadcast(e, lanes)


def _wider(a: DataType, b: DataType) -> DataType:
    """The common element type of a and b (scalars)."""
    if a == b:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            return a if a.bits >= b.bits else b
        return a if a.is_float else b
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    bits = max(a.bits, b.bits)
    kind = "int" if "int" in (a.kind, b.kind) else "uint"
    return DataType(kind, bits)


def match_types(a: PrimExpr | Number, b: PrimExpr | Number) -> tuple[PrimExpr, PrimExpr]:
    """Bring two operands to one dtype (see module docstring)."""
    if isinstance(a, ExprLike):
        a = a.as_expr()
    if isinstance(b, ExprLike):
        b = b.as_expr()
    if isinstance(a, PrimExpr) and not isinstance(b, PrimExpr):
        b = _number_like(b, a)
    elif isinstance(b, PrimExpr) and not isinstance(a, PrimExpr):
        a = _number_like(a, b)
    else:
        a, b = convert(a), convert(b)
    lanes = max(a.dtype.lanes, b.dtype.lanes)
    elem = _wider(a.dtype.element, b.dtype.element)
    a = _broadcast(cast(a, elem.with_lanes(a.dtype.lanes)), lanes)
    b = _broadcast(cast(b, elem.with_lanes(b.dtype.lanes)), lanes)
    return a, b


def _number_like(value, like: PrimExpr) -> PrimExpr:
    """A Python number as a constant of `like`'s element type (float32 if it does not fit)."""
    if isinstance(value, PrimExpr):
        return value
    elem = like.dtype.element
    if isinstance(value, bool):
        return const(value, BOOL if elem.is_bool else elem)
    if isinstance(value, int):
        if elem.is_float:
            return const(float(value), elem)
        if elem.is_bool:
            return const(value)
        if not elem.min_value() <= value <= elem.max_value():
            raise ValueError(f"constant {value} does not fit in {elem} (the other operand's type)")
        return const(value, elem)
    if isinstance(value, float):
        return const(value, elem if elem.is_float else FLOAT32)
    raise TypeError(f"expected a PrimExpr or a Python number, got {type(value).__name__}")


def _fold(cls, a: PrimExpr, b: PrimExpr) -> PrimExpr | None:
    """Fold an operation of two scalar constants; None if they are not both constants."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        if cls in (Div, Mod, FloorDiv, FloorMod) and b.value == 0:
            return None
        if cls in (ShiftLeft, ShiftRight) and not 0 <= b.value < a.dtype.bits:
            return None
        if a.dtype.is_bool:
            return None
        return IntImm(semantics.binary(cls.__name__, a.value, b.value, a.dtype), a.dtype)
    if isinstance(a, FloatImm) and isinstance(b, FloatImm):
        value = semantics.binary(cls.__name__, a.value, b.value, a.dtype)
        return FloatImm(value, a.dtype)
    return None


def _fold_or_build(cls, a: PrimExpr, b: PrimExpr) -> PrimExpr:
    folded = _fold(cls, a, b)
    return folded if folded is not None else cls(a, b)


def _binary(cls, a, b) -> PrimExpr:
    a, b = match_types(a, b)
    return _fold_or_build(cls, a, b)


def add(a, b) -> PrimExpr:
    a, b = match_types(a, b)
    if _is_int_zero(b):
        return a
    if _is_int_zero(a):
        return b
    return _fold_or_build(Add, a, b)


def sub(a, b) -> PrimExpr:
    a, b = match_types(a, b)
    if _is_int_zero(b):
        return a
    return _fold_or_build(Sub, a, b)


def mul(a, b) -> PrimExpr:
    a, b = match_types(a, b)
    if _is_int_one(b):
        return a
    if _is_int_one(a):
        return b
    return _fold_or_build(Mul, a, b)


def _is_int_zero(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value == 0 and not e.dtype.is_bool


def _is_int_one(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value == 1 and not e.dtype.is_bool


def div(a, b) -> PrimExpr:
    """Division: true division for floats, truncating (C) for integers."""
    return _binary(Div, a, b)


def truncdiv(a, b) -> PrimExpr:
    return _binary(Div, a, b)


def truncmod(a, b) -> PrimExpr:
    return _binary(Mod, a, b)


def floordiv(a, b) -> PrimExpr:
    return _binary(FloorDiv, a, b)


def floormod(a, b) -> PrimExpr:
    return _binary(FloorMod, a, b)


def min_(a, b) -> PrimExpr:
    return _binary(Min, a, b)


def max_(a, b) -> PrimExpr:
    return _binary(Max, a, b)


def neg(a) -> PrimExpr:
    a = convert(a)
    return sub(const(0, a.dtype), a)


def _integer_or_bool(name: str, a: PrimExpr, b: PrimExpr) -> None:
    if a.dtype.is_float:
        raise TypeError(f"{name} needs integer or bool operands, got {a.dtype}")


def bitwise_and(a, b) -> PrimExpr:
    a, b = match_types(a, b)
    _integer_or_bool("&", a, b)
    return logical_and(a, b) if a.dtype.is_bool else _fold_or_build(BitAnd, a, b)


def bitwise_or(a, b) -> PrimExpr:
    a, b = match_types(a, b)
    _integer_or_bool("|", a, b)
    return logical_or(a, b) if a.dtype.is_bool else _fold_or_build(BitOr, a, b)


def bitwise_xor(a, b) -> PrimExpr:
    a, b = match_types(a, b)
    _integer_or_bool("^", a, b)
    if a.dtype.is_bool:
        return NE(a, b)
    return _fold_or_build(BitXor, a, b)


def bitwise_not(a) -> PrimExpr:
    a = convert(a)
    if a.dtype.is_bool:
        return logical_not(a)
    if a.dtype.is_float:
        raise TypeError(f"~ needs an integer or bool operand, got {a.dtype}")
    return bitwise_xor(a, const(-1 if a.dtype.is_int else a.dtype.max_value(), a.dtype))


def shift_left(a, b) -> PrimExpr:
    return _binary(ShiftLeft, a, b)


def shift_right(a, b) -> PrimExpr:
    return _binary(ShiftRight, a, b)


def _compare(cls, a, b) -> PrimExpr:
    a, b = match_types(a, b)
    if isinstance(a, IntImm | FloatImm) and isinstance(b, IntImm | FloatImm):
        return const(semantics.compare(cls.__name__, a.value, b.value))
    return cls(a, b)


def equal(a, b) -> PrimExpr:
    """The expression `a == b` (what `a == b` on expressions gives inside an expression)."""
    return _compare(EQ, a, b)


def not_equal(a, b) -> PrimExpr:
    return _compare(NE, a, b)


def less(a, b) -> PrimExpr:
    return _compare(LT, a, b)


def less_equal(a, b) -> PrimExpr:
    return _compare(LE, a, b)


def greater(a, b) -> PrimExpr:
    return _compare(GT, a, b)


def greater_equal(a, b) -> PrimExpr:
    return _compare(GE, a, b)


def condition(value, what: str = "condition") -> PrimExpr:
    """A bool expression from a user-given condition; a Python bool is refused: it is almost
    always a comparison Python made of something that is not an expression."""
    if isinstance(value, bool):
        raise TypeError(
            f"{what} is a Python bool ({value}), not a condition; build one from expressions "
            "(`A[i] == 0`, te.equal(a, b))"
        )
    value = convert(value)
    if not value.dtype.is_bool:
        raise TypeError(f"{what} must be a bool expression, got {value.dtype}")
    return value


def logical_and(a, b) -> PrimExpr:
    a, b = condition(a), condition(b)
    a, b = match_types(a, b)
    for x, y in ((a, b), (b, a)):
        if isinstance(x, IntImm):
            return y if x.value else x
    return And(a, b)


def logical_or(a, b) -> PrimExpr:
    a, b = condition(a), condition(b)
    a, b = match_types(a, b)
    for x, y in ((a, b), (b, a)):
        if isinstance(x, IntImm):
            return x if x.value else y
    return Or(a, b)


def logical_not(a) -> PrimExpr:
    a = condition(a)
    if isinstance(a, IntImm):
        return const(not a.value)
    return Not(a)


def all_(*conds) -> PrimExpr:
    """Conjunction of conditions (True if none)."""
    result: PrimExpr = const(True)
    for c in _flatten_args(conds):
        result = logical_and(result, c)
    return result


def conjuncts(cond: PrimExpr) -> list[PrimExpr]:
    """The conditions a conjunction (`&&`, through `likely`) is made of: the inverse of all_."""
    if isinstance(cond, Call) and cond.op == "likely":
        return conjuncts(cond.args[0])
    if isinstance(cond, And):
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def any_(*conds) -> PrimExpr:
    """Disjunction of conditions (False if none)."""
    result: PrimExpr = const(False)
    for c in _flatten_args(conds):
        result = logical_or(result, c)
    return result


def _flatten_args(args) -> list:
    if len(args) == 1 and isinstance(args[0], list | tuple):
        return list(args[0])
    return list(args)


def select(cond, true_value, false_value) -> PrimExpr:
    """`cond ? true_value : false_value`, evaluating both sides."""
    cond = condition(cond, "select condition")
    t, f = match_types(true_value, false_value)
    if isinstance(cond, IntImm):
        return t if cond.value else f
    if cond.dtype.lanes == 1 and t.dtype.lanes > 1:
        cond = Broadcast(cond, t.dtype.lanes)
    return Select(cond, t, f)


def if_then_else(cond, true_value, false_value) -> PrimExpr:
    """`cond ? true_value : false_value`, evaluating only the side that is taken (safe for
    out-of-bounds reads on the untaken side, as in padding)."""
    cond = condition(cond, "if_then_else condition")
    t, f = match_types(true_value, false_value)
    if isinstance(cond, IntImm):
        return t if cond.value else f
    return Call(t.dtype, "if_then_else", (cond, t, f))


def cast(value, target: str | DataType) -> PrimExpr:
    """Convert to `target`; a scalar target keeps the value's lanes."""
    value = convert(value)
    dt = dtype(target)
    if dt.lanes == 1 and value.dtype.lanes > 1:
        dt = dt.with_lanes(value.dtype.lanes)
    if value.dtype == dt:
        return value
    if isinstance(value, IntImm | FloatImm) and dt.lanes == 1:
        if dt.is_handle:
            return Cast(dt, value)
        v = value.value
        if value.dtype.is_float and dt.is_integer and not math.isfinite(v):
            return Cast(dt, value)
        return const(semantics.cast(v, value.dtype, dt), dt)
    if isinstance(value, Broadcast):
        return Broadcast(cast(value.value, dt.element), dt.lanes)
    return Cast(dt, value)


def call_intrin(dt: str | DataType, name: str, *args) -> PrimExpr:
    """A call of the intrinsic `name` (see loom.ir.intrinsics)."""
    return Call(dtype(dt), name, tuple(_call_arg(a) for a in args), CallKind.INTRINSIC)


def call_func(name: str, *args) -> PrimExpr:
    """A call of the function `name` of the module tree through its entry point
    `int32_t name(void *const *args)`: buffers are passed by their data handle, scalars by
    value (the code generator points the argument vector at them); returns its status."""
    return Call(dtype("int32"), name, tuple(convert(a) for a in args), CallKind.FUNCTION)


def call_extern(dt: str | DataType, name: str, *args) -> PrimExpr:
    """A call of the C symbol `name`; the symbol must be declared by a runtime library."""
    return Call(dtype(dt), name, tuple(_call_arg(a) for a in args), CallKind.EXTERN)


def _call_arg(a) -> PrimExpr:
    return StringImm(a) if isinstance(a, str) else convert(a)


def math_call(name: str, *args) -> PrimExpr:
    """A floating-point math function; integer arguments are converted to float32."""
    exprs = [convert(a) for a in args]
    if len(exprs) == 2:
        exprs = list(match_types(*exprs))
    exprs = [e if e.dtype.is_float else cast(e, FLOAT32.with_lanes(e.dtype.lanes)) for e in exprs]
    return Call(exprs[0].dtype, name, tuple(exprs))


def abs_(x) -> PrimExpr:
    x = convert(x)
    if x.dtype.is_float:
        return math_call("fabs", x)
    if x.dtype.is_uint or x.dtype.is_bool:
        return x
    return select(less(x, 0), neg(x), x)


def max_value(dt: str | DataType) -> PrimExpr:
    dt = dtype(dt)
    return const(math.inf if dt.is_float else dt.max_value(), dt)


def min_value(dt: str | DataType) -> PrimExpr:
    dt = dtype(dt)
    return const(-math.inf if dt.is_float else dt.min_value(), dt)


def likely(cond) -> PrimExpr:
    """Mark a condition as usually true (a hint for code generators)."""
    cond = condition(cond)
    if isinstance(cond, IntImm):
        return cond
    return Call(cond.dtype, "likely", (cond,))


install_operators(sys.modules[__name__])
