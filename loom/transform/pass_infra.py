"""Passes and the context they run in.

A pass is a named function from an IRModule to an IRModule. It always receives the whole module
(the entry function and every kernel). `PassContext` holds the optimization level, configuration
(including user passes to insert at named phases of the pipeline) and instruments that observe
each pass.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from loom.errors import LoomError
from loom.ir.function import IRModule, PrimFunc
from loom.registry import Registry

PHASES = ("schedule", "flatten", "vectorize", "final", "memory", "build")
"""Where user passes can be inserted (TVM's add_lower_pass phases 0..3, and by name the others):
right after the schedule is lowered to loops, after buffers are flattened to 1-d, after
vectorization and unrolling, at the end of lowering; when building for a target, "memory" right
before the whole-module memory planning (plan_memory: a pass there sees `main` and every kernel
and may pin buffers to pools, loom.memory.pin), and "build" after memory lowering, parallel
outlining and the checks, right before legalization and code generation."""


@dataclasses.dataclass(frozen=True)
class Pass:
    """A named IRModule -> IRModule function; runs only when the context's opt_level is at least
    `opt_level`."""

    name: str
    fn: Callable[[IRModule], IRModule]
    opt_level: int = 0

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"pass {self.name} takes an IRModule, got {type(mod).__name__}")
        result = self.fn(mod)
        if not isinstance(result, IRModule):
            raise LoomError(
                f"pass {self.name} returned {type(result).__name__}, expected an IRModule"
            )
        return result


PASSES: Registry[Pass] = Registry("pass", builtins=("loom.transform.pipeline",))


def register_pass(p: Pass) -> Pass:
    """Make a pass findable by name (`get_pass`, `list_passes`); a new pass of the same name
    replaces the old one (a pass defined again in a notebook)."""
    return PASSES.register(p, replace=True)


get_pass = PASSES.get


def list_passes() -> list[str]:
    return PASSES.names()


def module_pass(fn: Callable | None = None, *, name: str | None = None, opt_level: int = 0):
    """Decorator: a pass from `fn(IRModule) -> IRModule`."""

    def wrap(f: Callable) -> Pass:
        return Pass(name or f.__name__, f, opt_level)

    return wrap(fn) if fn is not None else wrap


def prim_func_pass(fn: Callable | None = None, *, name: str | None = None, opt_level: int = 0):
    """Decorator: a pass applying `fn(PrimFunc) -> PrimFunc` to every function of the module."""

    def wrap(f: Callable) -> Pass:
        def run(mod: IRModule) -> IRModule:
            def apply(func: PrimFunc) -> PrimFunc:
                result = f(func)
                if not isinstance(result, PrimFunc):
                    raise LoomError(
                        f"pass {name or f.__name__} returned "
                        f"{type(result).__name__} for {func.name}, expected a PrimFunc"
                    )
                return result

            return mod.map_functions(apply)

        return Pass(name or f.__name__, run, opt_level)

    return wrap(fn) if fn is not None else wrap


def as_pass(p: Pass | Callable) -> Pass:
    """A Pass from a Pass or a plain function over IRModules."""
    if isinstance(p, Pass):
        return p
    if callable(p):
        return Pass(getattr(p, "__name__", "user_pass"), p)
    raise TypeError(f"a pass must be a loom Pass or a function IRModule -> IRModule, got {p!r}")


class PassInstrument:
    """Observes passes; override the hooks you need."""

    def enter_pass_ctx(self) -> None:
        pass

    def exit_pass_ctx(self) -> None:
        pass

    def run_before_pass(self, mod: IRModule, p: Pass) -> None:
        pass

    def run_after_pass(self, mod: IRModule, p: Pass) -> None:
        pass


class PrintAfterAll(PassInstrument):
    """Prints the module after every pass, headed by the pass name."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream

    def run_after_pass(self, mod: IRModule, p: Pass) -> None:
        out = self.stream or sys.stdout
        print(f"# IR after {p.name}", file=out)
        print(mod, file=out)
        print(file=out)


def _check_lower_passes(value: Any) -> list[tuple[str, Pass]]:
    if not isinstance(value, list | tuple):
        raise LoomError('"tir.add_lower_pass" takes a list of (phase, pass) pairs')
    out = []
    for item in value:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise LoomError(f'"tir.add_lower_pass" entries are (phase, pass) pairs, got {item!r}')
        phase, p = item
        if isinstance(phase, int) and not isinstance(phase, bool) and 0 <= phase < len(PHASES):
            phase = PHASES[phase]
        if phase not in PHASES:
            raise LoomError(
                f"unknown lowering phase {phase!r}; phases are {list(PHASES)} "
                f"(or 0..{len(PHASES) - 1})"
            )
        out.append((phase, as_pass(p)))
    return out


def _check_bool(key: str):
    def check(value: Any) -> bool:
        if not isinstance(value, bool):
            raise LoomError(f"config {key!r} takes a bool, got {value!r}")
        return value

    return check


@dataclasses.dataclass(frozen=True)
class ConfigKey:
    """A PassContext config key: `check(value)` validates and returns the value to store."""

    name: str
    check: Callable[[Any], Any]
    doc: str


CONFIGS: Registry[ConfigKey] = Registry("PassContext config", builtins=("loom.transform.pipeline",))


def register_config(key: str, check: Callable[[Any], Any], doc: str) -> None:
    """Declare a PassContext config key with its validator."""
    CONFIGS.register(ConfigKey(key, check, doc), replace=True)


def list_configs() -> dict[str, str]:
    return {c.name: c.doc for c in CONFIGS}


register_config(
    "tir.add_lower_pass",
    _check_lower_passes,
    "user passes as (phase, pass) pairs; phase is a name in PHASES or 0..3",
)
register_config(
    "tir.disable_vectorize",
    _check_bool("tir.disable_vectorize"),
    "run vectorized loops as serial loops",
)
register_config(
    "tir.disable_bound_checks",
    _check_bool("tir.disable_bound_checks"),
    "add no run-time checks of buffer indices (check_bounds); out-of-range accesses the "
    "build can prove are still errors",
)

_local = threading.local()


class PassContext:
    """Settings for lowering and building; use as a context manager."""

    def __init__(
        self,
        opt_level: int = 2,
        config: dict | None = None,
        instruments: Iterable[PassInstrument] = (),
        disabled_pass: Iterable[str] = (),
    ):
        if not isinstance(opt_level, int) or not 0 <= opt_level <= 3:
            raise LoomError(f"opt_level must be an int in 0..3, got {opt_level!r}")
        self.opt_level = opt_level
        self.config: dict[str, Any] = {}
        for key, value in (config or {}).items():
            if key not in CONFIGS:
                raise LoomError(f"unknown PassContext config {key!r}; known: {CONFIGS.names()}")
            self.config[key] = CONFIGS.get(key).check(value)
        self.instruments = list(instruments)
        for inst in self.instruments:
            if not isinstance(inst, PassInstrument):
                raise TypeError(f"instruments must be PassInstrument objects, got {inst!r}")
        self.disabled_pass = set(disabled_pass)

    def __enter__(self) -> PassContext:
        stack = _stack()
        stack.append(self)
        for inst in self.instruments:
            inst.enter_pass_ctx()
        return self

    def __exit__(self, *exc) -> None:
        for inst in self.instruments:
            inst.exit_pass_ctx()
        _stack().pop()

    @staticmethod
    def current() -> PassContext:
        stack = _stack()
        return stack[-1] if stack else _DEFAULT

    def get_config(self, key: str, default: Any = None) -> Any:
        return self.config.get(key, default)

    def user_passes(self, phase: str) -> list[Pass]:
        return [p for ph, p in self.config.get("tir.add_lower_pass", []) if ph == phase]

    def run(self, passes: Iterable[Pass], mod: IRModule) -> IRModule:
        """Run passes in order, skipping disabled ones and those above the opt_level."""
        for p in passes:
            if p.name in self.disabled_pass or p.opt_level > self.opt_level:
                continue
            for inst in self.instruments:
                inst.run_before_pass(mod, p)
            mod = p(mod)
            for inst in self.instruments:
                inst.run_after_pass(mod, p)
        return mod


def _stack() -> list[PassContext]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


_DEFAULT = PassContext()
