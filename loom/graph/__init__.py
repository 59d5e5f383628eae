"""loom's graph level: a dataflow graph of operators over typed tensors (`Graph`), the operators
it knows (`loom.graph.ops`), the passes over it, and its lowering to one IRModule."""

from loom.graph.ir import Graph, GraphError, Node, TensorType, to_text
from loom.graph.structural import assert_graph_equal, graph_difference, graph_equal

__all__ = [
    "Graph",
    "GraphError",
    "Node",
    "TensorType",
    "assert_graph_equal",
    "graph_difference",
    "graph_equal",
    "to_text",
]
