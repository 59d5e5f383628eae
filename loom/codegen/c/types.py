"""loom dtypes as C types, and constants as exact C literals."""

from __future__ import annotations

import math

from loom.abi import C_TYPES
from loom.abi.dtype import DataType
from loom.errors import LoomError
from loom.ir import semantics


def c_type(dt: DataType) -> str:
    """The C type of a value of `dt` (bool is `bool`, a handle `void *`)."""
    if dt.lanes != 1:
        raise LoomError(f"C code needs scalar IR, got a value of vector type {dt}")
    return C_TYPES[str(dt)]


def memory_type(dt: DataType) -> str:
    """The C type of an element of `dt` in memory (bool takes one byte)."""
    return "uint8_t" if dt.is_bool else c_type(dt)


def wide_unsigned(dt: DataType) -> str:
    """The unsigned type integer arithmetic on `dt` wraps in: C promotes narrower types to
    (signed) int, so 8- and 16-bit values are computed in 32 bits."""
    return "uint64_t" if dt.bits == 64 else "uint32_t"


def declaration(ctype: str, name: str, const: bool = False) -> str:
    """`const int32_t x` or `void *const p`."""
    if ctype.endswith("*"):
        return f"{ctype}{'const ' if const else ''}{name}"
    return f"{'const ' if const else ''}{ctype} {name}"


def int_literal(value: int, dt: DataType) -> str:
    """An integer constant of `dt`, written so that it never overflows in C."""
    if dt.is_bool:
        return "true" if value else "false"
    if dt.is_handle:
        return "NULL" if value == 0 else f"((void *)(uintptr_t)UINT64_C({value:#x}))"
    if dt.bits == 64:
        macro = "INT64_C" if dt.is_int else "UINT64_C"
        if value == -(1 << 63):
            return "(-INT64_C(9223372036854775807) - 1)"
        return f"{macro}({value})" if value >= 0 else f"(-{macro}({-value}))"
    if dt.is_uint and dt.bits == 32:
        return f"{value}u"
    if value == -(1 << 31):
        return "(-2147483647 - 1)"
    return str(value) if value >= 0 else f"({value})"


def float_literal(value: float, dt: DataType) -> str:
    """A float constant of `dt`: the value rounded to the type, as an exact hex literal."""
    value = semantics.round_float(float(value), dt)
    if math.isnan(value):
        text = "-NAN" if math.copysign(1.0, value) < 0 else "NAN"
    elif math.isinf(value):
        text = "-INFINITY" if value < 0 else "INFINITY"
    else:
        mantissa, exponent = float.hex(value).split("p")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        text = f"{mantissa}p{exponent}" + ("f" if dt.bits <= 32 else "")
    if dt.bits == 16:
        return f"((_Float16){text})"
    if dt.bits == 64 and not math.isfinite(value):
        return f"((double){text})"
    return f"({text})" if text.startswith("-") else text


def string_literal(text: str) -> str:
    """A C string literal with the UTF-8 bytes of `text` (octal escapes for anything unusual)."""
    out = []
    for byte in text.encode():
        ch = chr(byte)
        if ch in '"\\?':
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'
