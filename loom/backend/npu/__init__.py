"""The reference NPU (docs/npu.md) as a loom target kind: `target="npu"`.

The package's parts are imported on first use: `simulator` (the C simulator and its Python
callers; runtime layer, no compiler), `backend` (`NPUBackend`, registered as `BACKEND` when
imported, which `loom.target` does), `arch`, `rules`, `intrinsics`, `ops`, `kernels`,
`requant`, `codegen`, `graph`.
"""

from loom.lazy import lazy_attributes

_PARTS = ("arch", "backend", "codegen", "graph", "intrinsics", "kernels", "ops", "requant", "rules")
_LAZY = {name: (f"loom.backend.npu.{name}", None) for name in (*_PARTS, "simulator")}
_LAZY |= {
    "BACKEND": ("loom.backend.npu.backend", "BACKEND"),
    "NPUBackend": ("loom.backend.npu.backend", "NPUBackend"),
    "gemm": ("loom.backend.npu.intrinsics", "gemm"),
    "match_requantize": ("loom.backend.npu.requant", "match_requantize"),
    "requantize": ("loom.backend.npu.requant", "requantize"),
}

__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)

__all__ = ["BACKEND", "NPUBackend", "gemm", "match_requantize", "requantize"]
