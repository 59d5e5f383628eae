"""The tensor-expression language: placeholder, compute, reduce_axis and reductions."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from loom.abi.dtype import DataType
from loom.errors import LoomError
from loom.ir import op as irop
from loom.ir.expr import IntImm, PrimExpr, Var
from loom.ir.simplify import simplify
from loom.ir.visitor import post_order_visit
from loom.te.multi_output import (
    MultiOutputComputeOp,
    TupleCommReducer,
    TupleReduce,
    multi_output_body,
)
from loom.te.tensor import (
    CommReducer,
    ComputeOp,
    IterVar,
    IterVarKind,
    PlaceholderOp,
    Range,
    Reduce,
    Tensor,
    as_int,
    check_dtype,
    is_scalar_integer_expr,
    make_axis,
    normalize_shape,
)
from loom.te.tensor import size_var as _size_var


def placeholder(
    shape, dtype: str | DataType | None = "float32", name: str = "placeholder"
) -> Tensor:
    """An input tensor. Its dimensions are ints (any integral: np.int64 too) or scalar integer
    expressions (te.var, te.size_var: a symbolic shape); dtype None means float32, as in TVM."""
    return PlaceholderOp(
        name, normalize_shape(shape, f"placeholder {name}"), check_dtype(dtype)
    ).output(0)


def const(value, dtype: str | DataType | None = None, span=None) -> PrimExpr:
    """A constant (TVM's te.const / tir.const, `dtype` by keyword too): without a dtype, bool,
    int32 (int64 if it does not fit) or float32. `span` (TVM's source location) is ignored."""
    return irop.const(value, dtype)


def var(name: str = "v", dtype: str | DataType | None = "int32") -> Var:
    """A scalar parameter (pass it in the argument list of lower/build); dtype None means
    int32."""
    return Var(name, check_dtype(dtype, "int32"))


def size_var(name: str = "size", dtype: str | DataType | None = "int32") -> Var:
    """A shape variable known to be non-negative (TVM's te.size_var): bound inference and the
    simplifier may use that, e.g. to prove a split needs no guard."""
    dt = check_dtype(dtype, "int32")
    if not dt.is_integer:
        raise TypeError(f"size_var {name} must have an integer dtype, got {dt}")
    return _size_var(name, dt)


def reduce_axis(dom, name: str = "rv") -> IterVar:
    """A reduction axis over `dom`: an int n (0..n-1), a (begin, end) pair, or a Range (ints may
    be any integral, np.int64 too; an extent or end may be an integer expression: te.var)."""
    if as_int(dom) is not None:
        rng = Range(IntImm(0), IntImm(as_int(dom)))
    elif is_scalar_integer_expr(dom):
        rng = Range(IntImm(0, dom.dtype), dom)
    elif isinstance(dom, Range):
        rng = dom
    elif isinstance(dom, tuple | list) and len(dom) == 2:
        rng = Range.from_bounds(*[b if as_int(b) is None else as_int(b) for b in dom])
    else:
        raise TypeError(f"reduce_axis domain must be an int, (begin, end) or Range, got {dom!r}")
    for part in (rng.min, rng.extent):
        if part.dtype.is_vector or not part.dtype.is_integer or part.dtype.is_bool:
            raise TypeError(
                f"reduce_axis {name} domain must be scalar integers, got {rng} ({part.dtype})"
            )
    extent = as_int(simplify(rng.extent))
    if extent is not None and extent <= 0:
        raise ValueError(f"reduce_axis {name} has an empty domain {rng}")
    # a symbolic domain (0, n) runs no iterations when n <= 0, leaving the identity
    return IterVar(Var(name, rng.extent.dtype), rng, IterVarKind.REDUCE)


def _index_names(fcompute: Callable, ndim: int, name: str) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params):
        var_arg = next(p for p in params if p.kind == inspect.Parameter.VAR_POSITIONAL).name
        return [f"{var_arg}{k}" for k in range(ndim)]
    positional = [
        p.name
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    if len(positional) != ndim:
        raise LoomError(
            f"compute {name}: the rule takes {len(positional)} index arguments, "
            f"the shape has {ndim} dimensions"
        )
    return positional


def compute(
    shape, fcompute: Callable, name: str = "compute", tag: str = "", attrs: dict | None = None
) -> Tensor:
    """A tensor whose element at index `i...` is `fcompute(i...)`.

    The rule may be a reduction (te.sum, te.max, ...) only at its top level, as in TVM. A rule
    returning a tuple gives one operation with an output per value, and returns the tuple of
    its output tensors (`op.output(k)`), as TVM does; a tuple reducer's result (argmax) is such
    a tuple.
    """
    shape = normalize_shape(shape, f"compute {name}")
    axis = make_axis(shape, _index_names(fcompute, len(shape), name))
    body = fcompute(*[iv.var for iv in axis])
    if isinstance(body, tuple | list) and len(body) == 1 and not isinstance(body[0], TupleReduce):
        body = body[0]
    if isinstance(body, TupleReduce):
        body = (body,)
    if isinstance(body, tuple | list):
        multi = multi_output_body(name, body)
        for value in multi.parts() if isinstance(multi, TupleReduce) else multi.values:
            _check_body(name, value)
        op = MultiOutputComputeOp(name, axis, multi, tag, attrs)
        outputs = tuple(op.output(k) for k in range(op.num_outputs))
        return outputs[0] if len(outputs) == 1 else outputs
    if isinstance(body, Tensor):
        raise TypeError(
            f"compute {name}: the rule returned a tensor; index it, e.g. {body.name}(i)"
        )
    body = irop.convert(body)
    _check_body(name, body)
    return ComputeOp(name, axis, body, tag, attrs).output(0)


def _check_body(name: str, body: PrimExpr) -> None:
    inner = [body.source, body.condition] if isinstance(body, Reduce) else [body]

    def reject_nested(n) -> None:
        if isinstance(n, Reduce | TupleReduce):
            raise LoomError(
                f"compute {name}: a reduction must be the whole rule, not part of "
                "an expression (compute it in its own stage)"
            )

    for part in inner:
        post_order_visit(part, reject_nested)


def _sum_identity(dt: DataType) -> PrimExpr:
    return irop.const(0, dt)


def _prod_identity(dt: DataType) -> PrimExpr:
    return irop.const(1, dt)


def _bits_identity(name: str, ones: bool) -> Callable[[DataType], PrimExpr]:
    """The identity of a bitwise reducer: every bit set (and) or none (or, xor)."""

    def identity(dt: DataType) -> PrimExpr:
        if not (dt.is_integer or dt.is_bool):
            raise TypeError(f"te.{name} reduces integers or bools, got {dt}")
        if not ones:
            return irop.const(0, dt)
        return irop.const(1 if dt.is_bool else (dt.max_value() if dt.is_uint else -1), dt)

    return identity


def comm_reducer(
    fcombine: Callable[[PrimExpr, PrimExpr], PrimExpr],
    fidentity: Callable[[DataType], PrimExpr],
    name: str = "reduce",
) -> CommReducer:
    """A reducer from a commutative, associative `fcombine(acc, x)` and its identity.

    `reducer(x, axis)` reduces over reduction axes; `reducer(a, b)` (no axis) combines two
    values, as TVM's reducers do: `te.max(a, b)`, `te.bitwise_and(a, b)`. `reducer((x, y),
    axis)` reduces tuples: `fcombine` then takes and returns tuples and `fidentity(*dtypes)`
    gives one identity per value (argmax); the result is a tuple of values for a compute with
    several outputs."""
    return TupleCommReducer(name, fcombine, fidentity)


sum = comm_reducer(irop.add, _sum_identity, "sum")
prod = comm_reducer(irop.mul, _prod_identity, "prod")
max = comm_reducer(irop.max_, irop.min_value, "max")
min = comm_reducer(irop.min_, irop.max_value, "min")
bitwise_and = comm_reducer(irop.bitwise_and, _bits_identity("bitwise_and", True), "bitwise_and")
bitwise_or = comm_reducer(irop.bitwise_or, _bits_identity("bitwise_or", False), "bitwise_or")
bitwise_xor = comm_reducer(irop.bitwise_xor, _bits_identity("bitwise_xor", False), "bitwise_xor")
# No shift reducer: `<<` is neither associative nor commutative ((1 << 2) << 3 != 1 << (2 << 3)),
# so its result would depend on the order a schedule visits the axis. Shift once by a sum:
# x << te.sum(s[k], axis=k).
