"""Code generation for the NPU: C that issues its instructions.

The host function (`<name>`) and the kernels (`<name>_npu`) are compiled as C by the C back
end into two modules: the host module ("c") imports the NPU module ("npu"). loom.packaging then
links both objects into one library with the instruction library (the simulator here, a
vendor's library on hardware).
"""

from __future__ import annotations

from loom.backend.base import KERNEL_ATTR
from loom.codegen.c import compile_c
from loom.ir.function import IRModule
from loom.runtime.module import NativeModule


def generate(mod: IRModule, target, backend_name: str) -> NativeModule:
    kernels = IRModule(tuple(f for f in mod if f.attr(KERNEL_ATTR) == backend_name), mod.attrs)
    host = IRModule(tuple(f for f in mod if f.attr(KERNEL_ATTR) != backend_name), mod.attrs)
    device = compile_c(kernels, target, type_key=backend_name)
    root = compile_c(host, target, sibling_signatures=device.signatures)
    root.import_module(device)
    return root
