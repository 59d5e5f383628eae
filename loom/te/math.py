"""Math functions on expressions (float intrinsics; integer arguments become float32)."""

from __future__ import annotations

from loom.ir.expr import PrimExpr
from loom.ir.op import math_call


def exp(x) -> PrimExpr:
    return math_call("exp", x)


def log(x) -> PrimExpr:
    return math_call("log", x)


def sqrt(x) -> PrimExpr:
    return math_call("sqrt", x)


def tanh(x) -> PrimExpr:
    return math_call("tanh", x)


def sigmoid(x) -> PrimExpr:
    return math_call("sigmoid", x)


def erf(x) -> PrimExpr:
    return math_call("erf", x)


def pow(x, y) -> PrimExpr:
    return math_call("pow", x, y)


def floor(x) -> PrimExpr:
    return math_call("floor", x)


def ceil(x) -> PrimExpr:
    return math_call("ceil", x)


def round(x) -> PrimExpr:
    """Round to nearest, ties to even (as numpy and ONNX)."""
    return math_call("round", x)
