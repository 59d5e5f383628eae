"""Importing ONNX models (loom/frontend/onnx.py): small models built with onnx.helper, each
imported graph checked against onnxruntime (the type of every value, and the outputs when the
graph is evaluated with loom's operators), and every way a model or its shapes can be refused."""

import pathlib
import pickle
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import loom.frontend.onnx as onnx_frontend
from loom.errors import LoomError
from loom.frontend import OPSET, UnsupportedModelError, from_onnx
from loom.graph import Graph, Node, TensorType
from loom.graph.ops import OPERATORS, Operator, Pattern, register

F = TensorProto.FLOAT
RNG = np.random.default_rng(3)


def make_model(nodes, inputs, outputs, initializers=(), opset=OPSET, extra_opsets=()):
    graph = helper.make_graph(nodes, "test", inputs, outputs, initializer=list(initializers))
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, v) for d, v in extra_opsets)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10  # the newest onnxruntime 1.31 reads
    return model


def tensor(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def out(name):
    """A graph output whose type onnx infers."""
    return onnx.ValueInfoProto(name=name)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def floats(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def ort_run(model, feeds, every_value=False):
    """onnxruntime's outputs by name; with `every_value`, of every value the nodes compute."""
    if every_value:
        model = _with_every_value_as_output(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def _with_every_value_as_output(model):
    inferred = onnx.shape_inference.infer_shapes(model)
    elem = {v.name: v.type.tensor_type.elem_type for v in inferred.graph.value_info}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    declared = {o.name for o in out.graph.output}
    for node in out.graph.node:
        for v in node.output:
            if v and v not in declared and v in elem:
                out.graph.output.append(helper.make_tensor_value_info(v, elem[v], None))
    return out


def evaluate(graph: Graph, feeds) -> dict:
    """Every value of `graph`, computed with loom's operators (their numpy semantics)."""
    env = {**feeds, **graph.constants}
    for node in graph.nodes:
        args = [env[v] if v else None for v in node.inputs]
        env.update(zip(node.outputs, OPERATORS.get(node.op).evaluate(node, args)))
    return env


def check_against_onnxruntime(model, graph, feeds):
    """Every value onnxruntime computes has loom's type, and loom computes the same outputs."""
    want = ort_run(model, feeds, every_value=True)
    for name, value in want.items():
        assert graph.type_of(name) == TensorType.of(value), name
    got = evaluate(graph, feeds)
    for name in graph.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5, err_msg=name)


def every_value_typed(graph: Graph) -> bool:
    values = {*graph.inputs, *graph.constants, *(v for n in graph.nodes for v in n.outputs)}
    return values <= set(graph.types)


# -- a small CNN ----------------------------------------------------------------------------------


def cnn(batch=1):
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], name="fc", transB=1, alpha=0.5),
    ]
    initializers = [
        init("w", floats(4, 3, 3, 3)),
        init("b", np.array([0.5, -1.0, 0.0, 2.0], np.float32)),
        init("w2", floats(10, 64)),
        init("b2", floats(10)),
    ]
    return make_model(nodes, [tensor("x", [batch, 3, 8, 8])], [out("y")], initializers)


def test_a_cnn_imports_as_a_typed_graph_that_reads_like_the_model():
    model = cnn()
    graph = from_onnx(model)
    assert str(graph).splitlines() == [
        "graph main(%x: float32[1, 3, 8, 8]) {",
        "  @w: float32[4, 3, 3, 3] = constant",
        "  @b: float32[4] = constant([0.5, -1.0, 0.0, 2.0])",
        "  @w2: float32[10, 64] = constant",
        "  @b2: float32[10] = constant",
        "  %c: float32[1, 4, 8, 8] = Conv(%x, @w, @b) {pads=[1, 1, 1, 1]}  # conv",
        "  %r: float32[1, 4, 8, 8] = Relu(%c)  # relu",
        "  %p: float32[1, 4, 4, 4] = MaxPool(%r) {kernel_shape=[2, 2], strides=[2, 2]}  # pool",
        "  %f: float32[1, 64] = Flatten(%p)  # flatten",
        "  %y: float32[1, 10] = Gemm(%f, @w2, @b2) {alpha=0.5, transB=1}  # fc",
        "  return %y",
        "}",
    ]
    assert every_value_typed(graph)
    check_against_onnxruntime(model, graph, {"x": floats(1, 3, 8, 8)})


def test_the_callers_model_is_not_changed_and_a_path_loads_the_same_graph(tmp_path):
    model = cnn(batch="N")
    before = model.SerializeToString()
    from_onnx(model, shapes={"x": (2, 3, 8, 8)})
    assert model.SerializeToString() == before
    path = tmp_path / "cnn.onnx"
    onnx.save(model, path)
    assert str(from_onnx(path, {"x": (2, 3, 8, 8)})) == str(
        from_onnx(str(path), {"x": [2, 3, 8, 8]})
    )


def test_attribute_values_become_python_values():
    nodes = [
        helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.01),
        helper.make_node("Transpose", ["a"], ["t"], perm=[1, 0]),
        helper.make_node(
            "ConstantOfShape", ["shape"], ["z"], value=helper.make_tensor("v", F, [1], [2.5])
        ),
        helper.make_node("DepthToSpace", ["x4"], ["d"], blocksize=2, mode="CRD"),
    ]
    model = make_model(
        nodes,
        [tensor("x", [2, 3]), tensor("x4", [1, 4, 2, 2])],
        [out("t"), out("z"), out("d")],
        [init("shape", np.array([2, 2], np.int64))],
    )
    graph = from_onnx(model)
    leaky, transpose, fill, d2s = graph.nodes
    assert leaky.attr("alpha") == 0.01  # the float32 attribute's shortest decimal
    assert transpose.attr("perm") == (1, 0)
    assert isinstance(fill.attr("value"), np.ndarray) and fill.attr("value").tolist() == [2.5]
    assert d2s.attrs == {"blocksize": 2, "mode": "CRD"}
    assert "{alpha=0.01}" in str(graph)
    check_against_onnxruntime(model, graph, {"x": floats(2, 3), "x4": floats(1, 4, 2, 2)})


# -- shapes ---------------------------------------------------------------------------------------


def test_a_symbolic_batch_takes_the_shape_given():
    model = cnn(batch="N")
    graph = from_onnx(model, shapes={"x": (2, 3, 8, 8)})
    assert graph.type_of("x") == TensorType((2, 3, 8, 8), "float32")
    assert graph.type_of("y") == TensorType((2, 10), "float32")
    assert every_value_typed(graph)
    check_against_onnxruntime(model, graph, {"x": floats(2, 3, 8, 8)})


def test_an_unknown_dimension_is_named_with_its_symbol():
    with pytest.raises(LoomError, match=r"input x: dimension 0 \('N'\) of \[N, 3, 8, 8\]"):
        from_onnx(cnn(batch="N"))
    unnamed = cnn()
    unnamed.graph.input[0].type.tensor_type.shape.dim[2].Clear()
    with pytest.raises(LoomError, match=r"input x: dimension 2 of \[1, 3, \?, 8\]"):
        from_onnx(unnamed)
    no_rank = cnn()
    no_rank.graph.input[0].type.tensor_type.ClearField("shape")
    with pytest.raises(LoomError, match="input x: its rank is not known"):
        from_onnx(no_rank)
    assert from_onnx(no_rank, {"x": (1, 3, 8, 8)}).type_of("y").shape == (1, 10)


@pytest.mark.parametrize(
    "shapes, message",
    [
        ({"w": (4, 3, 3, 3)}, "shapes: w is an initializer \\(a constant\\), not a graph input"),
        ({"nope": (1,)}, "shapes: nope is not a graph input; the inputs are x"),
        ({"x": (2, 3, 8)}, r"has rank 3, but input x has rank 4 \(\[N, 3, 8, 8\]\)"),
        ({"x": (2, 4, 8, 8)}, "gives dimension 1 the size 4, but the model fixes it to 3"),
        ({"x": (2, -3, 8, 8)}, "must hold non-negative ints"),
        ({"x": (2.0, 3, 8, 8)}, "must hold non-negative ints"),
        ({"x": "2,3,8,8"}, "must be a sequence of ints"),
    ],
)
def test_shapes_that_do_not_fit_the_inputs_are_refused(shapes, message):
    with pytest.raises(LoomError, match=message):
        from_onnx(cnn(batch="N"), shapes=shapes)


def test_a_symbol_shared_by_inputs_takes_one_value():
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    model = make_model(nodes, [tensor("a", ["N", 4]), tensor("b", ["N", 1])], [out("y")])
    graph = from_onnx(model, shapes={"a": (3, 4)})
    assert graph.type_of("b") == TensorType((3, 1), "float32")
    with pytest.raises(LoomError, match="'N' is 3 in one input and 5 in input b"):
        from_onnx(model, shapes={"a": (3, 4), "b": (5, 1)})


# -- constants ------------------------------------------------------------------------------------


def test_constant_nodes_and_initializers_listed_as_inputs_are_constants():
    nodes = [
        helper.make_node("Constant", [], ["scale"], value_float=2.0),
        helper.make_node("Constant", [], ["shape"], value_ints=[3, 4]),
        helper.make_node("Constant", [], ["one"], value_int=1),
        helper.make_node(
            "Constant", [], ["offset"], value=helper.make_tensor("o", F, [4], [1, 2, 3, 4])
        ),
        helper.make_node("Mul", ["x", "scale"], ["m"]),
        helper.make_node("Add", ["m", "bias"], ["a"]),
        helper.make_node("Reshape", ["a", "shape"], ["r"]),
        helper.make_node("Add", ["r", "offset"], ["y"]),
    ]
    # as exporters for IR version 3 did: the initializer is also a graph input
    model = make_model(
        nodes,
        [tensor("x", [2, 6]), tensor("bias", [6])],
        [out("y")],
        [init("bias", floats(6))],
    )
    graph = from_onnx(model)
    assert graph.inputs == ("x",)
    assert set(graph.constants) == {"bias", "scale", "shape", "one", "offset"}
    assert graph.constants["scale"].dtype == np.float32 and graph.constants["scale"].shape == ()
    assert graph.constants["shape"].tolist() == [3, 4]
    assert graph.constants["one"].dtype == np.int64
    assert [n.op for n in graph.nodes] == ["Mul", "Add", "Reshape", "Add"]
    assert "%r: float32[3, 4] = Reshape(%a, @shape)" in str(graph)
    check_against_onnxruntime(model, graph, {"x": floats(2, 6)})


def test_a_shape_computed_from_the_input_shape_is_a_constant_to_be():
    # Reshape(x, Concat(Gather(Shape(x), 0), [-1])), as exporters write a flatten
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    initializers = [
        init("zero", np.array(0, np.int64)),
        init("axes", np.array([0], np.int64)),
        init("minus1", np.array([-1], np.int64)),
    ]
    model = make_model(nodes, [tensor("x", ["N", 3, 4])], [out("y")], initializers)
    graph = from_onnx(model, {"x": (2, 3, 4)})
    assert graph.type_of("y") == TensorType((2, 12), "float32")
    check_against_onnxruntime(model, graph, {"x": floats(2, 3, 4)})


# -- unsupported models ---------------------------------------------------------------------------


def three_unsupported():
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node(
            "Conv",
            ["r", "w"],
            ["c"],
            name="dilated_same",
            auto_pad="SAME_UPPER",
            dilations=[2, 2],
            kernel_shape=[3, 3],
        ),
        helper.make_node("FooBar", ["c"], ["f"], name="mystery"),
        helper.make_node("FusedGemm", ["f", "f"], ["g"], domain="com.microsoft"),
        helper.make_node("Relu", ["g"], ["y"]),
    ]
    return make_model(
        nodes,
        [tensor("x", [1, 2, 5, 5])],
        [out("y")],
        [init("w", floats(2, 2, 3, 3))],
        extra_opsets=[("com.microsoft", 1)],
    )


def test_every_unsupported_node_is_listed_in_one_error():
    with pytest.raises(UnsupportedModelError) as caught:
        from_onnx(three_unsupported())
    assert str(caught.value).splitlines() == [
        "3 of 5 nodes are not supported:",
        "  dilated_same (Conv): auto_pad=SAME_UPPER with dilations > 1 is not supported",
        "  mystery (FooBar): operator FooBar is not supported",
        "  com.microsoft.FusedGemm -> g: operator FusedGemm of domain com.microsoft is not "
        "supported",
    ]
    assert [(n.name, n.op) for n in caught.value.nodes] == [
        ("dilated_same", "Conv"),
        ("mystery", "FooBar"),
        ("", "com.microsoft.FusedGemm"),
    ]
    assert caught.value.total == 5


def test_unsupported_element_types_and_constants_are_listed():
    nodes = [
        helper.make_node("Cast", ["x"], ["b16"], name="to_bf16", to=TensorProto.BFLOAT16),
        helper.make_node("Cast", ["b16"], ["y"], name="back", to=F),
        helper.make_node("Constant", [], ["s"], name="text", value_string="hello"),
        helper.make_node("Identity", ["s"], ["s2"], name="copy"),
        helper.make_node("Add", ["x", "h"], ["z"], name="add_bf16"),
    ]
    model = make_model(
        nodes,
        [tensor("x", [2])],
        [out("y"), out("s2"), out("z")],
        [helper.make_tensor("h", TensorProto.BFLOAT16, [2], [1.0, 2.0])],
    )
    with pytest.raises(UnsupportedModelError) as caught:
        from_onnx(model)
    lines = str(caught.value).splitlines()
    # Cast's own check refuses the type first
    assert lines[1].startswith("  to_bf16 (Cast): to=16 is not a type loom has")
    assert lines[:1] + lines[2:] == [
        "5 of 5 nodes are not supported:",
        "  back (Cast): input b16 has element type BFLOAT16, which loom does not support",
        "  text (Constant): a constant given as value_string is not supported",
        "  copy (Identity): input s has element type STRING, which loom does not support",
        "  add_bf16 (Add): input h has element type BFLOAT16, which loom does not support",
    ]


def test_operator_domains_loom_does_not_know_are_refused_by_name():
    nodes = [
        helper.make_node("Normalizer", ["x"], ["n"], domain="ai.onnx.ml", norm="L1"),
        helper.make_node("MyOp", ["n"], ["y"], domain="my.company"),
    ]
    model = make_model(
        nodes,
        [tensor("x", [2, 3])],
        [out("y")],
        extra_opsets=[("ai.onnx.ml", 3), ("my.company", 1)],
    )
    with pytest.raises(
        LoomError, match=r"domains .*: ai.onnx.ml \(Normalizer\); my.company \(MyOp\)"
    ):
        from_onnx(model)


# -- opset conversion -----------------------------------------------------------------------------


def test_an_opset_13_model_is_converted_to_opset_21():
    # ReduceMean's axes and Squeeze's axes are attributes before opset 18 and 13: inputs after
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], name="mean", axes=[2, 3], keepdims=1),
        helper.make_node("Relu", ["m"], ["y"], name="relu"),
    ]
    model = make_model(nodes, [tensor("x", [1, 4, 3, 3])], [out("y")], opset=13)
    graph = from_onnx(model)
    mean = graph.nodes[0]
    assert mean.op == "ReduceMean" and "axes" not in mean.attrs
    assert graph.constants[mean.inputs[1]].tolist() == [2, 3]
    assert graph.type_of("y") == TensorType((1, 4, 1, 1), "float32")
    check_against_onnxruntime(model, graph, {"x": floats(1, 4, 3, 3)})

    # the default domain may be spelled "ai.onnx"
    squeeze = helper.make_node("Squeeze", ["x"], ["y"], axes=[1], domain="ai.onnx")
    model = make_model([squeeze], [tensor("x", [3, 1, 2])], [out("y")], opset=11)
    model.opset_import[0].domain = "ai.onnx"
    graph = from_onnx(model)
    (node,) = graph.nodes
    assert node.op == "Squeeze" and graph.constants[node.inputs[1]].tolist() == [1]
    check_against_onnxruntime(model, graph, {"x": floats(3, 1, 2)})


def test_a_model_the_converter_cannot_take_to_opset_21_names_both_opsets():
    # onnx 1.23 has no adapter taking GlobalMaxPool from opset 22 to 21
    nodes = [helper.make_node("GlobalMaxPool", ["x"], ["y"])]
    model = make_model(nodes, [tensor("x", [1, 2, 3, 3])], [out("y")], opset=22)
    with pytest.raises(
        LoomError,
        match=r"from opset 22 to opset 21.*No Adapter From Version \$22 for GlobalMaxPool",
    ):
        from_onnx(model)


# -- subgraphs and outputs ------------------------------------------------------------------------


def _fake_operator(name, infer):
    def evaluate(node, inputs):
        raise NotImplementedError(f"{name} is a test operator with types only")

    register(
        Operator(name, Pattern.OPAQUE, infer, evaluate, attrs={"then_branch", "else_branch"}),
        replace=True,
    )


def test_an_if_branch_is_a_graph_whose_inputs_are_the_outer_values_it_reads():
    def infer(node, types, consts):
        branch = node.attr("then_branch")
        return [branch.type_of(v) for v in branch.outputs]

    _fake_operator("If", infer)
    then_branch = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["t"])], "then", [], [tensor("t", [2])]
    )
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])], "else", [], [tensor("e", [2])]
    )
    nodes = [
        helper.make_node("If", ["cond"], ["y"], then_branch=then_branch, else_branch=else_branch)
    ]
    model = make_model(
        nodes,
        [tensor("cond", [], TensorProto.BOOL), tensor("x", [2])],
        [out("y")],
        [init("b", floats(2))],
    )
    graph = from_onnx(model)
    (node,) = graph.nodes
    assert node.inputs == ("cond",)
    then_graph, else_graph = node.attr("then_branch"), node.attr("else_branch")
    assert then_graph.inputs == ("x", "b") and else_graph.inputs == ("x",)
    assert then_graph.type_of("x") == TensorType((2,), "float32")
    assert then_graph.type_of("t") == TensorType((2,), "float32")
    assert graph.type_of("y") == TensorType((2,), "float32")
    assert "then_branch=graph then_branch(%x: float32[2], %b: float32[2])" in str(graph)


def test_an_omitted_optional_output_gets_a_name_and_omitted_trailing_ones_go():
    def infer(node, types, consts):
        k = int(consts[1][0])
        return [TensorType((k,), types[0].dtype), TensorType((k,), "int64")]

    register(
        Operator("TopK", Pattern.OPAQUE, infer, lambda n, i: [], attrs={"axis"}),
        replace=True,
    )
    nodes = [
        helper.make_node("TopK", ["x", "k"], ["", "idx"], name="top"),
        helper.make_node("Dropout", ["x"], ["d", ""], name="drop"),
    ]
    model = make_model(
        nodes,
        [tensor("x", [5])],
        [out("idx"), out("d")],
        [init("k", np.array([2], np.int64))],
    )
    graph = from_onnx(model)
    top, drop = graph.nodes
    assert top.outputs == ("top.unused0", "idx") and drop.outputs == ("d",)
    assert graph.type_of("top.unused0") == TensorType((2,), "float32")


# -- files and bad input --------------------------------------------------------------------------


@pytest.mark.parametrize("content", [b"hello, not a model\n", b"", bytes(range(256))])
def test_a_file_that_is_not_an_onnx_model_is_refused_by_path(tmp_path, content):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(LoomError, match=re.escape(str(path))):
        from_onnx(path)


def test_a_missing_file_or_a_directory_is_refused_by_path(tmp_path):
    with pytest.raises(LoomError, match=f"cannot read the ONNX model {re.escape(str(tmp_path))}"):
        from_onnx(tmp_path / "missing.onnx")
    with pytest.raises(LoomError, match=re.escape(str(tmp_path))):
        from_onnx(tmp_path)
    with pytest.raises(TypeError, match=r"a path or an onnx\.ModelProto, got int"):
        from_onnx(42)


def test_external_data_is_read_from_a_path_and_refused_in_a_model_without_it(tmp_path):
    model = cnn()
    w = numpy_helper.to_array(model.graph.initializer[0])
    path = tmp_path / "cnn.onnx"
    onnx.save(model, path, save_as_external_data=True, size_threshold=0, location="cnn.data")
    np.testing.assert_array_equal(from_onnx(path).constants["w"], w)
    unread = onnx.load(path, load_external_data=False)
    with pytest.raises(LoomError, match="initializer w is stored in an external file"):
        from_onnx(unread)


def test_a_declared_type_onnx_contradicts_is_refused():
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    model = make_model(nodes, [tensor("x", [1, 3])], [tensor("y", [5, 3])])
    with pytest.raises(LoomError, match="onnx's shape inference refuses the model"):
        from_onnx(model)


def test_without_onnx_the_importer_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(onnx_frontend, "onnx", None)
    with pytest.raises(LoomError, match="pip install onnx"):
        from_onnx("model.onnx")


def test_the_graph_nodes_are_loom_nodes():
    graph = from_onnx(cnn())
    assert all(isinstance(n, Node) for n in graph.nodes)


def test_a_value_read_before_it_is_defined_or_defined_twice_is_refused():
    nodes = [helper.make_node("Relu", ["z"], ["y"], name="early")]
    model = make_model(nodes, [tensor("x", [2])], [out("y")])
    with pytest.raises(LoomError, match="node early reads z, which no graph input"):
        from_onnx(model)
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])]
    model = make_model(nodes, [tensor("x", [2])], [out("y")])
    with pytest.raises(LoomError, match="value y is defined twice"):
        from_onnx(model)


@pytest.mark.parametrize("opset", [11, 13, 18, 22, 24])
def test_the_cnn_at_other_opsets_imports_as_at_opset_21(opset):
    model = cnn()
    model.opset_import[0].version = opset
    assert str(from_onnx(model)) == str(from_onnx(cnn()))


def test_nodes_of_a_subgraph_are_listed_with_the_others():
    branch = helper.make_graph(
        [helper.make_node("FooBar", ["x"], ["t"], name="inner")], "then", [], [out("t")]
    )
    nodes = [
        helper.make_node("If", ["cond"], ["y"], name="if", then_branch=branch, else_branch=branch)
    ]
    model = make_model(nodes, [tensor("cond", [], TensorProto.BOOL), tensor("x", [2])], [out("y")])
    with pytest.raises(UnsupportedModelError) as caught:
        from_onnx(model)
    assert str(caught.value).splitlines() == [
        "3 of 3 nodes are not supported:",
        "  inner (FooBar) in if.else_branch: operator FooBar is not supported",
        "  inner (FooBar) in if.then_branch: operator FooBar is not supported",
        "  if (If): input 0 (cond) must be a constant",
    ]


LIGHT_MODELS = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


@pytest.mark.parametrize("name", ["squeezenet", "resnet50", "shufflenet"])
def test_onnx_light_models_at_opset_9_import_with_onnxruntime_types(name):
    # onnx's own test models: IR version 3 (initializers listed as inputs), opset 9
    model = onnx.load(LIGHT_MODELS / f"light_{name}.onnx")
    graph = from_onnx(model)
    assert every_value_typed(graph)
    (x,) = graph.inputs
    want = ort_run(model, {x: floats(*graph.type_of(x).shape)}, every_value=True)
    assert {k: graph.type_of(k) for k in want} == {k: TensorType.of(v) for k, v in want.items()}


def test_an_operator_newer_than_opset_21_is_named_when_conversion_fails():
    nodes = [helper.make_node("RMSNormalization", ["x", "scale"], ["y"], axis=-1)]
    model = make_model(
        nodes, [tensor("x", [2, 4])], [out("y")], [init("scale", floats(4))], opset=23
    )
    with pytest.raises(
        LoomError, match=r"from opset 23 to opset 21.*ONNX added RMSNormalization after opset 21"
    ):
        from_onnx(model)


def test_the_unsupported_model_error_keeps_its_nodes_through_pickling():
    with pytest.raises(UnsupportedModelError) as caught:
        from_onnx(three_unsupported())
    copy = pickle.loads(pickle.dumps(caught.value))
    assert str(copy) == str(caught.value) and copy.nodes == caught.value.nodes


def test_a_node_whose_outputs_are_all_omitted_is_left_out():
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], [""])]
    model = make_model(nodes, [tensor("x", [2])], [out("y")])
    assert [n.op for n in from_onnx(model).nodes] == ["Relu"]
