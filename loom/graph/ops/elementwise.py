"""Element-wise and broadcasting operators (ONNX opset 21): arithmetic, comparisons, logic,
bitwise operations, activations, Cast, Where, Clip, Dropout (inference) and the like.

Most operators are one table row: the dtypes ONNX allows, a numpy function (the reference
semantics) and a function of scalar expressions (the kernel's element). `_elementwise` makes the
Operator: inputs of one dtype, numpy broadcasting, the output of that dtype or bool. Operators
whose inputs have different dtypes (Pow, Where, Cast, Clip, PRelu, Dropout) have their own type
rule and share the rest.

Where ONNX leaves a result to the implementation, loom does what onnxruntime does: integer Div
truncates toward zero, Mod with fmod=0 takes the divisor's sign, a shift by the width or more
gives 0, Max/Min/Relu/Clip propagate NaN, a float cast to an integer truncates toward zero.
Integer division by zero is an error (onnxruntime's result is undefined).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

from loom import te
from loom.abi.dtype import DataType, dtype
from loom.errors import LoomError
from loom.graph.ir import Node, TensorType
from loom.graph.ops.base import Operator, Pattern, broadcast_index, broadcast_shape, register
from loom.ir import op as irop
from loom.ir.expr import PrimExpr
from loom.te.tensor import Tensor

FLOATS = frozenset({"float16", "float32", "float64"})
SIGNED = frozenset({"int8", "int16", "int32", "int64"})
UNSIGNED = frozenset({"uint8", "uint16", "uint32", "uint64"})
INTEGERS = SIGNED | UNSIGNED
NUMERIC = FLOATS | INTEGERS
BOOL = frozenset({"bool"})
ANY = NUMERIC | BOOL

ONNX_ELEMENT_TYPES = {
    1: "float32",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
    12: "uint32",
    13: "uint64",
}
"""ONNX's TensorProto element type numbers that loom has a dtype for (Cast's `to`)."""

Operand = Tensor | PrimExpr
"""A kernel's view of an input: a tensor, or a scalar constant as an immediate."""


# -- types ----------------------------------------------------------------------------------------


def _present(node: Node, types: Sequence[TensorType | None], low: int, high: int | None):
    """The indices of the inputs given; `low` are required, at most `high` (None: any)."""
    if len(types) < low or (high is not None and len(types) > high):
        most = "or more" if high is None else f"to {high}"
        raise LoomError(f"{node.label}: {node.op} takes {low} {most} inputs, got {len(types)}")
    for k in range(low):
        if types[k] is None:
            raise LoomError(f"{node.label}: input {k} of {node.op} is required")
    return [k for k, t in enumerate(types) if t is not None]


def _dtype_of(node: Node, types, k: int, allowed: frozenset[str]) -> DataType:
    dt = types[k].dtype
    if str(dt) not in allowed:
        raise LoomError(
            f"{node.label}: input {k} ({node.inputs[k]}) is {dt}; "
            f"{node.op} takes {', '.join(sorted(allowed))}"
        )
    return dt


def _one_dtype(node: Node, types, indices: Sequence[int], allowed: frozenset[str]) -> DataType:
    """The dtype the inputs `indices` share (ONNX does not promote: mixed dtypes are an error)."""
    first = _dtype_of(node, types, indices[0], allowed)
    for k in indices[1:]:
        if types[k].dtype != first:
            raise LoomError(
                f"{node.label}: input {k} ({node.inputs[k]}) is {types[k].dtype} but input "
                f"{indices[0]} is {first}; {node.op} needs inputs of one dtype"
            )
    return first


def _broadcast(node: Node, types, indices: Sequence[int]) -> tuple[int, ...]:
    shapes = [types[k].shape for k in indices]
    try:
        return broadcast_shape(*shapes)
    except ValueError:
        raise LoomError(
            f"{node.label}: input shapes {', '.join(map(str, map(list, shapes)))} do not broadcast"
        ) from None


def _scalar(node: Node, types, k: int, dt: DataType, what: str) -> None:
    """Input `k`, if given, is a one-element tensor of dtype `dt`."""
    t = types[k] if k < len(types) else None
    if t is None:
        return
    if t.dtype != dt:
        raise LoomError(f"{node.label}: {what} ({node.inputs[k]}) is {t.dtype}, expected {dt}")
    if t.size != 1:
        raise LoomError(f"{node.label}: {what} ({node.inputs[k]}) must be a scalar, got {t}")


# -- kernels --------------------------------------------------------------------------------------


def _operand(node: Node, k: int, tensors, consts) -> Operand:
    """Input `k` of a kernel: its tensor, or its constant value if that is a scalar."""
    if tensors[k] is not None:
        return tensors[k]
    value = consts[k] if k < len(consts) else None
    if value is None or value.size != 1:
        raise LoomError(f"{node.label}: input {k} ({node.inputs[k]}) must be given as a tensor")
    return te.const(value.item(), str(dtype(value.dtype)))


def _operands(node: Node, tensors, consts) -> list[Operand]:
    """The given inputs (absent optional ones skipped)."""
    given = [
        k
        for k in range(len(tensors))
        if tensors[k] is not None or (k < len(consts) and consts[k] is not None)
    ]
    return [_operand(node, k, tensors, consts) for k in given]


def _at(x: Operand, out_shape: Sequence[int], index: Sequence) -> PrimExpr:
    """The element of `x` that numpy broadcasting pairs with output element `index`."""
    if isinstance(x, Tensor):
        return x(*broadcast_index(x.shape, out_shape, index))
    return x


def _broadcast_kernel(
    node: Node, operands: Sequence[Operand], out: TensorType, fn: Callable[..., PrimExpr]
) -> Tensor:
    """out[i] = fn(each operand at i, broadcast)."""

    def element(*index):
        value = irop.convert(fn(*[_at(x, out.shape, index) for x in operands]))
        if value.dtype != out.dtype:
            raise LoomError(
                f"{node.label}: {node.op}'s element is {value.dtype}, expected {out.dtype} "
                "(a bug in loom's operator)"
            )
        return value

    return te.compute(out.shape, element, name=node.op.lower())


def _kernel(expr_fn: Callable[..., PrimExpr]):
    """A compute function: one broadcasting kernel of `expr_fn(node, *elements)` over every
    given input."""

    def compute(node, tensors, consts, out_types):
        operands = _operands(node, tensors, consts)
        return [_broadcast_kernel(node, operands, out_types[0], lambda *xs: expr_fn(node, *xs))]

    return compute


def _zero(x: PrimExpr) -> PrimExpr:
    return te.const(0, x.dtype)


def _one(x: PrimExpr) -> PrimExpr:
    return te.const(1, x.dtype)


def _like(value, x: PrimExpr) -> PrimExpr:
    return te.const(value, x.dtype)


# -- the operator builder -------------------------------------------------------------------------


def _elementwise(
    name: str,
    dtypes: frozenset[str],
    numpy_fn: Callable[..., np.ndarray],
    expr_fn: Callable[..., PrimExpr],
    arity: tuple[int, int | None] = (1, 1),
    to_bool: bool = False,
    attrs: Sequence[str] = (),
    check: Callable[[Node], str | None] | None = None,
    refuse: Callable[[Node, DataType], str | None] | None = None,
    doc: str = "",
) -> Operator:
    """Register `name`: inputs of one dtype in `dtypes`, broadcast; the output has their dtype
    (bool if `to_bool`). `numpy_fn(node, *arrays)` and `expr_fn(node, *elements)` compute it;
    `refuse(node, dtype)` names what the operator cannot do with that dtype."""
    low, high = arity

    def infer(node, types, consts):
        given = _present(node, types, low, high)
        dt = _one_dtype(node, types, given, dtypes)
        reason = refuse(node, dt) if refuse is not None else None
        if reason:
            raise LoomError(f"{node.label}: {reason}")
        return [TensorType(_broadcast(node, types, given), "bool" if to_bool else dt)]

    def evaluate(node, arrays):
        given = [np.asarray(x) for x in arrays if x is not None]
        with np.errstate(all="ignore"):
            out = numpy_fn(node, *given)
        return [np.asarray(out, dtype=np.bool_ if to_bool else given[0].dtype)]

    pattern = Pattern.ELEMWISE if high == 1 else Pattern.BROADCAST
    # a one-element constant operand (x / 8, x + 1e-5) becomes a literal of the kernel: LLVM
    # folds it instead of loading and broadcasting a tensor argument per vector
    scalars = tuple(range(high)) if high is not None and high > 1 else ()
    return register(
        Operator(
            name,
            pattern,
            infer,
            evaluate,
            _kernel(expr_fn),
            attrs,
            check,
            scalar_inputs=scalars,
            doc=doc,
        )
    )


def _plain(fn: Callable) -> Callable:
    """`fn(*values)` as a function of (node, *values), for operators without attributes."""
    return lambda node, *xs: fn(*xs)


# -- numpy reference helpers ----------------------------------------------------------------------


def _nonzero_divisor(node: Node, b: np.ndarray) -> None:
    if b.dtype.kind in "iu" and np.any(b == 0):
        raise LoomError(f"{node.label}: integer division by zero")


def _np_div(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return a / b
    _nonzero_divisor(node, b)
    floor = np.floor_divide(a, b)
    # floor and truncation differ by one where the division is inexact and the signs differ
    return floor + ((np.fmod(a, b) != 0) & ((a < 0) != (b < 0))).astype(a.dtype)


def _np_sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


_erf64 = np.vectorize(math.erf, otypes=[np.float64])


def _np_erf(x: np.ndarray) -> np.ndarray:
    return _erf64(x).astype(x.dtype)


def _np_softplus(x: np.ndarray) -> np.ndarray:
    # onnxruntime's stable form: x + log(exp(-x) + 1) above 0, log(exp(x) + 1) below
    return np.maximum(x, 0) + np.log(np.exp(-np.abs(x)) + 1)


def _np_gelu(node: Node, x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    if node.attr("approximate", "none") == "tanh":
        inner = math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)
        return (0.5 * x64 * (1 + np.tanh(inner))).astype(x.dtype)
    return (0.5 * x64 * (1 + _erf64(x64 * math.sqrt(0.5)))).astype(x.dtype)


def _np_hard_sigmoid(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    t = x.dtype.type
    return np.maximum(t(0), np.minimum(t(1), x * t(alpha) + t(beta)))


def _np_mod(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    _nonzero_divisor(node, b)
    return np.fmod(a, b) if node.attr("fmod", 0) else np.mod(a, b)


def _np_is_inf(node: Node, x: np.ndarray) -> np.ndarray:
    out = np.zeros(x.shape, np.bool_)
    if node.attr("detect_positive", 1):
        out |= np.isposinf(x)
    if node.attr("detect_negative", 1):
        out |= np.isneginf(x)
    return out


def _np_shift(node: Node, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # numpy, like onnxruntime, shifts every bit out for an amount of the width or more
    return np.left_shift(x, y) if node.attr("direction") == "LEFT" else np.right_shift(x, y)


# -- kernel helpers -------------------------------------------------------------------------------


def _sign(x: PrimExpr) -> PrimExpr:
    if x.dtype.is_uint:
        return te.select(x > _zero(x), _one(x), _zero(x))
    rest = _zero(x)
    if x.dtype.is_float:
        # NaN compares false everywhere: it falls through and is its own sign
        rest = te.select(te.equal(x, _zero(x)), _zero(x), x)
    return te.select(x > _zero(x), _one(x), te.select(x < _zero(x), _like(-1, x), rest))


def _neg(x: PrimExpr) -> PrimExpr:
    # 0 - x would turn -0.0 into +0.0; a product by -1 is exact and keeps the sign of zero
    return x * _like(-1, x) if x.dtype.is_float else irop.neg(x)


def _hard_sigmoid(x: PrimExpr, alpha: float, beta: float) -> PrimExpr:
    return irop.max_(_zero(x), irop.min_(_one(x), x * _like(alpha, x) + _like(beta, x)))


def _softplus(x: PrimExpr) -> PrimExpr:
    return irop.max_(x, _zero(x)) + te.log(te.exp(_neg(te.abs(x))) + _one(x))


def _gelu(node: Node, x: PrimExpr) -> PrimExpr:
    half = _like(0.5, x)
    if node.attr("approximate", "none") == "tanh":
        inner = _like(math.sqrt(2 / math.pi), x) * (x + _like(0.044715, x) * x * x * x)
        return half * x * (_one(x) + te.tanh(inner))
    return half * x * (_one(x) + te.erf(x * _like(math.sqrt(0.5), x)))


def _mod(node: Node, a: PrimExpr, b: PrimExpr) -> PrimExpr:
    # loom's Mod is C's (sign of the dividend, fmod for floats); FloorMod is numpy's
    return irop.truncmod(a, b) if node.attr("fmod", 0) else irop.floormod(a, b)


def _is_inf(node: Node, x: PrimExpr) -> PrimExpr:
    tests = []
    if node.attr("detect_positive", 1):
        tests.append(te.equal(x, _like(math.inf, x)))
    if node.attr("detect_negative", 1):
        tests.append(te.equal(x, _like(-math.inf, x)))
    return te.any(*tests) if tests else te.const(False)


def _shift(node: Node, x: PrimExpr, y: PrimExpr) -> PrimExpr:
    # loom's shifts are only defined below the width: shift by 0 there and give 0 instead
    inside = y < _like(x.dtype.bits, y)
    amount = te.select(inside, y, _zero(y))
    left = node.attr("direction") == "LEFT"
    shifted = irop.shift_left(x, amount) if left else irop.shift_right(x, amount)
    return te.select(inside, shifted, _zero(x))


# -- attribute checks -----------------------------------------------------------------------------


def _check_gelu(node: Node) -> str | None:
    approximate = node.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        return f"approximate={approximate!r} (expected 'none' or 'tanh')"
    return None


def _check_mod(node: Node) -> str | None:
    if node.attr("fmod", 0) not in (0, 1):
        return f"fmod={node.attr('fmod')} (expected 0 or 1)"
    return None


def _refuse_float_floor_mod(node: Node, dt: DataType) -> str | None:
    if dt.is_float and not node.attr("fmod", 0):
        return f"Mod of {dt} needs fmod=1 (ONNX defines fmod=0 for integers only)"
    return None


def _check_shift(node: Node) -> str | None:
    direction = node.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        return f"direction={direction!r} (expected 'LEFT' or 'RIGHT')"
    return None


# -- the table-made operators ---------------------------------------------------------------------

_UNARY = {
    # name: (dtypes, numpy, element)
    "Relu": (
        FLOATS | SIGNED,
        lambda x: np.maximum(x, x.dtype.type(0)),
        lambda x: irop.max_(x, _zero(x)),
    ),
    "Sigmoid": (FLOATS, _np_sigmoid, te.sigmoid),
    "HardSwish": (
        FLOATS,
        lambda x: x * _np_hard_sigmoid(x, 1 / 6, 0.5),
        lambda x: x * _hard_sigmoid(x, 1 / 6, 0.5),
    ),
    "Tanh": (FLOATS, np.tanh, te.tanh),
    "Exp": (FLOATS, np.exp, te.exp),
    "Log": (FLOATS, np.log, te.log),
    "Sqrt": (FLOATS, np.sqrt, te.sqrt),
    "Reciprocal": (FLOATS, lambda x: x.dtype.type(1) / x, lambda x: _one(x) / x),
    "Neg": (FLOATS | SIGNED, np.negative, _neg),
    "Abs": (NUMERIC, np.abs, te.abs),
    "Floor": (FLOATS, np.floor, te.floor),
    "Ceil": (FLOATS, np.ceil, te.ceil),
    "Erf": (FLOATS, _np_erf, te.erf),
    "Softplus": (FLOATS, _np_softplus, _softplus),
    "Sign": (NUMERIC, np.sign, _sign),
    "Not": (BOOL, np.logical_not, irop.logical_not),
    "BitwiseNot": (INTEGERS, np.invert, irop.bitwise_not),
    "Identity": (ANY, lambda x: x, lambda x: x),
}

_BINARY = {
    # name: (dtypes, numpy, element)
    "Add": (NUMERIC, np.add, irop.add),
    "Sub": (NUMERIC, np.subtract, irop.sub),
    "Mul": (NUMERIC, np.multiply, irop.mul),
    "And": (BOOL, np.logical_and, irop.logical_and),
    "Or": (BOOL, np.logical_or, irop.logical_or),
    "Xor": (BOOL, np.logical_xor, te.not_equal),
    "BitwiseAnd": (INTEGERS, np.bitwise_and, irop.bitwise_and),
    "BitwiseOr": (INTEGERS, np.bitwise_or, irop.bitwise_or),
    "BitwiseXor": (INTEGERS, np.bitwise_xor, irop.bitwise_xor),
}

_COMPARISONS = {
    "Equal": (ANY, np.equal, te.equal),
    "Greater": (NUMERIC, np.greater, te.greater),
    "GreaterOrEqual": (NUMERIC, np.greater_equal, te.greater_equal),
    "Less": (NUMERIC, np.less, te.less),
    "LessOrEqual": (NUMERIC, np.less_equal, te.less_equal),
}

_VARIADIC = {
    # name: (dtypes, numpy of two, element of two); Mean divides a Sum
    "Max": (NUMERIC, np.maximum, irop.max_),
    "Min": (NUMERIC, np.minimum, irop.min_),
    "Sum": (FLOATS, np.add, irop.add),
}

for _name, (_dtypes, _np_fn, _expr_fn) in _UNARY.items():
    _elementwise(_name, _dtypes, _plain(_np_fn), _plain(_expr_fn))
for _name, (_dtypes, _np_fn, _expr_fn) in _BINARY.items():
    _elementwise(_name, _dtypes, _plain(_np_fn), _plain(_expr_fn), arity=(2, 2))
for _name, (_dtypes, _np_fn, _expr_fn) in _COMPARISONS.items():
    _elementwise(_name, _dtypes, _plain(_np_fn), _plain(_expr_fn), arity=(2, 2), to_bool=True)
for _name, (_dtypes, _np_fn, _expr_fn) in _VARIADIC.items():
    _elementwise(
        _name,
        _dtypes,
        _plain(lambda *xs, f=_np_fn: functools.reduce(f, xs)),
        _plain(lambda *xs, f=_expr_fn: functools.reduce(f, xs)),
        arity=(1, None),
    )

_elementwise(
    "Mean",
    FLOATS,
    _plain(lambda *xs: functools.reduce(np.add, xs) / xs[0].dtype.type(len(xs))),
    _plain(lambda *xs: functools.reduce(irop.add, xs) / _like(float(len(xs)), xs[0])),
    arity=(1, None),
)
_elementwise(
    "Div",
    NUMERIC,
    _np_div,
    _plain(irop.div),
    arity=(2, 2),
    doc="Integer division truncates toward zero (as onnxruntime); by zero it is an error.",
)
_elementwise(
    "Mod",
    NUMERIC,
    _np_mod,
    _mod,
    arity=(2, 2),
    attrs=("fmod",),
    check=_check_mod,
    refuse=_refuse_float_floor_mod,
    doc="fmod=0: the remainder has the divisor's sign (numpy's, integers only); fmod=1: C's "
    "fmod, the dividend's sign. Integer remainder by zero is an error.",
)
_elementwise(
    "BitShift",
    UNSIGNED,
    _np_shift,
    _shift,
    arity=(2, 2),
    attrs=("direction",),
    check=_check_shift,
    doc="A shift by the width or more gives 0 (as onnxruntime and numpy).",
)
_elementwise(
    "LeakyRelu",
    FLOATS,
    lambda node, x: np.where(x >= 0, x, x * x.dtype.type(node.attr("alpha", 0.01))),
    lambda node, x: te.select(x >= _zero(x), x, x * _like(node.attr("alpha", 0.01), x)),
    attrs=("alpha",),
)
_elementwise(
    "HardSigmoid",
    FLOATS,
    lambda node, x: _np_hard_sigmoid(x, node.attr("alpha", 0.2), node.attr("beta", 0.5)),
    lambda node, x: _hard_sigmoid(x, node.attr("alpha", 0.2), node.attr("beta", 0.5)),
    attrs=("alpha", "beta"),
)
_elementwise("Gelu", FLOATS, _np_gelu, _gelu, attrs=("approximate",), check=_check_gelu)
_elementwise("IsNaN", FLOATS, _plain(np.isnan), _plain(lambda x: te.not_equal(x, x)), to_bool=True)
_elementwise(
    "IsInf",
    FLOATS,
    _np_is_inf,
    _is_inf,
    to_bool=True,
    attrs=("detect_negative", "detect_positive"),
)


# -- operators with inputs of several dtypes ------------------------------------------------------

_POW_BASES = FLOATS | frozenset({"int32", "int64"})


def _pow_work_dtype(base: DataType, exponent: DataType) -> DataType:
    """The float dtype Pow computes in: the base's, unless the exponent is another type or the
    base is an integer (onnxruntime's std::pow then computes in double)."""
    return base if base.is_float and exponent == base else dtype("float64")


def _pow_infer(node, types, consts):
    _present(node, types, 2, 2)
    base = _dtype_of(node, types, 0, _POW_BASES)
    _dtype_of(node, types, 1, NUMERIC)
    return [TensorType(_broadcast(node, types, [0, 1]), base)]


def _pow_evaluate(node, arrays):
    x, y = (np.asarray(a) for a in arrays)
    work = _pow_work_dtype(dtype(x.dtype), dtype(y.dtype)).numpy
    with np.errstate(all="ignore"):
        return [np.power(x.astype(work), y.astype(work)).astype(x.dtype)]


def _pow_element(node: Node, x: PrimExpr, y: PrimExpr) -> PrimExpr:
    work = _pow_work_dtype(x.dtype, y.dtype)
    return te.cast(te.pow(te.cast(x, work), te.cast(y, work)), x.dtype)


register(
    Operator(
        "Pow",
        Pattern.BROADCAST,
        _pow_infer,
        _pow_evaluate,
        _kernel(_pow_element),
        doc="An integer base is raised in double and truncated toward zero (as onnxruntime).",
    )
)


def _where_infer(node, types, consts):
    _present(node, types, 3, 3)
    _dtype_of(node, types, 0, BOOL)
    dt = _one_dtype(node, types, [1, 2], ANY)
    return [TensorType(_broadcast(node, types, [0, 1, 2]), dt)]


register(
    Operator(
        "Where",
        Pattern.BROADCAST,
        _where_infer,
        lambda node, arrays: [np.asarray(np.where(*arrays), dtype=arrays[1].dtype)],
        _kernel(lambda node, c, x, y: te.select(c, x, y)),
    )
)


_PRELU_TYPES = FLOATS | frozenset({"int32", "int64", "uint32", "uint64"})


def _prelu_infer(node, types, consts):
    _present(node, types, 2, 2)
    dt = _one_dtype(node, types, [0, 1], _PRELU_TYPES)
    shape = _broadcast(node, types, [0, 1])
    if shape != types[0].shape:
        raise LoomError(
            f"{node.label}: slope {list(types[1].shape)} must broadcast to the input's shape "
            f"{list(types[0].shape)}"
        )
    return [TensorType(shape, dt)]


register(
    Operator(
        "PRelu",
        Pattern.BROADCAST,
        _prelu_infer,
        lambda node, arrays: [np.where(arrays[0] < 0, arrays[0] * arrays[1], arrays[0])],
        _kernel(lambda node, x, slope: te.select(x < _zero(x), x * slope, x)),
    )
)


def _clip_infer(node, types, consts):
    _present(node, types, 1, 3)
    dt = _dtype_of(node, types, 0, NUMERIC)
    _scalar(node, types, 1, dt, "min")
    _scalar(node, types, 2, dt, "max")
    return [types[0]]


def _clip_evaluate(node, arrays):
    x = np.asarray(arrays[0])
    low = arrays[1] if len(arrays) > 1 else None
    high = arrays[2] if len(arrays) > 2 else None
    if low is not None:
        x = np.maximum(x, np.asarray(low).reshape(()))
    if high is not None:
        x = np.minimum(x, np.asarray(high).reshape(()))
    return [np.asarray(x)]


def _clip_compute(node, tensors, consts, out_types):
    given = [
        k
        for k in range(len(tensors))
        if tensors[k] is not None or (k < len(consts) and consts[k] is not None)
    ]
    bounds = {k: _operand(node, k, tensors, consts) for k in given}
    (out,) = out_types

    def element(*index):
        value = tensors[0](*index)
        if 1 in bounds:
            value = irop.max_(value, _at(bounds[1], out.shape, index))
        if 2 in bounds:
            value = irop.min_(value, _at(bounds[2], out.shape, index))
        return value

    return [te.compute(out.shape, element, name="clip")]


register(
    Operator(
        "Clip",
        Pattern.BROADCAST,
        _clip_infer,
        _clip_evaluate,
        _clip_compute,
        scalar_inputs=(1, 2),
        doc="min(max(x, min), max): max wins when min > max; NaN stays NaN. min and max are "
        "optional scalar inputs, constants or not (constants become literals of the kernel).",
    )
)


def _cast_target(node: Node) -> DataType:
    return dtype(ONNX_ELEMENT_TYPES[node.attr("to")])


def _check_cast(node: Node) -> str | None:
    to = node.attr("to")
    if to is None:
        return "attribute to is required"
    if to not in ONNX_ELEMENT_TYPES:
        supported = ", ".join(f"{k} ({v})" for k, v in ONNX_ELEMENT_TYPES.items())
        return f"to={to} is not a type loom has; supported: {supported}"
    return None


def _cast_infer(node, types, consts):
    _present(node, types, 1, 1)
    reason = _check_cast(node)
    if reason:
        raise LoomError(f"{node.label}: {reason}")
    return [TensorType(types[0].shape, _cast_target(node))]


def _cast_evaluate(node, arrays):
    with np.errstate(all="ignore"):
        return [np.asarray(arrays[0]).astype(_cast_target(node).numpy)]


register(
    Operator(
        "Cast",
        Pattern.ELEMWISE,
        _cast_infer,
        _cast_evaluate,
        _kernel(lambda node, x: te.cast(x, _cast_target(node))),
        attrs=("to", "saturate"),
        check=_check_cast,
        doc="A float becomes an integer truncated toward zero (out of range: undefined), a bool "
        "by x != 0 (NaN is true). `saturate` only concerns float8 types, which loom lacks.",
    )
)


def _dropout_infer(node, types, consts):
    given = _present(node, types, 1, 3)
    dt = _dtype_of(node, types, 0, FLOATS)
    if 1 in given:
        _scalar(node, types, 1, types[1].dtype, "ratio")
        _dtype_of(node, types, 1, FLOATS)
    if 2 in given:
        _scalar(node, types, 2, dtype("bool"), "training_mode")
        if consts[2] is None:
            raise LoomError(f"{node.label}: training_mode must be a constant (loom infers only)")
        _inference_only(node, consts[2])
    outs = [TensorType(types[0].shape, dt)]
    if len(node.outputs) > 1:
        outs.append(TensorType(types[0].shape, "bool"))
    return outs


def _inference_only(node: Node, training_mode: np.ndarray | None) -> None:
    if training_mode is not None and bool(np.asarray(training_mode).reshape(())):
        raise LoomError(f"{node.label}: training_mode=true is not supported (loom infers only)")


def _dropout_evaluate(node, arrays):
    _inference_only(node, arrays[2] if len(arrays) > 2 else None)
    x = np.asarray(arrays[0])
    return [x, np.ones(x.shape, np.bool_)][: len(node.outputs)]


def _dropout_compute(node, tensors, consts, out_types):
    x = tensors[0]
    outs = [te.compute(x.shape, lambda *i: x(*i), name="dropout")]
    if len(out_types) > 1:
        outs.append(te.compute(x.shape, lambda *i: te.const(True), name="dropout_mask"))
    return outs


register(
    Operator(
        "Dropout",
        Pattern.ELEMWISE,
        _dropout_infer,
        _dropout_evaluate,
        _dropout_compute,
        attrs=("seed",),
        constant_inputs=(2,),
        doc="Inference: the output is the input and the mask all true; ratio is ignored and "
        "training_mode must be a constant false.",
    )
)

__all__ = [
    "ANY",
    "BOOL",
    "FLOATS",
    "INTEGERS",
    "NUMERIC",
    "ONNX_ELEMENT_TYPES",
    "SIGNED",
    "UNSIGNED",
]
