"""Modules loaded into a device session, and their functions: arguments are checked against
each function's signature, numpy arrays are copied in and (if written) out.

A call holds its session's lock from its checks to the last free of its temporaries, so
another thread can neither interleave exchanges with it nor free its arrays, close or restart
the session in the middle of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from loom.abi import FunctionSignature, ParamSpec
from loom.abi.dtype import dtype as to_dtype
from loom.errors import DeviceError, LoomError
from loom.runtime.call import _check_array, _check_distinct, _scalar, bind_shapes, check_shape
from loom.runtime.session import DeviceArray, Session
from loom.runtime.timing import TimeResult, evaluator

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
            with self.session.lock:
                self._check_current(f"module #{self.module_id}")
                address = self.session.lookup(self.module_id, name)
            fn = DeviceFunction(self, self.module.signatures[name], address)
            fn = self._functions.setdefault(name, fn)
        return fn

    def _check_current(self, what: str) -> None:
        """An error unless the session is open and still the runtime this was loaded into
        (hold the session's lock from this check to the last request that relies on it)."""
        self.session.check_open()
        if self._generation != self.session.generation:
            raise LoomError(
                f"{what} was loaded into an earlier runtime of session {self.session.name}; "
                "load the module again"
            )

    def __call__(self, *args) -> None:
        names = self.module.function_names()
        if len(names) != 1:
            raise LoomError(f"module has {len(names)} functions {names}; call one by name")
        self[names[0]](*args)

    def time_evaluator(
        self, name: str, dev=None, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0
    ):
        """f(*args) -> TimeResult, timed inside the device by its own clock (TVM's
        time_evaluator; `dev`, if given, must be the module's session)."""
        if dev is not None and dev is not self.session:
            raise TypeError(
                f"time_evaluator: dev must be the session the module is loaded on "
                f"({self.session.name}) or None, got {dev!r}; pass number= and repeat= by keyword"
            )
        return evaluator(self[name].time, number, repeat, min_repeat_ms)

    def unload(self) -> None:
        with self.session.lock:
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
        session = self.loaded.session
        with session.lock:
            addresses, temporaries, copy_back = self._prepare(args)
            try:
                session.call(self.address, addresses)
                for original, on_device in copy_back:
                    original[...] = on_device.numpy()
            finally:
                _free_all(temporaries)

    def time(self, args: tuple, number: int, repeat: int) -> TimeResult:
        session = self.loaded.session
        with session.lock:
            addresses, temporaries, _ = self._prepare(args)
            try:
                return TimeResult(tuple(session.time(self.address, addresses, number, repeat)))
            finally:
                _free_all(temporaries)

    def _prepare(self, args: tuple) -> tuple[list[int], list[DeviceArray], list]:
        """Check every argument, then copy scalars and numpy arrays to the device; the caller
        holds the session's lock."""
        sig, session = self.signature, self.loaded.session
        self.loaded._check_current(sig.name)
        arguments = sig.arguments
        if len(args) != len(arguments):
            raise TypeError(f"{sig.describe()} takes {len(arguments)} arguments, got {len(args)}")
        checked: list = []  # per parameter: a scalar's ctypes value, a DeviceArray, an ndarray
        buffers: list[tuple[ParamSpec, object]] = []
        for spec, value in zip(arguments, args):
            if not spec.is_buffer:
                checked.append(_scalar(sig, spec, value))
                continue
            if isinstance(value, DeviceArray):
                _check_device_array(sig, spec, value, session)
            else:
                value = _check_array(sig, spec, value)
            checked.append(value)
            buffers.append((spec, value))
        given = [(p, v if p.is_buffer else v.value) for p, v in zip(arguments, checked)]
        checked += [_scalar(sig, p, v) for p, v in bind_shapes(sig, given)]
        _check_distinct(sig, buffers, _share_memory)

        addresses: list[int] = []
        temporaries: list[DeviceArray] = []
        copy_back: list = []
        try:
            scalars = [
                bytes(v).ljust(8, b"\0") for p, v in zip(sig.params, checked) if not p.is_buffer
            ]
            if scalars:  # one 8-byte slot per scalar, in one allocation
                slots = DeviceArray.from_numpy(session, np.frombuffer(b"".join(scalars), np.uint8))
                temporaries.append(slots)
                next_slot = slots.address
            for spec, value in zip(sig.params, checked):
                if not spec.is_buffer:
                    addresses.append(next_slot)
                    next_slot += 8
                elif isinstance(value, DeviceArray):
                    addresses.append(value.address)
                else:
                    on_device = DeviceArray.from_numpy(session, value, alignment=spec.alignment)
                    temporaries.append(on_device)
                    if spec.written:
                        copy_back.append((value, on_device))
                    addresses.append(on_device.address)
        except BaseException:
            _free_all(temporaries)
            raise
        return addresses, temporaries, copy_back

    def __repr__(self) -> str:
        return f"<loom device function {self.signature.describe()}>"


def _free_all(temporaries: list[DeviceArray]) -> None:
    for t in temporaries:
        t.free()


def _share_memory(a, b) -> bool:
    """Whether two buffer arguments of a device call overlap: device arrays (of one session,
    so one address space) when their [address, address + nbytes) ranges intersect, numpy
    arrays as on the host; a numpy array is copied in, so it never aliases a device array."""
    if isinstance(a, DeviceArray) and isinstance(b, DeviceArray):
        return a.address < b.address + b.nbytes and b.address < a.address + a.nbytes
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return bool(np.may_share_memory(a, b))
    return False


def _check_device_array(
    sig: FunctionSignature, spec: ParamSpec, arr: DeviceArray, session: Session
) -> None:
    where = f"{sig.name}: argument {spec.name}"
    if arr.session is not session:
        raise ValueError(f"{where} lives on session {arr.session.name}, not {session.name}")
    if not arr.alive:
        raise DeviceError(
            f"{where} belonged to an earlier runtime of session {session.name}; make it again"
        )
    if not arr.address:
        raise LoomError(f"{where} was freed")
    if arr.dtype != to_dtype(spec.dtype).numpy:
        raise TypeError(f"{where} must have dtype {spec.dtype}, got {arr.dtype}")
    check_shape(sig, spec, arr.shape)
    if arr.address % spec.alignment:
        raise ValueError(f"{where} is at 0x{arr.address:x}, not aligned to {spec.alignment} bytes")
