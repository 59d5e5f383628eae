"""Tensor expressions and schedules, in the style of TVM's `te` module."""

from loom.ir.op import (
    abs_ as abs,
)
from loom.ir.op import (
    all_ as all,
)
from loom.ir.op import (
    any_ as any,
)
from loom.ir.op import (
    cast,
    const,
    equal,
    greater,
    greater_equal,
    if_then_else,
    less,
    less_equal,
    likely,
    max_value,
    min_value,
    not_equal,
    select,
)
from loom.te.math import ceil, erf, exp, floor, log, pow, round, sigmoid, sqrt, tanh
from loom.te.operation import (
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    comm_reducer,
    compute,
    max,
    min,
    placeholder,
    prod,
    reduce_axis,
    sum,
    var,
)
from loom.te.schedule import Schedule, Stage, create_schedule
from loom.te.tensor import ComputeOp, IterVar, PlaceholderOp, Range, Reduce, Tensor

__all__ = [
    "ComputeOp",
    "IterVar",
    "PlaceholderOp",
    "Range",
    "Reduce",
    "Schedule",
    "Stage",
    "Tensor",
    "abs",
    "all",
    "any",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "cast",
    "ceil",
    "comm_reducer",
    "compute",
    "const",
    "create_schedule",
    "equal",
    "erf",
    "exp",
    "floor",
    "greater",
    "greater_equal",
    "if_then_else",
    "less",
    "less_equal",
    "likely",
    "log",
    "max",
    "max_value",
    "min",
    "min_value",
    "not_equal",
    "placeholder",
    "pow",
    "prod",
    "reduce_axis",
    "round",
    "select",
    "sigmoid",
    "sqrt",
    "sum",
    "tanh",
    "var",
]
