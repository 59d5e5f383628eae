"""What loom knows about one graph operator, and the registry of them.

An `Operator` gives, for one op name (ONNX's, such as "Conv"):
- `infer`: the output types from the node, its input types and the values of its constant
  inputs (a Reshape's target shape);
- `evaluate`: the outputs computed with numpy, the reference semantics (constant folding runs
  it, and tests compare compiled kernels with it);
- `compute`: the outputs as `loom.te` tensors, from which the kernels are made;
- its fusion `pattern` (as TVM's FuseOps classifies operators);
- the attributes it understands (`attrs`) and what it cannot do with their values (`check`):
  a node with another attribute, or a value `check` refuses, is unsupported, and the importer
  lists every unsupported node of a model at once.

Operators register themselves in `OPERATORS` from the modules of loom/graph/ops/, one family of
operators per module; a user's operator registers the same way.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Sequence

import numpy as np

from loom.graph.ir import Node, TensorType
from loom.registry import Registry
from loom.te.tensor import Tensor


class Pattern(enum.IntEnum):
    """How an operator fuses, from the most to the least fusible (TVM's OpPatternKind)."""

    ELEMWISE = 0
    """out[i] = f(in[i]) over inputs of the output's shape."""
    BROADCAST = 1
    """Element-wise with numpy broadcasting."""
    INJECTIVE = 2
    """Each output element is one input element (reshape, transpose, slice, concat, gather)."""
    REDUCTION = 3
    """Reduces axes of its input (sum, max, mean)."""
    OUT_ELEMWISE_FUSABLE = 4
    """Complex (conv, matmul) but element-wise consumers fuse into its epilogue."""
    OPAQUE = 8
    """Never fused (control flow, data-dependent shapes)."""


InferFn = Callable[
    [Node, Sequence[TensorType | None], Sequence[np.ndarray | None]], Sequence[TensorType]
]
"""(node, input types (None: absent optional input), constant input values or None) ->
output types."""
EvaluateFn = Callable[[Node, Sequence[np.ndarray | None]], Sequence[np.ndarray]]
"""(node, input arrays (None: absent optional input)) -> output arrays."""
ComputeFn = Callable[
    [Node, Sequence[Tensor | None], Sequence[np.ndarray | None], Sequence[TensorType]],
    Sequence[Tensor],
]
"""(node, input tensors, constant input values or None, output types) -> output tensors. The
tensor of an absent optional input, of an input in `Operator.constant_inputs` (whose value is
in the constants), or of an input in `Operator.scalar_inputs` that is a one-element constant,
is None."""


@dataclasses.dataclass(frozen=True)
class Operator:
    name: str
    pattern: Pattern
    infer: InferFn
    evaluate: EvaluateFn
    compute: ComputeFn | None = None
    attrs: frozenset[str] = frozenset()
    check: Callable[[Node], str | None] | None = None
    """What this operator cannot do with the node's attribute values or inputs (None: it can)."""
    constant_inputs: tuple[int, ...] = ()
    """Inputs `compute` needs as constants (a Reshape's shape): non-constant is unsupported."""
    scalar_inputs: tuple[int, ...] = ()
    """Inputs `compute` takes as an immediate value when they are a one-element constant (a
    Clip's bounds): the kernel then compares with a literal that LLVM folds (one `maxps`)
    instead of loading a tensor argument whose NaN test it cannot drop. A non-constant one
    stays a tensor."""
    doc: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "attrs", frozenset(self.attrs))
        object.__setattr__(self, "pattern", Pattern(self.pattern))


def _check_operator(item) -> None:
    if not isinstance(item, Operator):
        raise TypeError(f"a graph operator must be a loom.graph.ops.Operator, got {item!r}")


FAMILIES = (
    "loom.graph.ops.elementwise",
    "loom.graph.ops.nn",
    "loom.graph.ops.shape",
    "loom.graph.ops.reduce",
    "loom.graph.ops.control",
    "loom.graph.ops.quant",
)
"""The modules that register loom's own operators, one family each."""

OPERATORS: Registry[Operator] = Registry("graph operator", check=_check_operator, builtins=FAMILIES)


def register(op: Operator, replace: bool = False) -> Operator:
    return OPERATORS.register(op, replace=replace)


def unsupported(node: Node, constant: Callable[[str], bool] = lambda v: False) -> str | None:
    """Why loom cannot compile `node` (unknown operator, attribute or value), or None.
    `constant(value)` says whether an input is a constant of the graph."""
    op = OPERATORS.find(node.op)
    if op is None:
        return f"operator {node.op} is not supported"
    extra = sorted(set(node.attrs) - op.attrs)
    if extra:
        return (
            f"{node.op}: attribute{'s' if len(extra) > 1 else ''} {', '.join(extra)} not supported"
        )
    if op.check is not None:
        reason = op.check(node)
        if reason:
            return f"{node.op}: {reason}"
    for k in op.constant_inputs:
        if k < len(node.inputs) and node.inputs[k] and not constant(node.inputs[k]):
            return f"{node.op}: input {k} ({node.inputs[k]}) must be a constant"
    return None


# -- helpers operator modules share -------------------------------------------------------------


def broadcast_shape(*shapes: Sequence[int]) -> tuple[int, ...]:
    """numpy's broadcast of `shapes` (ValueError if they do not broadcast)."""
    return tuple(int(d) for d in np.broadcast_shapes(*(tuple(s) for s in shapes)))


def broadcast_index(shape: Sequence[int], out_shape: Sequence[int], index: Sequence) -> list:
    """The index into a tensor of `shape` that numpy broadcasting reads for output element
    `index` of `out_shape` (dimensions aligned at the right; size-1 dimensions read 0)."""
    offset = len(out_shape) - len(shape)
    return [0 if d == 1 else index[offset + k] for k, d in enumerate(shape)]


def normalize_axis(axis: int, rank: int, node: Node) -> int:
    """An axis in [0, rank) from ONNX's [-rank, rank) (ValueError naming the node otherwise)."""
    if not -rank <= axis < rank:
        raise ValueError(f"{node.label}: axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


__all__ = [
    "OPERATORS",
    "ComputeFn",
    "EvaluateFn",
    "InferFn",
    "Operator",
    "Pattern",
    "broadcast_index",
    "broadcast_shape",
    "normalize_axis",
    "register",
    "unsupported",
]
