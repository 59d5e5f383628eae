"""The CPU target kinds: `llvm` (LLVM through llvmlite, any triple LLVM knows) and `c` (C for
the host's compiler). Code runs on the CPU ("cpu") and calls loom's host runtime, libm, libc
and the compiler's support routines."""

from __future__ import annotations

import functools

from loom import abi
from loom.backend.base import Backend, register
from loom.backend.cpu import (
    conv_schedules,
    dense_schedules,
    group_schedules,
    pack_conv_weights,
    reduce_schedules,
    strategies,
)
from loom.codegen.c import compile_c
from loom.codegen.llvm import build_llvm, fast_math
from loom.runtime.host_runtime import HOST_RUNTIME
from loom.transform.cpu_prefetch_output import cpu_prefetch_output
from loom.transform.cpu_prefetch_tile_output import cpu_prefetch_tile_output
from loom.transform.cpu_prefetch_weights import cpu_prefetch_weights

_LIBRARIES = [HOST_RUNTIME, abi.LIBM, abi.LIBC, abi.COMPILER_RUNTIME]
_STRATEGIES = {"matmul": strategies.matmul, "elementwise": strategies.elementwise_kernel}
_OPERATOR_SCHEDULES = (conv_schedules.schedule, dense_schedules.schedule, reduce_schedules.schedule)
"""Schedules for the kernels whose operator they recognize; group_schedules.py then schedules
every stage they left as the default schedule made it."""


class LLVMBackend(Backend):
    name = "llvm"
    doc = "a CPU through LLVM (the host by default; -mtriple/-mcpu/-mattr for another)"
    vector_ir = True
    partitions = False
    replaceable = False
    # codegen/llvm/emit.py: loop_vectorize; codegen/llvm/fast_math.py: -fp-contract, -fp-reassoc
    options = (*Backend.options, "llvm-loop-vectorize", *fast_math.OPTIONS)

    def libraries(self):
        return _LIBRARIES

    def strategies(self):
        return _STRATEGIES

    def passes(self):
        """Software prefetch of the weights the hardware prefetcher does not follow
        (loom/transform/cpu_prefetch_weights.py), of a row group's output row
        (cpu_prefetch_output.py) and of a register tile's output a tile ahead
        (cpu_prefetch_tile_output.py)."""
        return [
            ("flatten", cpu_prefetch_weights),
            ("flatten", cpu_prefetch_output),
            ("flatten", cpu_prefetch_tile_output),
        ]

    def graph_passes(self, target):
        """Constant convolution weights in blocks of their register tile's output channels for
        `target` (pack_conv_weights.py): the C backend's loops read them as ONNX lays them
        out."""
        pack = functools.partial(pack_conv_weights.pack_conv_weights, target=target)
        return [("simplified", pack)]

    def codegen(self, mod, target):
        return build_llvm(mod, target)

    def schedule_group(self, s, outputs, pattern, target):
        """Parallel and vectorized loops for a model's kernels: the operator schedules first,
        then group_schedules.py for every stage they did not schedule."""
        for schedule in _OPERATOR_SCHEDULES:
            schedule(s, target)
        group_schedules.schedule_group(s, outputs, pattern, target)


class CBackend(Backend):
    name = "c"
    doc = "C compiled by the host's C compiler (which vectorizes the plain loops it gets)"
    vector_ir = False
    partitions = False
    replaceable = False

    def libraries(self):
        return _LIBRARIES

    def codegen(self, mod, target):
        return compile_c(mod, target)


LLVM = register(LLVMBackend())
C = register(CBackend())

__all__ = ["LLVM", "C", "CBackend", "LLVMBackend"]
