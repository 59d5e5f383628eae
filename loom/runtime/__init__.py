"""Running compiled code: modules, aligned arrays, the host runtime and the thread pool."""

from loom.runtime.host_runtime import configure_vtcm, num_threads, set_num_threads, vtcm_stats
from loom.runtime.module import Module, NativeFunction, TimeResult

__all__ = [
    "Module",
    "NativeFunction",
    "TimeResult",
    "configure_vtcm",
    "num_threads",
    "set_num_threads",
    "vtcm_stats",
]
