"""Expressions of the loop IR.

Every expression has a `dtype`. Operators on expressions build new expressions with TVM's rules:
`+ - *` as usual, `/` is division (truncating for integers, like C), `//` and `%` are floor
division and floor modulo, `< <= > >=` compare, `& | ^ ~ << >>` are bitwise (logical on bool).

`==` and `!=` give an `EqualOp` / `NotEqualOp`, as TVM's do: used in an expression
(`te.if_then_else(A[i] == 0, ...)`, `select`, `&`) it is the comparison node `op.equal(a, b)`;
used as a Python truth value (`if a == b`, `in`, dict keys) it says whether the two are the same
IR value, compared field by field as every IR value is (docs/architecture.md, decision 1; TVM
compares identity there). `loom.ir.structural_equal` compares programs up to bound variables.
"""

from __future__ import annotations

import abc
import itertools
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from loom.abi.dtype import BOOL, HANDLE, INT32, DataType, dtype
from loom.ir.intrinsic_registry import check_call
from loom.ir.node import Node, derived, node

if TYPE_CHECKING:
    from loom.ir.buffer import Buffer

_var_ids = itertools.count(1)


class Operators:
    """Python operators that build expressions with TVM's rules (see the module docstring),
    shared by expressions and by what stands for one (a te axis: `k ^ 1`, `1 << k`, ...)."""

    def __add__(self, other):
        return op.add(self, other)

    def __radd__(self, other):
        return op.add(other, self)

    def __sub__(self, other):
        return op.sub(self, other)

    def __rsub__(self, other):
        return op.sub(other, self)

    def __mul__(self, other):
        return op.mul(self, other)

    def __rmul__(self, other):
        return op.mul(other, self)

    def __floordiv__(self, other):
        return op.floordiv(self, other)

    def __mod__(self, other):
        return op.floormod(self, other)

    def __truediv__(self, other):
        return op.div(self, other)

    def __rtruediv__(self, other):
        return op.div(other, self)

    def __rfloordiv__(self, other):
        return op.floordiv(other, self)

    def __rmod__(self, other):
        return op.floormod(other, self)

    def __neg__(self):
        return op.neg(self)

    def __and__(self, other):
        return op.bitwise_and(self, other)

    def __rand__(self, other):
        return op.bitwise_and(other, self)

    def __or__(self, other):
        return op.bitwise_or(self, other)

    def __ror__(self, other):
        return op.bitwise_or(other, self)

    def __xor__(self, other):
        return op.bitwise_xor(self, other)

    def __rxor__(self, other):
        return op.bitwise_xor(other, self)

    def __invert__(self):
        return op.bitwise_not(self)

    def __lshift__(self, other):
        return op.shift_left(self, other)

    def __rlshift__(self, other):
        return op.shift_left(other, self)

    def __rshift__(self, other):
        return op.shift_right(self, other)

    def __rrshift__(self, other):
        return op.shift_right(other, self)

    def __lt__(self, other):
        return op.less(self, other)

    def __le__(self, other):
        return op.less_equal(self, other)

    def __gt__(self, other):
        return op.greater(self, other)

    def __ge__(self, other):
        return op.greater_equal(self, other)

    def _expression_eq(self, other):
        return EqualOp(self, other)

    def _expression_ne(self, other):
        return NotEqualOp(self, other)

    # `@node` installs these again over the dataclass's field comparison (kept as
    # `_fields_equal`, which EqualOp's truth value uses).
    __eq__ = _expression_eq
    __ne__ = _expression_ne
    __hash__ = object.__hash__


class ExprLike(Operators, abc.ABC):
    """An object that stands for an expression (a te IterVar stands for its loop variable):
    `as_expr()` gives it, and arithmetic on it builds expressions."""

    @abc.abstractmethod
    def as_expr(self) -> PrimExpr:
        """The expression this object stands for."""


def same_value(a, b) -> bool:
    """Whether `a` and `b` are the same IR value: the same object, or nodes of one class with
    equal fields (what `bool(a == b)` says). Objects that stand for an expression (a te axis)
    are the same only if identical."""
    if a is b:
        return True
    if type(a) is not type(b) or not isinstance(a, Node):
        return False
    return a._fields_equal(b) is True


class EqualOp(ExprLike):
    """The result of `a == b` on expressions: the comparison `op.equal(a, b)` in an expression,
    `same_value(a, b)` as a Python truth value (see the module docstring)."""

    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b

    def as_expr(self) -> PrimExpr:
        return op.equal(self.a, self.b)

    asobject = as_expr  # TVM's name

    @property
    def dtype(self) -> DataType:
        return self.as_expr().dtype

    def __bool__(self) -> bool:
        a, b = self.a, self.b  # same_value inlined: dict and `in` lookups of IR call it
        return a is b or (type(a) is type(b) and isinstance(a, Node) and a._fields_equal(b) is True)

    def __repr__(self) -> str:
        return f"({self.a} == {self.b})"


class NotEqualOp(ExprLike):
    """The result of `a != b` on expressions: `op.not_equal(a, b)` in an expression, `not
    same_value(a, b)` as a Python truth value."""

    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b

    def as_expr(self) -> PrimExpr:
        return op.not_equal(self.a, self.b)

    asobject = as_expr

    @property
    def dtype(self) -> DataType:
        return self.as_expr().dtype

    def __bool__(self) -> bool:
        return not same_value(self.a, self.b)

    def __repr__(self) -> str:
        return f"({self.a} != {self.b})"


class PrimExpr(Operators, Node):
    """Base of all expressions."""

    dtype: DataType

    def __bool__(self):
        raise TypeError(
            "an IR expression has no Python truth value; build conditions with loom.ir.op "
            "(equal, all_, any_) and use select/if_then_else instead of Python `if`"
        )

    def astype(self, target: str | DataType) -> PrimExpr:
        """Cast to another dtype (no-op when the dtype is already `target`)."""
        return op.cast(self, target)


@node
class Var(PrimExpr):
    """A variable: a loop index, a scalar parameter, or a buffer's data pointer (dtype handle).

    Two variables are the same only if they are the same variable: each gets a unique `id`.
    """

    name: str
    dtype: DataType = INT32
    id: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"Var name must be a non-empty str, got {self.name!r}")
        self._set("dtype", dtype(self.dtype))
        if self.id == 0:
            self._set("id", next(_var_ids))

    def copy_with_name(self, name: str) -> Var:
        """A new, distinct variable of the same dtype."""
        return Var(name, self.dtype)


@node
class IntImm(PrimExpr):
    """An integer or bool constant."""

    value: int
    dtype: DataType = INT32

    def __post_init__(self) -> None:
        dt = self.dtype
        if type(dt) is not DataType:
            dt = dtype(dt)
            self._set("dtype", dt)
        limits = _INT_LIMITS.get(dt)
        if limits is None:
            if not (dt.is_integer or dt.is_bool or dt.is_handle) or dt.is_vector:
                raise ValueError(f"IntImm needs a scalar integer or bool dtype, got {dt}")
            limits = _INT_LIMITS[dt] = (
                (None, None) if dt.is_handle else (dt.min_value(), dt.max_value())
            )
        value = self.value
        if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
            value = int(value)
            self._set("value", value)
        lo, hi = limits
        if lo is not None and not lo <= value <= hi:
            raise ValueError(f"constant {value} does not fit in {dt}")


_INT_LIMITS: dict[DataType, tuple[int | None, int | None]] = {}
"""The range of each IntImm dtype, found once (a constant is made for every index and step)."""


@node
class FloatImm(PrimExpr):
    """A floating-point constant."""

    value: float
    dtype: DataType = dtype("float32")

    def __post_init__(self) -> None:
        dt = dtype(self.dtype)
        self._set("dtype", dt)
        if not dt.is_float or dt.is_vector:
            raise ValueError(f"FloatImm needs a scalar float dtype, got {dt}")
        self._set("value", float(self.value))

    # Equal constants are the same bits: -0.0 is not 0.0 (1/x tells them apart), a NaN is
    # itself. Caches keyed by expressions (the LLVM code generator's reuse) rely on it.
    def __eq__(self, other) -> bool:
        return (
            type(other) is FloatImm
            and self.dtype == other.dtype
            and self.value.hex() == other.value.hex()
        )

    def __hash__(self) -> int:
        return hash((self.value.hex(), self.dtype))


@node
class StringImm(PrimExpr):
    """A string argument of a call (a symbol name, an error message)."""

    value: str
    dtype: DataType = derived(HANDLE)


def _same_dtype(name: str, a: PrimExpr, b: PrimExpr) -> DataType:
    if not isinstance(a, PrimExpr) or not isinstance(b, PrimExpr):
        raise TypeError(
            f"{name} takes two PrimExpr operands, got {type(a).__name__}, {type(b).__name__}"
        )
    dt = a.dtype
    if dt is not b.dtype and dt != b.dtype:
        raise TypeError(f"{name} operands must have the same dtype, got {a.dtype} and {b.dtype}")
    return dt


def _with_lanes(dt: DataType, lanes: int) -> DataType:
    """`dt.with_lanes(lanes)`, one DataType per pair (a vector node is made for every access)."""
    if dt.lanes == lanes:
        return dt
    key = (dt, lanes)
    out = _LANES.get(key)
    if out is None:
        out = _LANES[key] = dt.with_lanes(lanes)
    return out


_LANES: dict[tuple[DataType, int], DataType] = {}


class BinaryOp(PrimExpr):
    """Base of arithmetic and bitwise operations on two operands of the same dtype."""

    a: PrimExpr
    b: PrimExpr
    symbol = "?"

    def __post_init__(self) -> None:
        self._set("dtype", _same_dtype(type(self).__name__, self.a, self.b))


@node
class Add(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "+"


@node
class Sub(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "-"


@node
class Mul(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "*"


@node
class Div(BinaryOp):
    """Division: true division for floats, truncation toward zero for integers (C)."""

    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "/"


@node
class Mod(BinaryOp):
    """Remainder of truncating division (C's %)."""

    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "%"


@node
class FloorDiv(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "floordiv"


@node
class FloorMod(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "floormod"


@node
class Min(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "min"


@node
class Max(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "max"


class IntegerBinaryOp(BinaryOp):
    def __post_init__(self) -> None:
        dt = _same_dtype(type(self).__name__, self.a, self.b)
        if not (dt.is_integer or dt.is_bool):
            raise TypeError(f"{type(self).__name__} needs integer operands, got {dt}")
        self._set("dtype", dt)


@node
class BitAnd(IntegerBinaryOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "&"


@node
class BitOr(IntegerBinaryOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "|"


@node
class BitXor(IntegerBinaryOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "^"


@node
class ShiftLeft(IntegerBinaryOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "<<"


@node
class ShiftRight(IntegerBinaryOp):
    """Arithmetic shift for signed integers, logical for unsigned."""

    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = ">>"


class CompareOp(PrimExpr):
    """Base of comparisons; the result is bool with the operands' lanes."""

    a: PrimExpr
    b: PrimExpr
    symbol = "?"

    def __post_init__(self) -> None:
        dt = _same_dtype(type(self).__name__, self.a, self.b)
        self._set("dtype", BOOL.with_lanes(dt.lanes))


@node
class EQ(CompareOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "=="


@node
class NE(CompareOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "!="


@node
class LT(CompareOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "<"


@node
class LE(CompareOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "<="


@node
class GT(CompareOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = ">"


@node
class GE(CompareOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = ">="


class LogicalOp(PrimExpr):
    a: PrimExpr
    b: PrimExpr
    symbol = "?"

    def __post_init__(self) -> None:
        dt = _same_dtype(type(self).__name__, self.a, self.b)
        if not dt.is_bool:
            raise TypeError(f"{type(self).__name__} needs bool operands, got {dt}")
        self._set("dtype", dt)


@node
class And(LogicalOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "&&"


@node
class Or(LogicalOp):
    a: PrimExpr
    b: PrimExpr
    dtype: DataType = derived()
    symbol = "||"


@node
class Not(PrimExpr):
    a: PrimExpr
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        if not self.a.dtype.is_bool:
            raise TypeError(f"Not needs a bool operand, got {self.a.dtype}")
        self._set("dtype", self.a.dtype)


@node
class Select(PrimExpr):
    """`condition ? true_value : false_value`; both sides are evaluated (see `if_then_else`)."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        dt = _same_dtype("Select", self.true_value, self.false_value)
        cond = self.condition.dtype
        if not cond.is_bool or cond.lanes not in (1, dt.lanes):
            raise TypeError(f"Select condition must be bool with 1 or {dt.lanes} lanes, got {cond}")
        self._set("dtype", dt)


@node
class Cast(PrimExpr):
    dtype: DataType
    value: PrimExpr

    def __post_init__(self) -> None:
        dt = dtype(self.dtype)
        if dt.lanes != self.value.dtype.lanes:
            raise TypeError(f"Cast from {self.value.dtype} to {dt} changes the number of lanes")
        self._set("dtype", dt)


@node
class BufferLoad(PrimExpr):
    """Read `buffer[indices]`. A vector index (a Ramp) reads several lanes; lanes whose
    `predicate` is false are not read (their value is undefined)."""

    buffer: Buffer
    indices: tuple[PrimExpr, ...]
    predicate: PrimExpr | None = None
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        if not isinstance(self.indices, tuple):
            self._set("indices", tuple(self.indices))
        lanes = _access_lanes(self.buffer, self.indices, self.predicate)
        self._set("dtype", _with_lanes(self.buffer.dtype, lanes))


def _access_lanes(buffer, indices, predicate) -> int:
    if len(indices) != len(buffer.shape):
        raise ValueError(
            f"buffer {buffer.name} has {len(buffer.shape)} dimensions, accessed with "
            f"{len(indices)} indices"
        )
    lanes = 1
    for index in indices:
        idt = index.dtype
        if not idt.is_integer:
            raise TypeError(f"index of buffer {buffer.name} must be an integer, got {idt}")
        if idt.lanes > 1:
            if lanes > 1 and lanes != idt.lanes:
                raise TypeError(f"indices of buffer {buffer.name} have different lanes")
            lanes = idt.lanes
    if predicate is not None and predicate.dtype != _with_lanes(BOOL, lanes):
        raise TypeError(
            f"predicate of an access to {buffer.name} must be bool with {lanes} "
            f"lanes, got {predicate.dtype}"
        )
    return lanes


class CallKind(StrEnum):
    INTRINSIC = "intrin"
    EXTERN = "extern"
    FUNCTION = "func"  # another function of the module tree, through its entry point


@node
class Call(PrimExpr):
    """A call of an intrinsic (`kind=intrin`, see loom.ir.intrinsics) or an extern C symbol."""

    dtype: DataType
    op: str
    args: tuple[PrimExpr, ...]
    kind: CallKind = CallKind.INTRINSIC

    def __post_init__(self) -> None:
        self._set("dtype", dtype(self.dtype))
        self._set("kind", CallKind(self.kind))
        if not isinstance(self.args, tuple):
            self._set("args", tuple(self.args))
        for arg in self.args:
            if not isinstance(arg, PrimExpr):
                raise TypeError(f"argument of call {self.op} must be a PrimExpr, got {arg!r}")
        if self.kind == CallKind.INTRINSIC:
            check_call(self)
        elif not self.op.isidentifier():
            raise ValueError(f"called symbol name must be a C identifier, got {self.op!r}")
        if self.kind == CallKind.FUNCTION and str(self.dtype) != "int32":
            raise TypeError(
                f"call_func({self.op}) returns the callee's int32 status, not {self.dtype}"
            )


@node
class Ramp(PrimExpr):
    """The vector `[base, base + stride, ..., base + (lanes-1)*stride]`."""

    base: PrimExpr
    stride: PrimExpr
    lanes: int
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        dt = _same_dtype("Ramp", self.base, self.stride)
        if dt.lanes != 1 or self.lanes < 2:
            raise TypeError(f"Ramp needs scalar base/stride and lanes >= 2, got {dt}, {self.lanes}")
        self._set("dtype", _with_lanes(dt, self.lanes))


@node
class Broadcast(PrimExpr):
    """A vector with `value` in every lane."""

    value: PrimExpr
    lanes: int
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        if self.value.dtype.lanes != 1 or self.lanes < 2:
            raise TypeError(
                f"Broadcast needs a scalar value and lanes >= 2, got "
                f"{self.value.dtype}, {self.lanes}"
            )
        self._set("dtype", _with_lanes(self.value.dtype, self.lanes))


@node
class Let(PrimExpr):
    """`let var = value in body` inside an expression."""

    var: Var
    value: PrimExpr
    body: PrimExpr
    dtype: DataType = derived()

    def __post_init__(self) -> None:
        if self.var.dtype != self.value.dtype:
            raise TypeError(f"Let binds {self.var.name}: {self.var.dtype} to a {self.value.dtype}")
        self._set("dtype", self.body.dtype)


op: Any = None
"""loom.ir.op, whose functions the operators above call. op builds these classes, so it imports
this module and installs itself here (`install_operators`) when it is imported."""


def install_operators(module) -> None:
    global op
    op = module
