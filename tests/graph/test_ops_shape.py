"""The shape and index operators (loom/graph/ops/shape.py) against onnxruntime: infer, evaluate
and the compiled compute, for every attribute value loom supports."""

import numpy as np
import pytest
from onnx import numpy_helper

import loom
import loom.graph.ops.shape  # registers the operators before any test runs
from loom import te
from loom.graph.ir import Node, TensorType
from loom.graph.ops import OPERATORS, unsupported
from tests.graph import opcheck
from tests.graph.opcheck import check_op

RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float32):
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return RNG.integers(0, 2, shape).astype(bool)
    return RNG.integers(-50, 50, shape).astype(dtype)


def ints(*values, dtype=np.int64):
    return np.array(values, dtype=dtype)


# -- Reshape, Flatten, Transpose, Squeeze, Unsqueeze -----------------------------------------------


@pytest.mark.parametrize(
    "shape, target, attrs, dtype",
    [
        ((2, 3, 4), (0, -1, 2), {}, np.float32),
        ((6, 4), (24,), {}, np.int64),
        ((2, 3, 4), (2, 1, 3, 4), {}, np.float32),
        ((1, 6, 1), (3, 2), {}, np.int32),
        ((4, 6), (2, 2, 2, 3), {"allowzero": 1}, np.float32),
        ((2, 3, 4), (3, 8), {}, np.float32),
        ((6, 4), (2, 12), {}, np.float32),
        ((2, 3, 4), (-1,), {}, bool),
        ((), (1, 1), {}, np.float32),
        ((1, 1), (), {}, np.float32),
    ],
)
def test_reshape(shape, target, attrs, dtype):
    check_op("Reshape", [rand(*shape, dtype=dtype), ints(*target)], attrs, constant=(1,))


def test_reshape_allowzero_keeps_a_zero():
    check_op("Reshape", [rand(0, 3), ints(3, 0)], {"allowzero": 1}, constant=(1,), compiled=False)


def test_reshape_refuses_bad_shapes_and_runtime_shapes():
    op = OPERATORS.get("Reshape")
    node = Node("Reshape", ["x", "s"], ["y"])
    x = TensorType((2, 3), "float32")
    with pytest.raises(loom.LoomError, match="more than one -1"):
        op.infer(node, [x, TensorType((2,), "int64")], [None, ints(-1, -1)])
    with pytest.raises(loom.LoomError, match="cannot reshape"):
        op.infer(node, [x, TensorType((1,), "int64")], [None, ints(5)])
    assert "must be a constant" in unsupported(node, constant=lambda v: False)
    assert unsupported(node, constant=lambda v: v == "s") is None


@pytest.mark.parametrize("axis", [0, 1, -1, 3])
def test_flatten(axis):
    check_op("Flatten", [rand(2, 3, 4)], {"axis": axis})


@pytest.mark.parametrize(
    "shape, perm, dtype",
    [
        ((2, 3, 4), None, np.float32),
        ((2, 3, 4), (1, 2, 0), np.int64),
        ((2, 3, 4, 5), (0, 2, 3, 1), np.int8),
        ((5,), (0,), np.float32),
    ],
)
def test_transpose(shape, perm, dtype):
    check_op("Transpose", [rand(*shape, dtype=dtype)], {} if perm is None else {"perm": perm})


@pytest.mark.parametrize(
    "shape, axes", [((1, 3, 1, 4), (0, -2)), ((1, 3, 1, 4), None), ((3, 1), (1,)), ((1,), None)]
)
def test_squeeze(shape, axes):
    if axes is None:
        check_op("Squeeze", [rand(*shape)])
    else:
        check_op("Squeeze", [rand(*shape), ints(*axes)], constant=(1,))


def test_squeeze_refuses_an_axis_that_is_not_one():
    op = OPERATORS.get("Squeeze")
    node = Node("Squeeze", ["x", "a"], ["y"])
    with pytest.raises(loom.LoomError, match="cannot squeeze axis 1"):
        op.infer(node, [TensorType((1, 3), "float32"), None], [None, ints(1)])


@pytest.mark.parametrize(
    "shape, axes", [((3, 4), (0,)), ((3, 4), (-1, 1)), ((), (0, 1)), ((2, 3), (3, 0))]
)
def test_unsqueeze(shape, axes):
    check_op("Unsqueeze", [rand(*shape, dtype=np.int32), ints(*axes)], constant=(1,))


# -- Concat, Split ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shapes, axis, dtype",
    [
        (((2, 3, 4), (2, 1, 4), (2, 2, 4)), -2, np.float32),
        (((1, 3), (4, 3)), 0, np.int64),
        (((2, 2), (2, 3), (2, 1), (2, 1)), 1, bool),
        (((5,),), 0, np.float32),
    ],
)
def test_concat(shapes, axis, dtype):
    check_op("Concat", [rand(*s, dtype=dtype) for s in shapes], {"axis": axis})


@pytest.mark.parametrize(
    "shape, split, attrs, n",
    [
        ((2, 6), (1, 5), {"axis": 1}, 2),
        ((2, 6, 3), (2, 2, 2), {"axis": -2}, 3),
        ((7, 2), None, {"num_outputs": 3}, 3),
        ((6, 2), None, {"num_outputs": 2}, 2),
    ],
)
def test_split(shape, split, attrs, n):
    x = rand(*shape)
    if split is None:
        check_op("Split", [x], attrs, n_outputs=n)
    else:
        check_op("Split", [x, ints(*split)], attrs, constant=(1,), n_outputs=n)


def test_split_refuses_sizes_that_do_not_add_up():
    op = OPERATORS.get("Split")
    node = Node("Split", ["x", "s"], ["a", "b"])
    with pytest.raises(loom.LoomError, match="do not cut"):
        op.infer(node, [TensorType((5,), "float32"), None], [None, ints(2, 2)])


# -- Slice -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "start, end, step",
    [
        (-100, -200, -1),
        (100, -100, -1),
        (5, -7, -1),
        (-1, -7, -2),
        (3, 100, 2),
        (10, 0, -3),
        (-7, 10, 1),
        (1, -1, 1),
        (2**62, -(2**62), -2),
    ],
)
def test_slice_clamps_as_onnx(start, end, step):
    check_op(
        "Slice",
        [rand(6, 2), ints(start), ints(end), ints(0), ints(step)],
        constant=(1, 2, 3, 4),
    )


def test_slice_to_nothing():
    for start, end, step in ((2, -100, 1), (-100, 3, -1)):
        inputs = [rand(6), ints(start), ints(end), ints(0), ints(step)]
        check_op("Slice", inputs, constant=(1, 2, 3, 4), compiled=False)


@pytest.mark.parametrize(
    "shape, starts, ends, axes, steps, dtype",
    [
        ((4, 5, 6), (1, -4), (3, 100), (0, 2), None, np.float32),
        ((4, 5, 6), (0, 1), (-1, 4), None, None, np.int64),
        ((4, 5, 6), (-1, 4, 0), (-100, 0, 6), (-1, 1, 0), (-2, -1, 3), np.int32),
        ((3, 4), (1,), (4,), (-1,), (2,), np.float32),
    ],
)
def test_slice(shape, starts, ends, axes, steps, dtype):
    inputs = [rand(*shape, dtype=dtype), ints(*starts), ints(*ends)]
    inputs.append(None if axes is None else ints(*axes))
    if steps is not None:
        inputs.append(ints(*steps))
    check_op("Slice", inputs, constant=(1, 2, 3, 4))


# -- Gather, GatherND, GatherElements --------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, indices, axis, constant",
    [
        ((5, 3), ints(0, -1, 3, -5), 0, ()),
        ((2, 5, 3), ints([0, -1], [2, 4], dtype=np.int32), 1, ()),
        ((2, 5, 3), ints([0, -1], [2, -3]), -1, ()),
        ((2, 5, 3), np.array(-2, np.int64), 1, ()),
        ((2, 5, 3), np.array(-2, np.int64), 1, (1,)),
        ((4, 3), ints(1, 2, 3), 0, (1,)),
        ((4, 3), ints([3, 0, -1], [1, 1, 2]), -2, (1,)),
        ((6,), ints(5, 0, 2, -3, 1), 0, (1,)),
    ],
)
def test_gather(shape, indices, axis, constant):
    check_op("Gather", [rand(*shape), indices], {"axis": axis}, constant=constant)


def test_gather_out_of_range_is_an_error():
    op = OPERATORS.get("Gather")
    node = Node("Gather", ["x", "i"], ["y"])
    with pytest.raises(loom.LoomError, match="out of range"):
        op.evaluate(node, [rand(3), ints(3)])
    # at run time, the kernel's bounds check
    x, i = te.placeholder((3, 2), name="x"), te.placeholder((2,), "int64", name="i")
    (y,) = op.compute(node, [x, i], [None, None], [TensorType((2, 2), "float32")])
    f = loom.build(te.create_schedule(y.op), [x, i, y], target="llvm", name="gather")
    data, out = rand(3, 2), np.zeros((2, 2), np.float32)
    f(data, ints(0, -3), out)
    np.testing.assert_array_equal(out, data[[0, 0]])
    with pytest.raises(loom.LoomError, match="outside"):
        f(data, ints(0, 3), out)


@pytest.mark.parametrize(
    "data_shape, indices, batch_dims, constant",
    [
        ((3, 4), ints([0, 1], [-1, -2], [2, 3]), 0, ()),
        ((3, 4, 2), ints([1], [-1]), 0, ()),
        ((2, 3, 4), ints([[1, 0], [2, 3]], [[0, -1], [1, 1]]), 1, ()),
        ((2, 3, 4), ints([1], [0]), 1, ()),
        ((3, 4), ints([0, 1], [-1, -2]), 0, (1,)),
    ],
)
def test_gather_nd(data_shape, indices, batch_dims, constant):
    check_op(
        "GatherND", [rand(*data_shape), indices], {"batch_dims": batch_dims}, constant=constant
    )


@pytest.mark.parametrize(
    "data_shape, indices, axis, constant",
    [
        ((3, 4), ints([0, -1, 2, 1], [2, 2, -3, 0]), 0, ()),
        ((3, 4), ints([0, -1], [3, 1], [2, -4]), -1, ()),
        ((2, 3, 2), ints([[0, 1]], [[2, -1]]), 1, (1,)),
    ],
)
def test_gather_elements(data_shape, indices, axis, constant):
    check_op("GatherElements", [rand(*data_shape), indices], {"axis": axis}, constant=constant)


# -- Expand, Tile ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, target", [((3, 1), (2, 3, 4)), ((3, 4), (2, 1, 1)), ((1,), (5,)), ((), (2, 2))]
)
def test_expand(shape, target):
    check_op("Expand", [rand(*shape), ints(*target)], constant=(1,))


@pytest.mark.parametrize("shape, repeats", [((2, 3), (2, 3)), ((2, 1, 3), (1, 4, 2)), ((3,), (1,))])
def test_tile(shape, repeats):
    check_op("Tile", [rand(*shape, dtype=np.int64), ints(*repeats)], constant=(1,))


# -- Pad -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [(1, 0, 2, 0, 2, 1), (1, -1, 0, -1, 2, 2)])
def test_pad_modes(mode, pads):
    check_op("Pad", [rand(3, 4, 5), ints(*pads)], {"mode": mode}, constant=(1,))


@pytest.mark.parametrize("pads", [(2, -1), (-1, 2), (-2, 3), (4, 0)])
@pytest.mark.parametrize("mode", ["edge", "wrap"])
def test_pad_crops_before_it_pads(pads, mode):
    check_op("Pad", [rand(5), ints(*pads)], {"mode": mode}, constant=(1,))


def test_pad_constant_value_and_axes():
    x = rand(2, 3, 4, dtype=np.int32)
    value = np.array(7, np.int32)
    check_op("Pad", [x, ints(1, 2, 0, 3), value, ints(-1, 0)], constant=(1, 2, 3))
    # a constant_value computed at run time
    check_op("Pad", [x, ints(1, 2, 0, 3), value, ints(-1, 0)], constant=(1, 3))
    check_op("Pad", [rand(2, 3), ints(1, 1, 1, 1), np.array([2.5], np.float32)], constant=(1,))


def test_pad_refuses():
    node = Node("Pad", ["x", "p"], ["y"], {"mode": "mirror"})
    assert "mode=mirror not supported" in unsupported(node, constant=lambda v: True)
    node = Node("Pad", ["x", "p"], ["y"], {"mode": "reflect"})
    assert "must be a constant" in unsupported(node, constant=lambda v: v == "x")
    with pytest.raises(loom.LoomError, match="reflect"):
        OPERATORS.get("Pad").infer(node, [TensorType((5,), "float32"), None], [None, ints(-2, 3)])


# -- Resize ----------------------------------------------------------------------------------------

COORDINATES = [
    "half_pixel",
    "asymmetric",
    "align_corners",
    "pytorch_half_pixel",
    "half_pixel_symmetric",
    "tf_half_pixel_for_nn",
]


def resize(x, scales=None, sizes=None, constant=(2,), **attrs):
    scales = None if scales is None else np.array(scales, np.float32)
    sizes = None if sizes is None else ints(*sizes)
    inputs = [x, None, scales] if sizes is None else [x, None, scales, sizes]
    check_op("Resize", inputs, attrs, constant=constant)


@pytest.mark.parametrize(
    "nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
)
@pytest.mark.parametrize("coordinates", COORDINATES)
def test_resize_nearest(coordinates, nearest_mode):
    resize(
        rand(1, 2, 5, 7),
        scales=(1, 1, 0.5, 1.7),
        mode="nearest",
        coordinate_transformation_mode=coordinates,
        nearest_mode=nearest_mode,
    )


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil"])
@pytest.mark.parametrize("coordinates", ["half_pixel", "asymmetric", "align_corners"])
def test_resize_nearest_ties(coordinates, nearest_mode):
    resize(
        rand(1, 1, 6, 4, dtype=np.int8),
        scales=(1, 1, 2.5, 0.5),
        mode="nearest",
        coordinate_transformation_mode=coordinates,
        nearest_mode=nearest_mode,
    )


@pytest.mark.parametrize("coordinates", COORDINATES[:5])
@pytest.mark.parametrize("scales", [(1, 1, 2, 2), (1, 1, 0.6, 1.5), (1, 1, 3, 0.5)])
def test_resize_linear(coordinates, scales):
    resize(
        rand(1, 2, 5, 7), scales=scales, mode="linear", coordinate_transformation_mode=coordinates
    )


def test_resize_by_sizes_and_axes():
    x = rand(1, 3, 4, 6)
    resize(x, sizes=(1, 3, 7, 3), constant=(2, 3), mode="nearest")
    resize(x, sizes=(7, 3), constant=(3,), mode="linear", axes=(2, 3))
    resize(x, scales=(2.0, 0.5), mode="linear", axes=(-2, -1))
    resize(rand(2, 8, 8, 3), scales=(1, 0.5, 2, 1), mode="linear")  # NHWC
    resize(
        rand(3, 5), scales=(2, 1.5), mode="linear", coordinate_transformation_mode="align_corners"
    )
    resize(
        rand(1, 2, 4, 4, dtype=np.uint8),
        scales=(1, 1, 2, 2),
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    resize(rand(1, 1, 9, 10), sizes=(1, 1, 3, 4), constant=(2, 3), mode="nearest")
    resize(rand(1, 1, 9, 10), sizes=(1, 1, 3, 4), constant=(2, 3), mode="linear")


def test_resize_float16():
    x = rand(1, 2, 3, 5, dtype=np.float16)
    check_op(
        "Resize",
        [x, None, np.array((1, 1, 2, 1.5), np.float32)],
        {"mode": "nearest"},
        constant=(2,),
    )
    check_op(
        "Resize",
        [x, None, np.array((1, 1, 2, 1.5), np.float32)],
        {"mode": "linear"},
        constant=(2,),
        rtol=2e-3,
        atol=2e-3,
    )


def test_resize_refuses():
    def reason(**attrs):
        node = Node("Resize", ["x", "", "s"], ["y"], attrs)
        return unsupported(node, constant=lambda v: v == "s")

    assert reason(mode="linear") is None
    assert "mode=cubic" in reason(mode="cubic")
    assert "antialias" in reason(mode="linear", antialias=1)
    assert "exclude_outside" in reason(exclude_outside=1)
    assert "keep_aspect_ratio_policy" in reason(keep_aspect_ratio_policy="not_larger")
    assert "tf_crop_and_resize" in reason(coordinate_transformation_mode="tf_crop_and_resize")
    assert "nearest_mode" in reason(nearest_mode="simple")
    node = Node("Resize", ["x", "", "s"], ["y"], {"mode": "linear"})
    with pytest.raises(loom.LoomError, match="float"):
        OPERATORS.get("Resize").infer(
            node, [TensorType((1, 4), "int32"), None, None], [None, None, np.ones(2, np.float32)]
        )


# -- Range, Shape, Size, ConstantOfShape -----------------------------------------------------------


@pytest.mark.parametrize(
    "start, limit, delta, dtype",
    [
        (0, 10, 3, np.int64),
        (5, -4, -2, np.int32),
        (0.1, 10.0, 0.1, np.float32),
        (-1.5, 2.0, 0.25, np.float32),
        (3.0, 1.0, -0.3, np.float64),
    ],
)
def test_range(start, limit, delta, dtype):
    inputs = [np.array(v, dtype) for v in (start, limit, delta)]
    check_op("Range", inputs, constant=(0, 1, 2))


def test_range_empty():
    inputs = [np.array(v, np.int64) for v in (5, 1, 1)]
    check_op("Range", inputs, constant=(0, 1, 2), compiled=False)


@pytest.mark.parametrize(
    "attrs", [{}, {"start": 1}, {"end": -1}, {"start": -2, "end": 10}, {"start": 3, "end": 1}]
)
def test_shape(attrs):
    check_op("Shape", [rand(2, 3, 4)], attrs)
    assert OPERATORS.get("Shape").compute is None


def test_size():
    check_op("Size", [rand(2, 3, 4)])
    check_op("Size", [rand()])


@pytest.fixture
def tensor_attributes(monkeypatch):
    """check_op with numpy arrays as ONNX tensor attributes (opcheck passes them as lists)."""
    plain = opcheck.onnxruntime_outputs

    def with_tensors(op, inputs, attrs, *args, **kwargs):
        attrs = {
            k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v
            for k, v in attrs.items()
        }
        return plain(op, inputs, attrs, *args, **kwargs)

    monkeypatch.setattr(opcheck, "onnxruntime_outputs", with_tensors)


@pytest.mark.parametrize(
    "shape, value",
    [
        ((2, 3), None),
        ((4,), np.array([7], np.int64)),
        ((2, 1, 2), np.array([-1.5], np.float32)),
        ((), np.array([3], np.int32)),
        ((3,), np.array([True])),
    ],
)
def test_constant_of_shape(tensor_attributes, shape, value):
    attrs = {} if value is None else {"value": value}
    check_op("ConstantOfShape", [ints(*shape)], attrs, constant=(0,))


# -- Trilu, DepthToSpace, SpaceToDepth, OneHot -----------------------------------------------------


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 1, -2])
def test_trilu(upper, k):
    x = rand(2, 4, 5)
    if k is None:
        check_op("Trilu", [x], {"upper": upper})
    else:
        check_op("Trilu", [x, np.array(k, np.int64)], {"upper": upper}, constant=(1,))


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    check_op("DepthToSpace", [rand(2, 8, 3, 2)], {"blocksize": 2, "mode": mode})


def test_space_to_depth():
    check_op("SpaceToDepth", [rand(2, 3, 4, 6)], {"blocksize": 2})
    node = Node("DepthToSpace", ["x"], ["y"], {"blocksize": 2, "mode": "XYZ"})
    assert "mode=XYZ" in unsupported(node)


@pytest.mark.parametrize(
    "indices, depth, values, axis, constant",
    [
        (ints([0, 3, -1], [2, -4, 1]), np.int64, np.int64, -1, (1,)),
        (ints(1, -2, 4, 0, dtype=np.int32), np.int32, np.float32, 0, (1,)),
        (
            np.array([[1.0, 2.7, 4.0], [-1.0, 0.0, -1.3]], np.float32),
            np.float32,
            np.float32,
            1,
            (1, 2),
        ),
        (ints([2], [-5]), np.int64, np.float32, -2, (1, 2)),
    ],
)
def test_one_hot(indices, depth, values, axis, constant):
    inputs = [indices, np.array(5, depth), np.array([-1, 5], values)]
    check_op("OneHot", inputs, {"axis": axis}, constant=constant)


# -- support -------------------------------------------------------------------------------------


def test_unknown_attribute_is_unsupported():
    node = Node("Transpose", ["x"], ["y"], {"perm": (1, 0), "conjugate": 1})
    assert unsupported(node) == "Transpose: attribute conjugate not supported"


def test_every_operator_is_registered():
    names = {
        "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice",
        "Gather", "GatherND", "GatherElements", "Expand", "Tile", "Pad", "Resize", "Range",
        "Shape", "Size", "ConstantOfShape", "Trilu", "DepthToSpace", "SpaceToDepth", "OneHot",
    }  # fmt: skip
    for name in names:
        op = OPERATORS.get(name)
        assert op.doc, name
        assert (op.compute is None) == (name in ("Shape", "Size")), name
