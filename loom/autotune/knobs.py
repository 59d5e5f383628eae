"""Tunable strategies: a strategy (a function returning a schedule and its arguments) that
declares knobs, parameters whose values change only how fast the kernel runs, never what it
computes (docs/tuning.md).

`tunable(name, strategy, knobs)` wraps a strategy. The wrapper is called like the strategy; the
knobs its caller leaves out come from the tuning records (records.py): the best values that
`loom.autotune.tune` measured for this strategy, these arguments and this target, or the
strategy's own defaults when nothing was measured.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any

from loom.autotune import records
from loom.target import Target, as_target


@dataclasses.dataclass(frozen=True)
class Knob:
    """A parameter of a strategy that the tuner may set: its keyword `name` and the values it
    may take, a sequence or a function `values(target) -> sequence` (values that depend on the
    target's vector registers)."""

    name: str
    values: Sequence[Any] | Callable[[Target], Sequence[Any]]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"Knob name must be an identifier, got {self.name!r}")

    def values_for(self, target: Target) -> tuple[Any, ...]:
        values = tuple(self.values(target) if callable(self.values) else self.values)
        if not values:
            raise ValueError(f"knob {self.name} has no values for {target}")
        for v in values:
            json.dumps(v)  # a value must be recordable
        return values


class Tunable:
    """A strategy with knobs. Call it as the strategy: `tunable(*args, target=..., **kwargs)`
    returns the strategy's (schedule, args), with the recorded best value of every knob not
    given in `kwargs`."""

    def __init__(self, name: str, strategy: Callable, knobs: Sequence[Knob]):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a tunable strategy needs a name, got {name!r}")
        if not callable(strategy):
            raise TypeError(f"strategy must be callable, got {strategy!r}")
        knobs = tuple(knobs)
        for k in knobs:
            if not isinstance(k, Knob):
                raise TypeError(f"knobs must be loom.autotune.Knob objects, got {k!r}")
        names = [k.name for k in knobs]
        if len(set(names)) != len(names):
            raise ValueError(f"tunable {name}: knob names repeat: {names}")
        self.name = name
        self.strategy = strategy
        self.knobs = knobs
        functools.update_wrapper(self, strategy)

    def __call__(self, *args, target: str | Target | None = None, **kwargs):
        chosen = self.recorded(*args, target=target, **kwargs) or {}
        return self.strategy(*args, target=as_target(target or "llvm"), **(chosen | kwargs))

    def key(self, args: tuple, kwargs: dict, target: str | Target | None) -> str:
        """The record key: this strategy, its arguments other than knobs, the target."""
        fixed = {k: v for k, v in kwargs.items() if k not in self.knob_names}
        try:
            described = json.dumps([list(args), fixed], sort_keys=True)
        except TypeError:
            raise TypeError(
                f"tunable {self.name}: arguments must be JSON values (ints, strings, ...) "
                f"to be recorded, got {args!r} {fixed!r}"
            ) from None
        return f"{self.name} {described} {as_target(target or 'llvm')}"

    @property
    def knob_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.knobs)

    def recorded(self, *args, target: str | Target | None = None, **kwargs) -> dict | None:
        """The best knob values recorded for these arguments and target, or None."""
        return records.best(self.key(args, kwargs, target))

    def configurations(self, target: str | Target | None = None) -> list[dict[str, Any]]:
        """Every combination of the knobs' values for `target`."""
        target = as_target(target or "llvm")
        values = [k.values_for(target) for k in self.knobs]
        return [dict(zip(self.knob_names, combo)) for combo in itertools.product(*values)]

    def __repr__(self) -> str:
        return f"<loom.autotune.Tunable {self.name} knobs={list(self.knob_names)}>"


def tunable(name: str, strategy: Callable | None = None, knobs: Sequence[Knob] = ()):
    """Wrap `strategy` as a Tunable named `name` (the records' key); as a decorator,
    `@tunable("mine", knobs=[Knob("tile", (8, 16))])`."""
    if strategy is None:
        return lambda fn: Tunable(name, fn, knobs)
    return Tunable(name, strategy, knobs)
