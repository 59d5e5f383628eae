"""TVM's `tvm.contrib` helpers that loom has the tools for: `cc` (shared libraries and
executables with the system C compiler), `clang` (C to LLVM IR) and `utils` (temporary
directories). Each is imported on first use."""

from loom.lazy import lazy_attributes

_LAZY = {
    "cc": ("loom.contrib.cc", None),
    "clang": ("loom.contrib.clang", None),
    "utils": ("loom.contrib.utils", None),
}

__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)

__all__ = ["cc", "clang", "utils"]
