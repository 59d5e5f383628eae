"""Code for a device: a position-independent shared object loaded into device sessions.

`loom.build(..., target=hexagon("v66"))` returns a `DeviceModule` (type key "hexagon");
`export_library` packs it into the host library as a payload and `load_module` rebuilds it
through the loader registered here. `mod.to_device(session)` loads it into a running device
runtime and returns a `LoadedModule` whose functions take device arrays (or numpy arrays,
copied in and out), checked against their signatures like host functions.
"""

from __future__ import annotations

import pathlib
import tempfile

import numpy as np

from loom.errors import LoomError
from loom.runtime.export import register_loader
from loom.runtime.module import Module, TimeResult
from loom.runtime.native_lib import cache_dir
from loom.runtime.session import DeviceArray, Session
from loom.runtime.signature import FunctionSignature, ParamSpec, _check_array, _scalar


def link_shared_object(object_code: bytes, isa: str) -> bytes:
    """Link one object into a device shared object (ld.lld -shared, no libraries)."""
    from loom.runtime.device import build_device_library

    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        obj = pathlib.Path(tmp) / "module.o"
        obj.write_bytes(object_code)
        out = pathlib.Path(tmp) / "module.so"
        build_device_library([obj], out, isa)
        return out.read_bytes()


class DeviceModule(Module):
    """A shared object for the device ISA `type_key` ("hexagon", "aarch64")."""

    def __init__(
        self,
        isa: str,
        signatures: dict[str, FunctionSignature],
        shared_object: bytes,
        target,
        sources: dict[str, str] | None = None,
        extern_symbols: dict[str, str] | None = None,
        memories: tuple[str, ...] = (),
        object_code: bytes | None = None,
    ):
        super().__init__(isa, signatures)
        self.shared_object = shared_object
        self.target = target
        self.sources = dict(sources or {})
        self.extern_symbols = dict(extern_symbols or {})
        self.memories = tuple(memories)
        self.object_code = object_code

    @property
    def device_isa(self) -> str:
        return self.type_key

    def save_payload(self) -> bytes:
        return self.shared_object

    def metadata(self) -> dict:
        return {
            "target": str(self.target),
            "extern_symbols": self.extern_symbols,
            "memories": list(self.memories),
        }

    @staticmethod
    def load(payload: bytes, record: dict) -> DeviceModule:
        from loom.target import Target

        sigs = {f["name"]: FunctionSignature.from_json(f) for f in record["functions"]}
        return DeviceModule(
            record["type_key"],
            sigs,
            payload,
            Target(record["target"]),
            extern_symbols=record.get("extern_symbols"),
            memories=tuple(record.get("memories", ())),
        )

    def get_source(self, fmt: str = "asm") -> str:
        """ "ir", "ll" or "asm" of a module built in this process (a loaded one has none)."""
        if fmt not in self.sources:
            raise LoomError(f"no {fmt!r} source; available: {sorted(self.sources)}")
        return self.sources[fmt]

    def load_into(self, session: Session) -> LoadedModule:
        if self.type_key == "hexagon" and not getattr(self.target, "runs_in_simulator", True):
            if session.name.endswith("-sim"):
                raise LoomError(
                    f"this module is for Hexagon {self.target.hexagon_version}, which is "
                    "compile-only here: qemu-hexagon (QEMU 7.2) runs v66 and v67 code only"
                )
        return LoadedModule(self, session, session.load_module(self.shared_object))

    def __repr__(self) -> str:
        return f"<loom.DeviceModule {self.type_key} functions={self.function_names()}>"


class LoadedModule:
    """A module loaded into a device session."""

    def __init__(self, module: Module, session: Session, module_id: int):
        self.module = module
        self.session = session
        self.module_id = module_id
        self._generation = session.generation
        self._functions: dict[str, DeviceFunction] = {}

    def __getitem__(self, name: str) -> DeviceFunction:
        if name not in self.module.signatures:
            raise LoomError(
                f"module has no function {name!r}; it has {self.module.function_names()}"
            )
        fn = self._functions.get(name)
        if fn is None:
            address = self.session.lookup(self.module_id, name)
            fn = self._functions[name] = DeviceFunction(self, self.module.signatures[name], address)
        return fn

    def __call__(self, *args) -> None:
        names = self.module.function_names()
        if len(names) != 1:
            raise LoomError(f"module has {len(names)} functions {names}; call one by name")
        self[names[0]](*args)

    def time_evaluator(self, name: str, number: int = 10, repeat: int = 3):
        """f(*args) -> TimeResult, timed inside the device by its own clock."""
        fn = self[name]
        return lambda *args: fn.time(args, number, repeat)

    def unload(self) -> None:
        if self.session.generation == self._generation and not self.session.closed:
            self.session.unload_module(self.module_id)

    def __repr__(self) -> str:
        return (
            f"<loom.LoadedModule {self.module.type_key} #{self.module_id} on {self.session.name}>"
        )


class DeviceFunction:
    """A function of a loaded module; arguments are checked against its signature."""

    def __init__(self, loaded: LoadedModule, signature: FunctionSignature, address: int):
        self.loaded = loaded
        self.signature = signature
        self.address = address

    def __call__(self, *args) -> None:
        addresses, temporaries, copy_back = self._prepare(args)
        try:
            self.loaded.session.call(self.address, addresses)
            for original, on_device in copy_back:
                original[...] = on_device.numpy()
        finally:
            for t in temporaries:
                t.free()

    def time(self, args: tuple, number: int, repeat: int) -> TimeResult:
        addresses, temporaries, _ = self._prepare(args)
        try:
            return TimeResult(
                tuple(self.loaded.session.time(self.address, addresses, number, repeat))
            )
        finally:
            for t in temporaries:
                t.free()

    def _prepare(self, args: tuple) -> tuple[list[int], list[DeviceArray], list]:
        sig, session = self.signature, self.loaded.session
        if self.loaded._generation != session.generation or session.closed:
            raise LoomError(
                f"{sig.name} was loaded into an earlier runtime of session "
                f"{session.name}; load the module again"
            )
        if len(args) != len(sig.params):
            raise TypeError(f"{sig.describe()} takes {len(sig.params)} arguments, got {len(args)}")
        addresses, temporaries, copy_back = [], [], []
        for spec, value in zip(sig.params, args):
            if not spec.is_buffer:
                slot = DeviceArray(session, (8,), np.uint8)
                temporaries.append(slot)
                scalar = _scalar(sig, spec, value)
                slot.session.write(slot.address, bytes(scalar).ljust(8, b"\0"))
                addresses.append(slot.address)
            elif isinstance(value, DeviceArray):
                _check_device_array(sig, spec, value, session)
                addresses.append(value.address)
            else:
                arr = _check_array(sig, spec, value)
                on_device = DeviceArray.from_numpy(session, arr, alignment=spec.alignment)
                temporaries.append(on_device)
                if spec.written:
                    copy_back.append((arr, on_device))
                addresses.append(on_device.address)
        return addresses, temporaries, copy_back

    def __repr__(self) -> str:
        return f"<loom device function {self.signature.describe()}>"


def _check_device_array(
    sig: FunctionSignature, spec: ParamSpec, arr: DeviceArray, session: Session
) -> None:
    from loom.ir.dtype import dtype as to_dtype

    where = f"{sig.name}: argument {spec.name}"
    if arr.session is not session:
        raise ValueError(f"{where} lives on session {arr.session.name}, not {session.name}")
    if not arr.alive:
        raise ValueError(f"{where} belonged to an earlier runtime of the session")
    if arr.dtype != to_dtype(spec.dtype).numpy:
        raise TypeError(f"{where} must have dtype {spec.dtype}, got {arr.dtype}")
    if arr.shape != spec.shape:
        raise ValueError(f"{where} must have shape {spec.shape}, got {arr.shape}")
    if arr.address % spec.alignment:
        raise ValueError(f"{where} is at 0x{arr.address:x}, not aligned to {spec.alignment} bytes")


for _isa in ("hexagon", "aarch64"):
    register_loader(_isa, DeviceModule.load)

__all__ = ["DeviceModule", "LoadedModule", "link_shared_object"]
