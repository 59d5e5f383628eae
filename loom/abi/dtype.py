"""Data types: bool, int8..int64, uint8..uint64, float16/32/64, handles, vector lanes (int8x128).

A `DataType` is a `str` ("float32", "int8x128"), as a dtype is in TVM's Python API: it compares
and hashes as its text, so `A.dtype == "float32"`, a dict keyed by dtype names and numpy
(`np.zeros(shape, dtype=A.dtype)`) take it as it is; its fields (`kind`, `bits`, `lanes`) and
properties say what the type is.
"""

from __future__ import annotations

import functools
import re

import numpy as np

_KINDS = ("int", "uint", "float", "bool", "handle")
_PATTERN = re.compile(r"^(int|uint|float|bool|handle)(\d+)?(?:x(\d+))?$")
_VALID_BITS = {"int": (8, 16, 32, 64), "uint": (8, 16, 32, 64), "float": (16, 32, 64)}


class DataType(str):
    """A scalar or vector element type, and its text.

    `bool` has 1 bit (stored as one byte); `handle` is a pointer. Immutable.
    """

    kind: str
    bits: int
    lanes: int

    def __new__(cls, kind: str, bits: int, lanes: int = 1) -> DataType:
        if kind not in _KINDS:
            raise ValueError(f"dtype kind must be one of {_KINDS}, got {kind!r}")
        valid = _VALID_BITS.get(kind)
        if valid is not None and bits not in valid:
            raise ValueError(f"{kind} dtype must have {valid} bits, got {bits}")
        if kind == "bool" and bits != 1:
            raise ValueError(f"bool dtype has 1 bit, got {bits}")
        if kind == "handle" and (bits != 64 or lanes != 1):
            raise ValueError("handle dtype is a scalar 64-bit pointer")
        if lanes < 1:
            raise ValueError(f"dtype lanes must be >= 1, got {lanes}")
        base = kind if kind in ("bool", "handle") else f"{kind}{bits}"
        self = super().__new__(cls, base if lanes == 1 else f"{base}x{lanes}")
        self.__dict__.update(kind=kind, bits=int(bits), lanes=int(lanes))
        return self

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError(f"DataType {self} is immutable (cannot set {name})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"DataType {self} is immutable (cannot delete {name})")

    def __repr__(self) -> str:
        return str.__str__(self)

    def __reduce__(self):
        return (DataType, (self.kind, self.bits, self.lanes))

    def __copy__(self) -> DataType:
        return self

    def __deepcopy__(self, memo) -> DataType:
        return self

    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def is_uint(self) -> bool:
        return self.kind == "uint"

    @property
    def is_integer(self) -> bool:
        """Signed or unsigned integer (not bool)."""
        return self.kind in ("int", "uint")

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def is_handle(self) -> bool:
        return self.kind == "handle"

    @property
    def is_vector(self) -> bool:
        return self.lanes > 1

    @property
    def element(self) -> DataType:
        """The scalar type of one lane."""
        return self if self.lanes == 1 else DataType(self.kind, self.bits)

    def with_lanes(self, lanes: int) -> DataType:
        return self if lanes == self.lanes else DataType(self.kind, self.bits, lanes)

    @property
    def itemsize(self) -> int:
        """Bytes one scalar element occupies in memory (bool takes a byte)."""
        return 1 if self.kind == "bool" else self.bits // 8

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype of one element."""
        if self.kind == "bool":
            return np.dtype(np.bool_)
        if self.kind == "handle":
            return np.dtype(np.uint64)
        return np.dtype(f"{self.kind}{self.bits}")

    def min_value(self) -> int | float:
        if self.kind == "int":
            return -(1 << (self.bits - 1))
        if self.kind in ("uint", "bool"):
            return 0
        if self.kind == "float":
            return float(-np.finfo(self.numpy).max)
        raise ValueError(f"{self} has no minimum value")

    def max_value(self) -> int | float:
        if self.kind == "int":
            return (1 << (self.bits - 1)) - 1
        if self.kind == "uint":
            return (1 << self.bits) - 1
        if self.kind == "bool":
            return 1
        if self.kind == "float":
            return float(np.finfo(self.numpy).max)
        raise ValueError(f"{self} has no maximum value")


@functools.lru_cache(maxsize=512)
def _parse(text: str) -> DataType:
    m = _PATTERN.match(text)
    if not m:
        raise ValueError(
            f"unknown dtype {text!r}: expected bool, int8..int64, uint8..uint64, float16/32/64,"
            " handle, optionally with lanes like int8x128"
        )
    kind, bits, lanes = m.group(1), m.group(2), m.group(3)
    if kind == "bool":
        if bits is not None:
            raise ValueError(f"unknown dtype {text!r}: bool takes no bit width")
        nbits = 1
    elif kind == "handle":
        nbits = 64
    else:
        if bits is None:
            raise ValueError(f"unknown dtype {text!r}: {kind} needs a bit width, e.g. {kind}32")
        nbits = int(bits)
    return DataType(kind, nbits, int(lanes) if lanes else 1)


def dtype(value: str | DataType | np.dtype | type) -> DataType:
    """Convert a dtype spelling (string, DataType, numpy dtype) to a DataType."""
    if isinstance(value, DataType):
        return value
    if isinstance(value, str):
        return _parse(value)
    if value is None:  # numpy would read None as float64
        raise TypeError("expected a dtype (str, DataType or numpy dtype), got None")
    try:
        np_dtype = np.dtype(value)
    except TypeError:
        raise TypeError(f"expected a dtype (str, DataType or numpy dtype), got {value!r}") from None
    if np_dtype == np.bool_:
        return _parse("bool")
    return _parse(np_dtype.name)


BOOL = dtype("bool")
INT32 = dtype("int32")
INT64 = dtype("int64")
FLOAT32 = dtype("float32")
HANDLE = dtype("handle")
