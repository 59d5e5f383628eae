"""The reference NPU as a target kind (`NPUBackend`), registered as `BACKEND` on import: the
scratchpad and accumulator memories, the instruction library (the simulator), the pragma rules
`npu_mvin`/`npu_mvout`, the GEMM intrinsics, the matmul and conv2d strategies, the int8 graph
patterns it takes from a model (loom/backend/npu/graph.py), and code generation."""

from __future__ import annotations

from loom.backend.base import Backend, register
from loom.backend.npu import arch, codegen, graph, kernels, ops, padded_copies, rules
from loom.backend.npu import simulator as npu_sim
from loom.backend.npu.intrinsics import GEMM, GEMM_BIAS, GEMM_STREAM, GEMM_STREAM_BIAS
from loom.ir.function import IRModule


class NPUBackend(Backend):
    name = "npu"
    doc = "the reference Gemmini-style NPU (DIM x DIM int8 systolic array), simulated"
    kernel_device = arch.DEVICE

    def __init__(self) -> None:
        self.extra_passes: list = []
        self.extra_graph_passes: list = []

    def memories(self):
        return [arch.SPAD_SCOPE, arch.ACC_SCOPE]

    def libraries(self):
        return [npu_sim.LIBRARY]

    def intrinsics(self):
        return {
            "npu_gemm": GEMM,
            "npu_gemm_bias": GEMM_BIAS,
            "npu_gemm_stream": GEMM_STREAM,
            "npu_gemm_stream_bias": GEMM_STREAM_BIAS,
        }

    def pragma_rules(self):
        return [rules.MVIN, rules.MVOUT]

    def strategies(self):
        return {"matmul": ops.matmul, "conv2d": ops.conv2d_nhwc}

    def passes(self):
        return [
            ("schedule", padded_copies.zero_fill_columns),
            ("build", kernels.no_parallel_instructions),
            *self.extra_passes,
        ]

    def graph_patterns(self):
        return list(graph.PATTERNS)

    def graph_passes(self, target):
        return [("partitioned", graph.legalize), *self.extra_graph_passes]

    def lower_region(self, region, model_graph, name):
        return graph.lower_region(self, region, model_graph, name)

    def partition(self, func):
        host, kernel = super().partition(func)
        return IRModule((host, kernels.owned(kernel)))

    def codegen(self, mod, target):
        return codegen.generate(mod, target, self.name)


BACKEND = register(NPUBackend())

__all__ = ["BACKEND", "NPUBackend"]
