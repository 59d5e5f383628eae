"""The element-wise and broadcasting operators (loom/graph/ops/elementwise.py), each checked
against onnxruntime by `check_op`: inferred types, numpy evaluation and the compiled kernel."""

import re

import numpy as np
import pytest

from loom.errors import LoomError
from loom.graph.ir import Node, TensorType
from loom.graph.ops import OPERATORS, Pattern, unsupported
from tests.graph.opcheck import check_op

RNG = np.random.default_rng(7)

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 30.0, -30.0, np.inf, -np.inf, np.nan])
"""Zeros, signs, large values, infinities and NaN (float64; each test casts it)."""

BROADCASTS = [
    ((2, 3, 4), (2, 3, 4)),
    ((2, 3, 4), (3, 1)),
    ((2, 3, 4), ()),
    ((), ()),
    ((3, 1), (1, 4)),
]


def floats(shape, dtype=np.float32, low=-3.0, high=3.0) -> np.ndarray:
    return np.asarray(RNG.uniform(low, high, shape), dtype=dtype)


def ints(shape, dtype=np.int32, low=-20, high=20) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(max(low, info.min), min(high, info.max), shape, endpoint=True).astype(dtype)


def nonzero_ints(shape, dtype=np.int32, low=-7, high=7) -> np.ndarray:
    x = ints(shape, dtype, low, high)
    return np.where(x == 0, np.asarray(1, dtype), x).astype(dtype)


def bools(shape) -> np.ndarray:
    return np.asarray(RNG.integers(0, 2, shape).astype(bool))


# -- unary ----------------------------------------------------------------------------------------

FLOAT_UNARY = [
    "Relu", "Sigmoid", "HardSwish", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Neg", "Abs",
    "Floor", "Ceil", "Erf", "Softplus", "Sign", "IsNaN", "IsInf", "Identity", "LeakyRelu",
    "HardSigmoid", "Gelu",
]  # fmt: skip


@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_float_unary_ops(op):
    check_op(op, [floats((2, 3, 4))])
    check_op(op, [SPECIAL.astype(np.float32)])
    check_op(op, [np.asarray(-1.25, np.float32)])


# not Sigmoid: onnxruntime's float64 Sigmoid is 1e-3 off at -30 (9.348e-14 for 9.3576e-14); not
# Sign: onnxruntime's float16 Sign of NaN is 0 (its float32 and float64 Sign give NaN)
@pytest.mark.parametrize("op", ["Exp", "Sqrt", "Neg", "IsNaN", "Floor", "Abs"])
def test_unary_ops_of_other_float_widths(op):
    check_op(op, [SPECIAL], rtol=1e-12, atol=0)
    check_op(op, [SPECIAL.astype(np.float16)], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(
    "op, dtype",
    [
        ("Relu", np.int8), ("Relu", np.int32), ("Neg", np.int8), ("Neg", np.int64),
        ("Abs", np.int16), ("Abs", np.uint32), ("Sign", np.int64), ("Sign", np.uint8),
        ("BitwiseNot", np.int8), ("BitwiseNot", np.uint64), ("Identity", np.int64),
    ],
)  # fmt: skip
def test_integer_unary_ops(op, dtype):
    info = np.iinfo(dtype)
    extremes = np.array([info.min, info.min + 1, -1 if info.min else 1, 0, info.max], dtype)
    check_op(op, [np.concatenate([ints((7,), dtype), extremes])])


@pytest.mark.parametrize("op", ["Not", "Identity"])
def test_bool_unary_ops(op):
    check_op(op, [bools((3, 4))])
    check_op(op, [np.asarray(True)])


@pytest.mark.parametrize(
    "op, attrs",
    [
        ("LeakyRelu", {"alpha": 0.3}),
        ("HardSigmoid", {"alpha": 0.4, "beta": 0.25}),
        ("Gelu", {"approximate": "tanh"}),
        ("Gelu", {"approximate": "none"}),
        ("IsInf", {"detect_negative": 0}),
        ("IsInf", {"detect_positive": 0}),
        ("IsInf", {"detect_negative": 0, "detect_positive": 0}),
    ],
)
def test_unary_attributes(op, attrs):
    check_op(op, [np.concatenate([floats((5,)), SPECIAL.astype(np.float32)])], attrs)


# -- binary and variadic --------------------------------------------------------------------------

FLOAT_BINARY = [
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Equal", "Greater",
    "GreaterOrEqual", "Less", "LessOrEqual",
]  # fmt: skip


@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
@pytest.mark.parametrize("op", FLOAT_BINARY)
def test_float_binary_ops_broadcast(op, shapes):
    a, b = floats(shapes[0]), floats(shapes[1])
    if op == "Pow":
        a = np.asarray(np.abs(a) + np.float32(0.1))
    check_op(op, [a, b])


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "Less", "Equal"])
def test_float_binary_ops_special_values(op):
    a = np.repeat(SPECIAL, len(SPECIAL)).astype(np.float32)
    b = np.tile(SPECIAL, len(SPECIAL)).astype(np.float32)
    check_op(op, [a, b])


@pytest.mark.parametrize(
    "op, dtype",
    [
        ("Add", np.int32), ("Add", np.uint8), ("Sub", np.int64), ("Sub", np.uint16),
        ("Mul", np.int8), ("Mul", np.int64), ("Max", np.int8), ("Min", np.uint32),
        ("Greater", np.int64), ("LessOrEqual", np.uint8), ("Equal", np.int16),
        ("BitwiseAnd", np.int32), ("BitwiseOr", np.uint8), ("BitwiseXor", np.int64),
    ],
)  # fmt: skip
def test_integer_binary_ops(op, dtype):
    check_op(op, [ints((2, 3, 4), dtype, -100, 100), ints((3, 1), dtype, -100, 100)])
    check_op(op, [ints((5,), dtype, -100, 100), ints((), dtype, -100, 100)])


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_integer_div_truncates_toward_zero(dtype):
    a = ints((6, 5), dtype, -40, 40)
    b = nonzero_ints((5,), dtype, -7, 7)
    check_op("Div", [a, b])
    if np.iinfo(dtype).min < 0:
        low = np.iinfo(dtype).min
        check_op(
            "Div",
            [np.array([7, -7, 7, -7, low, low], dtype), np.array([2, 2, -2, -2, 3, -3], dtype)],
        )


def test_integer_division_by_zero_is_an_error():
    node = Node("Div", ["a", "b"], ["y"])
    with pytest.raises(LoomError, match="division by zero"):
        OPERATORS.get("Div").evaluate(
            node, [np.array([1, 2], np.int32), np.array([1, 0], np.int32)]
        )
    node = Node("Mod", ["a", "b"], ["y"], {"fmod": 1})
    with pytest.raises(LoomError, match="division by zero"):
        OPERATORS.get("Mod").evaluate(node, [np.array([1], np.int64), np.array([0], np.int64)])


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16])
def test_integer_mod(dtype, fmod):
    check_op(
        "Mod", [ints((4, 6), dtype, -50, 50), nonzero_ints((6,), dtype, -9, 9)], {"fmod": fmod}
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_mod_is_c_fmod(dtype):
    a = np.repeat(SPECIAL, len(SPECIAL)).astype(dtype)
    b = np.tile(SPECIAL, len(SPECIAL)).astype(dtype)
    check_op("Mod", [a, b], {"fmod": 1})
    check_op("Mod", [floats((2, 3), dtype, -9, 9), np.asarray(-2.5, dtype)], {"fmod": 1})


@pytest.mark.parametrize(
    "base, exponent",
    [
        (np.float32, np.float32), (np.float32, np.int64), (np.float32, np.int32),
        (np.float32, np.float64), (np.float64, np.float64), (np.int32, np.int32),
        (np.int64, np.int64), (np.int64, np.float32),
    ],
)  # fmt: skip
def test_pow_of_base_and_exponent_types(base, exponent):
    if np.dtype(base).kind == "f":
        x = np.array([2.0, -2.0, 0.5, -0.5, 0.0, 3.0, -3.0, 1.5], base)
    else:
        x = np.array([2, -2, 1, -1, 0, 3, -3, 5], base)
    y = np.array([[3], [2], [0], [1]], exponent)
    check_op("Pow", [x, y])
    if np.dtype(exponent).kind == "f":
        fractional = np.array([0.5, -1.5, 2.25], exponent)
        check_op("Pow", [np.abs(x)[:3].astype(base) + base(1), fractional])


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
def test_variadic_ops(op):
    check_op(op, [floats((2, 3, 4))])
    check_op(op, [floats((2, 1, 4)), floats((3, 1)), floats(()), floats((4,))])
    check_op(op, [np.asarray(1.5, np.float32), np.asarray(-2.0, np.float32)])


@pytest.mark.parametrize("op", ["And", "Or", "Xor", "Equal"])
def test_bool_binary_ops(op):
    check_op(op, [bools((2, 3, 4)), bools((3, 1))])
    check_op(op, [bools((4,)), np.asarray(True)])


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])
def test_bit_shift(dtype, direction):
    bits = np.iinfo(dtype).bits
    x = np.array([1, 3, 128, np.iinfo(dtype).max, 0, 5], dtype)
    amounts = np.array([[0], [1], [bits - 1], [bits], [bits + 1]], dtype)
    check_op("BitShift", [x, amounts], {"direction": direction})


def test_prelu_slope_broadcasts_to_the_input():
    x = floats((2, 3, 4))
    for slope in (floats((3, 1)), floats((4,)), floats(()), floats((2, 3, 4))):
        check_op("PRelu", [x, slope])
    check_op("PRelu", [SPECIAL.astype(np.float32), np.asarray(0.25, np.float32)])


def test_prelu_refuses_a_slope_that_grows_the_input():
    node = Node("PRelu", ["x", "s"], ["y"])
    types = [TensorType((3,), "float32"), TensorType((2, 3), "float32")]
    with pytest.raises(LoomError, match="must broadcast to the input's shape"):
        OPERATORS.get("PRelu").infer(node, types, [None, None])


# -- Where, Clip, Cast, Dropout -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
def test_where_broadcasts_three_ways(dtype):
    values = floats if np.dtype(dtype).kind == "f" else ints
    check_op("Where", [bools((2, 1, 4)), values((3, 1), dtype), values((4,), dtype)])
    check_op("Where", [np.asarray(False), values((2, 3), dtype), values((), dtype)])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.int64])
@pytest.mark.parametrize("constant", [(), (1, 2)], ids=["inputs", "constants"])
def test_clip_bounds_as_inputs_or_constants(dtype, constant):
    x = floats((3, 4), dtype, -10, 10) if np.dtype(dtype).kind == "f" else ints((3, 4), dtype)
    low, high = np.asarray(2, dtype), np.asarray(9, dtype)
    check_op("Clip", [x, low, high], constant=constant)
    check_op("Clip", [x, low], constant=constant[:1])
    check_op("Clip", [x, None, high], constant=constant[1:])
    check_op("Clip", [x, high, low], constant=constant)  # min > max: every element is max


def test_clip_without_bounds_nan_and_one_element_bounds():
    check_op("Clip", [floats((2, 3))])
    x = SPECIAL.astype(np.float32)
    check_op("Clip", [x, np.asarray(-1.0, np.float32), np.asarray(0.75, np.float32)])
    check_op("Clip", [floats(()), np.array([-0.5], np.float32), np.array([0.5], np.float32)])


CAST_TARGETS = {
    1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
    7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64,
}  # fmt: skip


@pytest.mark.parametrize("to", CAST_TARGETS, ids=lambda to: np.dtype(CAST_TARGETS[to]).name)
def test_cast_from_float_truncates_toward_zero(to):
    x = np.array([0.0, -0.0, 1.7, 2.5, 100.9, 126.99, 0.2], np.float32)
    if np.dtype(CAST_TARGETS[to]).kind != "u":
        x = np.concatenate([x, -x])
    check_op("Cast", [x], {"to": to})


@pytest.mark.parametrize(
    "source", [np.int32, np.int64, np.uint8, np.bool_, np.float64, np.float16, np.uint64]
)
@pytest.mark.parametrize("to", [1, 3, 7, 9, 10, 11, 13])
def test_cast_between_types(source, to):
    if np.dtype(source).kind == "b":
        x = np.array([True, False, True])
    elif np.dtype(source).kind == "f":
        x = np.array([0.0, 1.0, 3.75, 120.5, 7.0], source)
    else:
        x = np.array([0, 1, 127, 255, 100, 3], np.int64).astype(source)
        if np.dtype(source).kind == "i":
            x = np.concatenate([x, -x])
    check_op("Cast", [x], {"to": to})


def test_cast_wraps_integers_and_tests_floats_against_zero():
    check_op("Cast", [np.array([300, -129, 65535, 1 << 40], np.int64)], {"to": 3})
    check_op("Cast", [np.array([np.nan, 0.0, -0.0, np.inf, 1e-30], np.float32)], {"to": 9})
    check_op("Cast", [np.array([1.0 + 2**-20, 1e6, -3.1], np.float64)], {"to": 10})
    check_op("Cast", [np.asarray(5, np.int32)], {"to": 1})
    # onnxruntime refuses saturate unless casting to float8; loom accepts and ignores it
    assert unsupported(Node("Cast", ["x"], ["y"], {"to": 1, "saturate": 1})) is None


@pytest.mark.parametrize("to", [8, 14, 16, 17, 21, 99])
def test_cast_refuses_types_loom_lacks(to):
    reason = unsupported(Node("Cast", ["x"], ["y"], {"to": to}))
    assert reason is not None and f"to={to} is not a type loom has" in reason
    assert "Cast: attribute to is required" == unsupported(Node("Cast", ["x"], ["y"]))


def test_dropout_passes_the_input_and_an_all_true_mask():
    x = floats((2, 3, 4))
    check_op("Dropout", [x])
    check_op("Dropout", [x], n_outputs=2)
    check_op("Dropout", [x, np.asarray(0.3, np.float32)], n_outputs=2)
    check_op(
        "Dropout",
        [x, np.asarray(0.5, np.float32), np.asarray(False)],
        {"seed": 3},
        constant=(2,),
        n_outputs=2,
    )


def test_dropout_refuses_training():
    node = Node("Dropout", ["x", "", "t"], ["y"])
    types = [TensorType((2,), "float32"), None, TensorType((), "bool")]
    op = OPERATORS.get("Dropout")
    with pytest.raises(LoomError, match="training_mode=true is not supported"):
        op.infer(node, types, [None, None, np.asarray(True)])
    with pytest.raises(LoomError, match="training_mode must be a constant"):
        op.infer(node, types, [None, None, None])
    assert "must be a constant" in unsupported(node)
    assert unsupported(node, constant=lambda v: v == "t") is None


# -- refusals -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op, attrs, reason",
    [
        ("Gelu", {"approximate": "erf"}, "approximate='erf'"),
        ("Mod", {"fmod": 2}, "fmod=2"),
        ("BitShift", {"direction": "UP"}, "direction='UP'"),
        ("BitShift", {}, "direction=None"),
        ("Relu", {"alpha": 1.0}, "attribute alpha not supported"),
    ],
)
def test_unsupported_attribute_values(op, attrs, reason):
    assert reason in unsupported(Node(op, ["a", "b"], ["y"], attrs))


@pytest.mark.parametrize(
    "op, types, message",
    [
        ("Add", [("float32", (2,)), ("int32", (2,))], "needs inputs of one dtype"),
        ("Add", [("float32", (2,)), ("float32", (3,))], "do not broadcast"),
        ("Add", [("bool", (2,)), ("bool", (2,))], "Add takes float16"),
        ("Sqrt", [("int32", (2,))], "Sqrt takes float16, float32, float64"),
        ("Mod", [("float32", (2,)), ("float32", (2,))], "needs fmod=1"),
        ("Where", [("float32", (2,)), ("float32", (2,)), ("float32", (2,))], "Where takes bool"),
        ("Clip", [("float32", (2,)), ("float32", (2,))], "min (in1) must be a scalar"),
        ("Clip", [("float32", (2,)), ("float64", ())], "min (in1) is float64"),
        ("Max", [], "takes 1 or more inputs"),
        ("Neg", [("uint8", (2,))], "Neg takes"),
    ],
)
def test_infer_refuses_bad_inputs(op, types, message):
    node = Node(op, [f"in{k}" for k in range(len(types))], ["y"])
    typed = [TensorType(shape, dt) for dt, shape in types]
    with pytest.raises(LoomError, match=re.escape(message)):
        OPERATORS.get(op).infer(node, typed, [None] * len(typed))


def test_patterns():
    assert OPERATORS.get("Exp").pattern == Pattern.ELEMWISE
    assert OPERATORS.get("Cast").pattern == Pattern.ELEMWISE
    assert OPERATORS.get("Add").pattern == Pattern.BROADCAST
    assert OPERATORS.get("Where").pattern == Pattern.BROADCAST
    assert OPERATORS.get("Sum").pattern == Pattern.BROADCAST
