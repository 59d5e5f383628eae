"""The reference NPU's architecture as loom sees it (docs/npu.md): its memories as memory
scopes, and how buffers in them are addressed."""

from __future__ import annotations

from loom import memory
from loom.backend.npu import simulator as npu_sim
from loom.errors import LoomError
from loom.ir import op
from loom.ir.buffer import Buffer
from loom.ir.expr import Call, PrimExpr
from loom.ir.linear import linearize

DIM = npu_sim.DIM
SPAD_ROWS = npu_sim.SPAD_ROWS
ACC_ROWS = npu_sim.ACC_ROWS
SPAD = "npu.spad"
ACC = "npu.acc"
DEVICE = "npu"

SPAD_SCOPE = memory.MemoryScope(
    SPAD,
    memory.FixedAddress(0, npu_sim.SPAD_ROWS * DIM, 8 * DIM, SPAD),
    alignment=DIM,
    accessible_from=(DEVICE,),
    doc=f"the NPU scratchpad: {npu_sim.SPAD_ROWS} rows of {DIM} int8, addressed by row",
)
ACC_SCOPE = memory.MemoryScope(
    ACC,
    memory.FixedAddress(npu_sim.ACC_BASE, npu_sim.ACC_ROWS * DIM * 4, 32 * DIM, ACC),
    alignment=4 * DIM,
    accessible_from=(DEVICE,),
    doc=f"the NPU accumulator: {npu_sim.ACC_ROWS} rows of {DIM} int32, addressed by row",
)


def _multiple_of_dim(offset: PrimExpr) -> bool:
    """Whether every term of `offset` is a multiple of DIM (which divides 2^32, so it stays
    one under wraparound)."""
    lin = linearize(offset)
    return lin.const % DIM == 0 and all(k % DIM == 0 for k in lin.terms.values())


def row_address(buffer: Buffer, offset: PrimExpr, what: str) -> PrimExpr:
    """The NPU address of the row holding element `offset` of a scratchpad or accumulator
    buffer (its data pointer is the address of its first row; every row is DIM elements)."""
    if buffer.scope not in (SPAD, ACC):
        raise LoomError(f"{what}: {buffer.name} must be in {SPAD} or {ACC}, not {buffer.scope}")
    if not _multiple_of_dim(offset):  # the NPU names whole rows, not a place inside one
        raise LoomError(
            f"{what}: {buffer.name} starts at element {offset}, which is not provably at the "
            f"start of a row (rows are {DIM} elements); split that axis by {DIM}, not less"
        )
    base = op.cast(buffer.data, "uint64")
    return op.cast(base + op.cast(op.floordiv(offset, DIM), "uint64"), "uint32")


def instruction_call(name: str, *args) -> Call:
    """A call of the NPU instruction `name`, each argument cast to its declared type (the
    instruction library in loom.backend.npu.simulator declares them)."""
    sym = npu_sim.LIBRARY.symbol(name)
    converted = tuple(op.cast(a, t) for a, (_, t) in zip(args, sym.params))
    return Call("int32", name, converted, "extern")
