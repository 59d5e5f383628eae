"""loom: a tensor compiler for processors with explicit memory hierarchies.

`import loom` loads nothing but the error classes and the version; every other name is imported
on first use (PEP 562), so that `import loom.runtime` loads the runtime without the compiler
(docs/architecture.md, "Layers").
"""

from loom.errors import (
    DeviceError,
    InterpreterError,
    LoomError,
    LoweringError,
    ScheduleError,
    TVMError,
)
from loom.lazy import lazy_attributes
from loom.version import __version__

_LAZY = {  # name -> (module, attribute or None for the module itself)
    "abi": ("loom.abi", None),
    "autotune": ("loom.autotune", None),
    "backend": ("loom.backend", None),
    "build": ("loom.driver", "build"),
    "compile": ("loom.model", "compile"),
    "contrib": ("loom.contrib", None),
    "cpu": ("loom.runtime.device_handle", "cpu"),
    "Device": ("loom.runtime.device_handle", "Device"),
    "frontend": ("loom.frontend", None),
    "get_global_func": ("loom.runtime.global_functions", "get_global_func"),
    "graph": ("loom.graph", None),
    "device": ("loom.runtime.session", "device"),
    "error": ("loom.errors", None),  # TVM's tvm.error (TVMError)
    "ir": ("loom.ir", None),
    "lower": ("loom.driver", "lower"),
    "memory": ("loom.memory", None),
    "nd": ("loom.nd", None),
    "ops": ("loom.ops", None),
    "packaging": ("loom.packaging", None),
    "PassContext": ("loom.transform", "PassContext"),
    "register_func": ("loom.runtime.global_functions", "register_func"),
    "runtime": ("loom.runtime", None),
    "target": ("loom.target", None),
    "te": ("loom.te", None),
    "tir": ("loom.tir", None),
    "transform": ("loom.transform", None),
    "tune": ("loom.autotune", "tune"),
}

__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)

__all__ = [
    "Device",
    "DeviceError",
    "InterpreterError",
    "LoomError",
    "LoweringError",
    "PassContext",
    "ScheduleError",
    "TVMError",
    "__version__",
    "abi",
    "autotune",
    "backend",
    "build",
    "compile",
    "contrib",
    "cpu",
    "device",
    "error",
    "frontend",
    "get_global_func",
    "graph",
    "ir",
    "lower",
    "memory",
    "nd",
    "ops",
    "packaging",
    "register_func",
    "runtime",
    "target",
    "te",
    "tir",
    "transform",
    "tune",
]
