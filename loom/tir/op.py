"""TVM's `tvm.tir` expression builders over loom's: intrinsic and extern calls, the bit cast,
and the arithmetic TVM spells its own way (`indexdiv`, `truncmod`, ...)."""

from __future__ import annotations

from loom.abi.dtype import DataType
from loom.abi.dtype import dtype as parse_dtype
from loom.ir import op as irop
from loom.ir.expr import PrimExpr
from loom.ir.intrinsic_registry import canonical_name


def call_intrin(dtype: str | DataType, func_name: str, *args, span=None) -> PrimExpr:
    """A call of the intrinsic `func_name`: loom's name, or TVM's `tir.<name>` where loom has
    `<name>` (`call_intrin("float32", "tir.exp", x)`)."""
    del span
    return irop.call_intrin(dtype, canonical_name(func_name), *args)


def call_extern(dtype: str | DataType, func_name: str, *args, span=None) -> PrimExpr:
    """A call of the C function `func_name`, which a registered runtime library must declare
    (loom.abi.register_library); strings become string constants."""
    del span
    return irop.call_extern(dtype, func_name, *args)


def call_pure_extern(dtype: str | DataType, func_name: str, *args, span=None) -> PrimExpr:
    """As `call_extern`: loom does not mark calls pure (it never removes or merges an extern
    call)."""
    del span
    return irop.call_extern(dtype, func_name, *args)


def reinterpret(dtype: str | DataType, value, span=None) -> PrimExpr:
    """The bits of `value` as `dtype` (same width: float32 <-> int32/uint32, ...); itself if
    it has that dtype already."""
    del span
    value = irop.convert(value)
    dt = parse_dtype(dtype)
    if value.dtype == dt:
        return value
    return irop.call_intrin(dt, "reinterpret", value)


def indexdiv(a, b, span=None) -> PrimExpr:
    """Division of non-negative indices (floor division, as TVM lowers it)."""
    del span
    return irop.floordiv(a, b)


def indexmod(a, b, span=None) -> PrimExpr:
    """Remainder of non-negative indices (floor modulo, as TVM lowers it)."""
    del span
    return irop.floormod(a, b)
