"""Code generation for the NPU: C that issues its instructions, linked with its library.

The host function (`<name>`) and the kernels (`<name>_npu`) are compiled as C by the C back
end into two modules: the host module ("c") imports the NPU module ("npu"); both objects are
linked into one library with the instruction library (the simulator here, a vendor's library
on hardware).
"""

from __future__ import annotations

from loom.backend.base import KERNEL_ATTR
from loom.codegen.c import compile_c
from loom.codegen.common import link_flags
from loom.ir.function import IRModule
from loom.runtime.linker import load_host_object
from loom.runtime.module import NativeModule


def generate(mod: IRModule, target, backend_name: str) -> NativeModule:
    kernels = IRModule(tuple(f for f in mod if f.attr(KERNEL_ATTR) == backend_name), mod.attrs)
    host = IRModule(tuple(f for f in mod if f.attr(KERNEL_ATTR) != backend_name), mod.attrs)
    device = compile_c(kernels, target, type_key=backend_name)
    root = compile_c(
        host,
        target,
        siblings={f.name: backend_name for f in kernels},
        sibling_signatures=device.signatures,
    )
    name = host.functions[0].name if len(host) else backend_name
    flags = link_flags({**root.extern_symbols, **device.extern_symbols})
    library = load_host_object([root.object_code, device.object_code], name, flags)
    root.library = device.library = library
    root.import_module(device)
    return root
