"""cpu_prefetch_output: a loop nest that computes a local row buffer, followed by one of the same
extents that writes the output from it at the same index, gets at the top of each outer
iteration a `prefetch_write` of every cache line the output loop writes in that iteration, and
a `prefetch` of every line its contiguous loads read in it, a row further; nothing else
changes, and nothing changes for other pairs of loops."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import loom
from loom.ir import op
from loom.ir.buffer import decl_buffer
from loom.ir.expr import Var
from loom.ir.function import PrimFunc
from loom.ir.interpret import interpret
from loom.ir.stmt import Allocate, Evaluate, For, ForKind, seq
from loom.ir.structural import assert_structural_equal
from loom.transform.cpu_prefetch_output import LINE_BYTES, prefetch_output

ROWS = 4


def row_group(
    row: int,
    vector: int,
    out_index=None,
    out_scope="global",
    out_vectors=None,
    outer=ForKind.SERIAL,
    x_index=None,
):
    """Per row i: L[j * vector + l] = exp(X[i * row + j * vector + l]) (j < row / vector, l
    vectorized), then Y[i * row + j * vector + l] = L[...] * 2 in a nest of the same extents
    (or `out_vectors` outer iterations). Returns the function and a maker of the first nest
    with a given statement first in its outer body."""
    X = decl_buffer((ROWS * row,), "float32", "X")
    Y = decl_buffer((ROWS * row,), "float32", "Y", scope=out_scope)
    L = decl_buffer((row,), "float32", "L", scope="local")
    i, j, l, j2, l2 = Var("i"), Var("j"), Var("l"), Var("j2"), Var("l2")
    steps = row // vector
    x_read = i * row + j * vector + l if x_index is None else x_index(i, j * vector + l)

    def exp_nest(first=None):
        inner = For(
            l,
            op.const(0),
            op.const(vector),
            ForKind.VECTORIZED,
            L.store(op.call_intrin("float32", "exp", X[x_read]), [j * vector + l]),
        )
        body = inner if first is None else seq(*first, inner)
        return For(j, op.const(0), op.const(steps), outer, body)

    index = (j2 * vector + l2) if out_index is None else out_index(j2, l2)
    out = For(
        j2,
        op.const(0),
        op.const(out_vectors or steps),
        ForKind.SERIAL,
        For(
            l2,
            op.const(0),
            op.const(vector),
            ForKind.VECTORIZED,
            Y.store(L[index] * op.const(2.0, "float32"), [i * row + j2 * vector + l2]),
        ),
    )

    def func(first=None):
        body = Allocate(L, seq(exp_nest(first), out))
        return PrimFunc("rows", (X, Y), For(i, op.const(0), op.const(ROWS), ForKind.SERIAL, body))

    def prefetch(offset):
        address = op.call_intrin("handle", "address_of", Y[i * row + j * vector + offset])
        return Evaluate(op.call_intrin("int32", "prefetch_write", address))

    def next_row(offset):
        index = op.max_(op.min_(i * row + j * vector + (row + offset), ROWS * row - 1), 0)
        address = op.call_intrin("handle", "address_of", X[index])
        return Evaluate(op.call_intrin("int32", "prefetch", address))

    return func, prefetch, next_row


@pytest.mark.parametrize("vector", [16, 32, 4])
def test_the_row_buffer_loop_prefetches_each_output_line_for_writing(vector):
    """... and each line of the input it reads, a row further (the next row's)."""
    func, prefetch, next_row = row_group(row=64, vector=vector)
    per_line = LINE_BYTES // 4
    offsets = range(0, vector, per_line) if vector > per_line else [0]
    expected = func([prefetch(k) for k in offsets] + [next_row(k) for k in offsets])
    assert_structural_equal(prefetch_output(func()), expected)


def test_a_strided_input_is_not_prefetched():
    """X read down its columns (the rows' element k is X[k * ROWS + i]): one line a lane, no
    contiguous row to bring in; the output's write prefetches stay."""
    func, prefetch, _ = row_group(row=64, vector=16, x_index=lambda i, k: k * ROWS + i)
    assert_structural_equal(prefetch_output(func()), func([prefetch(0)]))


def test_the_prefetches_change_no_result():
    func, *_ = row_group(row=64, vector=16)
    x = np.linspace(-3, 3, ROWS * 64, dtype=np.float32)
    want, got = np.zeros_like(x), np.zeros_like(x)
    interpret(func(), x, want)
    interpret(prefetch_output(func()), x, got)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "case",
    [
        dict(out_scope="local"),  # the second loop does not write the output
        dict(out_index=lambda j2, l2: 63 - (j2 * 16 + l2)),  # it reads another element
        dict(out_vectors=2),  # another nest
        dict(outer=ForKind.UNROLLED),  # not a serial loop
    ],
    ids=["local output", "other element", "other extents", "unrolled"],
)
def test_other_pairs_of_loops_are_left_alone(case):
    func, *_ = row_group(row=64, vector=16, **case)
    assert_structural_equal(prefetch_output(func()), func())


def _softmax_model(rows: int, cols: int):
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
        "softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, cols])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, cols])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _calls(source_ir: str, name: str) -> int:
    return source_ir.count(f"@{name}(")


def test_softmax_prefetches_its_output_rows_while_exp_computes():
    model = _softmax_model(64, 1024)
    compiled = loom.compile(model, target="llvm")
    ir_text = compiled.module.get_source("ir")
    assert _calls(ir_text, "prefetch_write") >= 1
    x = np.random.default_rng(0).normal(0, 4, (64, 1024)).astype(np.float32)
    shifted = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    want = shifted / shifted.sum(axis=-1, keepdims=True)
    got = compiled(x=x)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_layer_norm_has_no_row_buffer_to_prefetch_for():
    graph = helper.make_graph(
        [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)],
        "ln",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 1024]),
            helper.make_tensor_value_info("g", TensorProto.FLOAT, [1024]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [1024]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 1024])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ir_text = loom.compile(model, target="llvm").module.get_source("ir")
    assert _calls(ir_text, "prefetch_write") == 0
