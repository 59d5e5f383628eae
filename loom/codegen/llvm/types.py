"""loom dtypes as LLVM types."""

from __future__ import annotations

import functools

from llvmlite import ir

from loom.abi.dtype import DataType
from loom.errors import LoomError

PTR = ir.PointerType()
I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)


@functools.cache
def scalar_type(dt: DataType) -> ir.Type:
    if dt.is_bool:
        return I1
    if dt.is_integer:
        return ir.IntType(dt.bits)
    if dt.is_float:
        return {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}[dt.bits]
    if dt.is_handle:
        return PTR
    raise LoomError(f"no LLVM type for {dt}")


@functools.cache
def value_type(dt: DataType) -> ir.Type:
    """The type of a value of `dt` in registers (bool is i1)."""
    scalar = scalar_type(dt.element)
    return scalar if dt.lanes == 1 else vector_type(scalar, dt.lanes)


@functools.cache
def memory_type(dt: DataType) -> ir.Type:
    """The type of a value of `dt` in memory (bool takes a byte)."""
    scalar = I8 if dt.element.is_bool else scalar_type(dt.element)
    return scalar if dt.lanes == 1 else vector_type(scalar, dt.lanes)


@functools.cache
def vector_type(element: ir.Type, lanes: int) -> ir.VectorType:
    """`ir.VectorType(element, lanes)`, one object for each: llvmlite formats a type's text
    once per object."""
    return ir.VectorType(element, lanes)


def mangle(t: ir.Type) -> str:
    """The suffix LLVM uses for an overloaded intrinsic's type (f32, v16f32, i32, p0)."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{mangle(t.element)}"
    if isinstance(t, ir.PointerType):
        return "p0"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    return {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(t)]
