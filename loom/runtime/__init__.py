"""Running compiled code: modules, aligned arrays, the host runtime and the thread pool."""

from loom.runtime.host_runtime import num_threads, set_num_threads
from loom.runtime.module import Module, NativeFunction, TimeResult

__all__ = ["Module", "NativeFunction", "TimeResult", "num_threads", "set_num_threads"]
