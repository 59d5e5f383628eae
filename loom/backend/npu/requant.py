"""The NPU's requantization (docs/npu.md, mvout) as an expression, and its recognition.

`requantize(x, multiplier, shift, relu, rounding)` is the exact int32 -> int8 conversion that
`mvout` performs, halves rounded up ("half_up", the default) or to even ("half_even", ONNX's
rounding); the pragma rule of `mvout` recognizes it in a copy loop and turns it into
`config_st` + `mvout`.
"""

from __future__ import annotations

import operator

import numpy

from loom.ir import op
from loom.ir.expr import BufferLoad, IntImm, Max, PrimExpr, ShiftRight
from loom.ir.simplify import simplify
from loom.ir.visitor import post_order_visit

from .simulator import MAX_SHIFT, ROUNDINGS  # ROUNDINGS by value: ("half_up", "half_even")


def integer(where: str, name: str, value: object) -> int:
    """`value` as a Python int: ints, bools and their numpy forms are accepted."""
    if isinstance(value, numpy.bool_):
        return int(value)
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{where}: {name} must be an int, got {value!r}") from None


def requantize(
    x, multiplier: int, shift: int, relu: bool = False, rounding: str = "half_up"
) -> PrimExpr:
    """int8 of x * multiplier / 2^shift rounded to the nearest integer, saturated (and
    max(., 0) with relu). Halves round up, (x * multiplier + 2^(shift-1)) >> shift, or with
    rounding="half_even" to the even neighbour: (x * multiplier + 2^(shift-1) - 1 + q_odd) >>
    shift, q_odd the lowest bit of (x * multiplier) >> shift.

    `config_st` accepts multiplier 0, but every output is then 0 and the value no longer
    depends on x, so no `mvout` could compute it: requantize refuses it."""
    multiplier = integer("requantize", "multiplier", multiplier)
    shift = integer("requantize", "shift", shift)
    relu = integer("requantize", "relu", relu)
    if not 1 <= multiplier < 2**31 or not 0 <= shift <= MAX_SHIFT or relu not in (0, 1):
        raise ValueError(
            f"requantize needs multiplier in [1, 2^31), shift in [0, {MAX_SHIFT}] and relu a "
            f"bool, got "
            f"multiplier={multiplier}, shift={shift}, relu={relu!r}"
        )
    if rounding not in ROUNDINGS:
        raise ValueError(f"requantize: rounding must be one of {ROUNDINGS}, got {rounding!r}")
    wide = op.cast(x, "int64") * op.const(multiplier, "int64")
    if shift:
        amount = op.const(shift, "int64")
        bias = op.const(1 << (shift - 1), "int64")
        if rounding == "half_even":  # one less at an exact half whose floor is even
            odd = op.bitwise_and(op.shift_right(wide, amount), op.const(1, "int64"))
            bias = bias - op.const(1, "int64") + odd
        wide = op.shift_right(wide + bias, amount)
    y = op.min_(op.max_(wide, op.const(-128, "int64")), op.const(127, "int64"))
    if relu:
        y = op.max_(y, op.const(0, "int64"))
    return op.cast(y, "int8")


def match_requantize(value: PrimExpr) -> tuple[BufferLoad, dict] | None:
    """(the int32 load, {multiplier, shift, relu, rounding}) if `value` is
    requantize(load, ...). With shift 0 nothing is rounded: the rounding found is "half_up"."""
    loads: list[BufferLoad] = []
    shifts: list[int] = []
    constants: list[int] = []
    maxima: list[Max] = []

    def record(n) -> None:
        if isinstance(n, BufferLoad):
            loads.append(n)
        elif isinstance(n, ShiftRight) and isinstance(n.b, IntImm):
            shifts.append(n.b.value)
        elif isinstance(n, IntImm) and str(n.dtype) == "int64":
            constants.append(n.value)
        elif isinstance(n, Max):
            maxima.append(n)

    post_order_visit(value, record)
    # halves to even read the value twice (for the parity of its floor): the same load
    if not loads or any(load != loads[0] for load in loads):
        return None
    if str(loads[0].dtype) != "int32" or str(value.dtype) != "int8":
        return None
    shift = shifts[0] if shifts else 0
    target = simplify(value)
    # multiplier 1 (and shift 0) simplify away, so they are never among the constants.
    for multiplier in dict.fromkeys([*(c for c in constants if 0 < c < 2**31), 1]):
        for relu in (False, True):
            for rounding in ROUNDINGS:
                candidate = requantize(loads[0], multiplier, shift, relu, rounding)
                if simplify(candidate) == target:
                    params = {"multiplier": multiplier, "shift": shift, "relu": relu}
                    return loads[0], params | {"rounding": rounding}
    return None
