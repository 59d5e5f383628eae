"""Hexagon DSPs (HVX vectors, VTCM) as a target kind: `target="hexagon -mcpu=v66 -hvx=128"`.

This package owns what loom knows about Hexagon on the compiler side: the target's options and
LLVM description, the VTCM memories, the runtime libraries Hexagon code may call, HVX schedules
(`strategies`), and code generation (LLVM's Hexagon back end, linked into a shared object that
a device session loads). The device runtime itself (its C sources with their Hexagon port, its
build, and the declaration of the symbols it exports) belongs to the runtime layer:
loom/runtime/device and loom/runtime/native/device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom import abi, memory
from loom.backend.base import Backend, register
from loom.backend.hexagon import llvm_fixups, strategies
from loom.codegen.llvm import build_device, fast_math
from loom.errors import LoomError
from loom.ir.expr import BufferLoad, Call, IntImm, Max, Min, Ramp, Select
from loom.ir.stmt import BufferStore
from loom.runtime.device import DEVICE_RUNTIME
from loom.transform.vectorize_loop import first_vector_problem

if TYPE_CHECKING:  # loom.target imports this package (it registers the kind)
    from loom.target.target import Target

TRIPLE = "hexagon-unknown-linux-musl"
VERSIONS = ("v66", "v67", "v68", "v69", "v71", "v73")
DEFAULT_VTCM_BYTES = 256 * 1024
VTCM_SCOPES = ("local.vtcm", "global.vtcm")

VTCM = [
    memory.MemoryScope(
        name,
        memory.RuntimeAllocator("HexagonBackendAllocateVTCM", "HexagonBackendFreeVTCM"),
        alignment=128,
        address_space="vtcm",
        accessible_from=("cpu", "hexagon"),
        doc="Hexagon's tightly coupled vector memory, from the runtime's VTCM allocator "
        "(the device runtime on Hexagon; an emulated arena in the host runtime)",
    )
    for name in VTCM_SCOPES
]


def version(target: Target) -> str:
    """ "v66", "v73", ... of a Hexagon target."""
    return target.cpu.removeprefix("hexagon")


def vtcm_size(target: Target) -> int:
    """Bytes of VTCM the device has."""
    return int(target.option("vtcm", str(DEFAULT_VTCM_BYTES)))


def vector_supported(dtype) -> bool:
    """Whether LLVM's Hexagon back end emits vectors of `dtype`: a power-of-two number of
    lanes, at least 32 bits in all unless they are predicates."""
    lanes = dtype.lanes
    if lanes & (lanes - 1):
        return False
    return dtype.is_bool or lanes * dtype.bits >= 32


def vector_problem(node) -> str | None:
    """Why loom does not give `node` of vector code to LLVM's Hexagon back end, or None.

    Each was seen to abort LLVM 22 or to compute wrong lanes under qemu-hexagon (tests/hexagon/
    test_hexagon_vector_types.py): `int8x2` arithmetic ("Do not know how to scalarize"),
    `int64x48` multiplication ("Invalid cast!"), a 6-lane int8 loop (the device crashed), a
    select, min or max between predicate vectors ("Cannot select: vselect"), and gathers and
    scatters (`Y[i] = X[i % 8]` on 128 lanes gave wrong lanes). Contiguous masked loads and
    stores are fine: loom emits them itself as aligned HVX block accesses that touch only
    blocks holding an enabled lane (loom/codegen/llvm/hvx.py), never LLVM's masked load, which
    reads whole aligned vectors past a buffer's edge."""
    dt = getattr(node, "dtype", None)
    if isinstance(node, BufferLoad | BufferStore):
        lanes = node.dtype.lanes if isinstance(node, BufferLoad) else node.value.dtype.lanes
        if lanes > 1 and not _contiguous(node.indices[-1]):
            return "a gather or scatter"
    if dt is None or dt.lanes == 1:
        return None
    if not vector_supported(dt):
        return f"vectors of {dt} (a power-of-two number of lanes of at least 32 bits)"
    bool_choice = isinstance(node, Select | Min | Max) or (
        isinstance(node, Call) and node.op == "if_then_else"
    )
    if dt.is_bool and bool_choice:
        return f"a select, min or max between predicate vectors ({dt})"
    return None


def _contiguous(index) -> bool:
    return isinstance(index, Ramp) and isinstance(index.stride, IntImm) and index.stride.value == 1


def check_vectors(mod) -> None:
    """Refuse, naming the function, vector code loom does not give LLVM's Hexagon back end
    (hand-written IR: the vectorizer makes none)."""
    for func in mod:
        reason = first_vector_problem(func.body, vector_problem)
        if reason is not None:
            raise LoomError(
                f"function {func.name}: Hexagon code cannot have {reason} "
                '(docs/hexagon.md, "Vector code")'
            )


class HexagonBackend(Backend):
    name = "hexagon"
    doc = (
        "Hexagon DSP with HVX and VTCM (v66-v73 run under qemu-hexagon 10; HVX float compiles only)"
    )
    device = "hexagon"
    vector_ir = True
    partitions = False
    replaceable = False
    options = ("mcpu", "hvx", "vtcm", *fast_math.OPTIONS)
    # LLVM's Hexagon lowering of a masked load reads whole aligned HVX vectors, which can fault
    # (or mix lanes) at a buffer's edge
    masked_loads_are_safe = False

    def describe_target(self, options, host):
        ver = options.pop("mcpu", "v66").removeprefix("hexagon")
        if ver not in VERSIONS:
            raise LoomError(f"unknown Hexagon version {ver!r}; known: {list(VERSIONS)}")
        hvx = options.pop("hvx", "128")
        if hvx not in ("0", "64", "128"):
            raise LoomError(f"-hvx must be 128, 64 or 0 (no HVX), got {hvx!r}")
        options["hvx"] = hvx
        vtcm = options.get("vtcm", str(DEFAULT_VTCM_BYTES))
        if not vtcm.isdigit() or int(vtcm) <= 0:
            raise LoomError(f"-vtcm must be a positive number of bytes, got {vtcm!r}")
        features = "" if hvx == "0" else f"+hvx{ver},+hvx-length{hvx}b"
        return TRIPLE, f"hexagon{ver}", features

    def target_text(self, target):
        return f"hexagon -mcpu={version(target)}"

    def vector_bytes(self, target):
        hvx = int(target.option("hvx", "0"))
        return hvx if hvx else 8

    def memory_capacity(self, target, scope):
        return vtcm_size(target) if scope in VTCM_SCOPES else None

    def vector_problem(self, target, node):
        return vector_problem(node)

    def llvm_fixups(self):
        return llvm_fixups.FIXUPS

    def memories(self):
        return VTCM

    def libraries(self):
        return [DEVICE_RUNTIME, abi.COMPILER_RUNTIME]

    def strategies(self):
        return {
            "elementwise": strategies.elementwise,
            "column_sum": strategies.column_sum,
            "matmul": strategies.matmul,
            "conv2d": strategies.conv2d_nchw,
        }

    def codegen(self, mod, target):
        check_vectors(mod)
        return build_device(mod, target)


BACKEND = register(HexagonBackend())


__all__ = ["BACKEND", "DEVICE_RUNTIME", "HexagonBackend"]
