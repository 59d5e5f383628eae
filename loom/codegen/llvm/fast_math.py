"""Which of LLVM's fast-math flags loom's float arithmetic carries, from the target's options.

- `-fp-contract=1` (the default) marks float add, subtract and multiply `contract`: LLVM may
  fuse a multiply and the add that uses it into one fused multiply-add, rounded once instead of
  twice. On a core with FMA units this doubles the peak of a matrix product. A contracted result
  differs from the IR's (which rounds after every operation) by at most one rounding of the
  product: within 1 ulp of the product per fused pair, docs/native.md, "Floating-point
  contraction and reassociation". `-fp-contract=0` keeps every rounding.
- `-fp-reassoc=1` (off by default) adds `reassoc`: LLVM may reorder chains of float additions
  and multiplications as if they were associative (C's `-fassociative-math`), for example to
  vectorize or interleave a reduction loop. Results then depend on the order LLVM picks.
- `-fp-flush-denormals=1` (the default) runs a compiled model's `main` with the CPU's
  flush-to-zero and denormals-are-zero modes on (x86's MXCSR FTZ and DAZ bits), restored when it
  returns; the thread pool's workers take the launching thread's modes for its tasks. Intel
  cores take a microcode assist, ~100 cycles, per operation on a denormal (SiLU's `x *
  sigmoid(x)` of large negative x makes many), AMD's do not; onnxruntime's sigmoid never makes
  one. Results below 2^-126 become zero: docs/native.md, "Denormals". `-fp-flush-denormals=0`
  keeps them. Kernels built alone (`loom.build`) keep the caller's modes.

No other flag is ever set: NaN, infinity and signed zero keep their IEEE meaning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom.errors import LoomError

if TYPE_CHECKING:  # the target package registers the kinds, which import this
    from loom.target.target import Target

CONTRACT_OPTION = "fp-contract"
REASSOC_OPTION = "fp-reassoc"
FLUSH_DENORMALS_OPTION = "fp-flush-denormals"
OPTIONS = (CONTRACT_OPTION, REASSOC_OPTION, FLUSH_DENORMALS_OPTION)
"""The target options of every target kind whose code LLVM generates."""

FLUSH_DENORMALS_ATTR = "model.flush_denormals"
"""PrimFunc attribute: its entry point runs it with denormals flushed (a model's `main`, set by
graph/lower.py where flushes_denormals(target))."""

_DEFAULTS = {CONTRACT_OPTION: "1", REASSOC_OPTION: "0", FLUSH_DENORMALS_OPTION: "1"}


def _enabled(target: Target, option: str) -> bool:
    value = target.option(option, _DEFAULTS[option])
    if value not in ("0", "1"):
        raise LoomError(f"target -{option} must be 0 or 1, got {value!r}")
    return value == "1"


def float_flags(target: Target) -> tuple[str, ...]:
    """The fast-math flags of float add, subtract and multiply for `target`."""
    flags = []
    if _enabled(target, CONTRACT_OPTION):
        flags.append("contract")
    if _enabled(target, REASSOC_OPTION):
        flags.append("reassoc")
    return tuple(flags)


def flushes_denormals(target: Target | None) -> bool:
    """Whether a model compiled for `target` (None: the default) runs with denormals flushed."""
    return target is None or _enabled(target, FLUSH_DENORMALS_OPTION)
