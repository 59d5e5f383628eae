"""Fingerprints: a sha256 of everything a value is made of, the key of the compile cache.

`fingerprint(value)` walks an IR value (an IRModule, a PrimFunc) or a schedule with its tensors,
and hashes each object's class and fields in a fixed order. Two values get the same fingerprint
only if they are built alike: the same classes, the same fields, the same names (of variables,
buffers, functions: they reach the object code as symbols and error messages), the same sharing
of objects. Variables are numbered by their first appearance, so a program built twice, in this
process or another, has one fingerprint, while `x + y` and `x + x` differ.

What cannot be walked (a Python function, as a tensorize intrinsic's implementation, or an
object of a class outside loom) makes the value unfingerprintable: `fingerprint` returns None
and the caller must not cache. A fingerprint is thus conservative: values that are equal but
built differently may get different fingerprints (a cache miss), never the reverse.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import weakref
from typing import Any

from loom.ir.expr import Var
from loom.ir.node import Node


class Unfingerprintable(Exception):
    """A value holds something the fingerprint cannot walk."""


_ATOMS = (type(None), bool, int, float, str, bytes)
_FIELDS: dict[type, tuple[str, ...]] = {}
_NOT_PART: dict[str, frozenset[str]] = {
    # how long the memory planner took: recorded in the module's plan, read by nobody that
    # makes code
    "loom.memory.planner.buffer.Plan": frozenset({"seconds"}),
}


def _fields_of(cls: type) -> tuple[str, ...]:
    """The fields that make up an object of `cls`: a dataclass's compared fields (the others
    are derived from them or cached), else its attributes (None: read `vars()` per object)."""
    names = _FIELDS.get(cls)
    if names is None:
        if dataclasses.is_dataclass(cls):
            skip = _NOT_PART.get(f"{cls.__module__}.{cls.__qualname__}", frozenset())
            names = tuple(
                f.name for f in dataclasses.fields(cls) if f.compare and f.name not in skip
            )
        else:
            slots = []
            for klass in cls.__mro__:
                slots += [s for s in getattr(klass, "__slots__", ()) if s != "__weakref__"]
            names = tuple(slots)
        _FIELDS[cls] = names
    return names


class _Walker:
    def __init__(self, in_process: bool) -> None:
        self.in_process = in_process
        self.out: list[str] = []
        self.seen: dict[int, int] = {}  # id(object) -> its number
        self.vars: dict[int, int] = {}  # Var.id -> its number
        self.keep: list[Any] = []  # objects numbered by id() stay alive during the walk
        self.functions: list[Any] = []  # in_process: functions, which the key names by id()

    def walk(self, x: Any) -> None:
        out = self.out
        t = type(x)
        if t in _ATOMS:
            out.append(f"{t.__name__[0]}{x!r}")
            return
        if t is tuple or t is list:
            out.append(f"{t.__name__[0]}{len(x)}(")
            for item in x:
                self.walk(item)
            out.append(")")
            return
        if t is Var:
            number = self.vars.get(x.id)
            if number is not None:
                out.append(f"v{number}")
                return
            self.vars[x.id] = number = len(self.vars)
            out.append(f"V{number}:{x.name}:{x.dtype}")
            return
        if isinstance(x, enum.Enum):
            out.append(f"E{t.__qualname__}.{x.name}")
            return
        if t is dict:
            out.append(f"d{len(x)}(")
            for key, value in x.items():
                self.walk(key)
                self.walk(value)
            out.append(")")
            return
        if t is set or t is frozenset:
            parts = sorted(fingerprint_parts(item) for item in x)
            out.append(f"s{len(parts)}({','.join(parts)})")
            return
        if not t.__module__.startswith("loom."):
            self.foreign(x)
            return
        number = self.seen.get(id(x))
        if number is not None:
            out.append(f"o{number}")
            return
        self.seen[id(x)] = len(self.seen)
        self.keep.append(x)
        out.append(f"O{t.__module__}.{t.__qualname__}(")
        names = _fields_of(t)
        if names:
            for name in names:
                self.walk(getattr(x, name, None))
        if not dataclasses.is_dataclass(t) and hasattr(x, "__dict__"):
            attrs = vars(x)
            for name in sorted(attrs):
                out.append(name)
                self.walk(attrs[name])
        out.append(")")

    def foreign(self, x: Any) -> None:
        """A value of a class outside loom: numpy arrays (constants) by their bytes; with
        `in_process`, a function (a reducer's combiner) by its identity, kept alive in `keep`."""
        if self.in_process and callable(x):
            self.functions.append(x)
            self.out.append(f"F{id(x)}")
            return
        tobytes = getattr(x, "tobytes", None)
        dtype, shape = getattr(x, "dtype", None), getattr(x, "shape", None)
        if tobytes is None or dtype is None or shape is None:
            raise Unfingerprintable(f"{type(x).__module__}.{type(x).__qualname__}")
        digest = hashlib.sha256(tobytes()).hexdigest()
        self.out.append(f"A{type(x).__module__}.{dtype}{tuple(shape)}{digest}")


def fingerprint_parts(value: Any) -> str:
    """The text that `fingerprint` hashes (raises Unfingerprintable)."""
    w = _Walker(in_process=False)
    w.walk(value)
    return "\x1f".join(w.out)


def process_fingerprint(value: Any) -> tuple[str, list] | None:
    """A fingerprint valid in this process only, for values that may hold functions (a
    schedule: reducers combine with Python functions), which count by identity: the key and
    the list of objects it depends on, which the caller keeps alive as long as it uses the key
    (an object's identity is reused once it is gone). None when it cannot be walked."""
    w = _Walker(in_process=True)
    try:
        w.walk(value)
    except Unfingerprintable:
        return None
    return hashlib.sha256("\x1f".join(w.out).encode()).hexdigest(), w.functions


_MEMO: dict[int, tuple[weakref.ref, str | None]] = {}


def fingerprint(value: Any) -> str | None:
    """The sha256 (hex) of `value`'s structure, or None when it holds something that cannot be
    walked. An IR value's is remembered while it lives (IR values never change; a schedule
    does, and is walked again each time)."""
    memo = _MEMO.get(id(value))
    if memo is not None and memo[0]() is value:
        return memo[1]
    try:
        result = hashlib.sha256(fingerprint_parts(value).encode()).hexdigest()
    except Unfingerprintable:
        result = None
    if isinstance(value, Node):
        key = id(value)
        _MEMO[key] = (weakref.ref(value, functools.partial(_forget, key)), result)
    return result


def _forget(key: int, _ref: weakref.ref) -> None:
    _MEMO.pop(key, None)


__all__ = ["Unfingerprintable", "fingerprint", "fingerprint_parts", "process_fingerprint"]
