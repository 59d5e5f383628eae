"""Shape and index operators (ONNX opset 21 semantics): Reshape, Flatten, Transpose, Squeeze,
Unsqueeze, Concat, Split, Slice, Gather, GatherND, GatherElements, Expand, Tile, Pad, Resize,
Range, Shape, Size, ConstantOfShape, Trilu, DepthToSpace, SpaceToDepth and OneHot.

Each output element of these operators is one input element (or a constant), found by integer
arithmetic on the output index: a Reshape's floordiv/floormod of a flat index, a Slice's
`start + i * step`, a Gather's run-time index. So they are INJECTIVE and fuse into their
consumers. Inputs that decide shapes (a Reshape's target, a Slice's starts, Pad's pads) must be
constants of the graph: they are listed in `constant_inputs` and read from the constants.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from loom import te
from loom.errors import LoomError
from loom.graph.ir import Node, TensorType
from loom.graph.ops.base import (
    Operator,
    Pattern,
    broadcast_index,
    broadcast_shape,
    normalize_axis,
    register,
)
from loom.ir import op as irop
from loom.ir.expr import PrimExpr
from loom.te.tensor import Tensor

INDEX_DTYPES = ("int32", "int64")
_TABLE_LIMIT = 64
"""Constant index arrays up to this size become select trees in the kernel rather than reads of
the index tensor (any size does when the index tensor is not given)."""


# -- helpers ---------------------------------------------------------------------------------------


def _fail(node: Node, message: str) -> LoomError:
    return LoomError(f"{node.label}: {message}")


def _present(node: Node, k: int) -> bool:
    return k < len(node.inputs) and bool(node.inputs[k])


def _const(node: Node, consts: Sequence[np.ndarray | None], k: int, what: str) -> np.ndarray:
    value = consts[k] if k < len(consts) else None
    if value is None:
        raise _fail(node, f"{what} (input {k}) must be a constant")
    return np.asarray(value)


def _const_ints(node: Node, consts, k: int, what: str) -> tuple[int, ...]:
    value = _const(node, consts, k, what)
    if value.dtype.kind not in "iu":
        raise _fail(node, f"{what} (input {k}) must hold integers, got {value.dtype}")
    return tuple(int(v) for v in value.reshape(-1))


def _optional_ints(node: Node, consts, k: int, what: str) -> tuple[int, ...] | None:
    if not _present(node, k):
        return None
    return _const_ints(node, consts, k, what)


def _check_index_dtype(node: Node, t: TensorType, what: str) -> None:
    if str(t.dtype) not in INDEX_DTYPES:
        raise _fail(node, f"{what} must be int32 or int64, got {t.dtype}")


def _axes(node: Node, axes: Sequence[int], rank: int) -> tuple[int, ...]:
    out = tuple(normalize_axis(int(a), rank, node) for a in axes)
    if len(set(out)) != len(out):
        raise _fail(node, f"axes {list(axes)} repeat an axis")
    return out


def _attr_axis(node: Node, rank: int, default: int = 0) -> int:
    return normalize_axis(int(node.attr("axis", default)), rank, node)


def _name(node: Node) -> str:
    return node.op.lower()


def _flat(index: Sequence, shape: Sequence[int]) -> PrimExpr:
    """The row-major position of `index` in `shape`."""
    flat: PrimExpr = irop.const(0)
    for i, d in zip(index, shape):
        flat = irop.add(irop.mul(flat, d), i)
    return flat


def _unflat(flat: PrimExpr, shape: Sequence[int]) -> list[PrimExpr]:
    """The index in `shape` at row-major position `flat` (< prod(shape))."""
    out: list[PrimExpr] = []
    stride = math.prod(shape)
    outermost = True
    for d in shape:
        stride //= d
        if d == 1:
            out.append(irop.const(0))
            continue
        q = flat if stride == 1 else irop.floordiv(flat, stride)
        out.append(q if outermost else irop.floormod(q, d))
        outermost = False
    return out


def _reshape_groups(a: Sequence[int], b: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """Runs of dimensions of `a` and of `b` with equal products, in order: an index maps within
    its run, so a reshape that keeps a dimension keeps its index without division."""
    groups = []
    i = j = 0
    while i < len(a) and j < len(b):
        pa, pb, ia, jb = a[i], b[j], [i], [j]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb:
                ia.append(i)
                pa, i = pa * a[i], i + 1
            else:
                jb.append(j)
                pb, j = pb * b[j], j + 1
        groups.append((ia, jb))
    return groups


def reshape_index(index: Sequence, out_shape: Sequence[int], in_shape: Sequence[int]) -> list:
    """The input index that an output element of a reshape from `in_shape` reads."""
    if 0 in out_shape or 0 in in_shape:
        raise LoomError("a reshape of an empty tensor has no elements to compute")
    result: list = [irop.const(0)] * len(in_shape)
    for ia, jb in _reshape_groups(in_shape, out_shape):
        if len(ia) == 1 and len(jb) == 1:
            result[ia[0]] = index[jb[0]]
            continue
        flat = _flat([index[j] for j in jb], [out_shape[j] for j in jb])
        for k, e in zip(ia, _unflat(flat, [in_shape[k] for k in ia])):
            result[k] = e
    return result


def _lookup(values: np.ndarray, pos: Sequence) -> PrimExpr:
    """values[pos] for a constant int array, as an int32 expression: a constant, an affine
    function of the flat position, or a balanced select tree."""
    flat_values = [int(v) for v in values.reshape(-1)]
    if len(flat_values) == 1:
        return irop.const(flat_values[0], "int32")
    flat = _flat(pos, values.shape)
    step = flat_values[1] - flat_values[0]
    if all(b - a == step for a, b in itertools.pairwise(flat_values)):
        return irop.add(irop.mul(flat, step), flat_values[0])

    def tree(lo: int, hi: int) -> PrimExpr:
        if hi - lo == 1:
            return irop.const(flat_values[lo], "int32")
        mid = (lo + hi) // 2
        return te.select(flat < mid, tree(lo, mid), tree(mid, hi))

    return tree(0, len(flat_values))


def _wrap_array(node: Node, values: np.ndarray, bound: int, what: str) -> np.ndarray:
    """ONNX index values (negative counts from the end) as indices in [0, bound)."""
    values = np.asarray(values).astype(np.int64)
    wrapped = np.where(values < 0, values + bound, values)
    if wrapped.size and (wrapped.min() < 0 or wrapped.max() >= bound):
        bad = values.reshape(-1)[np.argmax(((wrapped < 0) | (wrapped >= bound)).reshape(-1))]
        raise _fail(node, f"{what} value {bad} is out of range [-{bound}, {bound - 1}]")
    return wrapped


def _use_constant(tensor: Tensor | None, value: np.ndarray | None) -> bool:
    return value is not None and (tensor is None or value.size <= _TABLE_LIMIT)


def _index_expr(
    node: Node, tensor: Tensor | None, value: np.ndarray | None, pos: Sequence, bound: int
) -> PrimExpr:
    """The index (int32, in [0, bound)) that the element `pos` of an index input holds; a
    negative index wraps (`i + bound if i < 0`). The range is not clamped: the kernel's bounds
    checks catch an index out of range."""
    if _use_constant(tensor, value):
        return _lookup(_wrap_array(node, value, bound, "index"), pos)
    if tensor is None:
        raise _fail(node, "the index input is missing")
    v = tensor(*pos)
    return te.cast(te.select(v < 0, v + bound, v), "int32")


# -- Reshape, Flatten ------------------------------------------------------------------------------


def _reshape_shape(node: Node, in_shape: Sequence[int], target: Sequence[int]) -> tuple:
    allowzero = int(node.attr("allowzero", 0))
    out: list[int] = []
    unknown = None
    for k, d in enumerate(target):
        if d == -1:
            if unknown is not None:
                raise _fail(node, f"shape {list(target)} has more than one -1")
            unknown = k
            out.append(1)
        elif d == 0 and not allowzero:
            if k >= len(in_shape):
                raise _fail(node, f"shape {list(target)}: 0 at {k} copies no input dimension")
            out.append(in_shape[k])
        elif d < 0:
            raise _fail(node, f"shape {list(target)} has a negative dimension")
        else:
            out.append(d)
    total = math.prod(in_shape)
    if unknown is not None:
        known = math.prod(out)
        if known == 0 or total % known:
            raise _fail(node, f"cannot reshape {list(in_shape)} to {list(target)}")
        out[unknown] = total // known
    if math.prod(out) != total:
        raise _fail(node, f"cannot reshape {list(in_shape)} to {list(target)}")
    return tuple(out)


def _reshape_infer(node, types, consts):
    target = _const_ints(node, consts, 1, "shape")
    return [TensorType(_reshape_shape(node, types[0].shape, target), types[0].dtype)]


def _reshape_evaluate(node, inputs):
    x, shape = inputs
    return [x.reshape(_reshape_shape(node, x.shape, [int(v) for v in shape.reshape(-1)]))]


def _reshape_compute(node, tensors, consts, out_types):
    x, shape = tensors[0], out_types[0].shape
    return [te.compute(shape, lambda *i: x(*reshape_index(i, shape, x.shape)), name=_name(node))]


register(
    Operator(
        "Reshape",
        Pattern.INJECTIVE,
        _reshape_infer,
        _reshape_evaluate,
        _reshape_compute,
        attrs={"allowzero"},
        constant_inputs=(1,),
        doc="Reshape to a constant shape (0 copies the input dimension unless allowzero=1; "
        "-1 is inferred).",
    )
)


def _flatten_shape(node: Node, shape: Sequence[int]) -> tuple[int, int]:
    rank = len(shape)
    axis = int(node.attr("axis", 1))
    if not -rank <= axis <= rank:
        raise _fail(node, f"axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    return math.prod(shape[:axis]), math.prod(shape[axis:])


register(
    Operator(
        "Flatten",
        Pattern.INJECTIVE,
        lambda node, types, consts: [
            TensorType(_flatten_shape(node, types[0].shape), types[0].dtype)
        ],
        lambda node, inputs: [inputs[0].reshape(_flatten_shape(node, inputs[0].shape))],
        _reshape_compute,
        attrs={"axis"},
        doc="Flatten to 2-d: the dimensions before `axis`, and from it.",
    )
)


# -- Transpose -------------------------------------------------------------------------------------


def _perm(node: Node, rank: int) -> tuple[int, ...]:
    perm = node.attr("perm")
    if perm is None:
        return tuple(reversed(range(rank)))
    perm = tuple(int(p) for p in perm)
    if sorted(perm) != list(range(rank)):
        raise _fail(node, f"perm {list(perm)} is not a permutation of {rank} axes")
    return perm


def _transpose_infer(node, types, consts):
    t = types[0]
    return [TensorType(tuple(t.shape[p] for p in _perm(node, t.rank)), t.dtype)]


def _transpose_compute(node, tensors, consts, out_types):
    x = tensors[0]
    perm = _perm(node, x.ndim)

    def rule(*i):
        index = [None] * x.ndim
        for k, p in enumerate(perm):
            index[p] = i[k]
        return x(*index)

    return [te.compute(out_types[0].shape, rule, name=_name(node))]


register(
    Operator(
        "Transpose",
        Pattern.INJECTIVE,
        _transpose_infer,
        lambda node, inputs: [np.transpose(inputs[0], _perm(node, inputs[0].ndim))],
        _transpose_compute,
        attrs={"perm"},
        doc="Permute axes (default: reverse them).",
    )
)


# -- Squeeze, Unsqueeze ----------------------------------------------------------------------------


def _squeezed(node: Node, shape: Sequence[int], axes: Sequence[int] | None) -> tuple[int, ...]:
    if axes is None:
        return tuple(k for k, d in enumerate(shape) if d == 1)
    axes = _axes(node, axes, len(shape))
    for a in axes:
        if shape[a] != 1:
            raise _fail(node, f"cannot squeeze axis {a} of size {shape[a]}")
    return axes


def _squeeze_infer(node, types, consts):
    t = types[0]
    axes = _squeezed(node, t.shape, _optional_ints(node, consts, 1, "axes"))
    return [TensorType(tuple(d for k, d in enumerate(t.shape) if k not in axes), t.dtype)]


def _squeeze_evaluate(node, inputs):
    x = inputs[0]
    axes_in = None if len(inputs) < 2 or inputs[1] is None else inputs[1].reshape(-1).tolist()
    return [np.squeeze(x, axis=_squeezed(node, x.shape, axes_in))]


def _squeeze_compute(node, tensors, consts, out_types):
    x = tensors[0]
    axes = _squeezed(node, x.shape, _optional_ints(node, consts, 1, "axes"))

    def rule(*i):
        it = iter(i)
        return x(*[0 if k in axes else next(it) for k in range(x.ndim)])

    return [te.compute(out_types[0].shape, rule, name=_name(node))]


register(
    Operator(
        "Squeeze",
        Pattern.INJECTIVE,
        _squeeze_infer,
        _squeeze_evaluate,
        _squeeze_compute,
        constant_inputs=(1,),
        doc="Remove size-1 axes (the constant `axes` input, else every size-1 axis).",
    )
)


def _unsqueezed(node: Node, rank: int, axes: Sequence[int]) -> tuple[int, ...]:
    if not axes:
        raise _fail(node, "axes is empty")
    return _axes(node, axes, rank + len(axes))


def _unsqueeze_shape(node: Node, shape: Sequence[int], axes: tuple[int, ...]) -> tuple:
    it = iter(shape)
    return tuple(1 if k in axes else next(it) for k in range(len(shape) + len(axes)))


def _unsqueeze_infer(node, types, consts):
    t = types[0]
    axes = _unsqueezed(node, t.rank, _const_ints(node, consts, 1, "axes"))
    return [TensorType(_unsqueeze_shape(node, t.shape, axes), t.dtype)]


def _unsqueeze_evaluate(node, inputs):
    x, axes_in = inputs
    axes = _unsqueezed(node, x.ndim, axes_in.reshape(-1).tolist())
    return [x.reshape(_unsqueeze_shape(node, x.shape, axes))]


def _unsqueeze_compute(node, tensors, consts, out_types):
    x = tensors[0]
    axes = _unsqueezed(node, x.ndim, _const_ints(node, consts, 1, "axes"))

    def rule(*i):
        return x(*[v for k, v in enumerate(i) if k not in axes])

    return [te.compute(out_types[0].shape, rule, name=_name(node))]


register(
    Operator(
        "Unsqueeze",
        Pattern.INJECTIVE,
        _unsqueeze_infer,
        _unsqueeze_evaluate,
        _unsqueeze_compute,
        constant_inputs=(1,),
        doc="Insert size-1 axes at the constant `axes` (positions in the output).",
    )
)


# -- Concat, Split ---------------------------------------------------------------------------------


def _concat_infer(node, types, consts):
    first = types[0]
    if first.rank == 0:
        raise _fail(node, "cannot concatenate scalars")
    axis = _attr_axis(node, first.rank)
    for t in types[1:]:
        same = t.rank == first.rank and all(
            a == b for k, (a, b) in enumerate(zip(t.shape, first.shape)) if k != axis
        )
        if not same or t.dtype != first.dtype:
            raise _fail(node, f"cannot concatenate {first} and {t} on axis {axis}")
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in types)
    return [TensorType(tuple(shape), first.dtype)]


def _concat_compute(node, tensors, consts, out_types):
    axis = _attr_axis(node, tensors[0].ndim)
    parts, offset = [], 0
    for t in tensors:
        if t.shape[axis]:
            parts.append((t, offset))
        offset += t.shape[axis]

    def read(t: Tensor, off: int, i: Sequence) -> PrimExpr:
        return t(*i[:axis], i[axis] - off, *i[axis + 1 :])

    def rule(*i):
        t, off = parts[-1]
        expr = read(t, off, i)
        for t, off in reversed(parts[:-1]):
            expr = te.if_then_else(i[axis] < off + t.shape[axis], read(t, off, i), expr)
        return expr

    return [te.compute(out_types[0].shape, rule, name=_name(node))]


register(
    Operator(
        "Concat",
        Pattern.INJECTIVE,
        _concat_infer,
        lambda node, inputs: [
            np.concatenate(inputs, axis=_attr_axis(node, inputs[0].ndim)).astype(inputs[0].dtype)
        ],
        _concat_compute,
        attrs={"axis"},
        doc="Join any number of tensors along `axis`.",
    )
)


def _split_sizes(node: Node, shape: Sequence[int], split: Sequence[int] | None) -> list[int]:
    axis = _attr_axis(node, len(shape))
    dim, n = shape[axis], len(node.outputs)
    num_outputs = node.attr("num_outputs")
    if split is not None:
        if num_outputs is not None:
            raise _fail(node, "give either the split input or num_outputs, not both")
        sizes = list(split)
    elif num_outputs is not None:
        if num_outputs != n:
            raise _fail(node, f"num_outputs={num_outputs} but the node has {n} outputs")
        chunk = -(-dim // n)
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
    else:
        raise _fail(node, "needs the split input or the num_outputs attribute")
    if len(sizes) != n or any(s < 0 for s in sizes) or sum(sizes) != dim:
        raise _fail(node, f"split sizes {sizes} do not cut {dim} into {n} parts")
    return sizes


def _split_infer(node, types, consts):
    t = types[0]
    axis = _attr_axis(node, t.rank)
    sizes = _split_sizes(node, t.shape, _optional_ints(node, consts, 1, "split"))
    return [TensorType((*t.shape[:axis], s, *t.shape[axis + 1 :]), t.dtype) for s in sizes]


def _split_evaluate(node, inputs):
    x = inputs[0]
    split = None if len(inputs) < 2 or inputs[1] is None else inputs[1].reshape(-1).tolist()
    sizes = _split_sizes(node, x.shape, split)
    return np.split(x, np.cumsum(sizes)[:-1], axis=_attr_axis(node, x.ndim))


def _split_compute(node, tensors, consts, out_types):
    x = tensors[0]
    axis = _attr_axis(node, x.ndim)
    outs, offset = [], 0
    for k, t in enumerate(out_types):

        def rule(*i, off=offset):
            return x(*i[:axis], i[axis] + off, *i[axis + 1 :])

        outs.append(te.compute(t.shape, rule, name=f"{_name(node)}{k}"))
        offset += t.shape[axis]
    return outs


register(
    Operator(
        "Split",
        Pattern.INJECTIVE,
        _split_infer,
        _split_evaluate,
        _split_compute,
        attrs={"axis", "num_outputs"},
        constant_inputs=(1,),
        doc="Cut along `axis`: by the constant `split` sizes, or into `num_outputs` parts (the "
        "last one smaller if they do not divide the axis).",
    )
)


# -- Slice -----------------------------------------------------------------------------------------


def _slice_plan(node: Node, shape, starts, ends, axes, steps) -> list[tuple[int, int, int]]:
    """(start, step, count) per axis of `shape`, clamped as ONNX says."""
    rank = len(shape)
    if len(starts) != len(ends):
        raise _fail(node, f"starts {list(starts)} and ends {list(ends)} differ in length")
    axes = _axes(node, range(len(starts)) if axes is None else axes, rank)
    steps = [1] * len(starts) if steps is None else list(steps)
    if len(axes) != len(starts) or len(steps) != len(starts):
        raise _fail(node, "starts, ends, axes and steps must have the same length")
    plan = [(0, 1, d) for d in shape]
    for axis, s, e, step in zip(axes, starts, ends, steps):
        if step == 0:
            raise _fail(node, "a slice step is 0")
        dim = shape[axis]
        s, e = s + dim if s < 0 else s, e + dim if e < 0 else e
        if step > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
        plan[axis] = (s, step, max(0, -(-(e - s) // step)))
    return plan


def _slice_const_plan(node, shape, consts):
    return _slice_plan(
        node,
        shape,
        _const_ints(node, consts, 1, "starts"),
        _const_ints(node, consts, 2, "ends"),
        _optional_ints(node, consts, 3, "axes"),
        _optional_ints(node, consts, 4, "steps"),
    )


def _slice_infer(node, types, consts):
    plan = _slice_const_plan(node, types[0].shape, consts)
    return [TensorType(tuple(c for _, _, c in plan), types[0].dtype)]


def _slice_evaluate(node, inputs):
    x = inputs[0]
    plan = _slice_const_plan(node, x.shape, list(inputs) + [None] * (5 - len(inputs)))
    index = tuple(slice(s, s + c * st, st) if c else slice(0, 0) for s, st, c in plan)
    index = tuple(slice(sl.start, None if sl.stop < 0 else sl.stop, sl.step) for sl in index)
    return [x[index]]


def _slice_compute(node, tensors, consts, out_types):
    x = tensors[0]
    plan = _slice_const_plan(node, x.shape, consts)

    def rule(*i):
        return x(*[irop.add(irop.mul(v, st), s) for v, (s, st, _) in zip(i, plan)])

    return [te.compute(out_types[0].shape, rule, name=_name(node))]


register(
    Operator(
        "Slice",
        Pattern.INJECTIVE,
        _slice_infer,
        _slice_evaluate,
        _slice_compute,
        constant_inputs=(1, 2, 3, 4),
        doc="Take `starts:ends:steps` on `axes` (all constants; out-of-range starts and ends "
        "clamp as in ONNX, negative steps walk backwards).",
    )
)


# -- Gather, GatherND, GatherElements --------------------------------------------------------------


def _gather_infer(node, types, consts):
    data, indices = types
    _check_index_dtype(node, indices, "indices")
    axis = _attr_axis(node, data.rank)
    shape = data.shape[:axis] + indices.shape + data.shape[axis + 1 :]
    return [TensorType(shape, data.dtype)]


def _gather_evaluate(node, inputs):
    data, indices = inputs
    axis = _attr_axis(node, data.ndim)
    return [np.take(data, _wrap_array(node, indices, data.shape[axis], "indices"), axis=axis)]


def _gather_compute(node, tensors, consts, out_types):
    data, indices = tensors
    value = consts[1] if len(consts) > 1 else None
    axis = _attr_axis(node, data.ndim)
    q = len(out_types[0].shape) - data.ndim + 1

    def rule(*i):
        k = _index_expr(node, indices, value, i[axis : axis + q], data.shape[axis])
        return data(*i[:axis], k, *i[axis + q :])

    return [te.compute(out_types[0].shape, rule, name=_name(node))]


register(
    Operator(
        "Gather",
        Pattern.INJECTIVE,
        _gather_infer,
        _gather_evaluate,
        _gather_compute,
        attrs={"axis"},
        doc="Pick entries of `data` along `axis` by `indices` (any rank; negative counts from "
        "the end; a constant or a run-time tensor).",
    )
)


def _gather_nd_dims(node: Node, data: Sequence[int], indices: Sequence[int]) -> tuple:
    b = int(node.attr("batch_dims", 0))
    if not indices or not 0 <= b < min(len(data), len(indices)):
        raise _fail(node, f"batch_dims={b} does not fit data {data} and indices {indices}")
    m = indices[-1]
    if not 1 <= m <= len(data) - b:
        raise _fail(node, f"indices' last dimension {m} must be in [1, {len(data) - b}]")
    if tuple(data[:b]) != tuple(indices[:b]):
        raise _fail(node, f"batch dimensions differ: data {data}, indices {indices}")
    return b, m, tuple(indices[:-1]) + tuple(data[b + m :])


def _gather_nd_infer(node, types, consts):
    data, indices = types
    _check_index_dtype(node, indices, "indices")
    _, _, shape = _gather_nd_dims(node, data.shape, indices.shape)
    return [TensorType(shape, data.dtype)]


def _gather_nd_evaluate(node, inputs):
    data, indices = inputs
    b, m, shape = _gather_nd_dims(node, data.shape, indices.shape)
    batch = math.prod(data.shape[:b])
    flat_data = data.reshape((batch, *data.shape[b:]))
    flat_idx = indices.reshape(batch, -1, m).astype(np.int64)
    for k in range(m):
        flat_idx[..., k] = _wrap_array(node, flat_idx[..., k], data.shape[b + k], "indices")
    parts = [flat_data[n][tuple(flat_idx[n].T)] for n in range(batch)]
    return [np.stack(parts).reshape(shape).astype(data.dtype)]


def _gather_nd_compute(node, tensors, consts, out_types):
    data, indices = tensors
    value = consts[1] if len(consts) > 1 else None
    b, m, _ = _gather_nd_dims(node, data.shape, value.shape if indices is None else indices.shape)
    q = (indices.ndim if indices is not None else value.ndim) - 1
    use_constant = _use_constant(indices, value)

    def component(pos: Sequence, k: int) -> PrimExpr:
        bound = data.shape[b + k]
        if use_constant:
            return _lookup(_wrap_array(node, value[..., k], bound, "indices"), pos)
        return _index_expr(node, indices, None, (*pos, k), bound)

    def rule(*i):
        pos = i[:q]
        return data(*i[:b], *[component(pos, k) for k in range(m)], *i[q:])

    return [te.compute(out_types[0].shape, rule, name=_name(node))]


register(
    Operator(
        "GatherND",
        Pattern.INJECTIVE,
        _gather_nd_infer,
        _gather_nd_evaluate,
        _gather_nd_compute,
        attrs={"batch_dims"},
        doc="Pick slices of `data` by index tuples (the last axis of `indices`), after "
        "`batch_dims` shared leading dimensions.",
    )
)


def _gather_elements_infer(node, types, consts):
    data, indices = types
    _check_index_dtype(node, indices, "indices")
    if indices.rank != data.rank or data.rank == 0:
        raise _fail(node, f"indices {indices} and data {data} must have the same rank")
    _attr_axis(node, data.rank)
    return [TensorType(indices.shape, data.dtype)]


def _gather_elements_evaluate(node, inputs):
    data, indices = inputs
    axis = _attr_axis(node, data.ndim)
    wrapped = _wrap_array(node, indices, data.shape[axis], "indices")
    return [np.take_along_axis(data, wrapped, axis=axis)]


def _gather_elements_compute(node, tensors, consts, out_types):
    data, indices = tensors
    value = consts[1] if len(consts) > 1 else None
    axis = _attr_axis(node, data.ndim)

    def rule(*i):
        k = _index_expr(node, indices, value, i, data.shape[axis])
        return data(*i[:axis], k, *i[axis + 1 :])

    return [te.compute(out_types[0].shape, rule, name=_name(node))]


register(
    Operator(
        "GatherElements",
        Pattern.INJECTIVE,
        _gather_elements_infer,
        _gather_elements_evaluate,
        _gather_elements_compute,
        attrs={"axis"},
        doc="out[i] = data[i with its `axis` coordinate replaced by indices[i]].",
    )
)


# -- Expand, Tile ----------------------------------------------------------------------------------


def _expand_shape(node: Node, shape: Sequence[int], target: Sequence[int]) -> tuple:
    try:
        return broadcast_shape(shape, target)
    except ValueError:
        raise _fail(node, f"cannot expand {list(shape)} to {list(target)}") from None


def _expand_infer(node, types, consts):
    target = _const_ints(node, consts, 1, "shape")
    return [TensorType(_expand_shape(node, types[0].shape, target), types[0].dtype)]


def _expand_evaluate(node, inputs):
    x, target = inputs
    shape = _expand_shape(node, x.shape, target.reshape(-1).tolist())
    return [np.broadcast_to(x, shape).copy()]


def _expand_compute(node, tensors, consts, out_types):
    x, shape = tensors[0], out_types[0].shape
    return [te.compute(shape, lambda *i: x(*broadcast_index(x.shape, shape, i)), name=_name(node))]


register(
    Operator(
        "Expand",
        Pattern.BROADCAST,
        _expand_infer,
        _expand_evaluate,
        _expand_compute,
        constant_inputs=(1,),
        doc="Broadcast (numpy's rules, both ways) to a constant shape.",
    )
)


def _tile_repeats(node: Node, rank: int, repeats: Sequence[int]) -> tuple[int, ...]:
    if len(repeats) != rank or any(r < 0 for r in repeats):
        raise _fail(node, f"repeats {list(repeats)} must be {rank} non-negative counts")
    return tuple(repeats)


def _tile_infer(node, types, consts):
    t = types[0]
    reps = _tile_repeats(node, t.rank, _const_ints(node, consts, 1, "repeats"))
    return [TensorType(tuple(d * r for d, r in zip(t.shape, reps)), t.dtype)]


def _tile_evaluate(node, inputs):
    x, repeats = inputs
    return [np.tile(x, _tile_repeats(node, x.ndim, repeats.reshape(-1).tolist()))]


def _tile_compute(node, tensors, consts, out_types):
    x, shape = tensors[0], out_types[0].shape

    def rule(*i):
        return x(*[v if d == n else irop.floormod(v, d) for v, d, n in zip(i, x.shape, shape)])

    return [te.compute(shape, rule, name=_name(node))]


register(
    Operator(
        "Tile",
        Pattern.INJECTIVE,
        _tile_infer,
        _tile_evaluate,
        _tile_compute,
        constant_inputs=(1,),
        doc="Repeat the tensor `repeats[d]` times along each axis d (repeats constant).",
    )
)


# -- Pad -------------------------------------------------------------------------------------------

PAD_MODES = ("constant", "reflect", "edge", "wrap")


def _pad_check(node: Node) -> str | None:
    mode = node.attr("mode", "constant")
    if mode not in PAD_MODES:
        return f"mode={mode} not supported (supported: {', '.join(PAD_MODES)})"
    return None


def _pad_widths(node: Node, shape: Sequence[int], pads, axes) -> list[tuple[int, int]]:
    """(before, after) per axis; negative values crop."""
    rank = len(shape)
    axes = _axes(node, range(rank) if axes is None else axes, rank)
    if len(pads) != 2 * len(axes):
        raise _fail(node, f"pads {list(pads)} must hold 2 values for each of {len(axes)} axes")
    widths = [(0, 0)] * rank
    for k, a in enumerate(axes):
        widths[a] = (pads[k], pads[len(axes) + k])
    mode = node.attr("mode", "constant")
    for a, (b, e) in enumerate(widths):
        kept = shape[a] + min(b, 0) + min(e, 0)
        if kept < 0:
            raise _fail(node, f"pads {b}, {e} crop more than axis {a} of size {shape[a]}")
        if mode != "constant" and (b > 0 or e > 0):
            if kept == 0:
                raise _fail(node, f"mode={mode} cannot pad axis {a}, which is empty")
            if mode == "reflect" and max(b, e) > kept - 1:
                raise _fail(node, f"mode=reflect pads axis {a} of size {kept} by over {kept - 1}")
    return widths


def _pad_const_widths(node, shape, consts):
    return _pad_widths(
        node, shape, _const_ints(node, consts, 1, "pads"), _optional_ints(node, consts, 3, "axes")
    )


def _pad_infer(node, types, consts):
    t = types[0]
    widths = _pad_const_widths(node, t.shape, consts)
    return [TensorType(tuple(d + b + e for d, (b, e) in zip(t.shape, widths)), t.dtype)]


def _pad_evaluate(node, inputs):
    inputs = list(inputs) + [None] * (4 - len(inputs))
    x, _, value, _ = inputs
    widths = _pad_const_widths(node, x.shape, inputs)
    crop = tuple(slice(-min(b, 0), d - (-min(e, 0))) for d, (b, e) in zip(x.shape, widths))
    x = x[crop]
    grow = [(max(b, 0), max(e, 0)) for b, e in widths]
    mode = node.attr("mode", "constant")
    if mode == "constant":
        fill = 0 if value is None else np.asarray(value).reshape(-1)[0]
        return [np.pad(x, grow, mode="constant", constant_values=fill).astype(x.dtype)]
    return [np.pad(x, grow, mode=mode)]


def _pad_source(mode: str, j: PrimExpr, kept: int) -> PrimExpr:
    """The index in [0, kept) that padding mode `mode` reads for position j of the padded
    axis, relative to the first kept element."""
    if mode == "edge":
        return irop.min_(irop.max_(j, 0), kept - 1)
    if mode == "wrap":
        return irop.floormod(j, kept)
    last = kept - 1
    return last - te.abs(last - te.abs(j))


def _pad_compute(node, tensors, consts, out_types):
    x, value_tensor = tensors[0], tensors[2] if len(tensors) > 2 else None
    widths = _pad_const_widths(node, x.shape, consts)
    mode = node.attr("mode", "constant")
    value = _pad_value(node, x, value_tensor, consts)

    def rule(*i):
        index, inside = [], []
        for v, d, (b, e) in zip(i, x.shape, widths):
            if b == 0 and e == 0:
                index.append(v)
                continue
            start, kept = -min(b, 0), d + min(b, 0) + min(e, 0)
            j = v - max(b, 0)
            if mode == "constant":
                if b > 0 or e > 0:
                    inside += [j >= 0, j < kept]
                index.append(j + start)
            else:
                index.append(_pad_source(mode, j, kept) + start)
        if not inside:
            return x(*index)
        return te.if_then_else(irop.all_(*inside), x(*index), value)

    return [te.compute(out_types[0].shape, rule, name=_name(node))]


def _pad_value(node: Node, x: Tensor, tensor: Tensor | None, consts) -> PrimExpr:
    value = consts[2] if len(consts) > 2 else None
    if value is not None:
        return irop.const(np.asarray(value).reshape(-1)[0].item(), x.dtype)
    if tensor is not None:
        return tensor(*[0] * tensor.ndim)
    return irop.const(0, x.dtype)


register(
    Operator(
        "Pad",
        Pattern.INJECTIVE,
        _pad_infer,
        _pad_evaluate,
        _pad_compute,
        attrs={"mode"},
        check=_pad_check,
        constant_inputs=(1, 3),
        doc="Pad (negative pads crop first) with mode constant (the optional constant_value "
        "input, else 0), reflect, edge or wrap; pads and axes constant.",
    )
)


# -- Resize ----------------------------------------------------------------------------------------

RESIZE_COORDINATES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nn",
)
RESIZE_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize_check(node: Node) -> str | None:
    mode = node.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        return f"mode={mode} not supported (supported: nearest, linear)"
    coord = node.attr("coordinate_transformation_mode", "half_pixel")
    if coord not in RESIZE_COORDINATES:
        return f"coordinate_transformation_mode={coord} not supported"
    nearest = node.attr("nearest_mode", "round_prefer_floor")
    if nearest not in RESIZE_NEAREST:
        return f"nearest_mode={nearest} not supported"
    for attr, default in (("antialias", 0), ("exclude_outside", 0)):
        if node.attr(attr, default) != default:
            return f"{attr}={node.attr(attr)} not supported"
    policy = node.attr("keep_aspect_ratio_policy", "stretch")
    if policy != "stretch":
        return f"keep_aspect_ratio_policy={policy} not supported"
    return None


def _resize_plan(node: Node, shape: Sequence[int], consts) -> tuple[tuple, tuple]:
    """The output shape and the float32 scale of each axis, computed as onnxruntime does."""
    rank = len(shape)
    axes = node.attr("axes")
    axes = tuple(range(rank)) if axes is None else _axes(node, axes, rank)
    scales_in = consts[2] if _present(node, 2) and len(consts) > 2 else None
    if _present(node, 2) and scales_in is None:
        raise _fail(node, "scales (input 2) must be a constant")
    out, scales = list(shape), [np.float32(1)] * rank
    if scales_in is not None and np.asarray(scales_in).size:
        given = np.asarray(scales_in, np.float32).reshape(-1)
        if len(given) != len(axes) or np.any(given <= 0):
            raise _fail(node, f"scales {given.tolist()} must be {len(axes)} positive numbers")
        for a, s in zip(axes, given):
            scales[a] = s
            out[a] = int(s * np.float32(shape[a]))
    elif _present(node, 3):
        sizes = _const_ints(node, consts, 3, "sizes")
        if len(sizes) != len(axes) or any(s < 0 for s in sizes):
            raise _fail(node, f"sizes {list(sizes)} must be {len(axes)} non-negative sizes")
        for a, s in zip(axes, sizes):
            out[a] = s
            scales[a] = np.float32(s) / np.float32(shape[a]) if shape[a] else np.float32(1)
    else:
        raise _fail(node, "needs scales or sizes")
    return tuple(out), tuple(scales)


def _resize_infer(node, types, consts):
    t = types[0]
    if t.rank == 0:
        raise _fail(node, "cannot resize a scalar")
    if node.attr("mode", "nearest") == "linear" and not t.dtype.is_float:
        raise _fail(node, f"mode=linear needs a float tensor, got {t.dtype}")
    out, _ = _resize_plan(node, t.shape, consts)
    return [TensorType(out, t.dtype)]


class _NumpyMath:
    """The scalar operations of a coordinate transform, on float32 numpy arrays."""

    f32 = staticmethod(np.float32)
    floor = staticmethod(np.floor)
    ceil = staticmethod(np.ceil)
    select = staticmethod(np.where)
    minimum = staticmethod(np.minimum)
    maximum = staticmethod(np.maximum)
    abs = staticmethod(np.abs)
    equal = staticmethod(np.equal)

    @staticmethod
    def cast(x, dt: str):
        return np.asarray(x).astype(dt)


class _TeMath:
    """The same operations on loom expressions (float32 arithmetic, as onnxruntime's)."""

    floor = staticmethod(te.floor)
    ceil = staticmethod(te.ceil)
    select = staticmethod(te.select)
    minimum = staticmethod(irop.min_)
    maximum = staticmethod(irop.max_)
    abs = staticmethod(te.abs)
    equal = staticmethod(te.equal)
    cast = staticmethod(te.cast)

    @staticmethod
    def f32(v):
        return irop.const(float(v), "float32")


def _original_coordinate(m, mode: str, x, scale, out_len: int, in_len: int):
    """onnxruntime's GetOriginalCoordinate: where output position x (float32) samples the
    input, in float32 arithmetic (half_pixel_symmetric: partly float64, as onnxruntime)."""
    f = m.f32
    if mode == "asymmetric":
        return x / f(scale)
    if mode == "half_pixel":
        return (x + f(0.5)) / f(scale) - f(0.5)
    if mode == "tf_half_pixel_for_nn":
        return (x + f(0.5)) / f(scale)
    if mode == "pytorch_half_pixel":
        return (x + f(0.5)) / f(scale) - f(0.5) if out_len > 1 else x * f(0)
    if mode == "align_corners":
        if out_len == 1:
            return x * f(0)
        return x * f(in_len - 1) / f(out_len - 1)
    adjustment = np.float32(out_len) / (np.float32(scale) * np.float32(in_len))
    offset = np.float32(np.float32(in_len) / np.float32(2)) * (np.float32(1) - adjustment)
    return m.cast(float(offset) + (m.cast(x, "float64") + 0.5) / float(scale) - 0.5, "float32")


def _nearest_source(m, node: Node, x, scale, out_len: int, in_len: int):
    """The input index (int32) nearest mode reads for output position x."""
    if scale == 1:
        return m.cast(x, "int32")
    coord = node.attr("coordinate_transformation_mode", "half_pixel")
    orig = _original_coordinate(m, coord, x, scale, out_len, in_len)
    rounding = node.attr("nearest_mode", "round_prefer_floor")
    if rounding == "floor":
        picked = m.floor(orig)
    elif rounding == "ceil":
        picked = m.ceil(orig)
    else:
        # round from floor and the exact fraction: std::round's ties differ from np.round's
        low = m.floor(orig)
        frac = orig - low
        up = frac >= m.f32(0.5) if rounding == "round_prefer_ceil" else frac > m.f32(0.5)
        picked = m.select(up, low + m.f32(1), low)
    return m.cast(m.maximum(m.minimum(picked, m.f32(in_len - 1)), m.f32(0)), "int32")


def _linear_sources(m, node: Node, x, scale, out_len: int, in_len: int):
    """(low index, high index, weight of low, weight of high) linear mode reads for output
    position x, as onnxruntime's bilinear setup computes them."""
    coord = node.attr("coordinate_transformation_mode", "half_pixel")
    orig = x if scale == 1 else _original_coordinate(m, coord, x, scale, out_len, in_len)
    orig = m.maximum(m.minimum(orig, m.f32(in_len - 1)), m.f32(0))
    low = m.minimum(m.cast(orig, "int32"), in_len - 1)
    high = m.minimum(low + 1, in_len - 1)
    d_low = m.abs(orig - m.cast(low, "float32"))
    d_high = m.abs(orig - m.cast(high, "float32"))
    # at the last input element both corners are one element: onnxruntime weighs each by half
    same = m.equal(low, high)
    return low, high, m.select(same, m.f32(0.5), d_high), m.select(same, m.f32(0.5), d_low)


def _resize_evaluate(node, inputs):
    inputs = list(inputs) + [None] * (4 - len(inputs))
    x = inputs[0]
    out_shape, scales = _resize_plan(node, x.shape, inputs)
    m = _NumpyMath
    if node.attr("mode", "nearest") == "nearest":
        y = x
        for a, (d, n, s) in enumerate(zip(x.shape, out_shape, scales)):
            pos = np.arange(n, dtype=np.float32)
            y = np.take(y, _nearest_source(m, node, pos, s, n, d), axis=a)
        return [y]
    work = x.astype(np.float32) if x.dtype != np.float64 else x
    for a, (d, n, s) in enumerate(zip(x.shape, out_shape, scales)):
        if s == 1 and d == n:
            continue
        pos = np.arange(n, dtype=np.float32)
        low, high, w_low, w_high = _linear_sources(m, node, pos, s, n, d)
        shape = [1] * x.ndim
        shape[a] = n
        work = np.take(work, low, axis=a) * w_low.reshape(shape).astype(work.dtype) + np.take(
            work, high, axis=a
        ) * w_high.reshape(shape).astype(work.dtype)
    return [work.astype(x.dtype)]


def _resize_compute(node, tensors, consts, out_types):
    x = tensors[0]
    out_shape, scales = _resize_plan(node, x.shape, consts)
    m = _TeMath
    axes = [a for a, (d, n, s) in enumerate(zip(x.shape, out_shape, scales)) if s != 1 or d != n]
    if node.attr("mode", "nearest") == "nearest":

        def nearest(*i):
            return x(
                *[
                    _nearest_source(m, node, te.cast(v, "float32"), s, n, d) if a in axes else v
                    for a, (v, d, n, s) in enumerate(zip(i, x.shape, out_shape, scales))
                ]
            )

        return [te.compute(out_shape, nearest, name=_name(node))]
    work = "float64" if str(x.dtype) == "float64" else "float32"

    def linear(*i):
        sources = {
            a: _linear_sources(
                m, node, te.cast(i[a], "float32"), scales[a], out_shape[a], x.shape[a]
            )
            for a in axes
        }
        total = None
        for corner in itertools.product((0, 1), repeat=len(axes)):
            index, weight = list(i), None
            for a, high in zip(axes, corner):
                index[a] = sources[a][high]
                w = sources[a][2 + high]
                weight = w if weight is None else weight * w
            term = te.cast(x(*index), work)
            term = term if weight is None else term * te.cast(weight, work)
            total = term if total is None else total + term
        return te.cast(total, x.dtype)

    return [te.compute(out_shape, linear, name=_name(node))]


register(
    Operator(
        "Resize",
        Pattern.INJECTIVE,
        _resize_infer,
        _resize_evaluate,
        _resize_compute,
        attrs={
            "antialias",
            "axes",
            "coordinate_transformation_mode",
            "cubic_coeff_a",
            "exclude_outside",
            "extrapolation_value",
            "keep_aspect_ratio_policy",
            "mode",
            "nearest_mode",
        },
        check=_resize_check,
        constant_inputs=(1, 2, 3),
        doc="Resize by constant scales or sizes: mode nearest (any nearest_mode) or linear "
        "(float tensors; every resized axis interpolated), the coordinate transformations "
        "but tf_crop_and_resize, computed in float32 as onnxruntime does. Not cubic, "
        "antialias, exclude_outside or an aspect-ratio policy.",
    )
)


# -- Range, Shape, Size, ConstantOfShape -----------------------------------------------------------


def _range_values(node: Node, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> tuple:
    start, limit, delta = (np.asarray(v).reshape(()) for v in (start, limit, delta))
    if delta == 0:
        raise _fail(node, "delta is 0")
    diff = np.asarray(limit - start, dtype=start.dtype)
    count = max(0, math.ceil(float(diff) / float(delta)))
    return start, delta, count


def _range_infer(node, types, consts):
    _, _, count = _range_values(
        node, *(_const(node, consts, k, n) for k, n in enumerate(("start", "limit", "delta")))
    )
    return [TensorType((count,), types[0].dtype)]


def _range_evaluate(node, inputs):
    start, delta, count = _range_values(node, *inputs)
    if start.dtype.kind == "f":
        # onnxruntime adds delta again and again, in the tensor's type
        steps = np.full(count, delta, start.dtype)
        if count:
            steps[0] = start
        return [np.cumsum(steps, dtype=start.dtype)]
    return [(start + np.arange(count, dtype=start.dtype) * delta).astype(start.dtype)]


def _range_compute(node, tensors, consts, out_types):
    start, delta, _ = _range_values(
        node, *(_const(node, consts, k, n) for k, n in enumerate(("start", "limit", "delta")))
    )
    t = out_types[0]
    if t.dtype.is_float:
        # start + i * delta, not onnxruntime's running sum: equal up to its rounding
        def rule(i):
            value = irop.const(float(start), "float64") + te.cast(i, "float64") * float(delta)
            return te.cast(value, t.dtype)
    else:

        def rule(i):
            return irop.const(int(start), t.dtype) + te.cast(i, t.dtype) * int(delta)

    return [te.compute(t.shape, rule, name=_name(node))]


register(
    Operator(
        "Range",
        Pattern.OPAQUE,
        _range_infer,
        _range_evaluate,
        _range_compute,
        constant_inputs=(0, 1, 2),
        doc="start, start + delta, ... below limit (all three constant, so constant folding "
        "computes it; the kernel computes start + i * delta, which for floats may differ from "
        "onnxruntime's running sum in the last bits).",
    )
)


def _shape_range(node: Node, rank: int) -> tuple[int, int]:
    def clip(v: int) -> int:
        v = v + rank if v < 0 else v
        return min(max(v, 0), rank)

    start, end = clip(int(node.attr("start", 0))), clip(int(node.attr("end", rank)))
    return start, max(start, end)


def _shape_infer(node, types, consts):
    start, end = _shape_range(node, types[0].rank)
    return [TensorType((end - start,), "int64")]


def _shape_evaluate(node, inputs):
    start, end = _shape_range(node, inputs[0].ndim)
    return [np.array(inputs[0].shape[start:end], dtype=np.int64)]


register(
    Operator(
        "Shape",
        Pattern.OPAQUE,
        _shape_infer,
        _shape_evaluate,
        None,
        attrs={"start", "end"},
        doc="The input's dimensions start:end as int64. No kernel: the value comes from the "
        "input's type, so the lowering folds it into a constant.",
    )
)

register(
    Operator(
        "Size",
        Pattern.OPAQUE,
        lambda node, types, consts: [TensorType((), "int64")],
        lambda node, inputs: [np.array(inputs[0].size, dtype=np.int64)],
        None,
        doc="The input's element count as an int64 scalar. No kernel: the value comes from the "
        "input's type, so the lowering folds it into a constant.",
    )
)


def _fill_value(node: Node) -> np.ndarray:
    value = node.attr("value")
    if value is None:
        return np.zeros(1, np.float32)
    value = np.asarray(value)
    if value.size != 1:
        raise _fail(node, f"value must hold one element, got {value.size}")
    return value.reshape(1)


def _constant_of_shape_shape(node: Node, shape: Sequence[int]) -> tuple[int, ...]:
    if any(d < 0 for d in shape):
        raise _fail(node, f"shape {list(shape)} has a negative dimension")
    return tuple(shape)


def _constant_of_shape_infer(node, types, consts):
    shape = _constant_of_shape_shape(node, _const_ints(node, consts, 0, "shape"))
    return [TensorType(shape, TensorType.of(_fill_value(node)).dtype)]


def _constant_of_shape_evaluate(node, inputs):
    shape = _constant_of_shape_shape(node, inputs[0].reshape(-1).tolist())
    value = _fill_value(node)
    return [np.full(shape, value[0], dtype=value.dtype)]


def _constant_of_shape_compute(node, tensors, consts, out_types):
    t = out_types[0]
    value = irop.const(_fill_value(node)[0].item(), t.dtype)
    return [te.compute(t.shape, lambda *i: value, name=_name(node))]


register(
    Operator(
        "ConstantOfShape",
        Pattern.INJECTIVE,
        _constant_of_shape_infer,
        _constant_of_shape_evaluate,
        _constant_of_shape_compute,
        attrs={"value"},
        constant_inputs=(0,),
        doc="A tensor of the constant shape filled with `value` (one element; default float32 0).",
    )
)


# -- Trilu, DepthToSpace, SpaceToDepth, OneHot -----------------------------------------------------


def _trilu_infer(node, types, consts):
    if types[0].rank < 2:
        raise _fail(node, f"needs a tensor of rank >= 2, got {types[0]}")
    if _present(node, 1):
        _trilu_k(node, consts)
    return [types[0]]


def _trilu_k(node: Node, consts) -> int:
    if not _present(node, 1):
        return 0
    k = _const_ints(node, consts, 1, "k")
    if len(k) != 1:
        raise _fail(node, f"k must be a single integer, got {list(k)}")
    return k[0]


def _trilu_evaluate(node, inputs):
    x = inputs[0]
    k = _trilu_k(node, [*list(inputs), None])
    fn = np.triu if int(node.attr("upper", 1)) else np.tril
    return [fn(x, k).astype(x.dtype)]


def _trilu_compute(node, tensors, consts, out_types):
    x, k = tensors[0], _trilu_k(node, consts)
    upper = bool(int(node.attr("upper", 1)))

    def rule(*i):
        offset = i[-1] - i[-2]
        keep = offset >= k if upper else offset <= k
        return te.select(keep, x(*i), irop.const(0, x.dtype))

    return [te.compute(x.shape, rule, name=_name(node))]


register(
    Operator(
        "Trilu",
        Pattern.INJECTIVE,
        _trilu_infer,
        _trilu_evaluate,
        _trilu_compute,
        attrs={"upper"},
        constant_inputs=(1,),
        doc="Keep the upper (or lower) triangle of the last two axes from diagonal k "
        "(constant); zero the rest.",
    )
)


def _block(node: Node, shape: Sequence[int], to_space: bool) -> int:
    b = int(node.attr("blocksize", 0))
    if len(shape) != 4 or b < 1:
        raise _fail(node, f"needs a 4-d tensor and blocksize >= 1, got {list(shape)}, {b}")
    if to_space and shape[1] % (b * b):
        raise _fail(node, f"channels {shape[1]} are not a multiple of blocksize^2 = {b * b}")
    if not to_space and (shape[2] % b or shape[3] % b):
        raise _fail(node, f"height and width {shape[2:]} are not multiples of blocksize {b}")
    return b


def _depth_mode_check(node: Node) -> str | None:
    mode = node.attr("mode", "DCR")
    return None if mode in ("DCR", "CRD") else f"mode={mode} not supported (DCR or CRD)"


def _depth_to_space_infer(node, types, consts):
    t = types[0]
    b = _block(node, t.shape, True)
    n, c, h, w = t.shape
    return [TensorType((n, c // (b * b), h * b, w * b), t.dtype)]


def _depth_to_space_evaluate(node, inputs):
    x = inputs[0]
    b = _block(node, x.shape, True)
    n, c, h, w = x.shape
    if node.attr("mode", "DCR") == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [y.reshape(n, c // (b * b), h * b, w * b)]


def _depth_to_space_compute(node, tensors, consts, out_types):
    x = tensors[0]
    b = _block(node, x.shape, True)
    c_out = x.shape[1] // (b * b)
    dcr = node.attr("mode", "DCR") == "DCR"

    def rule(n, c, y, z):
        dy, dx = irop.floormod(y, b), irop.floormod(z, b)
        block = dy * b + dx
        channel = block * c_out + c if dcr else c * (b * b) + block
        return x(n, channel, irop.floordiv(y, b), irop.floordiv(z, b))

    return [te.compute(out_types[0].shape, rule, name=_name(node))]


register(
    Operator(
        "DepthToSpace",
        Pattern.INJECTIVE,
        _depth_to_space_infer,
        _depth_to_space_evaluate,
        _depth_to_space_compute,
        attrs={"blocksize", "mode"},
        check=_depth_mode_check,
        doc="Move blocksize x blocksize channel groups into space (NCHW; mode DCR or CRD).",
    )
)


def _space_to_depth_infer(node, types, consts):
    t = types[0]
    b = _block(node, t.shape, False)
    n, c, h, w = t.shape
    return [TensorType((n, c * b * b, h // b, w // b), t.dtype)]


def _space_to_depth_evaluate(node, inputs):
    x = inputs[0]
    b = _block(node, x.shape, False)
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return [y.reshape(n, c * b * b, h // b, w // b)]


def _space_to_depth_compute(node, tensors, consts, out_types):
    x = tensors[0]
    b = _block(node, x.shape, False)
    c_in = x.shape[1]

    def rule(n, c, y, z):
        block, channel = irop.floordiv(c, c_in), irop.floormod(c, c_in)
        dy, dx = irop.floordiv(block, b), irop.floormod(block, b)
        return x(n, channel, y * b + dy, z * b + dx)

    return [te.compute(out_types[0].shape, rule, name=_name(node))]


register(
    Operator(
        "SpaceToDepth",
        Pattern.INJECTIVE,
        _space_to_depth_infer,
        _space_to_depth_evaluate,
        _space_to_depth_compute,
        attrs={"blocksize"},
        doc="Move blocksize x blocksize spatial blocks into channels (NCHW).",
    )
)


def _one_hot_depth(node: Node, consts) -> int:
    depth = _const(node, consts, 1, "depth").reshape(-1)
    if depth.size != 1 or int(depth[0]) < 1:
        raise _fail(node, f"depth must be one positive number, got {depth.tolist()}")
    return int(depth[0])


def _one_hot_axis(node: Node, rank: int) -> int:
    return normalize_axis(int(node.attr("axis", -1)), rank + 1, node)


def _one_hot_infer(node, types, consts):
    indices, _, values = types
    if values.size != 2:
        raise _fail(node, f"values must hold [off, on], got {values}")
    depth, axis = _one_hot_depth(node, consts), _one_hot_axis(node, indices.rank)
    shape = (*indices.shape[:axis], depth, *indices.shape[axis:])
    return [TensorType(shape, values.dtype)]


def _one_hot_evaluate(node, inputs):
    indices, _, values = inputs
    depth, axis = _one_hot_depth(node, inputs), _one_hot_axis(node, indices.ndim)
    idx = np.expand_dims(np.where(indices < 0, indices + depth, indices), axis)
    shape = [1] * idx.ndim
    shape[axis] = depth
    hot = idx == np.arange(depth).astype(indices.dtype).reshape(shape)
    off, on = values.reshape(-1)
    return [np.where(hot, on, off).astype(values.dtype)]


def _one_hot_compute(node, tensors, consts, out_types):
    indices, _, values = tensors
    value = consts[2] if len(consts) > 2 else None
    depth, axis = _one_hot_depth(node, consts), _one_hot_axis(node, indices.ndim)
    dt = out_types[0].dtype
    if value is not None:
        off, on = (irop.const(v.item(), dt) for v in np.asarray(value).reshape(-1))
    else:
        flat = [0] * (values.ndim - 1)
        off, on = values(*flat, 0), values(*flat, 1)

    def rule(*i):
        # in the indices' own type: a float index that is not a whole number matches nothing
        v = indices(*i[:axis], *i[axis + 1 :])
        v = te.select(v < 0, v + depth, v)
        return te.select(te.equal(v, te.cast(i[axis], v.dtype)), on, off)

    return [te.compute(out_types[0].shape, rule, name=_name(node))]


register(
    Operator(
        "OneHot",
        Pattern.INJECTIVE,
        _one_hot_infer,
        _one_hot_evaluate,
        _one_hot_compute,
        attrs={"axis"},
        constant_inputs=(1,),
        doc="values[1] where the new `axis` coordinate equals the index (negative ones count "
        "from the constant depth; a float index that is not whole matches nothing, as in "
        "onnxruntime), values[0] elsewhere.",
    )
)


__all__ = ["INDEX_DTYPES", "PAD_MODES", "RESIZE_COORDINATES", "RESIZE_NEAREST", "reshape_index"]
