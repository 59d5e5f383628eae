"""The reference NPU (docs/npu.md) as a loom backend: `target="npu"`.

Importing this package registers the backend: the scratchpad and accumulator memories, the
instruction library (the simulator), the pragma rules `npu_mvin`/`npu_mvout`, the GEMM
intrinsic, and the matmul and conv2d strategies.
"""

from __future__ import annotations

from loom.backend.base import Backend, register
from loom.ir.function import IRModule
from loom.runtime import npu_sim

from . import arch, codegen, kernels, ops, rules
from .intrinsics import GEMM, GEMM_BIAS, gemm
from .requant import match_requantize, requantize


class NPUBackend(Backend):
    name = "npu"
    doc = "the reference Gemmini-style NPU (DIM x DIM int8 systolic array), simulated"

    def __init__(self) -> None:
        self.extra_passes: list = []

    def memories(self):
        return [arch.SPAD_SCOPE, arch.ACC_SCOPE]

    def libraries(self):
        return [npu_sim.LIBRARY]

    def intrinsics(self):
        return {"npu_gemm": GEMM, "npu_gemm_bias": GEMM_BIAS}

    def pragma_rules(self):
        return [rules.MVIN, rules.MVOUT]

    def strategies(self):
        return {"matmul": ops.matmul, "conv2d": ops.conv2d_nhwc}

    def passes(self):
        return [("build", kernels.no_parallel_instructions), *self.extra_passes]

    def partition(self, func):
        host, kernel = super().partition(func)
        return IRModule((host, kernels.owned(kernel)))

    def codegen(self, mod, target):
        npu_sim.library()  # the instructions' library must be loaded before the kernels
        return codegen.generate(mod, target, self.name)


BACKEND = register(NPUBackend())

__all__ = ["BACKEND", "NPUBackend", "gemm", "match_requantize", "requantize"]
