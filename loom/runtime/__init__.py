"""The runtime layer (docs/architecture.md): running compiled code without the compiler.

Modules and their functions, aligned arrays, the host runtime and its thread pool, loading
exported libraries, and device sessions. Nothing here imports loom's compiler (loom.ir, te,
transform, codegen, target); a layering test keeps it so.
"""

from loom.runtime import packed_callback  # noqa: F401 (declares the library call_packed links)
from loom.runtime.device_handle import Device, cpu
from loom.runtime.device_module import DeviceModule
from loom.runtime.enabled import enabled
from loom.runtime.global_functions import (
    get_global_func,
    list_global_func_names,
    register_func,
    remove_global_func,
)
from loom.runtime.host_ndarray import NDArray
from loom.runtime.host_runtime import configure_vtcm, num_threads, set_num_threads, vtcm_stats
from loom.runtime.load import load_module
from loom.runtime.loaded import LoadedModule
from loom.runtime.module import (
    Module,
    NativeFunction,
    NativeModule,
    register_loader,
    unregister_loader,
)
from loom.runtime.session import DeviceArray, Session, device
from loom.runtime.timing import TimeResult

__all__ = [
    "Device",
    "DeviceArray",
    "DeviceModule",
    "LoadedModule",
    "Module",
    "NDArray",
    "NativeFunction",
    "NativeModule",
    "Session",
    "TimeResult",
    "configure_vtcm",
    "cpu",
    "device",
    "enabled",
    "get_global_func",
    "list_global_func_names",
    "load_module",
    "num_threads",
    "register_func",
    "register_loader",
    "remove_global_func",
    "set_num_threads",
    "unregister_loader",
    "vtcm_stats",
]
