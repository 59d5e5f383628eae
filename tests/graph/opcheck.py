"""Checking one graph operator three ways against onnxruntime.

`check_op("Add", [a, b], attrs)` builds a one-node ONNX model (opset `OPSET`), runs it with
onnxruntime, and checks loom's operator: `infer` gives the output types onnxruntime's outputs
have, `evaluate` (numpy) gives its values, and the kernel built from `compute` with `llvm` gives
them too. Inputs listed in `constant` are given to `infer` and `compute` as constants (a
Reshape's shape), and are initializers of the ONNX model, not kernel arguments: `compute` gets
None for their tensors. `None` in `inputs` is an absent optional input.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import loom
from loom import te
from loom.graph.ir import Node, TensorType
from loom.graph.ops import OPERATORS

OPSET = 21
"""The opset loom normalizes every model to (loom/frontend/onnx.py)."""


def onnxruntime_outputs(
    op: str, inputs, attrs: dict, n_outputs: int, constant: Sequence[int] = (), opset: int = OPSET
):
    """onnxruntime's outputs of one `op` node; inputs in `constant` are initializers."""
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    names = [f"in{k}" if x is not None else "" for k, x in enumerate(inputs)]
    outs = [f"out{k}" for k in range(n_outputs)]
    node = helper.make_node(op, names, outs, **attrs)
    graph_inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
        for k, (n, x) in enumerate(zip(names, inputs))
        if x is not None and k not in constant
    ]
    initializers = [
        numpy_helper.from_array(x, n)
        for k, (n, x) in enumerate(zip(names, inputs))
        if x is not None and k in constant
    ]
    # outputs typed by onnx's shape inference, so the checker sees a complete model
    untyped = helper.make_model(
        helper.make_graph([node], "one", graph_inputs, [], initializer=initializers),
        opset_imports=[helper.make_opsetid("", opset)],
    )
    inferred = onnx.shape_inference.infer_shapes(untyped, strict_mode=True)
    graph_outputs = [v for v in inferred.graph.value_info if v.name in outs]
    graph_outputs.sort(key=lambda v: outs.index(v.name))
    graph = helper.make_graph([node], "one", graph_inputs, graph_outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {
        n: x for k, (n, x) in enumerate(zip(names, inputs)) if x is not None and k not in constant
    }
    return session.run(None, feeds)


def _close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float, what: str) -> None:
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def check_op(
    op: str,
    inputs: Sequence[np.ndarray | None],
    attrs: dict | None = None,
    constant: Sequence[int] = (),
    n_outputs: int = 1,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    compiled: bool = True,
) -> list[np.ndarray]:
    """Check `op` on `inputs` (see the module docstring); returns onnxruntime's outputs."""
    attrs = dict(attrs or {})
    want = onnxruntime_outputs(op, inputs, attrs, n_outputs, constant)
    operator = OPERATORS.get(op)
    names = [f"in{k}" if x is not None else "" for k, x in enumerate(inputs)]
    node = Node(op, names, [f"out{k}" for k in range(n_outputs)], attrs)
    types = [None if x is None else TensorType.of(x) for x in inputs]
    consts = [x if k in constant else None for k, x in enumerate(inputs)]
    out_types = list(operator.infer(node, types, consts))
    assert out_types == [TensorType.of(w) for w in want], f"{op}: infer gave {out_types}"
    got = operator.evaluate(node, list(inputs))
    for k, (g, w) in enumerate(zip(got, want)):
        _close(np.asarray(g), w, rtol, atol, f"{op} evaluate output {k}")
    if compiled and operator.compute is not None:
        placeholders = [
            None
            if x is None or k in constant
            else te.placeholder(x.shape, dtype=str(x.dtype), name=f"in{k}")
            for k, x in enumerate(inputs)
        ]
        outs = list(operator.compute(node, placeholders, consts, out_types))
        s = te.create_schedule([t.op for t in outs])
        used = [k for k, p in enumerate(placeholders) if p is not None]
        args = [placeholders[k] for k in used] + outs
        f = loom.build(s, args, target="llvm", name="op")
        results = [np.zeros(t.shape, t.dtype.numpy) for t in out_types]
        f(*[inputs[k] for k in used], *results)
        for k, (g, w) in enumerate(zip(results, want)):
            _close(g, w, rtol, atol, f"{op} compiled output {k}")
    return want
