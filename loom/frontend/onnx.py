"""Importing an ONNX model as a loom `Graph`.

`from_onnx(model, shapes)`:
1. loads the model (a path or an `onnx.ModelProto`) and inlines its model-local functions;
2. converts it to ONNX opset `OPSET` (loom's operators implement that opset's semantics);
3. gives every graph input a static shape (symbolic dimensions from `shapes`);
4. runs onnx's shape inference, for the type of every value;
5. maps initializers and Constant nodes to constants, every other node to a `loom.graph.Node`
   with its attributes as Python values, and subgraphs (If, Loop, Scan) to `Graph` attributes;
6. refuses the model at once, with every node loom cannot compile listed
   (`UnsupportedModelError`), or returns the graph with every value typed (`infer_types`).

Value names are ONNX's. An initializer that is also listed as a graph input is a constant (older
exporters list weights as inputs). A subgraph reads values of the graphs around it by name; its
`Graph` lists those values as inputs after its own (an If branch has no inputs of its own, so
its inputs are exactly the outer values it reads); the node's inputs stay ONNX's.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections import ChainMap
from collections.abc import Mapping, MutableMapping, Sequence

import numpy as np

from loom.errors import LoomError
from loom.graph.ir import Graph, GraphError, Node, TensorType
from loom.graph.ops.base import unsupported
from loom.graph.passes.fold_constants import MAX_FOLDED_ELEMENTS, SHAPE_ONLY
from loom.graph.passes.infer_types import infer_types

try:
    import onnx
    from google.protobuf.message import DecodeError
    from onnx import inliner, numpy_helper, shape_inference, version_converter

    _ONNX_MISSING: ImportError | None = None
except ImportError as e:  # onnx is an optional dependency: only from_onnx needs it
    onnx = None
    _ONNX_MISSING = e

OPSET = 21
"""The default-domain opset every model is converted to (loom's operators implement it)."""

DEFAULT_DOMAINS = ("", "ai.onnx")
LISTED_DOMAINS = ("com.microsoft",)
"""Domains whose nodes are listed as unsupported (onnxruntime's contrib operators, which
exporters emit in otherwise standard models); a model using any other domain is refused."""

DTYPES = {
    "FLOAT16": "float16",
    "FLOAT": "float32",
    "DOUBLE": "float64",
    "INT8": "int8",
    "INT16": "int16",
    "INT32": "int32",
    "INT64": "int64",
    "UINT8": "uint8",
    "UINT16": "uint16",
    "UINT32": "uint32",
    "UINT64": "uint64",
    "BOOL": "bool",
}
"""ONNX element types loom supports, by their TensorProto names."""

UNNAMED_DIMS = ("?",)
"""dim_params that exporters write for "unknown", not as a name shared by equal dimensions
(paddle2onnx marks both the height and the width of PP-OCR's inputs "?")."""


@dataclasses.dataclass(frozen=True)
class UnsupportedNode:
    """One node loom cannot compile, and why."""

    name: str
    op: str
    outputs: tuple[str, ...]
    reason: str
    subgraph: str = ""
    """Where the node is: "" in the main graph, "if1.then_branch" in a branch of node if1."""

    def __str__(self) -> str:
        label = f"{self.name} ({self.op})" if self.name else f"{self.op} -> {self.outputs[0]}"
        where = f" in {self.subgraph}" if self.subgraph else ""
        return f"{label}{where}: {self.reason}"


class UnsupportedModelError(LoomError):
    """A model with nodes loom cannot compile; `nodes` lists every one of them."""

    def __init__(self, nodes: Sequence[UnsupportedNode], total: int) -> None:
        self.nodes = list(nodes)
        self.total = total
        lines = [f"{len(self.nodes)} of {total} nodes are not supported:"]
        lines += [f"  {n}" for n in self.nodes]
        super().__init__("\n".join(lines))

    def __reduce__(self):
        # rebuilt from its fields (pickle would call the class with the message alone)
        return (type(self), (self.nodes, self.total))


def from_onnx(model, shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """The loom `Graph` of an ONNX model (a path or an `onnx.ModelProto`), every value typed.
    `shapes` gives the shape of inputs whose dimensions are symbolic or unknown:
    `shapes={"input": (1, 3, 224, 224)}`."""
    if onnx is None:
        raise LoomError(
            f"importing ONNX models needs the onnx package: pip install onnx ({_ONNX_MISSING})"
        )
    proto = _load(model)
    if proto.functions:
        proto = inliner.inline_local_functions(proto)
    _check_domains(proto.graph)
    _check_defined(proto.graph, set())
    proto = _convert_opset(proto)
    _set_input_shapes(proto.graph, dict(shapes or {}))
    proto = _infer_shapes(proto)
    graph = _Importer(proto.graph).import_main()
    return infer_types(graph)


# -- loading --------------------------------------------------------------------------------------


def _load(model) -> onnx.ModelProto:
    """A copy of the model (the caller's is never changed) or the model read from a path."""
    if isinstance(model, onnx.ModelProto):
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        return copy
    if not isinstance(model, str | pathlib.Path):
        raise TypeError(
            f"from_onnx: model must be a path or an onnx.ModelProto, got {type(model).__name__}"
        )
    try:
        proto = onnx.load(str(model))
    except (OSError, DecodeError, ValueError) as e:
        raise LoomError(f"cannot read the ONNX model {model}: {e}") from e
    # protobuf parses an empty (or nearly empty) file as an empty message
    if proto.ir_version <= 0 or not proto.HasField("graph"):
        raise LoomError(f"{model} is not an ONNX model (it has no IR version or no graph)")
    return proto


def _subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    graphs = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            graphs.append(a.g)
        elif a.type == onnx.AttributeProto.GRAPHS:
            graphs.extend(a.graphs)
    return graphs


def _all_graphs(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    """`graph` and its subgraphs, recursively."""
    graphs = [graph]
    for node in graph.node:
        for sub in _subgraphs(node):
            graphs.extend(_all_graphs(sub))
    return graphs


def _all_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The nodes of `graph` and of its subgraphs, recursively."""
    return [node for g in _all_graphs(graph) for node in g.node]


def _check_domains(graph: onnx.GraphProto) -> None:
    """Spell the default domain "" everywhere; refuse domains loom does not know at all."""
    other: dict[str, set[str]] = {}
    for node in _all_nodes(graph):
        if node.domain == "ai.onnx":
            node.domain = ""
        if node.domain not in DEFAULT_DOMAINS + LISTED_DOMAINS:
            other.setdefault(node.domain, set()).add(node.op_type)
    if other:
        listing = "; ".join(f"{d} ({', '.join(sorted(ops))})" for d, ops in sorted(other.items()))
        raise LoomError(
            f"the model uses operator domains loom does not support: {listing}; loom imports "
            'models of the default ONNX domain ("" or "ai.onnx")'
        )


def _check_defined(graph: onnx.GraphProto, outer: set[str]) -> None:
    """Every value a node reads is defined before it (onnx's shape inference would say only
    that an input has no type)."""
    defined = outer | {v.name for v in graph.input} | _initializer_names(graph)
    for node in graph.node:
        for v in node.input:
            if v and v not in defined:
                label = node.name or f"{node.op_type} -> {node.output[0] if node.output else '?'}"
                raise LoomError(
                    f"node {label} reads {v}, which no graph input, initializer or earlier node "
                    "defines"
                )
        for sub in _subgraphs(node):
            _check_defined(sub, defined)
        defined.update(v for v in node.output if v)


def _convert_opset(proto: onnx.ModelProto) -> onnx.ModelProto:
    for opset in proto.opset_import:
        if opset.domain == "ai.onnx":
            opset.domain = ""
    versions = [o.version for o in proto.opset_import if o.domain == ""]
    if not versions:
        if any(n.domain == "" for n in _all_nodes(proto.graph)):
            raise LoomError("the model imports no opset of the default ONNX domain")
        proto.opset_import.add(domain="", version=OPSET)
        return proto
    if versions[0] == OPSET:
        return proto
    try:
        return version_converter.convert_version(proto, OPSET)
    except Exception as e:  # the converter raises its C++ assertions as plain RuntimeErrors
        newer = _operators_after_opset(proto.graph)
        hint = f"; ONNX added {', '.join(newer)} after opset {OPSET}" if newer else ""
        raise LoomError(
            f"cannot convert the model from opset {versions[0]} to opset {OPSET}, which loom's "
            f"operators implement: {_converter_message(e)}{hint}"
        ) from e


def _operators_after_opset(graph: onnx.GraphProto) -> list[str]:
    """The model's default-domain operators that do not exist at opset OPSET yet."""
    newer = []
    for op in sorted({n.op_type for n in _all_nodes(graph) if n.domain == ""}):
        try:
            onnx.defs.get_schema(op, OPSET, "")
        except onnx.defs.SchemaError:
            if onnx.defs.has(op):
                newer.append(op)
    return newer


def _converter_message(error: Exception) -> str:
    """The reason in a converter assertion ("...: Assertion `false` failed: No Adapter From
    Version $22 for GlobalMaxPool")."""
    text = str(error).strip()
    _, marker, reason = text.partition(" failed: ")
    return reason.strip() if marker else text


# -- input shapes ---------------------------------------------------------------------------------


def _initializer_names(graph: onnx.GraphProto) -> set[str]:
    return {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}


def _set_input_shapes(graph: onnx.GraphProto, shapes: dict[str, Sequence[int]]) -> None:
    """Give every graph input a static shape: its own fixed dimensions, the user's `shapes`, and
    a symbolic dimension's value wherever another input's shape gives it."""
    constants = _initializer_names(graph)
    inputs = {v.name: v for v in graph.input if v.name not in constants}
    for key in shapes:
        if key in constants:
            raise LoomError(f"shapes: {key} is an initializer (a constant), not a graph input")
        if key not in inputs:
            raise LoomError(
                f"shapes: {key} is not a graph input; the inputs are {', '.join(inputs) or 'none'}"
            )
    symbols: dict[str, int] = {}
    for name, shape in shapes.items():
        _check_user_shape(inputs[name], shape, symbols)
    unknown = []
    for name, value in inputs.items():
        if not value.type.HasField("tensor_type"):
            raise LoomError(f"input {name} is not a tensor ({value.type.WhichOneof('value')})")
        dims = shapes[name] if name in shapes else _known_dims(value, symbols, unknown)
        if dims is not None:
            _write_shape(value, dims)
    if unknown:
        raise LoomError(
            "the shapes of some graph inputs are not known; give them with from_onnx(model, "
            "shapes={...}):\n" + "\n".join(unknown)
        )


def _dims(value: onnx.ValueInfoProto) -> list[int | str | None] | None:
    """The input's dimensions (int, a symbolic name, or None), or None for an unknown rank."""
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims: list[int | str | None] = []
    for d in tensor.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        elif d.dim_param in UNNAMED_DIMS:
            dims.append(None)
        else:
            dims.append(d.dim_param or None)
    return dims


def _check_user_shape(value: onnx.ValueInfoProto, shape, symbols: dict[str, int]) -> None:
    name = value.name
    if isinstance(shape, str | bytes) or not isinstance(shape, Sequence | np.ndarray):
        raise LoomError(f"shapes[{name!r}] must be a sequence of ints, got {shape!r}")
    shape = list(shape)
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 0:
            raise LoomError(f"shapes[{name!r}] must hold non-negative ints, got {shape!r}")
    dims = _dims(value)
    if dims is None:
        return
    if len(shape) != len(dims):
        raise LoomError(
            f"shapes[{name!r}] = {tuple(shape)} has rank {len(shape)}, but input {name} has rank "
            f"{len(dims)} ({_dims_text(dims)})"
        )
    for axis, (given, declared) in enumerate(zip(shape, dims)):
        if isinstance(declared, int) and given != declared:
            raise LoomError(
                f"shapes[{name!r}] = {tuple(shape)} gives dimension {axis} the size {given}, but "
                f"the model fixes it to {declared} ({_dims_text(dims)})"
            )
        if isinstance(declared, str):
            if symbols.setdefault(declared, int(given)) != given:
                raise LoomError(
                    f"shapes: the symbolic dimension {declared!r} is {symbols[declared]} in one "
                    f"input and {given} in input {name}"
                )


def _known_dims(value: onnx.ValueInfoProto, symbols: Mapping[str, int], unknown: list[str]):
    """The input's static shape from its declaration and the symbols' values, or None (and a
    line in `unknown` for each dimension that stays unknown)."""
    dims = _dims(value)
    if dims is None:
        unknown.append(f"  input {value.name}: its rank is not known")
        return None
    resolved = [symbols.get(d) if isinstance(d, str) else d for d in dims]
    missing = [k for k, d in enumerate(resolved) if d is None]
    for k in missing:
        symbol = f" ({dims[k]!r})" if dims[k] else ""
        unknown.append(f"  input {value.name}: dimension {k}{symbol} of {_dims_text(dims)}")
    return None if missing else resolved


def _dims_text(dims: Sequence[int | str | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _write_shape(value: onnx.ValueInfoProto, dims: Sequence[int]) -> None:
    shape = value.type.tensor_type.shape
    shape.Clear()
    for d in dims:
        shape.dim.add().dim_value = int(d)


def _forget_negative_dims(proto: onnx.ModelProto) -> None:
    """Make a declared dimension of -1 unknown: exporters (paddle2onnx) write -1 for "any",
    and the opset converter copies it to every value it types; strict inference would take it
    for a real size that contradicts the inferred one."""
    for graph in _all_graphs(proto.graph):
        for value in (*graph.value_info, *graph.output):
            if value.type.HasField("tensor_type"):
                for d in value.type.tensor_type.shape.dim:
                    if d.HasField("dim_value") and d.dim_value < 0:
                        d.Clear()


def _infer_shapes(proto: onnx.ModelProto) -> onnx.ModelProto:
    # strict: a type the model declares that contradicts onnx's inference is an error in the
    # model, better reported by onnx than later by loom (unknown operators are still skipped)
    _forget_negative_dims(proto)
    try:
        return shape_inference.infer_shapes(proto, strict_mode=True, data_prop=True)
    except (shape_inference.InferenceError, onnx.checker.ValidationError) as e:
        raise LoomError(f"onnx's shape inference refuses the model: {e}") from e


# -- mapping to loom ------------------------------------------------------------------------------


class _Refused(Exception):
    """An attribute or constant loom cannot represent; the message is the reason."""


def _dtype_name(elem_type: int) -> str:
    return onnx.TensorProto.DataType.Name(elem_type)


def _array(tensor: onnx.TensorProto, what: str) -> np.ndarray:
    name = _dtype_name(tensor.data_type)
    if name not in DTYPES:
        raise _Refused(f"{what} has element type {name}, which loom does not support")
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        raise LoomError(
            f"{what} is stored in an external file that was not read: pass the model's path "
            "to from_onnx, or load it with onnx.load(path)"
        )
    return numpy_helper.to_array(tensor).astype(DTYPES[name], copy=False)


def _float32_value(x: float) -> float:
    # ONNX float attributes are float32: keep the shortest decimal that is that float32, so
    # `epsilon=1e-05` prints as written and converts back to exactly the same float32
    return float(str(np.float32(x)))


def _loom_type(t: onnx.TypeProto) -> TensorType | None:
    """The static tensor type, or None (not a tensor, an unsupported element type, or a
    dimension onnx could not infer)."""
    if t.WhichOneof("value") != "tensor_type":
        return None
    tensor = t.tensor_type
    name = _dtype_name(tensor.elem_type)
    if name not in DTYPES or not tensor.HasField("shape"):
        return None
    dims = tensor.shape.dim
    if not all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims):
        return None
    return TensorType(tuple(d.dim_value for d in dims), DTYPES[name])


def _type_problem(role: str, value: str, t: onnx.TypeProto | None) -> str | None:
    """Why loom cannot hold `value` of type `t`, or None."""
    if t is None:
        return None
    kind = t.WhichOneof("value")
    if kind is None:
        return None
    if kind != "tensor_type":
        return f"{role} {value} is a {kind.removesuffix('_type')}, not a tensor"
    name = _dtype_name(t.tensor_type.elem_type)
    if name != "UNDEFINED" and name not in DTYPES:
        return f"{role} {value} has element type {name}, which loom does not support"
    return None


@dataclasses.dataclass
class _Scope:
    """What the importer knows while mapping one graph: its onnx value types (with those of
    the graphs around it) and the loom types of the values around it."""

    onnx_types: MutableMapping[str, onnx.TypeProto]
    outer_types: Mapping[str, TensorType]
    where: str = ""
    """The subgraph's place, for messages ("" for the main graph)."""
    foldable: set[str] = dataclasses.field(default_factory=set)
    """The values that are constants once fold_constants ran, those of the graphs around it
    included (a branch's shape computation reads the outer graph's)."""


class _Importer:
    def __init__(self, main: onnx.GraphProto) -> None:
        self.main = main
        self.unsupported: list[UnsupportedNode] = []
        self.node_count = 0
        self.taken = self._names(main)

    @staticmethod
    def _names(main: onnx.GraphProto) -> set[str]:
        names = set()
        for graph in _all_graphs(main):
            names.update(v.name for v in graph.input)
            names.update(_initializer_names(graph))
            for node in graph.node:
                names.update(node.input)
                names.update(node.output)
        return names

    def import_main(self) -> Graph:
        scope = _Scope(ChainMap(), {})
        inputs, nodes, constants, types = self._map_graph(self.main, scope, capture=False)
        if self.unsupported:
            raise UnsupportedModelError(self.unsupported, self.node_count)
        for v in inputs:
            problem = _type_problem("graph input", v, scope.onnx_types.get(v))
            if problem:
                raise LoomError(f"the model's {problem}")
        return Graph(inputs, [v.name for v in self.main.output], nodes, constants, types)

    def _map_graph(self, graph: onnx.GraphProto, scope: _Scope, capture: bool):
        """inputs, nodes, constants and types of `graph`; its inputs are the ONNX graph's
        (initializers excepted), then, with `capture`, the outer values it reads."""
        constants = self._initializers(graph, scope)
        formal = [v.name for v in graph.input if v.name not in constants]
        for v in (*graph.input, *graph.output, *graph.value_info):
            scope.onnx_types[v.name] = v.type
        nodes: list[Node] = []
        reads: list[str] = []
        foldable = scope.foldable
        foldable.update(constants)
        for proto in graph.node:
            self.node_count += 1
            if proto.op_type == "Constant" and proto.domain == "":
                node = self._constant(proto, scope, constants)
                foldable.update(constants)
            elif any(proto.output):
                node, captured = self._node(proto, scope, foldable)
                reads += captured
            else:
                continue  # every output omitted: it computes nothing anyone reads
            if node is not None:
                nodes.append(node)
                reads += node.inputs
        defined = {*formal, *constants, *(v for n in nodes for v in n.outputs)}
        outer = [v for v in dict.fromkeys(reads) if v and v not in defined] if capture else []
        inputs = [*formal, *outer]
        types = {v: t for v in defined if (t := self._type(v, scope)) is not None}
        types.update({v: scope.outer_types[v] for v in outer if v in scope.outer_types})
        return inputs, nodes, constants, types

    def _type(self, value: str, scope: _Scope) -> TensorType | None:
        t = scope.onnx_types.get(value)
        return None if t is None else _loom_type(t)

    def _initializers(self, graph: onnx.GraphProto, scope: _Scope) -> dict[str, np.ndarray]:
        if len(graph.sparse_initializer):
            names = ", ".join(t.values.name for t in graph.sparse_initializer)
            raise LoomError(f"sparse initializers are not supported ({names})")
        constants = {}
        for tensor in graph.initializer:
            scope.onnx_types[tensor.name] = onnx.helper.make_tensor_type_proto(
                tensor.data_type, list(tensor.dims)
            )
            try:
                constants[tensor.name] = _array(tensor, f"initializer {tensor.name}")
            except _Refused:
                pass  # the nodes reading it are listed, for its element type
        return constants

    def _constant(
        self, proto: onnx.NodeProto, scope: _Scope, constants: dict[str, np.ndarray]
    ) -> Node | None:
        """Record a Constant node's value as a constant; a value loom cannot hold leaves the
        node in the graph, listed as unsupported."""
        try:
            constants[proto.output[0]] = _constant_value(proto)
            return None
        except _Refused as e:
            node = Node("Constant", (), proto.output[:1], {}, proto.name)
            self._refuse(node, str(e), scope)
            return node

    def _node(self, proto: onnx.NodeProto, scope: _Scope, foldable: set[str]):
        """The loom node (its reason to be unsupported recorded) and the outer values its
        subgraphs read. `foldable`: the values that are constants once fold_constants ran (a
        Reshape's shape computed from the input's Shape is); the node's outputs join it if they
        will be too."""
        attrs, captured, refused = {}, [], []
        for a in proto.attribute:
            try:
                attrs[a.name], reads = self._attr(proto, a, scope)
                captured += reads
            except _Refused as e:
                refused.append(str(e))
        op = proto.op_type if proto.domain == "" else f"{proto.domain}.{proto.op_type}"
        node = Node(op, proto.input, self._outputs(proto), attrs, proto.name)
        if proto.domain != "":
            reason = f"operator {proto.op_type} of domain {proto.domain} is not supported"
        else:
            reason = (
                unsupported(node, constant=lambda v: v in foldable)
                or (refused[0] if refused else None)
                or self._types_problem(proto, scope)
            )
        if reason:
            self._refuse(node, reason, scope)
        elif self._folds(node, scope, foldable) and foldable.issuperset(captured):
            foldable.update(node.outputs)
        return node, captured

    def _folds(self, node: Node, scope: _Scope, foldable: set[str]) -> bool:
        """Whether fold_constants will make the node's outputs constants (its rules)."""
        for v in node.outputs:
            t = self._type(v, scope)
            if t is not None and t.size > MAX_FOLDED_ELEMENTS:
                return False
        if node.op in SHAPE_ONLY:
            # every value has a static type once infer_types ran (or the model does not
            # compile), though onnx's inference may not know it: a Range whose limit comes from
            # a Shape (YOLO's anchor grids), silero-vad's STFT
            return True
        return bool(node.inputs) and all(not v or v in foldable for v in node.inputs)

    def _outputs(self, proto: onnx.NodeProto) -> list[str]:
        """The node's output names: omitted trailing optional outputs dropped, an omitted one
        before a used one named (loom names every output)."""
        outputs = list(proto.output)
        while outputs and not outputs[-1]:
            outputs.pop()
        for k, v in enumerate(outputs):
            if not v:
                outputs[k] = self._fresh(f"{proto.name or proto.op_type}.unused{k}")
        return outputs

    def _fresh(self, base: str) -> str:
        name, n = base, 0
        while name in self.taken:
            n += 1
            name = f"{base}.{n}"
        self.taken.add(name)
        return name

    def _types_problem(self, proto: onnx.NodeProto, scope: _Scope) -> str | None:
        for role, values in (("input", proto.input), ("output", proto.output)):
            for v in values:
                problem = v and _type_problem(role, v, scope.onnx_types.get(v))
                if problem:
                    return problem
        return None

    def _refuse(self, node: Node, reason: str, scope: _Scope) -> None:
        reason = reason.removeprefix(f"{node.op}: ")
        entry = UnsupportedNode(node.name, node.op, node.outputs, reason, scope.where)
        self.unsupported.append(entry)

    def _attr(self, node: onnx.NodeProto, a: onnx.AttributeProto, scope: _Scope):
        """The attribute's Python value, and the outer values a subgraph attribute reads."""
        kinds = onnx.AttributeProto
        if a.ref_attr_name:
            raise _Refused(f"attribute {a.name} refers to a function attribute")
        if a.type == kinds.FLOAT:
            return _float32_value(a.f), []
        if a.type == kinds.INT:
            return int(a.i), []
        if a.type == kinds.STRING:
            return _text(a.name, a.s), []
        if a.type == kinds.FLOATS:
            return tuple(_float32_value(x) for x in a.floats), []
        if a.type == kinds.INTS:
            return tuple(int(x) for x in a.ints), []
        if a.type == kinds.STRINGS:
            return tuple(_text(a.name, s) for s in a.strings), []
        if a.type == kinds.TENSOR:
            return _array(a.t, f"attribute {a.name}"), []
        if a.type == kinds.GRAPH:
            return self._subgraph(node, a, scope)
        kind = kinds.AttributeType.Name(a.type)
        raise _Refused(f"attribute {a.name} is of type {kind}, which loom does not support")

    def _subgraph(self, node: onnx.NodeProto, a: onnx.AttributeProto, scope: _Scope):
        outer_types = dict(scope.outer_types)
        for v in scope.onnx_types:
            t = self._type(v, scope)
            if t is not None:
                outer_types[v] = t
        label = node.name or f"{node.op_type}({node.output[0]})"
        where = f"{scope.where}/{label}.{a.name}" if scope.where else f"{label}.{a.name}"
        inner = _Scope(scope.onnx_types.new_child(), outer_types, where, set(scope.foldable))
        inputs, nodes, constants, types = self._map_graph(a.g, inner, capture=True)
        outputs = [v.name for v in a.g.output]
        try:
            graph = Graph(inputs, outputs, nodes, constants, types, name=a.name)
        except GraphError:
            if self.unsupported:  # a refused node or constant left a value undefined
                raise _Refused(f"subgraph {a.name} has unsupported nodes") from None
            raise
        formal = {v.name for v in a.g.input}
        return graph, [v for v in inputs if v not in formal]


def _text(attr: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Refused(f"attribute {attr} is not UTF-8 text") from None


def _constant_value(proto: onnx.NodeProto) -> np.ndarray:
    """The value of a Constant node."""
    if len(proto.attribute) != 1:
        raise _Refused(
            f"a Constant has exactly one value attribute, this one has {len(proto.attribute)}"
        )
    a = proto.attribute[0]
    if a.name == "value":
        return _array(a.t, "its value")
    if a.name == "value_float":
        return np.array(a.f, np.float32)
    if a.name == "value_floats":
        return np.array(list(a.floats), np.float32)
    if a.name == "value_int":
        return np.array(a.i, np.int64)
    if a.name == "value_ints":
        return np.array(list(a.ints), np.int64)
    raise _Refused(f"a constant given as {a.name} is not supported")


__all__ = ["DTYPES", "OPSET", "UnsupportedModelError", "UnsupportedNode", "from_onnx"]
