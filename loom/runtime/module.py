"""Compiled modules: functions callable with numpy arrays, sources, timing.

A `Module` has a `type_key` (the kind of code: "llvm" for host code), the signatures of its
functions, the generated sources, and the modules it imports (device code, added by later
targets). Calling a function checks every argument against its signature first.
"""

from __future__ import annotations

import ctypes
import dataclasses
import pathlib
import time
from collections.abc import Callable

from loom.abi import FunctionSignature
from loom.errors import LoomError
from loom.registry import Registry
from loom.runtime.call import native_plan, prepare_call
from loom.runtime.device import link_shared_object
from loom.runtime.device_handle import Device
from loom.runtime.elf import elf_machine_of_triple, host_machine
from loom.runtime.host_ndarray import host_buffers
from loom.runtime.host_runtime import last_error
from loom.runtime.library import SharedLibrary
from loom.runtime.loaded import LoadedModule
from loom.runtime.timing import TimeResult, evaluator


class NativeFunction:
    """One entry point `int32_t f(void *const *args)` of a loaded library. It keeps the library
    loaded (as its ctypes function pointer does), even when its module is gone."""

    def __init__(self, signature: FunctionSignature, cfunc, library: SharedLibrary | None = None):
        self.signature = signature
        self.cfunc = cfunc
        self.library = library
        # the signature's checks compiled once (loom/runtime/call.py); `cfunc` keeps the code
        # at the address it calls loaded. (The address is read from the pointer's storage:
        # ctypes.cast would put the pointer in a reference cycle, keeping its library loaded.)
        address = ctypes.c_void_p.from_address(ctypes.addressof(cfunc)).value
        self._run = native_plan(signature, address)

    @property
    def name(self) -> str:
        return self.signature.name

    def __call__(self, *args) -> None:
        status = None if self._run is None else self._run(args)
        if status is None:  # an argument failed the fast checks: an NDArray, or a wrong one
            args = host_buffers(args)
            status = None if self._run is None else self._run(args)
        if status is None:  # check it in detail
            prepared = prepare_call(self.signature, args)
            self._invoke(prepared.argv)
            prepared.finish()
        elif status:
            raise LoomError(f"{self.name} failed (status {status}): {last_error()}")

    def _invoke(self, argv) -> None:
        status = self.cfunc(argv)
        if status != 0:
            raise LoomError(f"{self.name} failed (status {status}): {last_error()}")

    def time(self, args: tuple, number: int, repeat: int) -> TimeResult:
        prepared = prepare_call(self.signature, host_buffers(args))
        self._invoke(prepared.argv)  # warm-up, and fail early
        results = []
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                self._invoke(prepared.argv)
            results.append((time.perf_counter() - start) / number)
        prepared.finish()
        return TimeResult(tuple(results))

    def __repr__(self) -> str:
        return f"<loom function {self.signature.describe()}>"


class Module:
    """A node of the module tree: code of one kind (`type_key`), its functions' signatures, and
    the modules it imports.

    `loom.build` returns the host module with device modules imported. Host code ("llvm",
    "c") is a `NativeModule`, compiled and linked into the exported shared library ("DSO
    exportable"); every other module is packed into the library as a payload by `save_payload`
    and rebuilt on load by the loader registered for its type key.
    """

    dso_exportable = False

    entry_name = "__tvm_main__"
    """TVM's name of a module's main function: `mod[mod.entry_name]` is the function
    `mod(...)` calls (the module's only one)."""

    def __init__(
        self,
        type_key: str,
        signatures: dict[str, FunctionSignature],
        imports: tuple[Module, ...] = (),
    ):
        self.type_key = type_key
        self.signatures = dict(signatures)
        self.imports: list[Module] = list(imports)
        # what the build knows about the code; subclasses that compile code set them
        self.target = None
        self.extern_symbols: dict[str, str] = {}  # undefined symbol -> runtime library
        self.memories: tuple[str, ...] = ()  # memory scopes its allocations use

    def build_report(self) -> str:
        """What the build produced: functions, memories, and each undefined symbol of the
        object with the runtime library that resolves it."""
        lines = [
            f"module {self.type_key}" + (f" for {self.target}" if self.target is not None else "")
        ]
        lines += [f"  function {sig.describe()}" for sig in self.signatures.values()]
        if self.memories:
            lines.append(f"  memories: {', '.join(self.memories)}")
        lines.append("  undefined symbols:" if self.extern_symbols else "  no undefined symbols")
        width = max((len(s) for s in self.extern_symbols), default=0)
        lines += [f"    {sym.ljust(width)}  <- {lib}" for sym, lib in self.extern_symbols.items()]
        for m in self.imports:  # each imported module's own report, indented under it
            lines += ["  imports " + m.build_report().replace("\n", "\n  ")]
        return "\n".join(lines)

    def import_module(self, module: Module) -> None:
        """Make `module` a child of this one (exported and loaded with it)."""
        if not isinstance(module, Module):
            raise TypeError(f"import_module takes a loom Module, got {module!r}")
        if module is self or module in self.walk():
            raise LoomError(f"module {module.type_key} is already in this module tree")
        self.imports.append(module)

    def walk(self) -> list[Module]:
        """This module and every module it imports, depth first."""
        out = [self]
        for m in self.imports:
            out.extend(m.walk())
        return out

    def function_names(self) -> list[str]:
        return list(self.signatures)

    device_isa: str | None = None
    """The ISA of a device runtime this module can be loaded into, if any."""

    def to_device(self, session):
        """Load the module of this tree that runs on the session's device into it, returning a
        `LoadedModule` whose functions run there."""
        for m in self.walk():
            if m.device_isa == session.isa:
                return m.load_into(session)
        kinds = [f"{m.type_key} ({m.device_isa or 'host only'})" for m in self.walk()]
        raise LoomError(f"no module of this tree runs on a {session.isa} device: {kinds}")

    def load_into(self, session):
        raise LoomError(f"module type {self.type_key!r} cannot be loaded into a device")

    def save_payload(self) -> bytes:
        """The bytes that `export_library` packs for a non-DSO module (device code, programs)."""
        raise LoomError(
            f"module type {self.type_key!r} cannot be exported: it defines no save_payload"
        )

    def metadata(self) -> dict:
        """What the artifact's metadata records about this module (beyond type key, functions
        and imports)."""
        return {}

    def export_library(
        self,
        path,
        fcompile: Callable | None = None,
        *,
        cc: str | None = None,
        options: list[str] = (),
    ) -> None:
        """Write this module tree as one shared library (`.so`) or as a `.tar` of objects and
        sources to link later; see docs/export.md. `fcompile` (TVM's: e.g.
        `loom.contrib.cc.create_shared`) links the `.so` instead of loom's linker. Linking is
        the packaging layer's (loom.packaging.export), which installs itself as `EXPORTER`
        when imported."""
        if EXPORTER is None:
            raise LoomError("export_library needs loom's packaging layer: import loom.packaging")
        EXPORTER(self, path, cc=cc, options=options, fcompile=fcompile)

    def save(self, path, fmt: str = "") -> None:
        """TVM's `Module.save`: this module's object file (".o", which also records its
        signatures, so a library linked from it with `loom.contrib.cc.create_shared` loads with
        `load_module`) or a source (".ll", ".s", ".c"); see loom.packaging.export.save."""
        if SAVER is None:
            raise LoomError("save needs loom's packaging layer: import loom.packaging")
        SAVER(self, path, fmt)

    def __repr__(self) -> str:
        return f"<loom.Module {self.type_key} functions={self.function_names()}>"


class NativeModule(Module):
    """Host code ("llvm" or "c"): compiled for `target`, loaded in this process when the
    target is the host. Functions are called with numpy arrays, checked against their
    signatures.

    `library` is the loaded code, shared by the host modules of one tree; it is unloaded when
    the last module, function or timer using it is gone (loom/runtime/library.py)."""

    dso_exportable = True

    def __init__(
        self,
        type_key: str,
        signatures: dict[str, FunctionSignature],
        sources: dict[str, str],
        target,
        library: SharedLibrary | None = None,
        imports: tuple[Module, ...] = (),
        object_code: bytes | None = None,
        extern_symbols: dict[str, str] | None = None,
        memories: tuple[str, ...] = (),
    ):
        super().__init__(type_key, signatures, imports)
        self.sources = dict(sources)
        self.target = target
        self.library = library
        self.object_code = object_code
        self.extern_symbols = dict(extern_symbols or {})
        self.memories = tuple(memories)
        self.library_path: str | None = None  # the file it was loaded from, if any
        self._functions: dict[str, NativeFunction] = {}

    @property
    def device_isa(self) -> str | None:
        """Code for another CPU (an AArch64 build on x86-64) can run in that CPU's device
        runtime; host code runs here instead."""
        machine = elf_machine_of_triple(self.triple)
        if self.type_key != "llvm" or machine is None or machine == host_machine():
            return None
        return self.triple.split("-")[0]

    @property
    def triple(self) -> str:
        """The LLVM triple the code is for (from the target, or its text when loaded)."""
        triple = getattr(self.target, "triple", None)
        if triple is None:  # a loaded module keeps its target as text
            words = dict(w[1:].split("=", 1) for w in str(self.target).split()[1:] if "=" in w)
            triple = words.get("mtriple", "")
        return triple

    def load_into(self, session):
        if self.library_path is not None:
            shared_object = pathlib.Path(self.library_path).read_bytes()
        elif self.object_code is not None:
            shared_object = link_shared_object(self.object_code, self.device_isa)
        else:
            raise LoomError("this module has neither a library file nor object code to load")
        return LoadedModule(self, session, session.load_module(shared_object))

    def metadata(self) -> dict:
        return {
            "target": str(self.target),
            "extern_symbols": self.extern_symbols,
            "memories": list(self.memories),
        }

    def get_function(self, name: str) -> NativeFunction:
        if name == self.entry_name and name not in self.signatures:
            fn = self.get_function(self._entry_function())
            self._functions[name] = fn
            return fn
        if name not in self.signatures:
            raise LoomError(f"module has no function {name!r}; it has {self.function_names()}")
        if self.library is None:
            raise LoomError(
                f"function {name} was compiled for {self.target} and cannot run "
                "in this process; export it with export_library"
            )
        fn = self._functions.get(name)
        if fn is None:
            cfunc = self.library.function(name)
            fn = NativeFunction(self.signatures[name], cfunc, self.library)
            self._functions[name] = fn
        return fn

    def __getitem__(self, name: str) -> NativeFunction:
        fn = self._functions.get(name)  # `mod[name](...)` in a loop: the lookup is all it costs
        return fn if fn is not None else self.get_function(name)

    def _entry_function(self) -> str:
        """The name of the function `mod(...)` and `mod[mod.entry_name]` call: the only one."""
        if len(self.signatures) != 1:
            raise LoomError(
                f"module has {len(self.signatures)} functions "
                f"{self.function_names()}; call one by name: mod[name](...)"
            )
        return next(iter(self.signatures))

    @property
    def entry_func(self) -> NativeFunction:
        """The module's main function (TVM's `Module.entry_func`)."""
        return self.get_function(self.entry_name)

    def __call__(self, *args) -> None:
        self.get_function(self._entry_function())(*args)

    def get_source(self, fmt: str = "ll") -> str:
        """Generated code: "ir" (the final loop IR), "ll" (LLVM IR), "asm", or "c"."""
        if fmt not in self.sources:
            raise LoomError(f"no {fmt!r} source; available: {sorted(self.sources)}")
        return self.sources[fmt]

    def time_evaluator(
        self,
        name: str,
        dev: Device | None = None,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
    ):
        """TVM's time_evaluator: f(*args) -> TimeResult (`.mean`, `.median`, `.results` in
        seconds) timing `repeat` rounds of `number` calls. `dev` is where the function runs:
        the host (`loom.cpu(0)`, or None)."""
        if dev is not None and not isinstance(dev, Device):
            raise TypeError(
                f"time_evaluator: dev must be a Device such as loom.cpu(0) (or None), got "
                f"{dev!r}; pass number= and repeat= by keyword"
            )
        fn = self.get_function(name)
        return evaluator(fn.time, number, repeat, min_repeat_ms)

    def __repr__(self) -> str:
        return f"<loom.NativeModule {self.type_key} functions={self.function_names()}>"


EXPORTER: Callable | None = None
SAVER: Callable | None = None
"""export_library(module, path, cc=, options=): set by loom.packaging.export (the runtime links
nothing itself)."""


@dataclasses.dataclass(frozen=True)
class Loader:
    """`load(payload, record) -> Module` rebuilds modules of `type_key` from their payload and
    their metadata record (type key, functions, and what the module's `metadata()` wrote)."""

    type_key: str
    load: Callable[[bytes, dict], Module]


def _check_loader(loader) -> None:
    if not isinstance(loader, Loader):
        raise TypeError(f"expected a Loader, got {loader!r}")
    if loader.type_key in ("llvm", "c"):
        raise LoomError(f"modules of type {loader.type_key!r} are linked into the library itself")


LOADERS: Registry[Loader] = Registry(
    "module loader",
    key=lambda loader: loader.type_key,
    check=_check_loader,
    builtins=("loom.runtime.load", "loom.runtime.model"),  # device modules, compiled models
)


def register_loader(type_key: str, fn: Callable[[bytes, dict], Module]) -> None:
    """Rebuild modules of `type_key` with `fn(payload, record) -> Module` when loading."""
    LOADERS.register(Loader(type_key, fn), replace=True)


def unregister_loader(type_key: str) -> None:
    LOADERS.unregister(type_key, missing_ok=True)


def list_loaders() -> list[str]:
    return LOADERS.names()
