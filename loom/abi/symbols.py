"""Declared runtime ABIs (docs/architecture.md, decision 3): the runtime libraries and the C
symbols each provides.

Every `call_extern` must name a symbol a library declares for the device the code runs on,
with the declared argument types; every undefined symbol of a compiled object must be provided
by a declared library. Errors name the symbol, the function, and the libraries that provide
similar names.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
from collections.abc import Callable

from loom.errors import LoomError
from loom.registry import Registry

MODULE_PROVIDER = "module:"
"""Prefix of the provider of a symbol defined by another module of the same library."""

# The C type of each dtype at the ABI boundary, as C code generators spell it too.
C_TYPES = {
    "void": "void",
    "bool": "bool",
    "handle": "void *",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint8": "uint8_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
    "float16": "_Float16",
    "float32": "float",
    "float64": "double",
}


@dataclasses.dataclass(frozen=True)
class ExternSymbol:
    """A C function: return dtype ("void" allowed), parameters as (name, dtype) pairs, and
    whether it sets loom's last error when it fails (returns NULL or non-zero). `reads_only`
    names the pointer parameters it only reads through (`const void *`): an array passed
    there is an input of the calling function, not an output."""

    name: str
    ret: str
    params: tuple[tuple[str, str], ...] = ()
    sets_last_error: bool = False
    doc: str = ""
    reads_only: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        pointers = {n for n, t in self.params if t == "handle"}
        if not set(self.reads_only) <= pointers:
            raise ValueError(
                f"{self.name}: reads_only names {sorted(set(self.reads_only) - pointers)}, "
                f"which are not pointer (handle) parameters"
            )

    def c_declaration(self) -> str:
        args = (
            ", ".join(
                f"{'const ' if n in self.reads_only else ''}{C_TYPES[t]} {n}"
                for n, t in self.params
            )
            or "void"
        )
        ret = C_TYPES[self.ret]
        sep = "" if ret.endswith("*") else " "
        return f"{ret}{sep}{self.name}({args})"


@dataclasses.dataclass(frozen=True)
class RuntimeLibrary:
    """A library whose code runs on `devices` and provides `symbols` (and any name matching
    one of `patterns`, for compiler support routines). `link_flags()` gives what the host
    linker needs to link it (None: linked by the toolchain itself). `load()`, for a library
    loom builds itself, loads it into this process with its symbols global: an exported
    library then does not name it (its path is this machine's cache), and load_module loads
    it before the exported code."""

    name: str
    devices: tuple[str, ...]
    symbols: tuple[ExternSymbol, ...] = ()
    patterns: tuple[str, ...] = ()
    doc: str = ""
    link_flags: Callable[[], list[str]] | None = None
    load: Callable[[], object] | None = None

    def symbol(self, name: str) -> ExternSymbol | None:
        for s in self.symbols:
            if s.name == name:
                return s
        return None

    def provides(self, name: str) -> bool:
        return self.symbol(name) is not None or any(
            fnmatch.fnmatchcase(name, p) for p in self.patterns
        )


def _check(lib) -> None:
    if not isinstance(lib, RuntimeLibrary):
        raise TypeError(f"register_library takes a RuntimeLibrary, got {lib!r}")


LIBRARIES: Registry[RuntimeLibrary] = Registry(
    "runtime library",
    check=_check,
    # the host and device runtimes, the NPU simulator: all runtime-layer modules
    builtins=("loom.runtime", "loom.backend.npu.simulator"),
)
register_library = LIBRARIES.register
unregister_library = LIBRARIES.unregister
get_library = LIBRARIES.get
list_libraries = LIBRARIES.items


def provider(name: str, device: str) -> RuntimeLibrary | None:
    """The first registered library for `device` providing `name`."""
    for lib in LIBRARIES.in_order():
        if device in lib.devices and lib.provides(name):
            return lib
    return None


def read_only_params(name: str) -> set[int]:
    """Indices of the parameters of extern symbol `name` that every declaration of it marks
    read-only (none if it is not declared)."""
    decls = [s for lib in LIBRARIES.in_order() if (s := lib.symbol(name)) is not None]
    if not decls:
        return set()
    return set.intersection(
        *({k for k, (n, _) in enumerate(d.params) if n in d.reads_only} for d in decls)
    )


def similar_symbols(name: str, device: str | None = None) -> list[str]:
    """'symbol (library)' for declared names close to `name`."""
    pairs = {
        s.name: lib.name
        for lib in LIBRARIES.in_order()
        for s in lib.symbols
        if device is None or device in lib.devices
    }
    return [f"{n} ({pairs[n]})" for n in difflib.get_close_matches(name, pairs, n=4, cutoff=0.6)]


def lookup(name: str, device: str, caller: str) -> tuple[RuntimeLibrary, ExternSymbol]:
    """The declaration of extern symbol `name` called by function `caller` on `device`."""
    for lib in LIBRARIES.in_order():
        sym = lib.symbol(name)
        if sym is not None and device in lib.devices:
            return lib, sym
    elsewhere = [lib.name for lib in LIBRARIES.in_order() if lib.symbol(name) is not None]
    where = f"; it is declared only for other devices, by {elsewhere}" if elsewhere else ""
    near = similar_symbols(name, device)
    hint = f"; similar declared symbols: {', '.join(near)}" if near else ""
    raise LoomError(
        f"function {caller} calls extern symbol {name!r}, which no runtime library "
        f"declares for device {device!r}{where}{hint}. Declare it with "
        "loom.abi.register_library"
    )


def parse_declaration(decl: str, sets_last_error: bool = False, doc: str = "") -> ExternSymbol:
    """ExternSymbol from 'ret name(type name, ...)' with loom dtype names; 'const handle p'
    declares a pointer parameter it only reads."""
    head, args = decl.rstrip(")").split("(", 1)
    ret, name = head.split()
    params, reads_only = [], []
    for words in (p.split() for p in args.split(",") if p.strip()):
        if words[0] == "const":
            words = words[1:]
            reads_only.append(words[1])
        params.append((words[1], words[0]))
    return ExternSymbol(name, ret, tuple(params), sets_last_error, doc, tuple(reads_only))


RUNTIME_SYMBOLS = (
    parse_declaration("void loom_set_last_error(handle message)"),
    parse_declaration("handle loom_get_last_error()"),
    parse_declaration(
        "handle loom_alloc(int64 nbytes, int64 alignment)",
        True,
        "aligned workspace memory; NULL and the last error on failure",
    ),
    parse_declaration("void loom_free(handle ptr)"),
    parse_declaration(
        "int32 loom_parallel_launch(handle task, handle closure, int32 num_tasks)", True
    ),
    parse_declaration("int32 loom_get_num_threads()"),
    parse_declaration(
        "handle HexagonBackendAllocateVTCM(uint32 nbytes, uint32 alignment)",
        True,
        "first fit in the VTCM region (an emulated arena on the host)",
    ),
    parse_declaration("int32 HexagonBackendFreeVTCM(handle ptr)", True),
    parse_declaration("handle loom_vtcm_alloc(uint32 nbytes, uint32 alignment)", True),
    parse_declaration("int32 loom_vtcm_free(handle ptr)", True),
)
"""What loom's runtimes provide to generated code, on the host and on devices alike."""

_MATH1 = (
    "exp",
    "exp2",
    "log",
    "log2",
    "log10",
    "sqrt",
    "sin",
    "cos",
    "tanh",
    "erf",
    "fabs",
    "floor",
    "ceil",
    "trunc",
    "round",
    "roundeven",
    "nearbyint",
    "rint",
)
LIBM = register_library(
    RuntimeLibrary(
        "libm",
        ("cpu",),
        symbols=tuple(
            [parse_declaration(f"float32 {f}f(float32 x)") for f in _MATH1]
            + [parse_declaration(f"float64 {f}(float64 x)") for f in _MATH1]
            + [
                parse_declaration("float32 powf(float32 x, float32 y)"),
                parse_declaration("float64 pow(float64 x, float64 y)"),
                parse_declaration("float32 fmodf(float32 x, float32 y)"),
                parse_declaration("float64 fmod(float64 x, float64 y)"),
                parse_declaration(
                    "void sincosf(float32 x, handle sin, handle cos)",
                    doc="compilers merge sinf(x) and cosf(x) into one call",
                ),
                parse_declaration("void sincos(float64 x, handle sin, handle cos)"),
            ]
        ),
        doc="the C math library",
        link_flags=lambda: ["-lm"],
    )
)

LIBC = register_library(
    RuntimeLibrary(
        "libc",
        ("cpu",),
        symbols=(
            parse_declaration("handle memcpy(handle dst, const handle src, uint64 n)"),
            parse_declaration("handle memmove(handle dst, const handle src, uint64 n)"),
            parse_declaration("handle memset(handle dst, int32 value, uint64 n)"),
        ),
        doc="the C library's memory functions (LLVM turns copy and fill loops into them)",
        link_flags=None,
    )
)

COMPILER_RUNTIME = register_library(
    RuntimeLibrary(
        "compiler_runtime",
        ("cpu", "hexagon"),
        patterns=("__*",),
        doc="the compiler's support routines (libgcc / compiler-rt): __truncsfhf2, __divdi3, ...",
    )
)
