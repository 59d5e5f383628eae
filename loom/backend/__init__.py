"""Target kinds: the plug-in API (`Backend`, `register`) and the built-in kinds.

Every target kind is a `Backend` registered with `register`: `cpu` (llvm and c), `hexagon`,
`npu` (the reference NPU), and a user's. `loom.target` imports the built-in ones, which
registers them; the names here are imported on first use (the NPU's simulator, a runtime
module in this package, must not load the compiler).
"""

from loom.lazy import lazy_attributes

_BASE = ("BACKENDS", "KERNEL_ATTR", "Backend", "get", "is_backend", "register")
_LAZY = {name: ("loom.backend.base", name) for name in _BASE}
_LAZY |= {"list": ("loom.backend.base", "list_backends")}
_LAZY |= {kind: (f"loom.backend.{kind}", None) for kind in ("base", "cpu", "hexagon", "npu")}

__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)

__all__ = [*_BASE, "cpu", "hexagon", "list", "npu"]
