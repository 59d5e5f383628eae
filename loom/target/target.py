"""Target descriptions: what code is generated for, and the facts passes need about it.

`Target("llvm")` is the host CPU (triple, CPU name and features detected by LLVM);
`Target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon")` overrides any part.
Vector width and buffer alignment come from the target, never from a global constant.
"""

from __future__ import annotations

import dataclasses
import functools
import shlex

from loom.errors import LoomError

KINDS = ("llvm", "c", "hexagon")
_COMMON_OPTIONS = {"opt-level", "align", "stack-limit"}
_KIND_OPTIONS = {
    "llvm": {"mtriple", "mcpu", "mattr"},
    "c": {"mtriple", "mcpu", "mattr"},
    "hexagon": {"mcpu", "hvx", "vtcm"},
}
HEXAGON_TRIPLE = "hexagon-unknown-linux-musl"
HEXAGON_VERSIONS = ("v66", "v67", "v68", "v69", "v73")
HEXAGON_SIMULATED = ("v66", "v67")  # what Debian's qemu-hexagon (QEMU 7.2) runs
DEFAULT_VTCM_BYTES = 256 * 1024


@functools.cache
def _host() -> tuple[str, str, str]:
    import llvmlite.binding as llvm

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
    if triple.startswith("hexagon"):
        return 128 if "hvx-length128b" in enabled else 64 if "hvx-length64b" in enabled else 8
    if triple.startswith(("aarch64", "arm")):
        return 16
    return 16


@dataclasses.dataclass(frozen=True)
class Target:
    """kind (llvm or c), LLVM triple, CPU name, feature string, and options."""

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
        if kind not in KINDS and not _is_backend(kind):
            from loom.backend.base import _BACKENDS

            raise LoomError(
                f"unknown target kind {kind!r}; known: {list(KINDS)} and the "
                f"registered backends {sorted(_BACKENDS)}"
            )
        for word in words[1:]:
            if not word.startswith("-") or "=" not in word:
                raise LoomError(f"target option {word!r} must look like -key=value")
            key, value = word[1:].split("=", 1)
            opts[key] = value
        known = _KIND_OPTIONS.get(kind, {"mtriple", "mcpu", "mattr"}) | _COMMON_OPTIONS
        unknown = set(opts) - known
        if unknown:
            raise LoomError(
                f"unknown target options {sorted(unknown)} for {kind}; known: "
                f"{', '.join('-' + k for k in sorted(known))}"
            )
        if kind == "hexagon":
            triple, cpu, features = _hexagon(opts)
        else:
            host_triple, host_cpu, host_features = _host()
            triple = opts.pop("mtriple", host_triple)
            is_host = triple == host_triple
            cpu = opts.pop("mcpu", host_cpu if is_host else "generic")
            features = opts.pop("mattr", host_features if is_host and cpu == host_cpu else "")
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
    def device(self) -> str:
        """The kind of processor the code runs on, as memory scopes and runtime libraries name
        it: "hexagon" for Hexagon triples, else "cpu"."""
        return "hexagon" if self.triple.startswith("hexagon") else "cpu"

    @property
    def opt_level(self) -> int:
        level = int(self.option("opt-level", "3"))
        if not 0 <= level <= 3:
            raise LoomError(f"target -opt-level must be 0..3, got {level}")
        return level

    @property
    def vector_bytes(self) -> int:
        """Bytes in the widest vector register."""
        return _vector_bytes(self.triple, self.features)

    @property
    def alignment(self) -> int:
        """Byte alignment of buffers the code may assume (arguments are checked against it):
        a vector register or a cache line, whichever is larger, unless -align= says otherwise."""
        if self.option("align") is not None:
            return int(self.option("align"))
        return max(64, self.vector_bytes)

    @property
    def hexagon_version(self) -> str | None:
        """ "v66", "v73", ... for Hexagon targets, else None."""
        return self.cpu[len("hexagon") :] if self.kind == "hexagon" else None

    @property
    def runs_in_simulator(self) -> bool:
        """True for code the emulator here can run (Hexagon v66/v67 under qemu-hexagon)."""
        return self.hexagon_version in HEXAGON_SIMULATED

    @property
    def vtcm_size(self) -> int | None:
        """Bytes of VTCM the device has (Hexagon), else None."""
        if self.kind != "hexagon":
            return None
        return int(self.option("vtcm", str(DEFAULT_VTCM_BYTES)))

    def memory_capacity(self, scope: str) -> int | None:
        """The target's limit on a memory scope (VTCM size for the VTCM scopes), or None."""
        if scope in ("local.vtcm", "global.vtcm"):
            return self.vtcm_size
        return None

    @property
    def masked_loads_are_safe(self) -> bool:
        """Whether LLVM's masked vector loads never touch masked-off lanes. Hexagon's lowering
        reads whole aligned HVX vectors, which can fault (or mix lanes) at a buffer's edge, so
        loom reads masked-off lanes from a valid element instead."""
        return self.device != "hexagon"

    @property
    def takes_vector_ir(self) -> bool:
        """Whether its code generator takes vector IR: LLVM's does; C's does not (the C
        compiler vectorizes the plain loops it gets), nor a backend's unless it says so."""
        if _is_backend(self.kind):
            from loom.backend.base import get

            return get(self.kind).vector_ir
        return self.kind != "c"

    @property
    def stack_limit(self) -> int:
        """Bytes a generated function may allocate on the stack (stack-scoped buffers)."""
        return int(self.option("stack-limit", str(1 << 20)))

    def __str__(self) -> str:
        if self.kind == "hexagon":
            text = f"hexagon -mcpu={self.hexagon_version}"
        else:
            text = f"{self.kind} -mtriple={self.triple} -mcpu={self.cpu}"
        return text + "".join(f" -{k}={v}" for k, v in self.options)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"


def _is_backend(kind: str) -> bool:
    """A registered accelerator backend (its code runs on the host, calling the device)."""
    from loom.backend.base import is_backend

    return is_backend(kind)


def _hexagon(opts: dict[str, str]) -> tuple[str, str, str]:
    """(triple, cpu, features) of a Hexagon target from -mcpu=v66 and -hvx=128|0 (-vtcm stays
    an option)."""
    version = opts.pop("mcpu", "v66").removeprefix("hexagon")
    if version not in HEXAGON_VERSIONS:
        raise LoomError(f"unknown Hexagon version {version!r}; known: {list(HEXAGON_VERSIONS)}")
    hvx = opts.pop("hvx", "128")
    if hvx not in ("0", "64", "128"):
        raise LoomError(f"-hvx must be 128, 64 or 0 (no HVX), got {hvx!r}")
    opts["hvx"] = hvx
    vtcm = opts.get("vtcm", str(DEFAULT_VTCM_BYTES))
    if not vtcm.isdigit() or int(vtcm) <= 0:
        raise LoomError(f"-vtcm must be a positive number of bytes, got {vtcm!r}")
    features = "" if hvx == "0" else f"+hvx{version},+hvx-length{hvx}b"
    return HEXAGON_TRIPLE, f"hexagon{version}", features


def hexagon(
    version: str = "v66", hvx: int = 128, vtcm_size: int = DEFAULT_VTCM_BYTES, opt_level: int = 3
) -> Target:
    """A Hexagon target: `version` v66/v67 (run under qemu-hexagon) or v68/v69/v73 (compile
    only here), HVX vector length in bytes (0: none), VTCM bytes."""
    return Target(f"hexagon -mcpu={version} -hvx={hvx} -vtcm={vtcm_size} -opt-level={opt_level}")


def as_target(target: str | Target) -> Target:
    return target if isinstance(target, Target) else Target(target)
