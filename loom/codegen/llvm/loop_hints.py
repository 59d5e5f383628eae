"""What LLVM's loop unroller is told about a loop: to unroll it completely
(`llvm.loop.unroll.full`, a loop annotated UNROLL_FULL: loom/transform/unroll_loop.py), or to
leave it alone (`llvm.loop.unroll.disable`, below).

A long loop whose body only copies whole vectors (a packing loop: `packed[ramp] = src[ramp]`)
gains nothing from unrolling: each iteration already moves several vector registers, and the
copy is bound by memory, not by the loop's compare and branch. LLVM 22 still unrolls such a loop
16 times, which made a third of the object-code time of the 1024 matmul's first build (its B
panel's packing loop: 5 ms of 15). A short loop is not marked: LLVM may unroll it completely
and drop the loop. Every other loop is left to LLVM's cost model.
"""

from __future__ import annotations

from loom.ir.expr import BufferLoad, IntImm
from loom.ir.stmt import UNROLL_FULL, BufferStore, For, SeqStmt

UNROLL_FULL_HINT = "llvm.loop.unroll.full"
UNROLL_DISABLE_HINT = "llvm.loop.unroll.disable"

MIN_ITERATIONS = 64
"""Loops with fewer iterations (or an extent that is not a constant) are left to LLVM, which
may unroll them completely."""

MIN_BYTES = 256
"""Bytes an iteration must copy: four 512-bit registers, eight 256-bit ones."""


def _copied_bytes(body) -> int:
    """Bytes one iteration moves when `body` is only whole-vector copies, else 0."""
    stores = body.seq if type(body) is SeqStmt else (body,)
    total = 0
    for s in stores:
        if type(s) is not BufferStore or s.predicate is not None:
            return 0
        value = s.value
        if type(value) is not BufferLoad or value.predicate is not None:
            return 0
        if value.dtype.lanes == 1:
            return 0
        total += value.dtype.lanes * value.dtype.itemsize
    return total


def no_unroll(loop: For) -> bool:
    """True if `loop` is a long copy loop that LLVM should not unroll (see the module doc)."""
    extent = loop.extent
    if type(extent) is not IntImm or extent.value < MIN_ITERATIONS:
        return False
    return _copied_bytes(loop.body) >= MIN_BYTES


def unroll_hint(loop: For) -> str | None:
    """The loop metadata `loop` carries (UNROLL_FULL_HINT, UNROLL_DISABLE_HINT), or None: LLVM's
    cost model decides."""
    if any(key == UNROLL_FULL for key, _ in loop.annotations):
        return UNROLL_FULL_HINT
    return UNROLL_DISABLE_HINT if no_unroll(loop) else None
