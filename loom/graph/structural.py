"""Structural equality of graphs: the same computation, whatever the values are named.

Two graphs are equal when their inputs have the same types in the same order, their nodes apply
the same operators with equal attributes to corresponding values in the same order, their
constants hold the same arrays (same dtype, shape and bits), and they return corresponding
values. Value and node names do not matter; the graph's name does not either. Before/expected
tests of graph passes compare with `assert_graph_equal`, which names the first difference.
"""

from __future__ import annotations

import numpy as np

from loom.graph.ir import Graph, Node


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    """Same dtype, shape and bits (a NaN equals itself; -0.0 differs from 0.0)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _attr_difference(a, b, where: str) -> str | None:
    if isinstance(a, Graph) or isinstance(b, Graph):
        if not (isinstance(a, Graph) and isinstance(b, Graph)):
            return f"{where}: a graph and {b!r}"
        inner = graph_difference(a, b)
        return None if inner is None else f"{where}: {inner}"
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        ok = isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and _same_array(a, b)
        return None if ok else f"{where}: arrays differ"
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) != len(b):
            return f"{where}: {a!r} != {b!r}"
        for k, (x, y) in enumerate(zip(a, b)):
            d = _attr_difference(x, y, f"{where}[{k}]")
            if d:
                return d
        return None
    if type(a) is not type(b) or a != b:
        return f"{where}: {a!r} != {b!r}"
    return None


class _Matcher:
    def __init__(self, a: Graph, b: Graph):
        self.a, self.b = a, b
        self.pairs: dict[str, str] = {"": ""}  # a's value -> b's
        self.taken: set[str] = {""}

    def bind(self, va: str, vb: str, where: str) -> str | None:
        if va in self.pairs:
            return None if self.pairs[va] == vb else f"{where}: {va} corresponds to {vb}"
        if vb in self.taken:
            return f"{where}: {vb} already corresponds to another value"
        ca, cb = self.a.constants.get(va), self.b.constants.get(vb)
        if (ca is None) != (cb is None):
            return f"{where}: {va} and {vb} (one is a constant)"
        if ca is not None and not _same_array(ca, cb):
            return f"{where}: constants {va} and {vb} differ"
        ta, tb = self.a.types.get(va), self.b.types.get(vb)
        if ta != tb:
            return f"{where}: {va}: {ta} and {vb}: {tb}"
        self.pairs[va] = vb
        self.taken.add(vb)
        return None

    def use(self, va: str, vb: str, where: str) -> str | None:
        """An input of a node: an earlier value, or a constant seen first here."""
        if va in self.pairs or (va in self.a.constants and vb in self.b.constants):
            return self.bind(va, vb, where)
        return f"{where}: {va} and {vb} are not corresponding values"


def _node_difference(m: _Matcher, na: Node, nb: Node, where: str) -> str | None:
    if na.op != nb.op:
        return f"{where}: op {na.op} != {nb.op}"
    if len(na.inputs) != len(nb.inputs) or len(na.outputs) != len(nb.outputs):
        return f"{where} ({na.op}): {na.inputs} -> {na.outputs} vs {nb.inputs} -> {nb.outputs}"
    if set(na.attrs) != set(nb.attrs):
        return f"{where} ({na.op}): attributes {sorted(na.attrs)} != {sorted(nb.attrs)}"
    for key in na.attrs:
        d = _attr_difference(na.attrs[key], nb.attrs[key], f"{where} ({na.op}) attribute {key}")
        if d:
            return d
    for k, (va, vb) in enumerate(zip(na.inputs, nb.inputs)):
        d = m.use(va, vb, f"{where} ({na.op}) input {k}")
        if d:
            return d
    for k, (va, vb) in enumerate(zip(na.outputs, nb.outputs)):
        d = m.bind(va, vb, f"{where} ({na.op}) output {k}")
        if d:
            return d
    return None


def graph_difference(a: Graph, b: Graph) -> str | None:
    """The first difference between two graphs, or None if they are structurally equal."""
    if len(a.inputs) != len(b.inputs):
        return f"{len(a.inputs)} inputs != {len(b.inputs)}"
    m = _Matcher(a, b)
    for k, (va, vb) in enumerate(zip(a.inputs, b.inputs)):
        d = m.bind(va, vb, f"input {k}")
        if d:
            return d
    if len(a.nodes) != len(b.nodes):
        return f"{len(a.nodes)} nodes != {len(b.nodes)} ({a.ops()} vs {b.ops()})"
    for k, (na, nb) in enumerate(zip(a.nodes, b.nodes)):
        d = _node_difference(m, na, nb, f"node {k}")
        if d:
            return d
    if len(a.outputs) != len(b.outputs):
        return f"{len(a.outputs)} outputs != {len(b.outputs)}"
    for k, (va, vb) in enumerate(zip(a.outputs, b.outputs)):
        d = m.use(va, vb, f"output {k}")
        if d:
            return d
    return None


def graph_equal(a: Graph, b: Graph) -> bool:
    return graph_difference(a, b) is None


def assert_graph_equal(a: Graph, b: Graph) -> None:
    """Raise AssertionError naming the first difference, with both graphs, unless equal."""
    d = graph_difference(a, b)
    if d is not None:
        raise AssertionError(f"graphs differ at {d}\n--- lhs ---\n{a}\n--- rhs ---\n{b}")


__all__ = ["assert_graph_equal", "graph_difference", "graph_equal"]
