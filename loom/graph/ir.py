"""The graph IR: an immutable dataflow graph of operator nodes over typed tensors.

A `Graph` has named inputs, named outputs, nodes in topological order and constants held as
read-only numpy arrays. Every value (an input, a constant, a node's output) is named by a
string, unique in its graph; a node refers to its inputs by name ("" for an optional input that
is absent, as in ONNX). `types` gives the `TensorType` (static shape, dtype) of every value the
type-inference pass has seen. Operators are named as in ONNX ("Conv", "Add"), plus loom's own
("loom.fused": a group of nodes the fusion pass made, with its body as a `Graph` attribute).

Everything here is immutable: passes build new graphs (`Graph.replace`, `with_nodes`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from loom.abi.dtype import DataType, dtype
from loom.errors import LoomError


class GraphError(LoomError):
    """A malformed graph: an unknown value, a value defined twice, a cycle."""


@dataclasses.dataclass(frozen=True)
class TensorType:
    """A tensor's static shape and element type."""

    shape: tuple[int, ...]
    dtype: DataType

    def __post_init__(self) -> None:
        shape = tuple(self.shape)
        for d in shape:
            if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 0:
                raise ValueError(f"tensor shape must hold non-negative ints, got {self.shape!r}")
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        object.__setattr__(self, "dtype", dtype(self.dtype))
        if self.dtype.lanes != 1 or self.dtype.is_handle:
            raise ValueError(f"tensor element type must be a scalar type, got {self.dtype}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"

    @staticmethod
    def of(array: np.ndarray) -> TensorType:
        return TensorType(tuple(array.shape), dtype(array.dtype))


AttrValue = Any
"""int, float, str, a tuple of those, a numpy array (a tensor attribute) or a Graph."""


def _freeze_attr(name: str, value: AttrValue) -> AttrValue:
    if isinstance(value, bool | int | float | str | Graph) or value is None:
        return value
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return constant_array(value)
    if isinstance(value, list | tuple):
        return tuple(_freeze_attr(name, v) for v in value)
    raise TypeError(f"attribute {name}: unsupported value {value!r} ({type(value).__name__})")


def constant_array(value: np.ndarray) -> np.ndarray:
    """A read-only copy of `value` (unless it already is one)."""
    if isinstance(value, np.ndarray) and not value.flags.writeable:
        return value
    out = np.array(value, copy=True)
    out.flags.writeable = False
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class Node:
    """One operator application: `outputs = op(inputs) {attrs}`."""

    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, AttrValue] = dataclasses.field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.op, str) or not self.op:
            raise ValueError(f"node op must be a non-empty string, got {self.op!r}")
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        for v in (*self.inputs, *self.outputs):
            if not isinstance(v, str):
                raise TypeError(f"node {self.name or self.op}: value names are str, got {v!r}")
        if not self.outputs or "" in self.outputs:
            raise ValueError(f"node {self.name or self.op}: every output needs a name")
        frozen = {k: _freeze_attr(k, v) for k, v in sorted(dict(self.attrs).items())}
        object.__setattr__(self, "attrs", MappingProxyType(frozen))

    def attr(self, key: str, default: AttrValue = None) -> AttrValue:
        return self.attrs.get(key, default)

    @property
    def label(self) -> str:
        """How messages name the node: its name, else its op and first output."""
        return self.name or f"{self.op} -> {self.outputs[0]}"

    def replace(self, **changes) -> Node:
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True, eq=False)
class Graph:
    """A dataflow graph; see the module docstring."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[Node, ...]
    constants: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    types: Mapping[str, TensorType] = dataclasses.field(default_factory=dict)
    name: str = "main"

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        consts = {k: constant_array(v) for k, v in dict(self.constants).items()}
        object.__setattr__(self, "constants", MappingProxyType(consts))
        types = dict(self.types)
        for k, v in consts.items():
            types.setdefault(k, TensorType.of(v))
        for k, t in types.items():
            if not isinstance(t, TensorType):
                raise TypeError(f"type of {k} must be a TensorType, got {t!r}")
        object.__setattr__(self, "types", MappingProxyType(types))
        self._check()

    def _check(self) -> None:
        defined: set[str] = set()
        for v in (*self.inputs, *self.constants):
            if v in defined:
                raise GraphError(f"graph {self.name}: value {v} is defined twice")
            defined.add(v)
        for node in self.nodes:
            for v in node.inputs:
                if v and v not in defined:
                    raise GraphError(
                        f"graph {self.name}: node {node.label} reads {v}, which no input, "
                        "constant or earlier node defines"
                    )
            for v in node.outputs:
                if v in defined:
                    raise GraphError(f"graph {self.name}: value {v} is defined twice")
                defined.add(v)
        for v in self.outputs:
            if v not in defined:
                raise GraphError(f"graph {self.name}: output {v} is not defined")

    # -- queries --------------------------------------------------------------------------------
    def type_of(self, value: str) -> TensorType:
        try:
            return self.types[value]
        except KeyError:
            raise GraphError(
                f"graph {self.name}: the type of {value} is not known (run infer_types)"
            ) from None

    def producers(self) -> dict[str, Node]:
        """value -> the node computing it."""
        return {v: n for n in self.nodes for v in n.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        """value -> the nodes reading it (in graph order)."""
        out: dict[str, list[Node]] = {}
        for n in self.nodes:
            for v in dict.fromkeys(n.inputs):
                if v:
                    out.setdefault(v, []).append(n)
        return out

    def ops(self) -> dict[str, int]:
        """op -> how many nodes use it."""
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return counts

    # -- building new graphs --------------------------------------------------------------------
    def replace(self, **changes) -> Graph:
        return dataclasses.replace(self, **changes)

    def with_nodes(
        self,
        nodes: Iterable[Node],
        constants: Mapping[str, np.ndarray] | None = None,
        outputs: Iterable[str] | None = None,
    ) -> Graph:
        """The graph with other nodes (and constants, outputs); types of values no longer
        defined are dropped."""
        nodes = tuple(nodes)
        constants = self.constants if constants is None else constants
        outputs = self.outputs if outputs is None else tuple(outputs)
        live = {*self.inputs, *constants, *(v for n in nodes for v in n.outputs)}
        types = {k: t for k, t in self.types.items() if k in live}
        return Graph(self.inputs, outputs, nodes, constants, types, self.name)

    def __str__(self) -> str:
        return to_text(self)


# -- the text form --------------------------------------------------------------------------------

_ARRAY_ELEMENTS = 6  # a constant with more elements prints as its type only


def _attr_text(value: AttrValue, indent: str) -> str:
    if isinstance(value, Graph):
        return to_text(value, indent + "  ").lstrip()
    if isinstance(value, np.ndarray):
        if value.size <= _ARRAY_ELEMENTS:
            return f"{TensorType.of(value)}({value.ravel().tolist()})"
        return f"{TensorType.of(value)}(...)"
    if isinstance(value, tuple):
        return "[" + ", ".join(_attr_text(v, indent) for v in value) + "]"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def to_text(graph: Graph, indent: str = "") -> str:
    """The graph as text that reads like the model: one line per node,
    `%out: float32[1, 64, 56, 56] = Conv(%x, @w) {pads=[1, 1, 1, 1]}`; `@name` is a constant."""

    def value(v: str) -> str:
        if not v:
            return "_"
        return ("@" if v in graph.constants else "%") + v

    def typed(v: str) -> str:
        t = graph.types.get(v)
        return value(v) + (f": {t}" if t is not None else "")

    lines = [f"{indent}graph {graph.name}({', '.join(typed(v) for v in graph.inputs)}) {{"]
    for name, array in graph.constants.items():
        lines.append(f"{indent}  {typed(name)} = constant{_constant_text(array)}")
    for node in graph.nodes:
        outs = ", ".join(typed(v) for v in node.outputs)
        args = ", ".join(value(v) for v in node.inputs)
        attrs = ", ".join(f"{k}={_attr_text(v, indent + '  ')}" for k, v in node.attrs.items())
        label = f"  # {node.name}" if node.name else ""
        lines.append(
            f"{indent}  {outs} = {node.op}({args})" + (f" {{{attrs}}}" if attrs else "") + label
        )
    lines.append(f"{indent}  return {', '.join(value(v) for v in graph.outputs)}")
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def _constant_text(array: np.ndarray) -> str:
    return f"({array.ravel().tolist()})" if array.size <= _ARRAY_ELEMENTS else ""


__all__ = ["AttrValue", "Graph", "GraphError", "Node", "TensorType", "constant_array", "to_text"]
