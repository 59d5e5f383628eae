"""`tune`: measure candidate knob values of a tunable strategy on this machine and record the
fastest (docs/tuning.md).

Each candidate is built with `loom.build` and timed with the module's `time_evaluator` on
random inputs; the first candidate is always the strategy's own choice (no knob given), so the
record is never slower than the default as measured. The rest are drawn, without repetition,
from every combination of the knobs' values, by a seeded generator: the same call measures the
same candidates.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np

from loom.autotune import records
from loom.autotune.knobs import Tunable
from loom.driver import build
from loom.errors import LoomError
from loom.ir.expr import Var
from loom.target import Target, as_target


@dataclasses.dataclass(frozen=True)
class Trial:
    config: dict  # the knobs given ({}: the strategy's defaults)
    seconds: float  # median seconds per call


@dataclasses.dataclass(frozen=True)
class TuneResult:
    key: str  # the record's key
    best: Trial
    trials: tuple[Trial, ...]


def tune(
    strategy: Tunable,
    *args,
    target: str | Target = "llvm",
    trials: int = 8,
    number: int = 3,
    repeat: int = 3,
    seed: int = 0,
    **kwargs,
) -> TuneResult:
    """Measure up to `trials` candidates of `strategy(*args, **kwargs)` for `target` (which
    must run here: the host) and record the fastest in the tuning records (records.py). Each
    candidate is timed over `repeat` rounds of `number` calls; its median counts."""
    if not isinstance(strategy, Tunable):
        raise TypeError(f"tune takes a tunable strategy (loom.autotune.tunable), got {strategy!r}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be a positive int, got {trials!r}")
    target = as_target(target)
    if not target.is_host:
        raise LoomError(f"tune measures on this machine: target {target} does not run here")
    given = [name for name in strategy.knob_names if name in kwargs]
    if given:
        raise ValueError(f"tune chooses the knobs itself; do not pass {given}")
    key = strategy.key(args, kwargs, target)
    candidates = strategy.configurations(target)
    random.Random(seed).shuffle(candidates)
    measured = []
    for config in [{}, *candidates][:trials]:
        seconds = _measure(strategy, args, kwargs, config, target, number, repeat)
        measured.append(Trial(config, seconds))
    best = min(measured, key=lambda t: t.seconds)
    records.record(key, best.config, best.seconds, len(measured))
    return TuneResult(key, best, tuple(measured))


def _measure(strategy, args, kwargs, config, target, number, repeat) -> float:
    s, tensors = strategy.strategy(*args, target=target, **kwargs, **config)
    name = f"tune_{strategy.name.replace('.', '_')}"
    mod = build(s, tensors, target=target, name=name)
    arrays = [_random_input(t, k) for k, t in enumerate(tensors)]
    return mod.time_evaluator(name, number=number, repeat=repeat)(*arrays).median


def _random_input(tensor, k: int) -> np.ndarray:
    if isinstance(tensor, Var):
        raise LoomError(f"tune builds with random arrays; argument {k} ({tensor.name}) is a scalar")
    dtype = np.dtype(str(tensor.dtype))
    rng = np.random.default_rng(k)
    if dtype.kind == "f":
        return rng.standard_normal(tensor.shape).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 8, tensor.shape).astype(dtype)
    return np.zeros(tensor.shape, dtype)
