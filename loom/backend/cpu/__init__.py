"""The CPU target kinds: `llvm` (LLVM through llvmlite, any triple LLVM knows) and `c` (C for
the host's compiler). Code runs on the CPU ("cpu") and calls loom's host runtime, libm, libc
and the compiler's support routines."""

from __future__ import annotations

from loom import abi
from loom.backend.base import Backend, register
from loom.backend.cpu import group_schedules, strategies
from loom.codegen.c import compile_c
from loom.codegen.llvm import build_llvm
from loom.runtime.host_runtime import HOST_RUNTIME

_LIBRARIES = [HOST_RUNTIME, abi.LIBM, abi.LIBC, abi.COMPILER_RUNTIME]
_STRATEGIES = {"matmul": strategies.matmul, "elementwise": strategies.elementwise_kernel}


class LLVMBackend(Backend):
    name = "llvm"
    doc = "a CPU through LLVM (the host by default; -mtriple/-mcpu/-mattr for another)"
    vector_ir = True
    partitions = False
    replaceable = False
    options = (*Backend.options, "llvm-loop-vectorize")  # codegen/llvm/emit.py: loop_vectorize

    def libraries(self):
        return _LIBRARIES

    def strategies(self):
        return _STRATEGIES

    def codegen(self, mod, target):
        return build_llvm(mod, target)

    def schedule_group(self, s, outputs, pattern, target):
        """Parallel and vectorized loops for a model's kernels (group_schedules.py)."""
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
