"""Devices (docs/architecture.md, decision 7): the freestanding device runtime, its build, and
the codec of the protocol it serves (docs/device-protocol.md)."""

from loom.runtime.device import protocol
from loom.runtime.device.build import (
    DEVICE_RUNTIME,
    build_device_library,
    compile_device_object,
    elf_flags,
    emulator,
    isa_info,
    link_shared_object,
    module_cflags,
    runtime_path,
)

__all__ = [
    "DEVICE_RUNTIME",
    "build_device_library",
    "compile_device_object",
    "elf_flags",
    "emulator",
    "isa_info",
    "link_shared_object",
    "module_cflags",
    "protocol",
    "runtime_path",
]
