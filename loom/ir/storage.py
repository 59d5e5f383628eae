"""The interpreter's memory: storages, pointers into them, and the checked operations on them
that both interpreter modes use (the generated Python code of loom.ir.pycodegen and the plain
evaluator of loom.ir.evaluate). Every access is bounds-checked; a violation is an
`InterpreterError` naming the buffer, the index and the size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from loom.abi.dtype import DataType
from loom.errors import InterpreterError, LoomError
from loom.ir import semantics


class Storage:
    """The memory of one buffer: a list of element values of one dtype."""

    __slots__ = ("data", "dtype", "name")

    def __init__(self, name: str, dtype: DataType, data: list) -> None:
        self.name = name
        self.dtype = dtype
        self.data = data

    def __repr__(self) -> str:
        return f"Storage({self.name}: {len(self.data)} x {self.dtype})"


class Pointer:
    """A handle value: an element offset into a storage (`None` is the null pointer).

    Extern callbacks use it to read and write memory: `p[i]` and `p[i] = v` address element
    `offset + i`, bounds-checked against the storage; stored values are brought into the dtype.
    `p + k` is the pointer `k` elements further.
    """

    __slots__ = ("offset", "storage")

    def __init__(self, storage: Storage, offset: int = 0) -> None:
        self.storage = storage
        self.offset = offset

    @property
    def dtype(self) -> DataType:
        return self.storage.dtype

    def __len__(self) -> int:
        """Elements from this pointer to the end of the storage."""
        return max(0, len(self.storage.data) - self.offset)

    def _element(self, i: int) -> int:
        index = self.offset + int(i)
        if not 0 <= index < len(self.storage.data):
            raise InterpreterError(
                f"pointer access at element {index} is outside the storage {self.storage.name} "
                f"of {len(self.storage.data)} elements"
            )
        return index

    def __getitem__(self, i: int):
        return self.storage.data[self._element(i)]

    def __setitem__(self, i: int, value) -> None:
        self.storage.data[self._element(i)] = semantics.fit(value, self.dtype)

    def __add__(self, k: int) -> Pointer:
        return Pointer(self.storage, self.offset + int(k))

    def read(self, n: int) -> list:
        """The `n` elements starting here."""
        return [self[i] for i in range(n)]

    def write(self, values) -> None:
        for i, v in enumerate(values):
            self[i] = v

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Pointer)
            and other.storage is self.storage
            and other.offset == self.offset
        )

    def __hash__(self) -> int:
        return hash((id(self.storage), self.offset))

    def __repr__(self) -> str:
        return f"Pointer({self.storage.name} + {self.offset})"


# -- helpers the generated code calls (see loom.ir.pycodegen) -----------------------------------
def out_of_bounds(name, what, indices, shape, strides, base, size, lane):
    where = f"{what} of {name}[{', '.join(map(str, indices))}]"
    if lane is not None:
        where += f" (lane {lane})"
    if len(shape) >= 2:
        for d, (i, extent) in enumerate(zip(indices, shape)):
            if not 0 <= i < extent:
                raise InterpreterError(
                    f"{where}: index {i} is outside dimension {d} of extent {extent}"
                )
    offset = base + sum(i * s for i, s in zip(indices, strides))
    if size == 0:
        raise InterpreterError(f"{where}: its storage is empty (a null pointer?)")
    raise InterpreterError(
        f"{where}: element {offset} is outside its storage of {size} elements (0..{size - 1})"
    )


def out_of_bounds_ramp(name, what, start, step, lanes, size):
    for lane in range(lanes):
        offset = start + lane * step
        if not 0 <= offset < size:
            raise InterpreterError(
                f"{what} of {name}[{start}:{start + lanes * step}:{step}] (lane {lane}): element "
                f"{offset} is outside its storage of {size} elements (0..{size - 1})"
            )
    raise InterpreterError(f"{what} of {name} is outside its storage")  # not reached


def view(pointer, dt: DataType, name: str):
    """Storage, list, element offset and list length behind a pointer viewed as a buffer."""
    if pointer is None:
        return None, [], 0, 0
    if not isinstance(pointer, Pointer):
        raise InterpreterError(f"{name} holds {pointer!r}, not a pointer")
    if pointer.dtype != dt:
        raise InterpreterError(
            f"{name} points into {pointer.storage.name} ({pointer.dtype}) but is viewed as {dt}; "
            "the interpreter cannot reinterpret memory"
        )
    data = pointer.storage.data
    return pointer.storage, data, pointer.offset, len(data)


def address_of(storage, offset: int, size: int, name: str) -> Pointer:
    if storage is None:
        raise InterpreterError(f"address_of an element of {name}, which is a null pointer")
    if not 0 <= offset <= size:  # one past the end is a valid address
        raise InterpreterError(
            f"address_of {name} at element {offset} is outside its storage of {size} elements"
        )
    return Pointer(storage, offset)


def allocate(name: str, dt: DataType, count: int) -> Storage:
    if count < 0:
        raise InterpreterError(f"allocate {name}: negative size {count}")
    return Storage(name, dt, [junk_value(dt)] * count)


def check_loop(lo: int, extent: int, dt: DataType, name: str) -> None:
    if extent > 0 and lo + extent - 1 > dt.max_value():
        raise InterpreterError(
            f"loop {name}: the last value {lo + extent - 1} (min {lo} + extent {extent} - 1) "
            f"does not fit in {dt}"
        )


def lookup_extern(externs: Mapping[str, Callable], name: str, func_name: str) -> Callable:
    fn = externs.get(name)
    if fn is None:
        raise LoomError(
            f"{func_name} calls the extern symbol {name!r}, which is not provided; pass "
            f"externs={{{name!r}: callable}} (provided: {sorted(externs) or 'none'})"
        )
    return fn


def extern_result(value, dt: DataType, name: str):
    """Bring a callback's result into `dt`; None counts as 0 (a void function)."""
    if dt.is_handle:
        if value is not None and not isinstance(value, Pointer):
            raise InterpreterError(f"extern {name} returns handle, got {value!r}")
        return value
    if dt.is_vector:
        if value is None:
            value = (0,) * dt.lanes
        lanes = tuple(value)
        if len(lanes) != dt.lanes:
            raise InterpreterError(f"extern {name} returns {dt}, got {len(lanes)} values")
        return tuple(semantics.fit(v, dt.element) for v in lanes)
    return semantics.fit(0 if value is None else value, dt)


def fail(message: str):
    """Raise the InterpreterError of a failed check inside an expression (`require`)."""
    raise InterpreterError(message)


def unbound_storage(b) -> InterpreterError:
    """The error for an access of buffer `b` whose storage no parameter, Allocate or let binds."""
    return InterpreterError(
        f"buffer {b.name} is accessed but its storage {b.data.name} is not bound here "
        "(not a parameter, an Allocate, or a let-bound pointer)"
    )


def junk_value(dt: DataType):
    """The fill of fresh storage: NaN, True, or the byte 0x5A repeated."""
    if dt.is_float:
        return math.nan
    if dt.is_bool:
        return True
    return semantics.wrap_int(int.from_bytes(b"\x5a" * dt.itemsize, "little"), dt)
