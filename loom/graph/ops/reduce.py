"""Reductions (ONNX opset 21 semantics): ReduceSum, ReduceMean, ReduceMax, ReduceMin,
ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp, ArgMax, ArgMin.

A reduction is `post(accumulate(pre(x)))` over the reduced axes: ReduceL2 is the square root
(`post`) of a sum (`accumulate`) of squares (`pre`). The axes come from the optional constant
`axes` input; without it (or with it empty) every axis is reduced, unless
noop_with_empty_axes=1, which reduces none: onnxruntime then still applies pre and post (a
ReduceSumSquare squares each element), and so does loom.

Integer tensors follow onnxruntime: ReduceMean divides the sum by the count truncating toward
zero, ReduceL2 truncates the float64 square root. float16 accumulates in float32.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from loom import te
from loom.errors import LoomError
from loom.graph.ir import Node, TensorType
from loom.graph.ops.base import Operator, Pattern, normalize_axis, register
from loom.ir import op as irop
from loom.ir.expr import PrimExpr
from loom.te.tensor import Tensor

REDUCE_ATTRS = frozenset({"keepdims", "noop_with_empty_axes"})
ARG_ATTRS = frozenset({"axis", "keepdims", "select_last_index"})


def _fail(node: Node, message: str) -> LoomError:
    return LoomError(f"{node.label}: {message}")


# -- which axes ------------------------------------------------------------------------------------


def reduced_axes(node: Node, rank: int, axes: np.ndarray | None) -> tuple[int, ...]:
    """The axes `node` reduces, sorted: the `axes` input (None: absent), normalized."""
    present = len(node.inputs) > 1 and bool(node.inputs[1])
    if present and axes is None:
        raise _fail(node, "axes (input 1) must be a constant")
    values = [] if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
    if not values:
        return () if int(node.attr("noop_with_empty_axes", 0)) else tuple(range(rank))
    out = sorted(normalize_axis(a, rank, node) for a in values)
    if len(set(out)) != len(out):
        raise _fail(node, f"axes {values} repeat an axis")
    return tuple(out)


def _reduced_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if k in axes else d for k, d in enumerate(shape))
    return tuple(d for k, d in enumerate(shape) if k not in axes)


def _input_index(out_index: Sequence, rank: int, axes: Sequence[int], reduce_vars, keepdims: bool):
    """The input index read for an output element: reduction variables on reduced axes."""
    it, rv = iter(out_index), iter(reduce_vars)
    index = []
    for k in range(rank):
        if k in axes:
            index.append(next(rv))
            if keepdims:
                next(it)
        else:
            index.append(next(it))
    return index


# -- the reductions --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Reduction:
    """One reduction: numpy's value, and its parts for `loom.te`."""

    name: str
    numpy: Callable[[np.ndarray, tuple[int, ...]], np.ndarray]
    """(x, axes) -> the reduction with kept dimensions, in x's dtype."""
    accumulate: Callable
    """te.sum, te.max, te.min or te.prod."""
    pre: Callable[[PrimExpr], PrimExpr] = lambda v: v
    post: Callable[[PrimExpr, int], PrimExpr] | None = None
    """(accumulated value, number of elements reduced) -> the result (None: the value)."""
    float_only: bool = False
    widen: bool = True
    """Accumulate float16 in float32."""


def _count(x: np.ndarray, axes: tuple[int, ...]) -> int:
    return int(np.prod([x.shape[a] for a in axes], dtype=np.int64))


def _trunc_div(total: np.ndarray, count: int) -> np.ndarray:
    q = total // count
    return (q + ((q < 0) & (q * count != total))).astype(total.dtype)


def _np_sum(x, axes):
    return np.sum(x, axis=axes, keepdims=True, dtype=x.dtype)


def _np_mean(x, axes):
    if x.dtype.kind == "f":
        return np.mean(x, axis=axes, keepdims=True, dtype=x.dtype)
    return _trunc_div(_np_sum(x, axes), max(_count(x, axes), 1))


def _np_l2(x, axes):
    total = _np_sum(x * x, axes)
    if x.dtype.kind == "f":
        return np.sqrt(total)
    return np.trunc(np.sqrt(total.astype(np.float64))).astype(x.dtype)


def _np_log_sum_exp(x, axes):
    top = np.max(x, axis=axes, keepdims=True) if x.size else np.zeros((), x.dtype)
    top = np.where(np.isfinite(top), top, np.zeros_like(top))
    return (np.log(np.sum(np.exp(x - top), axis=axes, keepdims=True)) + top).astype(x.dtype)


def _mean_post(acc: PrimExpr, count: int) -> PrimExpr:
    if acc.dtype.is_float:
        return acc / irop.const(float(count), acc.dtype)
    return irop.truncdiv(acc, count)


def _l2_post(acc: PrimExpr, count: int) -> PrimExpr:
    if acc.dtype.is_float:
        return te.sqrt(acc)
    return te.cast(te.sqrt(te.cast(acc, "float64")), acc.dtype)


REDUCTIONS = {
    r.name: r
    for r in (
        Reduction("ReduceSum", _np_sum, te.sum),
        Reduction("ReduceMean", _np_mean, te.sum, post=_mean_post),
        Reduction("ReduceMax", lambda x, a: np.max(x, axis=a, keepdims=True), te.max, widen=False),
        Reduction("ReduceMin", lambda x, a: np.min(x, axis=a, keepdims=True), te.min, widen=False),
        Reduction(
            "ReduceProd", lambda x, a: np.prod(x, axis=a, keepdims=True, dtype=x.dtype), te.prod
        ),
        Reduction("ReduceSumSquare", lambda x, a: _np_sum(x * x, a), te.sum, pre=lambda v: v * v),
        Reduction("ReduceL1", lambda x, a: _np_sum(np.abs(x), a), te.sum, pre=te.abs),
        Reduction("ReduceL2", _np_l2, te.sum, pre=lambda v: v * v, post=_l2_post),
        Reduction(
            "ReduceLogSum",
            lambda x, a: np.log(_np_sum(x, a)),
            te.sum,
            post=lambda acc, n: te.log(acc),
            float_only=True,
        ),
        Reduction("ReduceLogSumExp", _np_log_sum_exp, te.sum, float_only=True),
    )
}
"""loom's reductions by operator name."""


def _reduce_infer(reduction: Reduction):
    def infer(node, types, consts):
        t = types[0]
        if reduction.float_only and not t.dtype.is_float:
            raise _fail(node, f"{reduction.name} of {t.dtype} is not supported (float only)")
        if str(t.dtype) == "bool" and reduction.name not in ("ReduceMax", "ReduceMin"):
            raise _fail(node, f"{reduction.name} of bool is not supported")
        axes = reduced_axes(node, t.rank, consts[1] if len(consts) > 1 else None)
        keepdims = bool(int(node.attr("keepdims", 1)))
        return [TensorType(_reduced_shape(t.shape, axes, keepdims), t.dtype)]

    return infer


def _reduce_evaluate(reduction: Reduction):
    def evaluate(node, inputs):
        x = inputs[0]
        axes = reduced_axes(node, x.ndim, inputs[1] if len(inputs) > 1 else None)
        work = x.astype(np.float32) if reduction.widen and x.dtype == np.float16 else x
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = np.asarray(reduction.numpy(work, axes))
        if not int(node.attr("keepdims", 1)):
            out = out.reshape(_reduced_shape(x.shape, axes, False))
        return [out.astype(x.dtype)]

    return evaluate


def _work_dtype(reduction: Reduction, x: Tensor) -> str:
    return "float32" if reduction.widen and str(x.dtype) == "float16" else str(x.dtype)


def _reduce_compute(reduction: Reduction):
    def compute(node, tensors, consts, out_types):
        x = tensors[0]
        axes = reduced_axes(node, x.ndim, consts[1] if len(consts) > 1 else None)
        keepdims = bool(int(node.attr("keepdims", 1)))
        shape, dt = out_types[0].shape, _work_dtype(reduction, x)
        count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
        name = node.op.lower()
        if reduction.name == "ReduceLogSumExp":
            return [_log_sum_exp(x, axes, keepdims, shape, dt, name)]

        def finish(acc: PrimExpr) -> PrimExpr:
            done = acc if reduction.post is None else reduction.post(acc, count)
            return te.cast(done, x.dtype)

        def element(index) -> PrimExpr:
            return reduction.pre(te.cast(x(*index), dt))

        if not axes:
            return [te.compute(shape, lambda *i: finish(element(i)), name=name)]
        rvars = [te.reduce_axis(x.shape[a], f"r{a}") for a in axes]
        direct = reduction.post is None and dt == str(x.dtype)
        acc = te.compute(
            shape,
            lambda *i: reduction.accumulate(
                element(_input_index(i, x.ndim, axes, rvars, keepdims)), axis=rvars
            ),
            name=name if direct else f"{name}.acc",
        )
        if direct:
            return [acc]
        return [te.compute(shape, lambda *i: finish(acc(*i)), name=name)]

    return compute


def _log_sum_exp(x: Tensor, axes, keepdims: bool, shape, dt: str, name: str) -> Tensor:
    """log(sum(exp(x - m))) + m, m the maximum, or 0 where that is infinite (all -inf gives
    -inf, not NaN)."""
    if not axes:
        return te.compute(shape, lambda *i: x(*i), name=name)
    r1 = [te.reduce_axis(x.shape[a], f"r{a}") for a in axes]
    r2 = [te.reduce_axis(x.shape[a], f"s{a}") for a in axes]
    top = te.compute(
        shape,
        lambda *i: te.max(te.cast(x(*_input_index(i, x.ndim, axes, r1, keepdims)), dt), axis=r1),
        name=f"{name}.max",
    )
    inf = irop.const(float("inf"), dt)
    finite = te.compute(
        shape,
        lambda *i: te.select(te.abs(top(*i)) < inf, top(*i), irop.const(0.0, dt)),
        name=f"{name}.shift",
    )
    total = te.compute(
        shape,
        lambda *i: te.sum(
            te.exp(te.cast(x(*_input_index(i, x.ndim, axes, r2, keepdims)), dt) - finite(*i)),
            axis=r2,
        ),
        name=f"{name}.sum",
    )
    return te.compute(shape, lambda *i: te.cast(te.log(total(*i)) + finite(*i), x.dtype), name=name)


def _register_reduction(reduction: Reduction) -> None:
    register(
        Operator(
            reduction.name,
            Pattern.REDUCTION,
            _reduce_infer(reduction),
            _reduce_evaluate(reduction),
            _reduce_compute(reduction),
            attrs=REDUCE_ATTRS,
            constant_inputs=(1,),
            doc=f"{reduction.name} over the constant `axes` input (all axes without it, none "
            "with noop_with_empty_axes=1), keepdims.",
        )
    )


for reduction in REDUCTIONS.values():
    _register_reduction(reduction)
del reduction


# -- ArgMax, ArgMin --------------------------------------------------------------------------------


def _arg_axis(node: Node, rank: int) -> int:
    return normalize_axis(int(node.attr("axis", 0)), max(rank, 1), node)


def _arg_infer(node, types, consts):
    t = types[0]
    if t.rank == 0:
        raise _fail(node, "needs a tensor of rank >= 1")
    axis = _arg_axis(node, t.rank)
    keepdims = bool(int(node.attr("keepdims", 1)))
    return [TensorType(_reduced_shape(t.shape, (axis,), keepdims), "int64")]


def _arg_evaluate(largest: bool):
    def evaluate(node, inputs):
        x = inputs[0]
        axis = _arg_axis(node, x.ndim)
        pick = np.argmax if largest else np.argmin
        if int(node.attr("select_last_index", 0)):
            index = x.shape[axis] - 1 - pick(np.flip(x, axis=axis), axis=axis)
        else:
            index = pick(x, axis=axis)
        if int(node.attr("keepdims", 1)):
            index = np.expand_dims(index, axis)
        return [np.asarray(index, dtype=np.int64)]

    return evaluate


def _arg_compute(largest: bool):
    def compute(node, tensors, consts, out_types):
        """The extreme value, then the first (or last) index holding it."""
        x = tensors[0]
        axis = _arg_axis(node, x.ndim)
        keepdims = bool(int(node.attr("keepdims", 1)))
        shape, n, name = out_types[0].shape, x.shape[axis], node.op.lower()
        r1, r2 = te.reduce_axis(n, "r"), te.reduce_axis(n, "s")
        extreme = te.max if largest else te.min
        best = te.compute(
            shape,
            lambda *i: extreme(x(*_input_index(i, x.ndim, (axis,), [r1], keepdims)), axis=r1),
            name=f"{name}.value",
        )
        last = bool(int(node.attr("select_last_index", 0)))
        pick, missing = (te.max, -1) if last else (te.min, n)

        def rule(*i):
            hit = te.equal(x(*_input_index(i, x.ndim, (axis,), [r2], keepdims)), best(*i))
            k = te.cast(r2, "int64")
            return pick(te.select(hit, k, irop.const(missing, "int64")), axis=r2)

        return [te.compute(shape, rule, name=name)]

    return compute


def _register_arg(name: str, largest: bool) -> None:
    register(
        Operator(
            name,
            Pattern.REDUCTION,
            _arg_infer,
            _arg_evaluate(largest),
            _arg_compute(largest),
            attrs=ARG_ATTRS,
            doc=f"The int64 index of the {'largest' if largest else 'smallest'} element along "
            "`axis` (the first, or the last with select_last_index=1), keepdims. NaN is not "
            "treated specially.",
        )
    )


_register_arg("ArgMax", True)
_register_arg("ArgMin", False)


__all__ = ["ARG_ATTRS", "REDUCE_ATTRS", "REDUCTIONS", "Reduction", "reduced_axes"]
