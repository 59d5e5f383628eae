"""A catalogue of operators under schedules, each with numpy inputs and a numpy reference.

Together the schedules use every schedule primitive, with split factors that do not divide the
extents. The interpreter tests run every case; the code generator tests run the same cases.
Each case builds a fresh schedule, so cases are independent.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from loom import te
from loom.ops import (
    broadcast_to,
    conv2d_nchw,
    depthwise_conv2d_nchw,
    matmul,
    pool2d,
    softmax,
)


@dataclasses.dataclass
class Case:
    name: str
    make: Callable[[], tuple]  # () -> (schedule, args)
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    reference: Callable[
        ..., list[np.ndarray | None]
    ]  # expected value of each argument (None: skip)
    rtol: float = 1e-5
    atol: float = 1e-5

    def __repr__(self) -> str:
        return self.name


CASES: list[Case] = []


def case(name, inputs, reference, rtol=1e-5, atol=1e-5):
    def register(make):
        CASES.append(Case(name, make, inputs, reference, rtol, atol))
        return make

    return register


def f32(rng, *shape, low=-1.0, high=1.0):
    return rng.uniform(low, high, shape).astype(np.float32)


def zeros(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


# -- elementwise ---------------------------------------------------------------------------------
def _add(shape=(5, 30)):
    A = te.placeholder(shape, name="A")
    B = te.placeholder(shape, name="B")
    C = te.compute(shape, lambda i, j: A[i, j] * 2.0 + B[i, j], name="C")
    return A, B, C


def _add_inputs(rng):
    return [f32(rng, 5, 30), f32(rng, 5, 30), zeros(5, 30)]


def _add_ref(a, b, c):
    return [None, None, a * np.float32(2) + b]


@case("add/default", _add_inputs, _add_ref)
def _():
    A, B, C = _add()
    return te.create_schedule(C.op), [A, B, C]


@case("add/split7-vectorize-parallel", _add_inputs, _add_ref)
def _():
    A, B, C = _add()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=7)
    s[C].vectorize(ji)
    s[C].parallel(i)
    return s, [A, B, C]


@case("add/fuse-split-unroll", _add_inputs, _add_ref)
def _():
    A, B, C = _add()
    s = te.create_schedule(C.op)
    f = s[C].fuse(*C.op.axis)
    fo, fi = s[C].split(f, factor=4)
    s[C].unroll(fi)
    return s, [A, B, C]


@case("add/reorder-nparts-pragma", _add_inputs, _add_ref)
def _():
    A, B, C = _add()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    s[C].reorder(j, i)
    jo, ji = s[C].split(j, nparts=4)
    s[C].pragma(jo, "auto_unroll_max_step", 16)
    return s, [A, B, C]


@case("add/cache_read-compute_at-storage_align", _add_inputs, _add_ref)
def _():
    A, B, C = _add()
    s = te.create_schedule(C.op)
    AS = s.cache_read(A, "shared", [C])
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, 2, 8)
    s[AS].compute_at(s[C], jo)
    s[AS].storage_align(s[AS].op.axis[0], 16, 3)
    s[C].vectorize(ji)
    return s, [A, B, C]


def _math_inputs(rng):
    x = rng.uniform(0.1, 3.0, (3, 17)).astype(np.float32)
    return [x, zeros(3, 17)]


def _math_case(name, fn, ref, rtol=2e-5):
    def make():
        X = te.placeholder((3, 17), name="X")
        Y = te.compute((3, 17), lambda i, j: fn(X[i, j]), name="Y")
        s = te.create_schedule(Y.op)
        jo, ji = s[Y].split(Y.op.axis[1], factor=8)
        s[Y].vectorize(ji)
        return s, [X, Y]

    CASES.append(Case(f"math/{name}", make, _math_inputs, lambda x, y: [None, ref(x)], rtol, 1e-6))


def _erf(x):
    return np.vectorize(math.erf)(x.astype(np.float64))


for _name, _fn, _ref in [
    ("exp", te.exp, np.exp),
    ("log", te.log, np.log),
    ("sqrt", te.sqrt, np.sqrt),
    ("tanh", te.tanh, np.tanh),
    ("sigmoid", te.sigmoid, lambda x: 1 / (1 + np.exp(-x.astype(np.float64)))),
    ("erf", te.erf, _erf),
    ("pow", lambda x: te.pow(x, 1.7), lambda x: np.power(x.astype(np.float64), 1.7)),
    ("abs", lambda x: te.abs(x - 1.5), lambda x: np.abs(x - np.float32(1.5))),
    ("floor", lambda x: te.floor(x * 2.0), lambda x: np.floor(x * np.float32(2))),
    ("ceil", lambda x: te.ceil(x * 2.0), lambda x: np.ceil(x * np.float32(2))),
    ("round", lambda x: te.round(x * 4.0), lambda x: np.round(x * np.float32(4))),
    ("select", lambda x: te.select(x > 1.5, x, 0.0 - x), lambda x: np.where(x > 1.5, x, -x)),
]:
    _math_case(_name, _fn, _ref)


def _int_inputs(rng):
    return [
        rng.integers(-128, 128, (4, 33), dtype=np.int8),
        rng.integers(-128, 128, (4, 33), dtype=np.int8),
        zeros(4, 33, dtype=np.int8),
    ]


@case(
    "int8/wrapping-mul-add",
    _int_inputs,
    lambda a, b, c: [None, None, (a * b + a).astype(np.int8)],
    0,
    0,
)
def _():
    A = te.placeholder((4, 33), name="A", dtype="int8")
    B = te.placeholder((4, 33), name="B", dtype="int8")
    C = te.compute((4, 33), lambda i, j: A[i, j] * B[i, j] + A[i, j], name="C")
    s = te.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=16)
    s[C].vectorize(ji)
    return s, [A, B, C]


def _int32_inputs(rng):
    return [rng.integers(-1000, 1000, (37,), dtype=np.int32), zeros(37, dtype=np.int32)]


@case(
    "int32/floordiv-floormod-cast",
    _int32_inputs,
    lambda a, c: [
        None,
        (a // 7) * 3 + a % 5 + (a.astype(np.float32) * np.float32(0.5)).astype(np.int32),
    ],
    0,
    0,
)
def _():
    A = te.placeholder((37,), name="A", dtype="int32")
    C = te.compute(
        (37,),
        lambda i: (A[i] // 7) * 3 + A[i] % 5 + (A[i].astype("float32") * 0.5).astype("int32"),
        name="C",
    )
    s = te.create_schedule(C.op)
    o, i = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(i)
    return s, [A, C]


# -- broadcast -----------------------------------------------------------------------------------
def _bias_inputs(rng):
    return [f32(rng, 2, 6, 5), f32(rng, 6, 1), zeros(2, 6, 5)]


def _bias(inline: bool):
    X = te.placeholder((2, 6, 5), name="X")
    b = te.placeholder((6, 1), name="b")
    bb = broadcast_to(b, (2, 6, 5), name="bb")
    Y = te.compute(
        (2, 6, 5),
        lambda n, c, w: te.select(X[n, c, w] + bb[n, c, w] > 0.0, X[n, c, w] + bb[n, c, w], 0.0),
        name="Y",
    )
    s = te.create_schedule(Y.op)
    if inline:
        s[bb].compute_inline()
    else:
        s[bb].compute_at(s[Y], Y.op.axis[1])
        s[bb].set_scope("local")
    return s, [X, b, Y]


def _bias_ref(x, b, y):
    return [None, None, np.maximum(x + b[None], 0)]


CASES.append(Case("broadcast/bias-relu-inline", lambda: _bias(True), _bias_inputs, _bias_ref))
CASES.append(Case("broadcast/bias-relu-compute_at", lambda: _bias(False), _bias_inputs, _bias_ref))


# -- reductions ----------------------------------------------------------------------------------
def _reduce_case(name, reducer, ref, schedule, where=False, dtype="float32", low=-1, high=1):
    def inputs(rng):
        if dtype == "float32":
            x = rng.uniform(low, high, (6, 11)).astype(np.float32)
        else:
            x = rng.integers(low, high, (6, 11)).astype(dtype)
        return [x, np.zeros(6, dtype)]

    def make():
        X = te.placeholder((6, 11), name="X", dtype=dtype)
        k = te.reduce_axis(11, name="k")
        cond = (k > 2) if where else None
        R = te.compute((6,), lambda i: reducer(X[i, k], axis=k, where=cond), name="R")
        s = te.create_schedule(R.op)
        schedule(s, R)
        return s, [X, R]

    def reference(x, r):
        sel = x[:, 3:] if where else x
        return [None, ref(sel.astype(np.float64)).astype(dtype)]

    CASES.append(Case(f"reduce/{name}", make, inputs, reference, 1e-5, 1e-5))


def _plain(s, R):
    pass


def _split_reduce(s, R):
    (k,) = R.op.reduce_axis
    ko, ki = s[R].split(k, factor=4)
    s[R].unroll(ki)


def _reduce_outer_vectorize(s, R):
    (k,) = R.op.reduce_axis
    (i,) = R.op.axis
    io, ii = s[R].split(i, factor=4)
    s[R].reorder(io, k, ii)
    s[R].vectorize(ii)


def _cache_write_reduce(s, R):
    RL = s.cache_write(R, "local")
    (i,) = R.op.axis
    io, ii = s[R].split(i, factor=4)
    s[RL].compute_at(s[R], io)
    (k,) = s[RL].op.reduce_axis
    s[RL].split(k, nparts=3)


_reduce_case("sum", te.sum, lambda x: x.sum(1), _plain)
_reduce_case("sum-split-unroll", te.sum, lambda x: x.sum(1), _split_reduce)
_reduce_case("sum-where", te.sum, lambda x: x.sum(1), _plain, where=True)
_reduce_case("max-reduce-outside-vectorized", te.max, lambda x: x.max(1), _reduce_outer_vectorize)
_reduce_case("min-cache_write", te.min, lambda x: x.min(1), _cache_write_reduce)
_reduce_case("prod", te.prod, lambda x: x.prod(1), _split_reduce, low=0.5, high=1.5)
_reduce_case(
    "int32-sum-where",
    te.sum,
    lambda x: x.sum(1),
    _reduce_outer_vectorize,
    where=True,
    dtype="int32",
    low=-100,
    high=100,
)


# -- matmul --------------------------------------------------------------------------------------
MM = (20, 18, 13)  # n, m, k: no tile below divides them


def _mm_inputs(rng):
    n, m, k = MM
    return [f32(rng, n, k), f32(rng, k, m), zeros(n, m)]


def _mm_ref(a, b, c):
    return [None, None, a.astype(np.float64) @ b]


def _mm():
    n, m, k = MM
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    return A, B, matmul(A, B, name="C")


@case("matmul/default", _mm_inputs, _mm_ref)
def _():
    A, B, C = _mm()
    return te.create_schedule(C.op), [A, B, C]


@case("matmul/tile-cache_write-vectorize-parallel", _mm_inputs, _mm_ref)
def _():
    A, B, C = _mm()
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*C.op.axis, 8, 5)
    s[C].parallel(io)
    s[CL].compute_at(s[C], jo)
    (k,) = s[CL].op.reduce_axis
    ko, ki = s[CL].split(k, factor=4)
    ci, cj = s[CL].op.axis
    s[CL].reorder(ko, ci, ki, cj)
    s[CL].unroll(ki)
    s[CL].vectorize(cj)
    s[C].vectorize(ji)
    return s, [A, B, C]


@case("matmul/cache_read-shared-compute_at-ko", _mm_inputs, _mm_ref)
def _():
    A, B, C = _mm()
    s = te.create_schedule(C.op)
    AS = s.cache_read(A, "shared", [C])
    BS = s.cache_read(B, "shared", [C])
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    ko, ki = s[C].split(k, factor=5)
    s[C].reorder(ko, i, ki, j)
    s[AS].compute_at(s[C], ko)
    s[BS].compute_at(s[C], ko)
    s[BS].compute_root()  # changed its mind: whole B at the root
    return s, [A, B, C]


# -- conv2d --------------------------------------------------------------------------------------
def _conv_case(name, stride, padding, schedule, shape=(1, 3, 9, 9), kshape=(4, 3, 3, 3)):
    def out_size(size, k):
        return (size + 2 * padding - k) // stride + 1

    oh, ow = out_size(shape[2], kshape[2]), out_size(shape[3], kshape[3])

    def inputs(rng):
        return [f32(rng, *shape), f32(rng, *kshape), zeros(shape[0], kshape[0], oh, ow)]

    def reference(x, w, y):
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding,) * 2, (padding,) * 2))
        out = np.zeros((shape[0], kshape[0], oh, ow))
        for ry in range(kshape[2]):
            for rx in range(kshape[3]):
                win = xp[:, :, ry : ry + stride * oh : stride, rx : rx + stride * ow : stride]
                out += np.einsum("nchw,fc->nfhw", win, w[:, :, ry, rx])
        return [None, None, out]

    def make():
        data = te.placeholder(shape, name="data")
        kernel = te.placeholder(kshape, name="kernel")
        out = conv2d_nchw(data, kernel, stride=stride, padding=padding, name="conv")
        s = te.create_schedule(out.op)
        schedule(s, out)
        return s, [data, kernel, out]

    CASES.append(Case(f"conv2d/{name}", make, inputs, reference, 1e-4, 1e-5))


def _conv_inline_pad(s, out):
    if out.op.input_tensors[0].name.endswith(".pad"):
        s[out.op.input_tensors[0]].compute_inline()
    n, f, y, x = out.op.axis
    xo, xi = s[out].split(x, factor=3)
    s[out].vectorize(xi)


def _conv_pad_at_row(s, out):
    pad = out.op.input_tensors[0]
    n, f, y, x = out.op.axis
    s[out].reorder(n, y, f, x)
    s[pad].compute_at(s[out], y)


def _conv_tiled_cache_write(s, out):
    pad = out.op.input_tensors[0]
    OL = s.cache_write(out, "local")
    n, f, y, x = out.op.axis
    yo, xo, yi, xi = s[out].tile(y, x, 2, 4)
    s[OL].compute_at(s[out], xo)
    s[pad].compute_inline()
    s[out].parallel(f)


_conv_case("s1p1-default", 1, 1, _plain)
_conv_case("s1p1-inline-vectorize", 1, 1, _conv_inline_pad)
_conv_case("s2p1-pad-compute_at-row", 2, 1, _conv_pad_at_row)
_conv_case("s2p0-default", 2, 0, _plain, shape=(1, 2, 8, 8), kshape=(4, 2, 3, 3))
_conv_case("s1p1-tile-cache_write", 1, 1, _conv_tiled_cache_write)


# -- depthwise conv ------------------------------------------------------------------------------
def _dw_case(name, schedule):
    shape, kshape = (1, 3, 8, 7), (6, 1, 3, 3)

    def inputs(rng):
        return [f32(rng, *shape), f32(rng, *kshape), zeros(1, 6, 8, 7)]

    def reference(x, w, y):
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, 6, 8, 7))
        for f in range(6):
            for ry in range(3):
                for rx in range(3):
                    out[0, f] += xp[0, f // 2, ry : ry + 8, rx : rx + 7] * w[f, 0, ry, rx]
        return [None, None, out]

    def make():
        data = te.placeholder(shape, name="data")
        kernel = te.placeholder(kshape, name="kernel")
        out = depthwise_conv2d_nchw(data, kernel, stride=1, padding=1, name="dw")
        s = te.create_schedule(out.op)
        schedule(s, out)
        return s, [data, kernel, out]

    CASES.append(Case(f"depthwise/{name}", make, inputs, reference, 1e-4, 1e-5))


_dw_case("default", _plain)
_dw_case("inline-pad-split", _conv_inline_pad)


# -- pooling -------------------------------------------------------------------------------------
def _pool_case(name, kind, kernel, stride, padding, schedule):
    shape = (1, 2, 7, 7)
    out = (7 + 2 * padding - kernel) // stride + 1

    def inputs(rng):
        return [f32(rng, *shape), zeros(1, 2, out, out)]

    def reference(x, y):
        fill = -np.inf if kind == "max" else 0.0
        xp = np.pad(
            x.astype(np.float64),
            ((0, 0), (0, 0), (padding,) * 2, (padding,) * 2),
            constant_values=fill,
        )
        res = np.full((1, 2, out, out), fill if kind == "max" else 0.0)
        for ry in range(kernel):
            for rx in range(kernel):
                win = xp[:, :, ry : ry + stride * out : stride, rx : rx + stride * out : stride]
                res = np.maximum(res, win) if kind == "max" else res + win
        return [None, res if kind == "max" else res / (kernel * kernel)]

    def make():
        data = te.placeholder(shape, name="data")
        y = pool2d(data, kernel, stride, padding, kind=kind, name="pool")
        s = te.create_schedule(y.op)
        schedule(s, y)
        return s, [data, y]

    CASES.append(Case(f"pool/{name}", make, inputs, reference, 1e-5, 1e-6))


def _pool_inline_all(s, y):
    for t in _upstream(y):
        s[t].compute_inline() if not isinstance(t.op.body, te.Reduce) else None


def _pool_sum_at(s, y):
    for t in _upstream(y):
        if isinstance(t.op.body, te.Reduce):
            s[t].compute_at(s[y], y.op.axis[2])


def _upstream(t):
    out = []
    for inp in t.op.input_tensors:
        if isinstance(inp.op, te.ComputeOp):
            out.append(inp)
            out.extend(_upstream(inp))
    return out


_pool_case("max2x2s2", "max", 2, 2, 0, _plain)
_pool_case("max3x3s2p1-inline", "max", 3, 2, 1, _pool_inline_all)
_pool_case("avg3x3s1p1", "avg", 3, 1, 1, _plain)
_pool_case("avg3x3s1p1-sum-at-row", "avg", 3, 1, 1, _pool_sum_at)


# -- softmax -------------------------------------------------------------------------------------
def _softmax_inputs(rng):
    return [f32(rng, 3, 10, low=-3, high=3), zeros(3, 10)]


def _softmax_ref(x, y):
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    return [None, e / e.sum(1, keepdims=True)]


def _softmax(schedule):
    def make():
        X = te.placeholder((3, 10), name="X")
        Y = softmax(X, name="sm")
        s = te.create_schedule(Y.op)
        schedule(s, Y)
        return s, [X, Y]

    return make


def _softmax_fused(s, Y):
    exp, total = Y.op.input_tensors
    row_max = exp.op.input_tensors[1]
    s[exp].compute_inline()
    (i, j) = Y.op.axis
    s[row_max].compute_at(s[Y], i)
    s[total].compute_at(s[Y], i)
    jo, ji = s[Y].split(j, factor=4)
    s[Y].vectorize(ji)


CASES.append(Case("softmax/default", _softmax(_plain), _softmax_inputs, _softmax_ref, 1e-5, 1e-6))
CASES.append(
    Case("softmax/row-fused", _softmax(_softmax_fused), _softmax_inputs, _softmax_ref, 1e-5, 1e-6)
)
