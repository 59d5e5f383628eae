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
from loom.te.extern import ExternOp, extern
from loom.te.math import ceil, erf, exp, floor, log, pow, round, sigmoid, sqrt, tanh
from loom.te.multi_output import MultiOutputComputeOp
from loom.te.operation import (
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    comm_reducer,
    compute,
    const,
    max,
    min,
    placeholder,
    prod,
    reduce_axis,
    size_var,
    sum,
    var,
)
from loom.te.scan import ScanOp, create_schedule, scan
from loom.te.schedule import Schedule, Stage
from loom.te.tensor import ComputeOp, IterVar, PlaceholderOp, Range, Reduce, Tensor
from loom.te.tensorize import decl_tensor_intrin

__all__ = [
    "ComputeOp",
    "ExternOp",
    "IterVar",
    "MultiOutputComputeOp",
    "PlaceholderOp",
    "Range",
    "Reduce",
    "ScanOp",
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
    "decl_tensor_intrin",
    "equal",
    "erf",
    "exp",
    "extern",
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
    "scan",
    "select",
    "sigmoid",
    "size_var",
    "sqrt",
    "sum",
    "tanh",
    "var",
]
