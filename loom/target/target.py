"""Target descriptions: what code is generated for, and the facts passes need about it.

`Target("llvm")` is the host CPU (triple, CPU name and features detected by LLVM);
`Target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon")` overrides any part.
The first word is a target kind: a `loom.backend.Backend` registered under that name (llvm, c,
hexagon, npu, or a user's) says which options it takes, what they mean, and how to build.
Vector width and buffer alignment come from the target, never from a global constant.
"""

from __future__ import annotations

import dataclasses
import functools
import shlex

import llvmlite.binding as llvm

from loom.backend.base import BACKENDS
from loom.errors import LoomError

_COMMON_OPTIONS = {"opt-level", "align", "stack-limit"}


@functools.cache
def _host() -> tuple[str, str, str]:

    features = llvm.get_host_cpu_features().flatten()
    return llvm.get_process_triple(), llvm.get_host_cpu_name(), features


def _vector_bytes(triple: str, features: str) -> int:
    """Width of the widest vector register the features enable."""
    enabled = {f[1:] for f in features.split(",") if f.startswith("+")}
    if triple.startswith(("x86_64", "i686", "i386")):
        if "avx512f" in enabled:
            return 64
        if "avx" in enabled or "avx2" in enabled:
            return 32
        return 16
    if triple.startswith(("aarch64", "arm")):
        return 16
    return 16


@dataclasses.dataclass(frozen=True)
class Target:
    """kind (a registered target kind), LLVM triple, CPU name, feature string, and options."""

    kind: str
    triple: str
    cpu: str
    features: str
    options: tuple[tuple[str, str], ...] = ()

    def __init__(self, spec: str | Target = "llvm"):
        if isinstance(spec, Target):
            for f in dataclasses.fields(Target):
                object.__setattr__(self, f.name, getattr(spec, f.name))
            return
        if not isinstance(spec, str) or not spec.strip():
            raise LoomError(f"target must be a string like 'llvm -mcpu=...', got {spec!r}")
        words = shlex.split(spec)
        kind, opts = words[0], {}
        if kind not in BACKENDS:
            raise LoomError(f"unknown target kind {kind!r}; registered kinds: {BACKENDS.names()}")
        backend = BACKENDS.get(kind)
        for word in words[1:]:
            if not word.startswith("-") or "=" not in word:
                raise LoomError(f"target option {word!r} must look like -key=value")
            key, value = word[1:].split("=", 1)
            opts[key] = value
        known = set(backend.options) | _COMMON_OPTIONS
        unknown = set(opts) - known
        if unknown:
            raise LoomError(
                f"unknown target options {sorted(unknown)} for {kind}; known: "
                f"{', '.join('-' + k for k in sorted(known))}"
            )
        triple, cpu, features = backend.describe_target(opts, _host())
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "triple", triple)
        object.__setattr__(self, "cpu", cpu)
        object.__setattr__(self, "features", features)
        object.__setattr__(self, "options", tuple(sorted(opts.items())))

    def option(self, key: str, default: str | None = None) -> str | None:
        return dict(self.options).get(key, default)

    @property
    def is_host(self) -> bool:
        return self.triple == _host()[0]

    @property
    def backend(self):
        """The registered `loom.backend.Backend` of this target's kind."""
        return BACKENDS.get(self.kind)

    @property
    def device(self) -> str:
        """The kind of processor the code runs on, as memory scopes and runtime libraries name
        it ("cpu", "hexagon", ...)."""
        return self.backend.device

    @property
    def opt_level(self) -> int:
        level = int(self.option("opt-level", "3"))
        if not 0 <= level <= 3:
            raise LoomError(f"target -opt-level must be 0..3, got {level}")
        return level

    @property
    def vector_bytes(self) -> int:
        """Bytes in the widest vector register."""
        own = self.backend.vector_bytes(self)
        return own if own is not None else _vector_bytes(self.triple, self.features)

    @property
    def alignment(self) -> int:
        """Byte alignment of buffers the code may assume (arguments are checked against it):
        a vector register or a cache line, whichever is larger, unless -align= says otherwise."""
        if self.option("align") is not None:
            return int(self.option("align"))
        return max(64, self.vector_bytes)

    def memory_capacity(self, scope: str) -> int | None:
        """The target's limit on a memory scope (the VTCM size for Hexagon's), or None."""
        return self.backend.memory_capacity(self, scope)

    @property
    def masked_loads_are_safe(self) -> bool:
        """Whether the code generator's masked vector loads never touch masked-off lanes (if
        not, loom reads masked-off lanes from a valid element instead)."""
        return self.backend.masked_loads_are_safe

    @property
    def takes_vector_ir(self) -> bool:
        """Whether its code generator takes vector IR: LLVM's does; C's does not (the C
        compiler vectorizes the plain loops it gets), nor a backend's unless it says so."""
        return self.backend.vector_ir

    @property
    def stack_limit(self) -> int:
        """Bytes a generated function may allocate on the stack (stack-scoped buffers)."""
        return int(self.option("stack-limit", str(1 << 20)))

    def __str__(self) -> str:
        text = self.backend.target_text(self)
        return text + "".join(f" -{k}={v}" for k, v in self.options)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"


def as_target(target: str | Target) -> Target:
    return target if isinstance(target, Target) else Target(target)
