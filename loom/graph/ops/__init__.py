"""Graph operators: `Operator` (type inference, numpy semantics, `loom.te` compute, fusion
pattern) and the registry `OPERATORS`; loom's own operators, one family per module."""

from loom.graph.ops.base import (
    OPERATORS,
    Operator,
    Pattern,
    broadcast_index,
    broadcast_shape,
    normalize_axis,
    register,
    unsupported,
)

__all__ = [
    "OPERATORS",
    "Operator",
    "Pattern",
    "broadcast_index",
    "broadcast_shape",
    "normalize_axis",
    "register",
    "unsupported",
]
