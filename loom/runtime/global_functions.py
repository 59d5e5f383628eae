"""Global functions by name: `loom.register_func` and `loom.get_global_func` (TVM's).

A table of Python callables that code finds by name (TVM's global PackedFunc registry). It is
a `Registry` (docs/architecture.md, decision 12), so the test suite's snapshot and restore
cover it; the rules are TVM's: a taken name needs `override=True`, and a missing one is an
error unless `allow_missing=True`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from loom.errors import LoomError
from loom.registry import Registry


@dataclasses.dataclass(frozen=True)
class GlobalFunction:
    name: str
    func: Callable


def _check(entry: GlobalFunction) -> None:
    if not isinstance(entry.name, str) or not entry.name:
        raise TypeError(f"a global function's name must be a non-empty str, got {entry.name!r}")
    if not callable(entry.func):
        raise TypeError(f"global function {entry.name!r} must be callable, got {entry.func!r}")


GLOBAL_FUNCTIONS: Registry[GlobalFunction] = Registry("global function", check=_check)


def register_func(func_name, f: Callable | None = None, override: bool = False):
    """Register `f` under `func_name`, or, without `f`, return a decorator that does. As a bare
    decorator (`@register_func`) the function's own name is used. Returns the function. A
    name already taken by another function is a LoomError unless `override=True`."""
    if callable(func_name):  # @register_func
        f, func_name = func_name, func_name.__name__
    if not isinstance(func_name, str):
        raise TypeError(f"func_name must be a str, got {func_name!r}")

    def register(func: Callable) -> Callable:
        old = GLOBAL_FUNCTIONS.find(func_name)
        if old is not None and old.func is not func and not override:
            raise LoomError(
                f"global function {func_name!r} is already registered (by "
                f"{getattr(old.func, '__qualname__', old.func)!s}); pass override=True to "
                "replace it"
            )
        GLOBAL_FUNCTIONS.register(GlobalFunction(func_name, func), replace=True)
        return func

    return register(f) if f is not None else register


def get_global_func(name: str, allow_missing: bool = False) -> Callable | None:
    """The function registered as `name`; a missing name is a LoomError naming the registered
    ones (None with `allow_missing=True`)."""
    if allow_missing:
        entry = GLOBAL_FUNCTIONS.find(name)
        return None if entry is None else entry.func
    return GLOBAL_FUNCTIONS.get(name).func


def list_global_func_names() -> list[str]:
    return GLOBAL_FUNCTIONS.names()


def remove_global_func(name: str) -> None:
    """Remove `name` (a LoomError if it is not registered)."""
    GLOBAL_FUNCTIONS.unregister(name)
