"""Tensors and the operations that produce them.

A `Tensor` is an output of an `Operation`: a `PlaceholderOp` (an input) or a `ComputeOp` (a value
defined by an expression over its index variables). Operations are compared by identity: two
computations with the same body are still two stages of a schedule.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence
from enum import StrEnum

import numpy as np

from loom.abi.dtype import DataType, dtype
from loom.errors import LoomError
from loom.ir import op as irop
from loom.ir.expr import ExprLike, IntImm, PrimExpr, Var
from loom.ir.node import derived, node
from loom.ir.simplify import simplify
from loom.ir.visitor import post_order_visit

Extent = int | PrimExpr
"""A dimension or loop extent: an int when constant, else an expression (a symbolic shape)."""

_size_var_ids: set[int] = set()
"""The ids of the variables te.size_var made (a Var's id is unique in the process): shape
variables known to be non-negative, as TVM's SizeVar."""


def size_var(name: str, dt: DataType) -> Var:
    """A new shape variable known to be non-negative."""
    v = Var(name, dt)
    _size_var_ids.add(v.id)
    return v


def is_size_var(v: Var) -> bool:
    return v.id in _size_var_ids


@dataclasses.dataclass(frozen=True)
class Range:
    """The integers [min, min + extent)."""

    min: PrimExpr
    extent: PrimExpr

    @staticmethod
    def from_bounds(begin, end) -> Range:
        begin, end = irop.convert(begin), irop.convert(end)
        return Range(begin, irop.sub(end, begin))

    def __repr__(self) -> str:
        return f"Range({self.min}, {self.extent})"


class IterVarKind(StrEnum):
    DATA_PAR = "data_par"
    REDUCE = "reduce"


@dataclasses.dataclass(frozen=True, eq=False)
class IterVar(ExprLike):
    """An iteration variable: its loop variable, its domain (None until bound inference for axes
    made by split/fuse), and whether it is a reduction axis. Used in an expression, it stands for
    its loop variable. Compared by identity, like the stages they belong to.
    """

    var: Var
    dom: Range | None
    kind: IterVarKind = IterVarKind.DATA_PAR

    def as_expr(self) -> Var:
        return self.var

    @property
    def name(self) -> str:
        return self.var.name

    @property
    def is_reduce(self) -> bool:
        return self.kind == IterVarKind.REDUCE

    def __repr__(self) -> str:
        return f"IterVar({self.var.name}, {self.dom}, {self.kind.value})"


class Operation:
    """Base of placeholder and compute operations (one output each)."""

    name: str
    shape: tuple[Extent, ...]
    dtype: DataType

    def output(self, index: int = 0) -> Tensor:
        if index != 0:
            raise LoomError(f"operation {self.name} has one output, asked for output {index}")
        return Tensor(self)

    @property
    def input_tensors(self) -> list[Tensor]:
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple[Extent, ...], dt: DataType):
        self.name, self.shape, self.dtype = name, shape, dt


class ComputeOp(Operation):
    """`name[axis] = body`, where body may be a `Reduce` over `reduce_axis`."""

    def __init__(
        self,
        name: str,
        axis: tuple[IterVar, ...],
        body: PrimExpr,
        tag: str = "",
        attrs: dict | None = None,
    ):
        self.name = name
        self.axis = axis
        self.body = body
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.reduce_axis: tuple[IterVar, ...] = body.axis if isinstance(body, Reduce) else ()
        self.shape = tuple(_extent(iv) for iv in axis)
        self.dtype = body.dtype
        # found once, here: scheduling asks again and again (each compute_at walks the readers),
        # and the body never changes (with_body makes another operation); always set, so the
        # compile cache's fingerprint of an operation does not depend on who asked before
        self._inputs = tuple(producer_tensors(body))

    @property
    def root_iter_vars(self) -> tuple[IterVar, ...]:
        return self.axis + self.reduce_axis

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self._inputs)

    def with_body(self, body: PrimExpr) -> ComputeOp:
        """The same computation (same axes, name and tag) with another body."""
        return ComputeOp(self.name, self.axis, body, self.tag, self.attrs)


def _extent(iv: IterVar) -> Extent:
    """An axis's extent: an int if constant, else its expression (a symbolic shape)."""
    value = as_int(iv.dom.extent)
    return iv.dom.extent if value is None else value


class Tensor:
    """An output of an operation. Index it with `T(i, j)` or `T[i, j]` inside a compute rule."""

    __slots__ = ("op",)

    def __init__(self, op: Operation):
        self.op = op

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tensor) and other.op is self.op

    def __hash__(self) -> int:
        return id(self.op)

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def shape(self) -> tuple[Extent, ...]:
        return self.op.shape

    @property
    def ndim(self) -> int:
        return len(self.op.shape)

    @property
    def dtype(self) -> DataType:
        return self.op.dtype

    def __call__(self, *indices) -> ProducerLoad:
        if len(indices) == 1 and isinstance(indices[0], tuple | list):
            indices = tuple(indices[0])
        if len(indices) != self.ndim:
            raise LoomError(
                f"tensor {self.name} has {self.ndim} dimensions, indexed with "
                f"{len(indices)} indices"
            )
        exprs = []
        for i, index in enumerate(indices):
            index = irop.convert(index)
            if not index.dtype.is_integer or index.dtype.is_vector:
                raise TypeError(
                    f"index {i} of tensor {self.name} must be a scalar integer, got {index.dtype}"
                )
            exprs.append(index)
        return ProducerLoad(self, tuple(exprs))

    def __getitem__(self, indices) -> ProducerLoad | TensorSlice:
        """`T[i, j]`; fewer indices than dimensions give a `TensorSlice` to index again
        (`T[i][j]`, as in TVM)."""
        if not isinstance(indices, tuple):
            indices = (indices,)
        if 0 < len(indices) < self.ndim:
            return TensorSlice(self, indices)
        return self(*indices)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, shape={list(self.shape)}, dtype={self.dtype})"


class TensorSlice(ExprLike):
    """`T[i]` of a tensor with more dimensions: indexed again, it reads an element
    (`T[i][j]` is `T[i, j]`); in an expression before all its indices are given, an error."""

    __slots__ = ("indices", "tensor")

    def __init__(self, tensor: Tensor, indices: tuple):
        self.tensor, self.indices = tensor, indices

    def __getitem__(self, indices) -> ProducerLoad | TensorSlice:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return self.tensor[self.indices + indices]

    @property
    def dtype(self) -> DataType:
        return self.tensor.dtype

    def as_expr(self) -> PrimExpr:
        raise LoomError(
            f"tensor {self.tensor.name} has {self.tensor.ndim} dimensions, used with "
            f"{len(self.indices)} indices; index it again ({self.tensor.name}[i][j]) or with "
            "all its indices"
        )

    asobject = as_expr  # TVM's name

    def __repr__(self) -> str:
        return f"TensorSlice({self.tensor.name}, {list(self.indices)})"


@node
class ProducerLoad(PrimExpr):
    """A read of a tensor element inside a compute rule (lowered to a BufferLoad)."""

    tensor: Tensor
    indices: tuple[PrimExpr, ...]
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        self._set("dtype", self.tensor.dtype)


@dataclasses.dataclass(frozen=True, eq=False)
class CommReducer:
    """A commutative reduction: `combine(acc, x)` and the identity element for a dtype."""

    name: str
    combine: Callable[[PrimExpr, PrimExpr], PrimExpr]
    identity: Callable[[DataType], PrimExpr]

    def __call__(self, source, *rest, axis=None, where=None, init=None) -> PrimExpr:
        """Reduce `source` over `axis` (an IterVar or a list of them, positional or keyword),
        where `where` holds; or, with values instead of axes, combine them from left to right
        (`te.max(a, b)`, `te.max(a, b, c)`, as in TVM)."""
        source = irop.convert(source)
        while rest and rest[-1] is None:  # where=None, init=None passed on positionally
            rest = rest[:-1]
        if axis is None and rest and not isinstance(rest[0], IterVar | list | tuple):
            if where is not None or init is not None:
                raise TypeError(
                    f"{self.name} of values takes no where= or init= (those need axis=)"
                )
            result = source
            for value in rest:
                result = self.combine(result, irop.convert(value))
            return result
        if axis is None:
            if not rest:
                raise TypeError(
                    f"{self.name} needs axis= (te.reduce_axis axes) or a second value to combine"
                )
            if len(rest) > 3:
                raise TypeError(
                    f"{self.name}(source, axis, where, init) takes at most 4 arguments, got "
                    f"{1 + len(rest)}"
                )
            axis, where, init = reducer_arguments(self.name, rest, where, init)
        elif rest:
            raise TypeError(f"{self.name} got axis= and positional arguments {rest!r}")
        axes, cond = reduction_domain(self.name, axis, where)
        if init is not None:
            init = irop.cast(irop.convert(init), source.dtype)
        else:
            self.identity(source.dtype)  # a reducer refuses dtypes it cannot reduce here
        return Reduce(self, source, axes, cond, init)

    def __repr__(self) -> str:
        return f"CommReducer({self.name})"


def reduction_domain(name: str, axis, where) -> tuple[tuple[IterVar, ...], PrimExpr]:
    """A reducer's axes (one reduction axis or a list of them) and its condition."""
    axes = tuple(axis) if isinstance(axis, list | tuple) else (axis,)
    for a in axes:
        if not isinstance(a, IterVar) or not a.is_reduce:
            raise TypeError(f"{name} reduces over te.reduce_axis(...) axes, got {a!r}")
    cond = irop.const(True) if where is None else irop.condition(where, "reduction where")
    return axes, cond


def reducer_arguments(name: str, rest: tuple, where, init) -> tuple:
    """(axis, where, init) from a reducer's positional arguments after the source, each given
    once."""
    given = list(rest) + [None] * (3 - len(rest))
    for k, (key, value) in enumerate((("where", where), ("init", init)), start=1):
        if value is not None:
            if given[k] is not None:
                raise TypeError(f"{name} got {key} twice (positionally and as {key}=)")
            given[k] = value
    return tuple(given)


@node
class Reduce(PrimExpr):
    """`combiner` over `source` for all points of `axis` where `condition` holds."""

    combiner: CommReducer
    source: PrimExpr
    axis: tuple[IterVar, ...]
    condition: PrimExpr
    init: PrimExpr | None = None
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        self._set("dtype", self.source.dtype)

    def identity(self) -> PrimExpr:
        return self.init if self.init is not None else self.combiner.identity(self.dtype)

    def parts(self) -> list[PrimExpr]:
        """The expressions of the reduction: source, condition and init (if any)."""
        return [self.source, self.condition] + ([self.init] if self.init is not None else [])


def producer_tensors(e: PrimExpr) -> list[Tensor]:
    """Tensors read by an expression, in order of first read."""

    found: dict[Tensor, None] = {}

    def record(n) -> None:
        if isinstance(n, ProducerLoad):
            found.setdefault(n.tensor)

    post_order_visit(e, record)
    return list(found)


def make_axis(shape: Sequence[Extent], names: Sequence[str]) -> tuple[IterVar, ...]:
    """The data-parallel axes of a shape; an axis of a symbolic extent has its extent's dtype."""
    axes = []
    for n, extent in zip(names, shape):
        extent = irop.convert(extent)
        axes.append(
            IterVar(
                Var(n, extent.dtype),
                Range(IntImm(0, extent.dtype), extent),
                IterVarKind.DATA_PAR,
            )
        )
    return tuple(axes)


def as_int(value) -> int | None:
    """`value` as a Python int if it is an int, an integer IntImm or any other integral
    (numpy's np.int64, ...: what operator.index takes), but not a bool; else None."""
    if isinstance(value, IntImm):
        return None if value.dtype.is_bool else value.value
    if isinstance(value, bool | np.bool_):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _is_float(value) -> bool:
    return isinstance(value, float | np.floating)


def whole_number(value, what: str) -> int:
    """A float that is a whole number as an int: TVM's scripts compute shapes and factors with
    `/` (`N / bn`, a float in Python 3), which TVM converts with `int()`. A fraction is refused
    (TVM would truncate it silently)."""
    if not float(value).is_integer():
        raise ValueError(f"{what}: expected a whole number, got {value!r}")
    return int(value)


def is_scalar_integer_expr(value) -> bool:
    return (
        isinstance(value, PrimExpr)
        and value.dtype.is_integer
        and not value.dtype.is_vector
        and not value.dtype.is_bool
    )


def normalize_shape(shape, what: str) -> tuple[Extent, ...]:
    """A shape as a tuple of ints and, for symbolic dimensions, scalar integer expressions
    (te.var / te.size_var and expressions of them; one that simplifies to a constant becomes
    an int). A constant dimension must be positive."""
    if as_int(shape) is not None or is_scalar_integer_expr(shape) or _is_float(shape):
        shape = (shape,)
    try:
        dims = list(shape)
    except TypeError:
        raise TypeError(
            f"{what} shape must be a tuple of ints or integer expressions (te.var), got {shape!r}"
        ) from None
    out: list[Extent] = []
    for s in dims:
        if isinstance(s, ExprLike) and not isinstance(s, PrimExpr):
            s = s.as_expr()
        if _is_float(s):
            s = whole_number(s, f"{what} shape")
        n = as_int(s)
        if n is None and is_scalar_integer_expr(s):
            s = simplify(s)
            n = as_int(s)
            if n is None:
                out.append(s)
                continue
        if n is None:
            raise TypeError(
                f"{what} shape must be a tuple of ints or integer expressions (te.var), got {s!r}"
            )
        if n <= 0:
            raise ValueError(f"{what} shape dimensions must be positive, got {n}")
        out.append(n)
    return tuple(out)


def check_dtype(dt, default: str = "float32") -> DataType:
    """A tensor's element type; None means `default` (float32 for tensors, as in TVM)."""
    d = dtype(default if dt is None else dt)
    if d.is_vector or d.is_handle:
        hint = (
            "; loom's buffers hold scalars: give the scalar type and vectorize a loop "
            "(s[T].vectorize(axis)), which makes the vector code"
            if d.is_vector
            else ""
        )
        raise TypeError(f"tensor dtype must be a scalar element type, got {d}{hint}")
    return d
