"""Scalar semantics of every IR operation, in one place.

The constant folder and the reference interpreter both evaluate through these functions, so the two
can never disagree; for native code the legalize pass (loom/transform/legalize.py) lowers them to
primitive operations, and tests/codegen/test_special_values.py checks every back end against them
(docs/ir.md "Semantics" is the table). Integers wrap to their width (two's complement).
`Div`/`Mod` truncate toward zero like C; `FloorDiv`/`FloorMod` round toward negative infinity.
Floats are computed in double precision and rounded to the type after every operation.
Integer division by zero, shifts by more than the width, and float-to-int casts of NaN, infinity or
out-of-range values have no defined result in native code: they raise `InterpreterError`.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from loom.abi.dtype import DataType
from loom.errors import InterpreterError

_F32 = struct.Struct("<f")
_F16 = struct.Struct("<e")


def wrap_int(value: int, dt: DataType) -> int:
    """Wrap an integer to the range of `dt` (two's complement); bool becomes 0 or 1."""
    if dt.kind == "bool":
        return 1 if value else 0
    mask = (1 << dt.bits) - 1
    value &= mask
    if dt.kind == "int" and value >> (dt.bits - 1):
        value -= 1 << dt.bits
    return value


def round_float(value: float, dt: DataType) -> float:
    """Round a double to the precision of float16/float32 (IEEE round to nearest even)."""
    if dt.bits == 64:
        return value
    packer = _F32 if dt.bits == 32 else _F16
    try:
        return packer.unpack(packer.pack(value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def fit(value, dt: DataType):
    """Bring a Python number into the value set of `dt`."""
    if dt.kind == "float":
        return round_float(float(value), dt)
    if dt.kind == "bool":
        return bool(value)
    return wrap_int(int(value), dt)


def truncdiv(a: int, b: int) -> int:
    if b == 0:
        raise InterpreterError("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def truncmod(a: int, b: int) -> int:
    return a - truncdiv(a, b) * b


def floordiv(a, b):
    if isinstance(a, float) or isinstance(b, float):
        q = float_div(a, b)
        return float(math.floor(q)) if math.isfinite(q) else q
    if b == 0:
        raise InterpreterError("integer division by zero")
    return a // b


def floormod(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return float_floormod(a, b)
    if b == 0:
        raise InterpreterError("integer modulo by zero")
    return a % b


def float_floormod(a: float, b: float) -> float:
    """a - floor(a / b) * b with libm's answers for zero, infinite and NaN operands."""
    if b == 0 or math.isnan(a) or math.isnan(b) or math.isinf(a):
        return math.nan
    if math.isinf(b):
        return a if (a >= 0) == (b > 0) or a == 0 else b
    q = a / b
    if math.isinf(q):
        raise InterpreterError(f"float floor-mod of {a} by {b}: the quotient overflows")
    return a - math.floor(q) * b


def float_fmod(a: float, b: float) -> float:
    """C's fmod: NaN for a zero divisor or an infinite/NaN dividend."""
    if b == 0 or math.isnan(a) or math.isnan(b) or math.isinf(a):
        return math.nan
    return math.fmod(a, b)


def float_div(a: float, b: float) -> float:
    """IEEE division: x/0 is +-inf, 0/0 is NaN."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        sign = math.copysign(1.0, a) * math.copysign(1.0, b)
        return math.copysign(math.inf, sign)
    return a / b


def shift_amount(b: int, dt: DataType) -> int:
    if not 0 <= b < dt.bits:
        raise InterpreterError(f"shift by {b} is outside 0..{dt.bits - 1} for {dt}")
    return b


def _as_unsigned(a: int, dt: DataType) -> int:
    return a & ((1 << dt.bits) - 1)


def binary(op: str, a, b, dt: DataType):
    """Evaluate binary operation `op` (a node class name) on scalars of element type `dt`."""
    if dt.kind == "float":
        if op == "Add":
            r = a + b
        elif op == "Sub":
            r = a - b
        elif op == "Mul":
            r = a * b
        elif op == "Div":
            r = float_div(a, b)
        elif op == "Mod":
            r = float_fmod(a, b)
        elif op == "FloorDiv":
            r = floordiv(a, b)
        elif op == "FloorMod":
            r = floormod(a, b)
        elif op == "Min":
            r = b if (b < a or math.isnan(b)) else a
        elif op == "Max":
            r = b if (b > a or math.isnan(b)) else a
        else:
            raise InterpreterError(f"{op} is not defined on {dt}")
        return round_float(r, dt)
    if op == "Add":
        r = a + b
    elif op == "Sub":
        r = a - b
    elif op == "Mul":
        r = a * b
    elif op == "Div":
        r = truncdiv(a, b)
    elif op == "Mod":
        r = truncmod(a, b)
    elif op == "FloorDiv":
        r = floordiv(a, b)
    elif op == "FloorMod":
        r = floormod(a, b)
    elif op == "Min":
        r = min(a, b)
    elif op == "Max":
        r = max(a, b)
    elif op == "BitAnd":
        r = a & b
    elif op == "BitOr":
        r = a | b
    elif op == "BitXor":
        r = a ^ b
    elif op == "ShiftLeft":
        r = a << shift_amount(b, dt)
    elif op == "ShiftRight":
        n = shift_amount(b, dt)
        r = (_as_unsigned(a, dt) >> n) if dt.kind == "uint" else (a >> n)
    else:
        raise InterpreterError(f"unknown binary operation {op}")
    return wrap_int(r, dt)


def compare(op: str, a, b) -> bool:
    if op == "EQ":
        return a == b
    if op == "NE":
        return a != b
    if op == "LT":
        return a < b
    if op == "LE":
        return a <= b
    if op == "GT":
        return a > b
    if op == "GE":
        return a >= b
    raise InterpreterError(f"unknown comparison {op}")


def cast(value, src: DataType, dst: DataType):
    """Convert a scalar from `src` to `dst` (both element types)."""
    if dst.kind == "bool":
        return bool(value != 0)
    if dst.kind == "float":
        if src.kind in ("int", "uint") and dst.bits < 64:
            return round_float(_nearest_double(int(value)), dst)
        return round_float(float(value), dst)
    if dst.kind == "handle":
        return value
    # to an integer type
    if src.kind == "float":
        if math.isnan(value) or math.isinf(value):
            raise InterpreterError(f"cast of {value} from {src} to {dst} has no defined result")
        truncated = math.trunc(value)
        if not dst.min_value() <= truncated <= dst.max_value():
            raise InterpreterError(
                f"cast of {value} from {src} to {dst} is out of range "
                f"[{dst.min_value()}, {dst.max_value()}]"
            )
        return truncated
    return wrap_int(int(value), dst)


def reinterpret(value, src: DataType, dst: DataType):
    """The bits of a scalar of element type `src` read as `dst` (the same width)."""
    if src.bits != dst.bits:
        raise InterpreterError(f"reinterpret from {src} to {dst}: the widths differ")
    raw = np.array(value, dtype=src.numpy).view(dst.numpy)
    return fit(raw.item(), dst)


def _nearest_double(n: int) -> float:
    """`n` as a double that rounds to the same float32/float16 as `n` itself: beyond 53 bits,
    float(n) would round once to double and again to the narrower type (2**60 + 2**36 + 1 must
    not become 2**60), so the bits below the 53rd are folded into one sticky bit first."""
    shift = abs(n).bit_length() - 53
    if shift <= 0:
        return float(n)
    mantissa = abs(n) >> shift | (1 if abs(n) & ((1 << shift) - 1) else 0)
    return math.copysign(math.ldexp(float(mantissa), shift), n)


def _integral(fn):
    """IEEE 754 roundToIntegral by `fn` (floor, ceil, trunc, round half to even): infinities and
    NaN stay, and a zero result keeps the sign of x (ceil(-0.5) is -0.0), as libm's."""

    def call(x: float) -> float:
        return math.copysign(float(fn(x)), x) if math.isfinite(x) else x

    return call


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _safe(fn):
    """Wrap a libm function so domain errors give NaN/inf as C's libm does, not a Python error."""

    def call(*args):
        try:
            return fn(*args)
        except ValueError:
            return math.nan
        except OverflowError:
            return math.inf

    return call


def _log(x: float) -> float:
    if x == 0:
        return -math.inf
    return math.nan if x < 0 or math.isnan(x) else math.log(x)


def _odd_integer(x: float) -> bool:
    return math.isfinite(x) and x == math.trunc(x) and math.fmod(x, 2.0) != 0


def _pow(a: float, b: float) -> float:
    """C99's pow (Annex F): a zero base to a negative power is +-inf (-inf for -0.0 to an odd
    integer), an overflow is +-inf with the sign of the exact result."""
    try:
        return math.pow(a, b)
    except ValueError:
        if a == 0 and b < 0:
            return math.copysign(math.inf, a) if _odd_integer(b) else math.inf
        return math.nan
    except (ZeroDivisionError, OverflowError):
        return -math.inf if a < 0 and _odd_integer(b) else math.inf


MATH = {
    "exp": _safe(math.exp),
    "exp2": _safe(lambda x: 2.0**x),
    "log": _log,
    "log2": lambda x: _log(x) / math.log(2) if x > 0 else _log(x),
    "log10": lambda x: _log(x) / math.log(10) if x > 0 else _log(x),
    "sqrt": lambda x: math.sqrt(x) if x >= 0 else math.nan,
    "tanh": math.tanh,
    "sigmoid": _sigmoid,
    "erf": math.erf,
    "sin": _safe(math.sin),
    "cos": _safe(math.cos),
    "pow": _pow,
    "floor": _integral(math.floor),
    "ceil": _integral(math.ceil),
    "trunc": _integral(math.trunc),
    "round": _integral(round),  # Python's round of a float ties to even
}
