"""Devices (DESIGN.md decision 7): the freestanding device runtime, its build, and the codec of
the protocol it serves (docs/device-protocol.md)."""

from loom.runtime.device import protocol
from loom.runtime.device.build import (
    build_device_library,
    compile_device_object,
    emulator,
    module_cflags,
    runtime_path,
)

__all__ = [
    "build_device_library",
    "compile_device_object",
    "emulator",
    "module_cflags",
    "protocol",
    "runtime_path",
]
