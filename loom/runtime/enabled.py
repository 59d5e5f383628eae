"""`loom.runtime.enabled(target)`: whether loom can build and run code for a target here (TVM's
`tvm.runtime.enabled`).

Answered from what is installed, without importing the compiler: llvmlite for "llvm", a C
compiler for "c", the tools of the Hexagon device path (as tests/hexagon/conftest.py needs
them) for "hexagon". loom has no GPU runtime, so TVM's GPU targets are never enabled.
"""

from __future__ import annotations

import importlib.util
import shutil

from loom.errors import LoomError
from loom.runtime.device_handle import GPU_KINDS

HEXAGON_TOOLS = ("clang", "ld.lld", "qemu-hexagon")
NEVER = (*GPU_KINDS, "rpc")  # no GPU runtime, and no RPC


def _llvm() -> bool:
    return importlib.util.find_spec("llvmlite") is not None


_CHECKS = {  # asked at each call: a tool installed since is found
    "cpu": lambda: True,
    "llvm": _llvm,
    "c": lambda: shutil.which("cc") is not None,
    "hexagon": lambda: all(shutil.which(tool) for tool in HEXAGON_TOOLS),
}


def enabled(target: str) -> bool:
    """Whether code for `target` (its kind, or a target's text such as "llvm -mcpu=znver4",
    read by its first word) can be built and run on this machine."""
    if not isinstance(target, str) or not target.split():
        raise TypeError(f"target must be a target's name, such as 'llvm', got {target!r}")
    kind = target.split()[0]
    if kind in _CHECKS:
        return bool(_CHECKS[kind]())
    if kind in NEVER:
        return False
    raise LoomError(f"unknown target {kind!r}; known: {', '.join([*_CHECKS, *NEVER])}")
