"""onnx's backend node tests, run through loom.

onnx builds its node tests in memory (`onnx.backend.test.loader.load_model_tests(kind="node")`):
each is a model with one node (or, for the `_expanded` tests, the nodes of the operator's
function body), its inputs and its expected outputs. `LoomBackend` is an `onnx.backend.base.
Backend` (so `onnx.backend.test.BackendTest(LoomBackend, __name__)` runs them too); `run_case`
runs one test as onnx's runner does (same comparison, same tolerances).

A test is "supported" when every operator of its model is registered in
`loom.graph.ops.OPERATORS` (a Constant node counts as supported: the importer maps it to a
constant); the others are not run.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import inliner, numpy_helper
from onnx.backend.base import Backend, BackendRep
from onnx.backend.test.loader import load_model_tests
from onnx.backend.test.runner import Runner

import loom
from loom.graph.ops import OPERATORS

FRONTEND_OPERATORS = frozenset({"Constant"})
"""Operators the importer handles itself (not graph operators)."""

_EXPANDED = re.compile(r"_expanded(_ver\d+)?$")


class LoomRep(BackendRep):
    """A model compiled by loom: `run(inputs)` takes the inputs in the model's order and returns
    the outputs in the model's order."""

    def __init__(self, compiled: loom.CompiledModel, outputs: Sequence[str]):
        self.compiled = compiled
        self.outputs = list(outputs)

    def run(self, inputs, **kwargs) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        results = self.compiled(*inputs)
        return tuple(results[name] for name in self.outputs)


class LoomBackend(Backend):
    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs) -> LoomRep:
        compiled = loom.compile(model, target="llvm")
        return LoomRep(compiled, [v.name for v in model.graph.output])

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


@dataclasses.dataclass(frozen=True)
class NodeCase:
    """One onnx node test: its name, the operator it tests (the node's, or for an `_expanded`
    test the operator whose function it expands), and the operators its model uses."""

    name: str
    operator: str
    expanded: bool
    operators: frozenset[str]
    test: object  # onnx.backend.test.case.test_case.TestCase

    @property
    def unsupported_operators(self) -> list[str]:
        return sorted(op for op in self.operators if not _supported(op))

    @property
    def supported(self) -> bool:
        return not self.unsupported_operators


def _supported(op: str) -> bool:
    return op in FRONTEND_OPERATORS or op in OPERATORS


def _graph_operators(graph: onnx.GraphProto) -> set[str]:
    ops = set()
    for node in graph.node:
        domain = "" if node.domain == "ai.onnx" else node.domain
        ops.add(node.op_type if not domain else f"{domain}.{node.op_type}")
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                ops |= _graph_operators(a.g)
            for g in a.graphs:
                ops |= _graph_operators(g)
    return ops


def model_operators(model: onnx.ModelProto) -> frozenset[str]:
    """The operators of the model's graph and subgraphs, model-local functions inlined."""
    if model.functions:
        model = inliner.inline_local_functions(model)
    return frozenset(_graph_operators(model.graph))


@functools.cache
def node_cases() -> tuple[NodeCase, ...]:
    """Every onnx node test, sorted by name."""
    tests = sorted(load_model_tests(kind="node"), key=lambda t: t.name)
    tested = {t.name: t.model.graph.node[0].op_type for t in tests if t.model.graph.node}
    cases = []
    for t in tests:
        base = _EXPANDED.sub("", t.name)
        expanded = base != t.name
        operator = tested.get(base, "?") if expanded else tested.get(t.name, "?")
        cases.append(NodeCase(t.name, operator, expanded, model_operators(t.model), t))
    return tuple(cases)


def run_case(case: NodeCase) -> None:
    """Compile the test's model with loom and compare its outputs with the expected ones, as
    onnx's runner does (`Runner.assert_similar_outputs`, the test's rtol and atol)."""
    test = case.test
    rep = LoomBackend.prepare(test.model, "CPU")
    for inputs, expected in test.data_sets:
        inputs = [_array(x) for x in inputs]
        expected = [_array(x) for x in expected]
        outputs = rep.run(inputs)
        Runner.assert_similar_outputs(expected, outputs, rtol=test.rtol, atol=test.atol)


def _array(x) -> np.ndarray:
    return numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x
