"""Schedules for Hexagon: integer kernels vectorized by the HVX vector width, and scalar ones.

Each function returns `(schedule, args)` for `loom.build(..., target=hexagon(...))`. With
`vectorize=True` the innermost loop covers one HVX vector (128 bytes: 128 int8, 64 int16 or
32 int32 lanes; 64 lanes for an int8 or int16 accumulation into int32) and accumulators live
in a small `local` tile that LLVM keeps in vector registers. With `vectorize=False` the same
computation runs as scalar loops (the reference for bench/hexagon.py). Float kernels should
use `vectorize=False`: v66 has no HVX floating point.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from loom import te
from loom.abi.dtype import dtype as to_dtype
from loom.errors import LoomError
from loom.ir.expr import PrimExpr
from loom.ops.nn import conv2d_nchw as conv
from loom.ops.nn import elementwise as elementwise_compute
from loom.te.schedule import Schedule

if TYPE_CHECKING:  # the target package registers the kinds, which import this
    from loom.target.target import Target


def lanes(dtype: str, target: Target) -> int:
    """Elements of `dtype` in one vector register of the target."""
    return max(1, target.vector_bytes // to_dtype(dtype).itemsize)


def accumulator_lanes(dtype: str, acc_dtype: str, target: Target) -> int:
    """Lanes of a widening accumulation (int8 or int16 inputs into int32): half a vector of
    int8 or a whole one of int16 (64 lanes, two int32 vectors). LLVM's HVX lowering of a
    quarter-vector widening (32 int8 lanes) is slow to compile and to run."""
    return max(lanes(acc_dtype, target), min(lanes(dtype, target), 2 * lanes(acc_dtype, target)))


def _vector_split(s: Schedule, stage, axis, n: int, vectorize: bool):
    outer, inner = s[stage].split(axis, factor=n)
    if vectorize:
        s[stage].vectorize(inner)
    return outer, inner


def elementwise(
    fn: Callable[..., PrimExpr],
    shape: tuple[int, ...],
    n_inputs: int,
    dtype: str,
    target: Target,
    *,
    vectorize: bool = True,
) -> tuple[Schedule, list]:
    """out = fn(inputs...) element by element, one vector per inner iteration."""
    inputs = [te.placeholder(shape, dtype, name=f"X{k}") for k in range(n_inputs)]
    out = elementwise_compute(fn, *inputs, name="Y")
    s = te.create_schedule(out.op)
    flat = s[out].fuse(*out.op.axis) if len(shape) > 1 else out.op.axis[0]
    _vector_split(s, out, flat, lanes(dtype, target), vectorize)
    return s, [*inputs, out]


def column_sum(
    rows: int, cols: int, dtype: str, acc_dtype: str, target: Target, *, vectorize: bool = True
) -> tuple[Schedule, list]:
    """out[j] = sum_i X[i, j] in `acc_dtype`: the columns of one vector are summed together,
    the running sums held in a register tile."""
    X = te.placeholder((rows, cols), dtype, name="X")
    i = te.reduce_axis(rows, name="i")
    out = te.compute((cols,), lambda j: te.sum(X[i, j].astype(acc_dtype), axis=i), name="Y")
    s = te.create_schedule(out.op)
    acc = s.cache_write(out, "local")
    jo, _ = _vector_split(
        s, out, out.op.axis[0], accumulator_lanes(dtype, acc_dtype, target), vectorize
    )
    s[acc].compute_at(s[out], jo)
    (aj,) = s[acc].op.axis
    (ai,) = s[acc].op.reduce_axis
    s[acc].reorder(ai, aj)
    if vectorize:
        s[acc].vectorize(aj)
    return s, [X, out]


def matmul(
    m: int, n: int, k: int, dtype: str, acc_dtype: str, target: Target, *, vectorize: bool = True
) -> tuple[Schedule, list]:
    """C[i, j] = sum_k A[i, k] * B[k, j] in `acc_dtype`: a row of C is computed one vector of
    columns at a time, the vector accumulated in registers over k."""
    A = te.placeholder((m, k), dtype, name="A")
    B = te.placeholder((k, n), dtype, name="B")
    r = te.reduce_axis(k, name="k")
    C = te.compute(
        (m, n),
        lambda i, j: te.sum(A[i, r].astype(acc_dtype) * B[r, j].astype(acc_dtype), axis=r),
        name="C",
    )
    s = te.create_schedule(C.op)
    acc = s.cache_write(C, "local")
    jo, _ = _vector_split(
        s, C, C.op.axis[1], accumulator_lanes(dtype, acc_dtype, target), vectorize
    )
    s[acc].compute_at(s[C], jo)
    ai, aj = s[acc].op.axis
    (ak,) = s[acc].op.reduce_axis
    s[acc].reorder(ai, ak, aj)
    if vectorize:
        s[acc].vectorize(aj)
    return s, [A, B, C]


def conv2d_nchw(
    shape: tuple[int, int, int, int],
    kernel: tuple[int, int, int, int],
    dtype: str,
    acc_dtype: str,
    target: Target,
    *,
    padding: int = 0,
    vectorize: bool = True,
) -> tuple[Schedule, list]:
    """A stride-1 conv2d over NCHW data, OIHW kernel, accumulated in `acc_dtype`: each output
    row is computed one vector of columns at a time. The padded input is computed once, so the
    inner loop reads it with plain vector loads (no lane is out of bounds)."""

    data = te.placeholder(shape, dtype, name="data")
    weights = te.placeholder(kernel, dtype, name="kernel")
    out = conv(data, weights, stride=1, padding=padding, out_dtype=acc_dtype, name="conv")
    s = te.create_schedule(out.op)
    acc = s.cache_write(out, "local")
    n, f, y, x = out.op.axis
    width = accumulator_lanes(dtype, acc_dtype, target)
    xo, _ = _vector_split(s, out, x, width, vectorize)
    s[acc].compute_at(s[out], xo)
    an, af, ay, ax = s[acc].op.axis
    rc, ry, rx = s[acc].op.reduce_axis
    s[acc].reorder(an, af, ay, rc, ry, rx, ax)
    if vectorize:
        s[acc].vectorize(ax)
    if out.shape[3] % width and vectorize:
        raise LoomError(
            f"conv2d_nchw for HVX needs an output width that is a multiple of "
            f"{width}, got {out.shape[3]}"
        )
    return s, [data, weights, out]
