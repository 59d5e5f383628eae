"""Code for a device: a position-independent shared object loaded into device sessions.

`loom.build(..., target=hexagon("v66"))` returns a `DeviceModule` (type key "hexagon");
`export_library` packs it into the host library as a payload and `load_module` rebuilds it
through the loader registered here. `mod.to_device(session)` loads it into a running device
runtime and returns a `LoadedModule` whose functions take device arrays (or numpy arrays,
copied in and out), checked against their signatures like host functions.
"""

from __future__ import annotations

from loom.abi import FunctionSignature
from loom.errors import LoomError
from loom.runtime.loaded import LoadedModule
from loom.runtime.module import Module
from loom.runtime.session import Session


class DeviceModule(Module):
    """A shared object for the device ISA `type_key` ("hexagon", "aarch64"); None until
    linked (a code generator gives the object code, `loom.build` links it)."""

    def __init__(
        self,
        isa: str,
        signatures: dict[str, FunctionSignature],
        shared_object: bytes | None,
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

    def get_source(self, fmt: str = "asm") -> str:
        """ "ir", "ll" or "asm" of a module built in this process (a loaded one has none)."""
        if fmt not in self.sources:
            raise LoomError(f"no {fmt!r} source; available: {sorted(self.sources)}")
        return self.sources[fmt]

    def load_into(self, session: Session) -> LoadedModule:
        if self.shared_object is None:
            raise LoomError("this device module has not been linked (loom.build links it)")
        # a simulator session refuses what its emulator cannot run (Session.load_module)
        with session.lock:  # the module id and the generation of one runtime
            return LoadedModule(self, session, session.load_module(self.shared_object))

    def __repr__(self) -> str:
        return f"<loom.DeviceModule {self.type_key} functions={self.function_names()}>"
