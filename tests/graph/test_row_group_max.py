"""The maximum of a row group (loom/backend/cpu/reduce_schedules.py): Softmax's and LogSoftmax's
is combined as `acc > x ? acc : x` (one maxps), since a NaN in the row makes every output of
the row NaN through the row's sum whatever the maximum; a maximum whose NaN would show keeps
the NaN-propagating combination."""

from __future__ import annotations

import math

import numpy as np
import pytest

import loom
from loom import te
from loom.backend.cpu import reduce_schedules
from loom.ir.expr import NE, Select
from loom.ir.stmt import BufferStore
from loom.ir.visitor import post_order_visit

ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402


def model(nodes, x: np.ndarray, opset: int = 17):
    graph = helper.make_graph(
        nodes,
        "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_empty_tensor_value_info("out")],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def rows_with_specials(rows: int, cols: int) -> np.ndarray:
    """Random rows, some with a NaN first, in the middle or last, with infinities, all -inf."""
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    x[1, 0] = math.nan
    x[2, cols // 2] = math.nan
    x[3, -1] = math.nan
    x[4, 5] = math.inf
    x[5, 7] = -math.inf
    x[6, :] = -math.inf
    x[7, 3], x[7, 9] = math.nan, math.inf
    return x


def max_stores(compiled, name: str) -> list[BufferStore]:
    """The stores into the maximum's partial results (`name`.rf...) after lowering."""
    found = []
    for f in loom.lower(compiled.lowered.module, target=compiled.target):

        def record(n):
            if isinstance(n, BufferStore) and n.buffer.name.startswith(name + ".rf"):
                found.append(n)

        post_order_visit(f.body, record)
    return found


def count(store: BufferStore, kind: type) -> int:
    """How many nodes of `kind` the stored value has."""
    found = []
    post_order_visit(store.value, lambda n: found.append(n) if isinstance(n, kind) else None)
    return len(found)


def unordered_compares(store: BufferStore) -> int:
    """How many `b != b` (NaN tests) the stored value makes."""
    return count(store, NE)


@pytest.mark.parametrize("op, name", [("Softmax", "softmax"), ("LogSoftmax", "log_softmax")])
def test_softmax_maximum_is_one_ordered_compare(op, name):
    x = rows_with_specials(16, 1024)
    m = model([helper.make_node(op, ["x"], ["out"], axis=-1)], x)
    compiled = loom.compile(m, target="llvm")
    stores = max_stores(compiled, f"{name}.max")
    assert stores and all(unordered_compares(s) == 0 for s in stores)
    assert max(count(s, Select) for s in stores) == 1  # one select per step: maxps
    got = compiled(x=x)["out"]
    want = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    # rows with a NaN are NaN throughout, as with a NaN-propagating maximum
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[[1, 2, 3, 6, 7]]).all()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_maximum_whose_nan_shows_keeps_it():
    """out = x - max(x) alone (no sum to carry a NaN): a NaN anywhere in a row, the first
    element too, makes the whole row NaN."""
    x = rows_with_specials(16, 1024)
    nodes = [
        helper.make_node("ReduceMax", ["x"], ["top"], axes=[-1], keepdims=1),
        helper.make_node("Sub", ["x", "top"], ["out"]),
    ]
    compiled = loom.compile(model(nodes, x), target="llvm")
    stores = max_stores(compiled, "reducemax")
    got = compiled(x=x)["out"]
    with np.errstate(invalid="ignore"):
        want = x - x.max(axis=-1, keepdims=True)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])
    assert any(unordered_compares(s) for s in stores)


def test_nan_reaches_through_arithmetic_only():
    """The check behind the choice: a path of +, -, *, / and exp carries a NaN; a maximum, a
    comparison or pow (pow(NaN, 0) = 1) does not."""
    x = te.placeholder((4,), "float32", name="x")
    e = x[0]
    nan_reaches = reduce_schedules._nan_reaches
    assert nan_reaches(te.exp(e - 1.0) * 2.0 / (e + 3.0), e)
    assert nan_reaches(te.log(1.0 / (te.exp(e) + 1.0)), e)
    assert not nan_reaches(te.max(e, te.const(0.0, "float32")) + 1.0, e)
    assert not nan_reaches(te.pow(e, te.const(0.0, "float32")), e)
    assert not nan_reaches(te.exp(x[1]), e)


def test_a_group_maximum_whose_nan_would_not_reach_the_sum_keeps_it():
    """out = x - max(x) + count(x > 0) in one row group: the count drops a NaN (a comparison),
    so the maximum must keep it: a row with a NaN first is NaN throughout."""
    rows, cols = 8, 1024
    x = te.placeholder((rows, cols), "float32", name="x")
    k1, k2 = te.reduce_axis(cols, "k"), te.reduce_axis(cols, "k")
    top = te.compute((rows,), lambda i: te.max(x[i, k1], axis=k1), name="top")
    positive = lambda i, k: te.cast(x[i, k] > 0.0, "float32")  # noqa: E731
    count = te.compute((rows,), lambda i: te.sum(positive(i, k2), axis=k2), name="count")
    out = te.compute((rows, cols), lambda i, j: x[i, j] - top[i] + count[i], name="out")
    s = te.create_schedule(out.op)
    target = loom.target.Target("llvm")
    reduce_schedules.schedule(s, target)
    assert s[top].attach_type != s[out].attach_type  # computed inside out's loop over the rows
    f = loom.build(s, [x, out], target=target)
    data = rows_with_specials(rows, cols)
    got = loom.nd.empty((rows, cols), "float32")
    f(loom.nd.array(data), got)
    with np.errstate(invalid="ignore"):
        want = data - data.max(axis=-1, keepdims=True) + (data > 0).sum(axis=-1, keepdims=True)
    np.testing.assert_array_equal(np.isnan(np.asarray(got)), np.isnan(want))
    assert np.isnan(np.asarray(got)[1]).all()
