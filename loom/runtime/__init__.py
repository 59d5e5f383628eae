"""Running compiled code: modules, aligned arrays, the host runtime and the thread pool."""

from loom.runtime.export import load_module, register_loader, unregister_loader
from loom.runtime.host_runtime import configure_vtcm, num_threads, set_num_threads, vtcm_stats
from loom.runtime.module import Module, NativeFunction, NativeModule, TimeResult

__all__ = [
    "Module",
    "NativeFunction",
    "NativeModule",
    "TimeResult",
    "configure_vtcm",
    "load_module",
    "num_threads",
    "register_loader",
    "set_num_threads",
    "unregister_loader",
    "vtcm_stats",
]
