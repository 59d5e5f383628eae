"""Target descriptions: what code is generated for, and the facts passes need about it.

`Target("llvm")` is the host CPU (triple, CPU name and features detected by LLVM);
`Target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon")` overrides any part.
The first word is a target kind: a `loom.backend.Backend` registered under that name (llvm, c,
hexagon, npu, or a user's) says which options it takes, what they mean, and how to build.
Vector width and buffer alignment come from the target, never from a global constant.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import re
import shlex
import subprocess
import sys
import threading

import llvmlite.binding as llvm

from loom.backend.base import BACKENDS
from loom.errors import LoomError

_COMMON_OPTIONS = {"opt-level", "align", "stack-limit"}

ARCHES = ("x86_64", "aarch64", "riscv64", "riscv32", "hexagon")
"""The architectures of the triples loom generates code for (ELF objects only)."""
MAX_ALIGN = 4096
"""The largest -align=N (a page): buffers are assumed aligned to N, and copied when not."""


@functools.cache
def _host() -> tuple[str, str, str]:

    features = llvm.get_host_cpu_features().flatten()
    return llvm.get_process_triple(), llvm.get_host_cpu_name(), features


def _int_option(key: str, value: str, lo: int, hi: int | None, what: str) -> int:
    """`value` of target option -key as an int in [lo, hi], else a LoomError saying so."""
    try:
        number = int(value, 10)
    except ValueError:
        number = None
    if number is None or number < lo or (hi is not None and number > hi):
        raise LoomError(f"target -{key} must be {what}, got {value}")
    return number


def _check_common_options(opts: dict[str, str]) -> None:
    if "opt-level" in opts:
        _int_option("opt-level", opts["opt-level"], 0, 3, "0..3")
    if "align" in opts:
        align = _int_option("align", opts["align"], 1, MAX_ALIGN, f"a power of two 1..{MAX_ALIGN}")
        if align & (align - 1):
            raise LoomError(
                f"target -align must be a power of two 1..{MAX_ALIGN}, got {opts['align']}"
            )
    if "stack-limit" in opts:
        _int_option("stack-limit", opts["stack-limit"], 0, None, "a number of bytes >= 0")


# -- what LLVM knows of a target --------------------------------------------------------------
# LLVM ends the process (report_fatal_error, or an assertion) on a CPU or feature it does not
# know or cannot generate code for: "-mcpu=haswel" on x86-64 ends in "64-bit code requested on a
# subtarget that doesn't support it!", "-mattr=avx2" (no sign) in an assertion. So a target's
# CPU and features are checked against the lists LLVM itself prints for `-mcpu=help`, and a small
# module is compiled for it, both in a child process that may die instead of this one.

_PROBE_IR = r"""
declare float @expf(float)
declare double @exp(double)

define float @probe_float(float %x) {
  %y = call float @expf(float %x)
  %z = fmul float %y, %x
  ret float %z
}

define double @probe_double(double %x) {
  %y = call double @exp(double %x)
  %z = fdiv double %y, %x
  ret double %z
}

define i32 @probe(ptr %args) {
  %p = load ptr, ptr %args
  %f = load <16 x float>, ptr %p, align 4
  %f2 = fadd <16 x float> %f, %f
  store <16 x float> %f2, ptr %p, align 4
  %b = load <64 x i8>, ptr %p, align 1
  %c = icmp sgt <64 x i8> %b, zeroinitializer
  %b2 = select <64 x i1> %c, <64 x i8> %b, <64 x i8> zeroinitializer
  store <64 x i8> %b2, ptr %p, align 1
  %l = load i64, ptr %p, align 8
  %q = sdiv i64 %l, 7
  store i64 %q, ptr %p, align 8
  %h = load half, ptr %p, align 2
  %g = fpext half %h to float
  %e = call float @probe_float(float %g)
  store float %e, ptr %p, align 4
  ret i32 0
}
"""

# Run by `python -c` with argv triple, cpu, features, IR. Prints one JSON line: LLVM's CPU and
# feature names for the triple; then, if the CPU and features are among them, compiles the IR
# for them and prints "compiled". LLVM prints its lists to the C stderr, once per process.
_PROBE_SCRIPT = r"""
import json, os, sys, tempfile
import llvmlite.binding as llvm
triple, cpu, features, ir = sys.argv[1:5]
llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
target = llvm.Target.from_triple(triple)
saved = os.dup(2)
with tempfile.TemporaryFile(mode="w+b") as listing:
    os.dup2(listing.fileno(), 2)
    try:
        target.create_target_machine(cpu="", features="+help")
    finally:
        os.dup2(saved, 2)
    listing.seek(0)
    text = listing.read().decode(errors="replace")
cpus, feats, section = [], [], None
for line in text.splitlines():
    if line.startswith("Available CPUs"):
        section = cpus
    elif line.startswith("Available features"):
        section = feats
    elif section is not None and line.startswith("  ") and " - " in line:
        section.append(line.split()[0])
print(json.dumps({"cpus": cpus, "features": feats}), flush=True)
wanted = [f[1:] for f in features.split(",") if f]
if cpu in cpus and all(f in feats for f in wanted):
    module = llvm.parse_assembly(ir)
    module.triple = triple
    tm = target.create_target_machine(
        cpu=cpu, features=features, opt=2, reloc="pic", codemodel="default"
    )
    module.data_layout = str(tm.target_data)
    tm.emit_object(module)
    print("compiled", flush=True)
    if triple.startswith("x86_64"):
        asm = tm.emit_assembly(module)
        widths = [w for reg, w in (("%zmm", 64), ("%ymm", 32), ("%xmm", 16)) if reg in asm]
        print(json.dumps({"vector_bytes": widths[0] if widths else 16}), flush=True)
"""


def _llvm_probe(triple: str, cpu: str, features: str) -> tuple[list[str], list[str], str | None]:
    """(LLVM's CPU names for `triple`, its feature names, None if a module compiles for this
    CPU and these features, else what LLVM said when it stopped)."""
    cpus, names, said, _ = _llvm_facts(triple, cpu, features)
    return cpus, names, said


@functools.cache
def _llvm_facts(triple: str, cpu: str, features: str):
    """_llvm_probe's answer and, for an x86-64 CPU that compiles, the widest vector register
    LLVM gives `<16 x float>` there (64: zmm, 32: ymm, 16: xmm), else None."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE_SCRIPT, triple, cpu, features, _PROBE_IR],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        raise LoomError(
            f"checking target {triple} -mcpu={cpu} -mattr={features} with LLVM took over 120 s"
        ) from None
    lines = done.stdout.splitlines()
    try:
        names = json.loads(lines[0])
    except (IndexError, ValueError):
        raise LoomError(
            f"could not ask LLVM about target {triple}: {done.stderr.strip()[-600:]}"
        ) from None
    width = None
    for line in lines[1:]:
        if line.startswith("{"):
            width = json.loads(line).get("vector_bytes")
    said = None
    if "compiled" not in lines[1:]:
        messages = [
            line
            for line in done.stderr.splitlines()
            if line.strip() and not line.startswith(("Available", "  ", "Use +", "For example"))
        ]
        said = "\n".join(messages[-4:]) or f"exit status {done.returncode}"
    return names["cpus"], names["features"], said, width


def _closest(name: str, names: list[str]) -> str:
    near = difflib.get_close_matches(name, names, n=4, cutoff=0.5)
    return f"closest: {', '.join(near)}" if near else "no close name"


def _check_triple(triple: str) -> None:
    if not triple or not re.fullmatch(r"[A-Za-z0-9_.-]+", triple):
        raise LoomError(
            f"target -mtriple must be an LLVM triple like x86_64-linux-gnu, got {triple!r}"
        )
    parts = llvm.get_triple_parts(triple)
    if parts.Arch not in ARCHES or parts.ObjectFormat != "ELF":
        raise LoomError(
            f"loom generates ELF code for the architectures {', '.join(ARCHES)}; the triple "
            f"{triple!r} is {parts.Arch} ({parts.ObjectFormat} objects)"
        )
    llvm.initialize_all_targets()
    try:
        llvm.Target.from_triple(triple)
    except RuntimeError as e:
        raise LoomError(f"LLVM has no backend for triple {triple!r}: {e}") from None


def check_llvm_target(triple: str, cpu: str, features: str) -> None:
    """Refuse a triple, CPU or feature list that LLVM does not know, or for which it cannot
    generate code, with a LoomError naming the closest names it knows: LLVM itself would end
    the process. The host as LLVM detects it needs no check."""
    if (triple, cpu, features) == _host():
        return
    _check_triple(triple)
    entries = [f.strip() for f in features.split(",") if f.strip()]
    for entry in entries:
        if entry[0] not in "+-" or not re.fullmatch(r"[A-Za-z0-9_.-]+", entry[1:]):
            raise LoomError(
                f"target -mattr entries are +feature or -feature, comma-separated; got {entry!r} "
                f"in {features!r}"
            )
    if not re.fullmatch(r"[A-Za-z0-9_.-]*", cpu):
        raise LoomError(f"target -mcpu must be a CPU name, got {cpu!r}")
    if cpu in ("", "generic") and not entries:
        return  # every LLVM back end has its generic CPU
    cpus, known, said = _llvm_probe(triple, cpu, ",".join(entries))
    if cpu not in cpus:
        raise LoomError(
            f"unknown CPU -mcpu={cpu} for {triple} ({_closest(cpu, cpus)}; LLVM knows "
            f"{len(cpus)}: `llc -mtriple={triple} -mcpu=help` lists them)"
        )
    for entry in entries:
        if entry[1:] not in known:
            raise LoomError(
                f"unknown feature {entry!r} in -mattr for {triple} ({_closest(entry[1:], known)}; "
                f"`llc -mtriple={triple} -mattr=help` lists them)"
            )
    if said is not None:
        raise LoomError(
            f"LLVM cannot generate code for {triple} -mcpu={cpu} -mattr={features}: {said}"
        )


def _cpu_vector_bytes(triple: str, cpu: str, features: str) -> int | None:
    """The widest vector register LLVM uses for `cpu` (x86-64, not the host, a named CPU), as
    its probe found it: `-mcpu=znver4` alone enables AVX-512 without any `-mattr`; None
    otherwise."""
    if not triple.startswith("x86_64") or cpu in ("", "generic"):
        return None
    if (triple, cpu, features) == _host():
        return None
    entries = [f.strip() for f in features.split(",") if f.strip()]
    return _llvm_facts(triple, cpu, ",".join(entries))[3]  # check_llvm_target's probe


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


class TargetKind(str):
    """A target's kind ("llvm", "c", "hexagon", ...): a string, with TVM's `kind.name`."""

    name: str

    def __new__(cls, name: str) -> TargetKind:
        self = super().__new__(cls, name)
        self.name = str.__str__(self)
        return self

    def __reduce__(self):
        return (TargetKind, (self.name,))


_CURRENT = threading.local()
"""The stack of targets entered with `with target:` in this thread (Target.current)."""


@dataclasses.dataclass(frozen=True)
class Target:
    """kind (a registered target kind), LLVM triple, CPU name, feature string, and options;
    `host`, as in TVM, the target of the host code (None: not given).

    loom's backends generate the host code of their kind themselves (the CPU's code for llvm
    and c, the host functions of an accelerator with LLVM for this machine), so `host` is
    recorded, compared and returned, not used to choose a code generator."""

    kind: TargetKind
    triple: str
    cpu: str
    features: str
    options: tuple[tuple[str, str], ...] = ()
    host: Target | None = None

    def __init__(self, target: str | Target = "llvm", host: str | Target | None = None):
        if host is not None and not isinstance(host, Target):
            if not isinstance(host, str):
                raise TypeError(f"Target host must be a string or a Target, got {host!r}")
            host = Target(host)
        if isinstance(target, Target):
            for f in dataclasses.fields(Target):
                object.__setattr__(self, f.name, getattr(target, f.name))
            if host is not None:
                object.__setattr__(self, "host", host)
            return
        spec = target
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
        _check_common_options(opts)
        triple, cpu, features = backend.describe_target(opts, _host())
        check_llvm_target(triple, cpu, features)
        object.__setattr__(self, "kind", TargetKind(kind))
        object.__setattr__(self, "triple", triple)
        object.__setattr__(self, "cpu", cpu)
        object.__setattr__(self, "features", features)
        object.__setattr__(self, "options", tuple(sorted(opts.items())))
        object.__setattr__(self, "host", host)

    def with_host(self, host: str | Target | None) -> Target:
        """This target with another host (TVM's `Target(target, host)`)."""
        return Target(self, host)

    @staticmethod
    def current(allow_none: bool = True) -> Target | None:
        """The innermost target entered with `with target:` in this thread, as in TVM; None
        (or, with allow_none=False, a LoomError) outside one."""
        stack = getattr(_CURRENT, "stack", None)
        if stack:
            return stack[-1]
        if not allow_none:
            raise LoomError("no target is entered (use `with loom.target.Target(...):`)")
        return None

    def __enter__(self) -> Target:
        if not hasattr(_CURRENT, "stack"):
            _CURRENT.stack = []
        _CURRENT.stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _CURRENT.stack.pop()

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
        if own is not None:
            return own
        named = _cpu_vector_bytes(self.triple, self.cpu, self.features)
        return named if named is not None else _vector_bytes(self.triple, self.features)

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

    def vector_problem(self, node) -> str | None:
        """Why its code generator cannot emit `node` of vector code, or None if it can."""
        return self.backend.vector_problem(self, node)

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
        host = "" if self.host is None else f", host={str(self.host)!r}"
        return f"Target({str(self)!r}{host})"


def as_target(target: str | Target) -> Target:
    return target if isinstance(target, Target) else Target(target)
