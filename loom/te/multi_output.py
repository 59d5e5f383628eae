"""Operations with several outputs: `te.compute` rules returning a tuple, and tuple reducers.

An output of such an operation is an `OutputTensor`, which knows its `value_index`. The rule of
every output is one node holding all the outputs' expressions (`OutputValues`, or a
`TupleReduce` for a reduction with a tuple reducer such as argmax), with the index of the one
it stands for: so a pass that rewrites the reads of `op.body` (cache_read, inlining) rewrites
the reads of every output, and `with_body` gives back the whole operation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from loom.abi.dtype import DataType
from loom.errors import LoomError
from loom.ir import op as irop
from loom.ir.expr import PrimExpr
from loom.ir.node import derived, node
from loom.te.tensor import (
    CommReducer,
    ComputeOp,
    Extent,
    IterVar,
    Operation,
    Reduce,
    Tensor,
    reducer_arguments,
    reduction_domain,
)


class OutputTensor(Tensor):
    """Output `value_index` of an operation with several outputs (TVM's `op.output(k)`)."""

    __slots__ = ("value_index",)

    def __init__(self, op: Operation, value_index: int):
        super().__init__(op)
        self.value_index = value_index

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Tensor)
            and other.op is self.op
            and value_index(other) == self.value_index
        )

    def __hash__(self) -> int:
        # output 0 hashes as a plain Tensor of the op, to which it is equal
        return id(self.op) if self.value_index == 0 else hash((id(self.op), self.value_index))

    @property
    def name(self) -> str:
        n = num_outputs(self.op)
        return self.op.name if n == 1 else f"{self.op.name}.v{self.value_index}"

    @property
    def shape(self) -> tuple[Extent, ...]:
        return self.op.output_shape(self.value_index)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> DataType:
        return self.op.output_dtype(self.value_index)


def value_index(t: Tensor) -> int:
    """Which output of its operation `t` is (0 for a single-output operation)."""
    return getattr(t, "value_index", 0)


def num_outputs(op: Operation) -> int:
    return getattr(op, "num_outputs", 1)


def output_tensor(op: Operation, index) -> Tensor:
    """`op.output(index)`, the index checked against the operation's number of outputs."""
    n = num_outputs(op)
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"operation {op.name}: output index must be an int, got {index!r}")
    if not 0 <= index < n:
        raise LoomError(
            f"operation {op.name} has {n} output{'s' if n > 1 else ''}, asked for output {index}"
        )
    return OutputTensor(op, index)


def output_shape(op: Operation, index: int) -> tuple[Extent, ...]:
    shape = getattr(op, "output_shape", None)
    return shape(index) if shape is not None else op.shape


def output_dtype(op: Operation, index: int) -> DataType:
    dt = getattr(op, "output_dtype", None)
    return dt(index) if dt is not None else op.dtype


@node
class OutputValues(PrimExpr):
    """The expressions of all outputs of a compute with several outputs; stands for output
    `value_index` (its dtype is that output's)."""

    values: tuple[PrimExpr, ...]
    value_index: int
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        self._set("dtype", self.values[self.value_index].dtype)


@dataclasses.dataclass(frozen=True, eq=False)
class TupleCommReducer(CommReducer):
    """A reducer that also reduces tuples: `fcombine(x, y)` takes and returns tuples of the same
    length, and `fidentity(*dtypes)` gives the identity tuple (TVM's comm_reducer over
    tuples, e.g. argmax over (index, value) pairs). Called with a single expression it reduces
    as a plain `CommReducer`."""

    def __call__(self, source, *rest, axis=None, where=None, init=None):
        if not isinstance(source, tuple | list):
            return super().__call__(source, *rest, axis=axis, where=where, init=init)
        if axis is None:
            axis, where, init = reducer_arguments(self.name, rest, where, init)
        elif rest:
            raise TypeError(f"{self.name}: axis given twice (positionally and as axis=)")
        sources = tuple(irop.convert(s) for s in source)
        if not sources:
            raise ValueError(f"reducer {self.name}: the source tuple is empty")
        axes, cond = reduction_domain(self.name, axis, where)
        if init is not None:
            if not isinstance(init, tuple | list) or len(init) != len(sources):
                raise ValueError(
                    f"reducer {self.name}: init must be a tuple of {len(sources)} values, "
                    f"got {init!r}"
                )
            inits = tuple(irop.cast(irop.convert(v), s.dtype) for v, s in zip(init, sources))
        else:
            inits = ()
            self.identity_tuple(tuple(s.dtype for s in sources))  # checks what fidentity gives
        return tuple(TupleReduce(self, sources, axes, cond, inits, k) for k in range(len(sources)))

    def identity_tuple(self, dtypes: tuple[DataType, ...]) -> tuple[PrimExpr, ...]:
        values = self.identity(*[str(d) for d in dtypes])
        return self._as_tuple(values, dtypes, "fidentity")

    def combine_tuple(self, acc: Sequence[PrimExpr], x: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
        dtypes = tuple(a.dtype for a in acc)
        return self._as_tuple(self.combine(tuple(acc), tuple(x)), dtypes, "fcombine")

    def _as_tuple(self, values, dtypes, what: str) -> tuple[PrimExpr, ...]:
        if not isinstance(values, tuple | list) or len(values) != len(dtypes):
            raise ValueError(
                f"reducer {self.name}: {what} must return a tuple of {len(dtypes)} values "
                f"(one per reduced value), got {values!r}"
            )
        out = []
        for v, dt in zip(values, dtypes):
            v = irop.convert(v)
            out.append(v if v.dtype == dt else irop.cast(v, dt))
        return tuple(out)


@node
class TupleReduce(PrimExpr):
    """`combiner` over the tuple `sources` for all points of `axis` where `condition` holds;
    stands for element `value_index` of the result."""

    combiner: TupleCommReducer
    sources: tuple[PrimExpr, ...]
    axis: tuple[IterVar, ...]
    condition: PrimExpr
    inits: tuple[PrimExpr, ...]
    value_index: int
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        self._set("dtype", self.sources[self.value_index].dtype)

    def identity(self) -> tuple[PrimExpr, ...]:
        if self.inits:
            return self.inits
        return self.combiner.identity_tuple(tuple(s.dtype for s in self.sources))

    def parts(self) -> list[PrimExpr]:
        return [*self.sources, self.condition, *self.inits]


class MultiOutputComputeOp(ComputeOp):
    """A compute whose rule gives several values per point: one stage, one output per value.
    `body` is the rule of output 0 (an `OutputValues` or a `TupleReduce`), holding them all."""

    def __init__(
        self,
        name: str,
        axis: tuple[IterVar, ...],
        body: OutputValues | TupleReduce,
        tag: str = "",
        attrs: dict | None = None,
    ):
        super().__init__(name, axis, body, tag, attrs)
        self.reduce_axis = body.axis if isinstance(body, TupleReduce) else ()

    @property
    def num_outputs(self) -> int:
        return len(self.values)

    @property
    def values(self) -> tuple[PrimExpr, ...]:
        """The expression of each output (a TupleReduce per output for a reduction)."""
        if isinstance(self.body, TupleReduce):
            return tuple(self.body.replace(value_index=k) for k in range(len(self.body.sources)))
        return self.body.values

    def output(self, index: int = 0) -> Tensor:
        return output_tensor(self, index)

    def output_shape(self, index: int) -> tuple[Extent, ...]:
        return self.shape

    def output_dtype(self, index: int) -> DataType:
        return self.values[index].dtype

    def with_body(self, body: PrimExpr) -> ComputeOp:
        if not isinstance(body, OutputValues | TupleReduce):
            raise LoomError(
                f"compute {self.name} has {self.num_outputs} outputs; its rule must stay a "
                f"tuple of {self.num_outputs} values"
            )
        return MultiOutputComputeOp(self.name, self.axis, body, self.tag, self.attrs)


def multi_output_body(name: str, values: Sequence) -> OutputValues | TupleReduce:
    """The body of a compute whose rule returned `values` (a tuple): all plain expressions, or
    all the outputs of one tuple reduction, in order."""
    if not values:
        raise LoomError(f"compute {name}: the rule returned an empty tuple")
    if any(isinstance(v, Tensor) for v in values):
        raise TypeError(f"compute {name}: the rule returned a tensor; index it, e.g. T(i)")
    exprs = [irop.convert(v) for v in values]
    reductions = [e for e in exprs if isinstance(e, TupleReduce | Reduce)]
    if not reductions:
        return OutputValues(tuple(exprs), 0)
    first = exprs[0]
    whole = (
        isinstance(first, TupleReduce)
        and len(exprs) == len(first.sources)
        and all(
            isinstance(e, TupleReduce)
            and e.value_index == k
            and e.replace(value_index=0) == first.replace(value_index=0)
            for k, e in enumerate(exprs)
        )
    )
    if not whole:
        raise LoomError(
            f"compute {name}: a rule with several outputs may reduce only with one tuple "
            "reducer, returning all its values in order (as `argmax((i, v), axis=k)` gives "
            "them); reduce the other values in a stage of their own"
        )
    return first.replace(value_index=0)
