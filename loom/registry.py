"""One registry type for every table of named things loom can be extended with.

Memory scopes, pragma rules, runtime libraries, module loaders, target kinds and backends each
live in a `Registry`. They all follow the same rules:

- registering a name that is free adds the item;
- registering an equal item under a name already taken does nothing (importing a module twice,
  or declaring the same thing from two places, is harmless);
- registering a different item under a taken name is a `LoomError`, unless `replace=True`;
- `get` of an unknown name is a `LoomError` that lists the registered names and the closest
  ones;
- `unregister` of an unknown name is a `LoomError` too, unless `missing_ok=True`.

A registry may name the modules that register loom's own entries (`builtins`): the first lookup
that misses, or lists the entries, imports them. So `loom.memory.get("local.vtcm")` finds
Hexagon's memory even if nothing imported the Hexagon target yet, and a module registers its
entries where they are defined, not in a central list.

`snapshot_all()` / `restore_all(token)` save and put back every registry at once: the test
suite wraps each test in them, so no test leaves a registration behind.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from loom.errors import LoomError

T = TypeVar("T")

_ALL: list[Registry] = []


class Registry(Generic[T]):
    """Items of one kind (`what`, e.g. "memory scope"), keyed by `key(item)` (default: its
    `name`). `check(item)` may raise TypeError for an item of the wrong type."""

    def __init__(
        self,
        what: str,
        key: Callable[[T], str] = lambda item: item.name,
        check: Callable[[T], None] | None = None,
        builtins: tuple[str, ...] = (),
    ) -> None:
        self.what = what
        self._key = key
        self._check = check
        self._builtins = builtins
        self._discovered = not builtins
        self._items: dict[str, T] = {}
        _ALL.append(self)

    def discover(self) -> None:
        """Import the modules that register loom's own entries (once)."""
        if not self._discovered:
            self._discovered = True
            for module in self._builtins:
                importlib.import_module(module)

    def register(self, item: T, replace: bool = False) -> T:
        """Add `item`; a taken name needs `replace=True` unless the item is equal."""
        if self._check is not None:
            self._check(item)
        name = self._key(item)
        old = self._items.get(name)
        if old is not None and not replace and old != item:
            raise LoomError(
                f"{self.what} {name!r} is already registered with another declaration; "
                "give yours another name, or pass replace=True"
            )
        self._items[name] = item
        return item

    def unregister(self, name: str, missing_ok: bool = False) -> None:
        """Remove `name`; an unknown name is an error unless `missing_ok`."""
        if name not in self._items and not missing_ok:
            self.get(name)  # raises, naming the registered ones
        self._items.pop(name, None)

    def get(self, name: str) -> T:
        if name not in self._items:
            self.discover()
        try:
            return self._items[name]
        except KeyError:
            near = difflib.get_close_matches(str(name), self._items, n=3)
            hint = f" (did you mean {', '.join(near)}?)" if near else ""
            raise LoomError(
                f"unknown {self.what} {name!r}{hint}; registered: "
                f"{', '.join(sorted(self._items)) or 'none'}"
            ) from None

    def find(self, name: str) -> T | None:
        """The item of that name, or None."""
        if name not in self._items:
            self.discover()
        return self._items.get(name)

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._items)

    def registered(self) -> dict[str, T]:
        """The entries registered so far, by name, without importing the modules that register
        loom's own (a copy: for a cache key that must not change by being computed)."""
        return dict(self._items)

    def items(self) -> list[T]:
        """Every item, sorted by name."""
        return [self._items[n] for n in self.names()]

    def in_order(self) -> list[T]:
        """Every item, in registration order (the order lookups that take the first match
        use)."""
        self.discover()
        return list(self._items.values())

    def __contains__(self, name: object) -> bool:
        if name not in self._items:
            self.discover()
        return name in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(self.items())

    def __len__(self) -> int:
        self.discover()
        return len(self._items)

    def snapshot(self) -> dict[str, T]:
        self.discover()
        return dict(self._items)

    def restore(self, saved: dict[str, T]) -> None:
        self._items.clear()
        self._items.update(saved)

    def __repr__(self) -> str:
        return f"<Registry of {self.what}: {self.names()}>"


def registries() -> list[Registry]:
    """Every registry, in creation order."""
    return list(_ALL)


def snapshot_all() -> list[tuple[Registry, dict]]:
    """What every registry holds now (see restore_all)."""
    return [(r, r.snapshot()) for r in _ALL]


def restore_all(saved: list[tuple[Registry, dict]]) -> None:
    """Put every registry back as `snapshot_all` saw it."""
    for registry, items in saved:
        registry.restore(items)
