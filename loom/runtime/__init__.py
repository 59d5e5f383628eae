"""Running compiled code: modules, aligned arrays, the host runtime and the thread pool."""

from loom.runtime.device_module import DeviceModule, LoadedModule
from loom.runtime.export import load_module, register_loader, unregister_loader
from loom.runtime.host_runtime import configure_vtcm, num_threads, set_num_threads, vtcm_stats
from loom.runtime.module import Module, NativeFunction, NativeModule, TimeResult
from loom.runtime.session import DeviceArray, Session, device

__all__ = [
    "DeviceArray",
    "DeviceModule",
    "LoadedModule",
    "Module",
    "NativeFunction",
    "NativeModule",
    "Session",
    "TimeResult",
    "configure_vtcm",
    "device",
    "load_module",
    "num_threads",
    "register_loader",
    "set_num_threads",
    "unregister_loader",
    "vtcm_stats",
]
