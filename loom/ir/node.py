"""The base of every IR value: a frozen dataclass with structural equality and a cached hash.

IR values never change after construction; a pass builds new ones. `@node` turns a class into such
a dataclass. Fields marked `derived()` (like an expression's dtype) are computed in `__post_init__`
from the other fields and take no part in equality. The field comparison is each class's
`_fields_equal`; it is also `==`, except for expressions, whose `==` builds a comparison (TVM's
EqualOp, loom/ir/expr.py) that is true as a Python value when `_fields_equal` is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


def derived(default: Any = None) -> Any:
    """A field computed from the others: not a constructor argument, not part of equality."""
    return dataclasses.field(default=default, init=False, compare=False, repr=False)


def node(cls):
    """Make `cls` a frozen dataclass whose hash is computed once."""
    cls = dataclasses.dataclass(frozen=True, repr=False)(cls)
    field_hash = cls.__hash__

    def __hash__(self) -> int:
        cached = self._hash  # an attribute read: hashing is a third of the simplifier's calls
        if cached is None:
            cached = field_hash(self)
            object.__setattr__(self, "_hash", cached)
        return cached

    cls.__hash__ = __hash__
    cls._fields_equal = cls.__eq__
    expression_eq = getattr(cls, "_expression_eq", None)
    if expression_eq is not None:  # the dataclass replaced the expression operators
        cls.__eq__, cls.__ne__ = expression_eq, cls._expression_ne
    cls._child_fields = tuple(f.name for f in dataclasses.fields(cls) if f.compare)
    return cls


class Node:
    """Common base of expressions, statements, buffers and functions."""

    _child_fields: tuple[str, ...] = ()
    _hash = None  # the hash, once computed (`node`'s __hash__); no exception on the first

    def _set(self, name: str, value: Any) -> None:
        """Set a derived field during `__post_init__` (the dataclass is frozen)."""
        object.__setattr__(self, name, value)

    def replace(self, **changes: Any):
        """A copy with some fields changed (as `dataclasses.replace`, which took a tenth of an
        unrolling pass: the constructor's fields are found once per class here)."""
        cls = type(self)
        names = _INIT_FIELDS.get(cls)
        if names is None:
            names = _INIT_FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls) if f.init)
        if not names.issuperset(changes):
            return dataclasses.replace(self, **changes)  # its error for a field it cannot set
        for name in names:
            if name not in changes:
                changes[name] = getattr(self, name)
        return cls(**changes)

    def __repr__(self) -> str:
        return _printer(self) if _printer is not None else object.__repr__(self)

    __str__ = __repr__


_INIT_FIELDS: dict[type, frozenset[str]] = {}

_printer: Callable[[Node], str] | None = None
"""How nodes print: loom.ir.printer.to_text, installed by `set_printer` when the printer is
imported (the printer knows every node class, so it imports them, not the other way)."""


def set_printer(fn: Callable[[Node], str]) -> None:
    global _printer
    _printer = fn
