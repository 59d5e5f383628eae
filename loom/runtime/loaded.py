"""Modules loaded into a device session, and their functions: arguments are checked against
each function's signature, numpy arrays are copied in and (if written) out."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from loom.abi import FunctionSignature, ParamSpec
from loom.abi.dtype import dtype as to_dtype
from loom.errors import LoomError
from loom.runtime.call import _check_array, _scalar
from loom.runtime.session import DeviceArray, Session
from loom.runtime.timing import TimeResult

if TYPE_CHECKING:  # a module tree's node; module.py imports this file
    from loom.runtime.module import Module


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
