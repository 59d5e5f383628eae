"""Small `static inline` C functions for the operations C has no operator for (or none without
undefined behaviour): division that wraps INT_MIN / -1, floor division and modulo, and min/max
with the IR's NaN rule. The generated file defines only those it uses.

The divisor is never zero here: the caller checks it first and reports an error.
"""

from __future__ import annotations

from loom.codegen.c.types import c_type, wide_unsigned
from loom.ir.dtype import DataType

HELPER_KINDS = ("div", "mod", "floordiv", "floormod", "min", "max")


def helper_name(kind: str, dt: DataType) -> str:
    return f"loom_{kind}_{dt}"


def helper_definition(kind: str, dt: DataType) -> str:
    """The C definition of helper `kind` for operands of dtype `dt`."""
    t = c_type(dt)
    head = f"static inline {t} {helper_name(kind, dt)}({t} a, {t} b)"
    return f"{head} {{\n{_BODIES[kind](dt, t)}\n}}"


def _negate(dt: DataType, t: str) -> str:
    return f"({t})(0u - ({wide_unsigned(dt)})a)"


def _div(dt: DataType, t: str) -> str:
    if dt.is_uint:
        return f"    return ({t})(a / b);"
    return f"    return b == -1 ? {_negate(dt, t)} : ({t})(a / b);"


def _mod(dt: DataType, t: str) -> str:
    if dt.is_uint:
        return f"    return ({t})(a % b);"
    return f"    return b == -1 ? 0 : ({t})(a % b);"


def _floordiv(dt: DataType, t: str) -> str:
    if dt.is_float:  # the IR's float floor division: in double precision, then rounded
        return f"    return ({t})(floor((double)a / (double)b) + 0.0);  /* floor(-0.0) is +0 */"
    if dt.is_uint:
        return f"    return ({t})(a / b);"
    return (
        f"    if (b == -1) return {_negate(dt, t)};\n"
        f"    {t} q = ({t})(a / b), r = ({t})(a % b);\n"
        f"    return (r != 0 && ((r < 0) != (b < 0))) ? ({t})(q - 1) : q;"
    )


def _floormod(dt: DataType, t: str) -> str:
    if dt.is_float:  # semantics.float_floormod, in double precision, then rounded
        return (
            "    double x = (double)a, y = (double)b;\n"
            "    if (y == 0 || isnan(x) || isnan(y) || isinf(x)) return NAN;\n"
            f"    if (isinf(y)) return ((x >= 0) == (y > 0) || x == 0) ? a : b;\n"
            f"    return ({t})(x - (floor(x / y) + 0.0) * y);"
        )
    if dt.is_uint:
        return f"    return ({t})(a % b);"
    return (
        "    if (b == -1) return 0;\n"
        f"    {t} r = ({t})(a % b);\n"
        f"    return (r != 0 && ((r < 0) != (b < 0))) ? ({t})(r + b) : r;"
    )


def _min(dt: DataType, t: str) -> str:
    if dt.is_float:  # b if (b < a or b is NaN) else a
        return "    return (b < a || isnan(b)) ? b : a;"
    return "    return b < a ? b : a;"


def _max(dt: DataType, t: str) -> str:
    if dt.is_float:
        return "    return (b > a || isnan(b)) ? b : a;"
    return "    return b > a ? b : a;"


_BODIES = {
    "div": _div,
    "mod": _mod,
    "floordiv": _floordiv,
    "floormod": _floormod,
    "min": _min,
    "max": _max,
}
