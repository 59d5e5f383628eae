"""The register tile of a matrix product on a CPU, from the target's vector registers.

A matrix product C[i, j] = sum_k A[i, k] * B[k, j] is computed a tile of `rows` x `cols` of C
at a time, in vector accumulators that stay in registers: at each step k, `vectors` vector
loads of B's row k, one broadcast of A[i, k] per row, and rows x vectors fused multiply-adds
(the FMA's latency is hidden by the independent accumulators; B's vectors are reused by every
row, A's broadcast by every vector). Used by the `matmul` strategy (strategies.py) and by the
dense kernels of models (dense_schedules.py).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

import llvmlite.binding as llvm

from loom.abi.dtype import DataType
from loom.abi.dtype import dtype as as_dtype

if TYPE_CHECKING:  # loom.target registers the target kinds, whose backends import this
    from loom.target import Target

ALIASING_BYTES = 4096
"""The L1 data cache's bytes per way (48 KiB in 12 ways on Zen 4, 32 KiB in 8 on most x86 and
Arm cores): addresses this far apart share a set. Rows of B a multiple of this long share
their sets: the matmul strategy packs such B sooner (strategies.NARROW_PACK_MIN_TILES), a
one-row product takes fewer rows a step (dense_schedules.ALIASED_ROW_K_UNROLL)."""

HALF_WIDTH_CORES = frozenset({"znver4"})
"""Cores (`-mcpu`) whose vector units are half as wide as their registers: AMD Zen 4 runs an
AVX-512 operation as two 256-bit halves, so 7 vectors of 8 lanes compute a 56-wide row at
the cost of 3.5 registers (conv_schedules.py; measured: 4% faster than the row widened to 4
full registers)."""

ACCUMULATORS = {32: 16, 16: 12}
"""Vector accumulators of a tile by the number of vector registers: the rest hold B's vectors
and A's broadcast. Measured on AVX-512 (Zen 4): a 4 x 64 float tile (16 zmm) at 93% of the FMA
peak; 6 x 64 (24) spilled once LLVM scheduled the unrolled steps' loads early."""

MAX_VECTORS = {32: 4, 16: 2}
"""Vectors of B per step: 4 x 16 floats on AVX-512 loads 256 contiguous bytes of a row of B."""

GEMV_VECTORS = {32: 8, 16: 4}
"""Vectors of a one-row product (a matrix-vector product: no row reuses B, which is streamed
from memory): longer contiguous runs of each row of B, and enough accumulators to hide the
FMA's latency."""

K_UNROLL = 4
"""Steps of the reduction unrolled in the micro-kernel."""


@dataclasses.dataclass(frozen=True)
class DenseTile:
    """A register tile: `rows` rows of A, `vectors` vectors of `lanes` elements of B."""

    rows: int
    vectors: int
    lanes: int
    k_unroll: int

    @property
    def cols(self) -> int:
        return self.vectors * self.lanes


@dataclasses.dataclass(frozen=True)
class VectorUnit:
    """What a tile needs to know of a target: its vector register's bytes and how many."""

    vector_bytes: int
    registers: int
    halves: bool = False  # runs a register's operations as two halves (HALF_WIDTH_CORES)

    @staticmethod
    def of(target: Target | None) -> VectorUnit:
        """The vector unit of `target`; None: of this machine."""
        if target is None:
            return _host_unit()
        aarch64 = target.triple.startswith("aarch64")
        registers = 32 if target.vector_bytes >= 64 or aarch64 else 16
        return VectorUnit(target.vector_bytes, registers, target.cpu in HALF_WIDTH_CORES)

    def lanes(self, dtype: str | DataType) -> int:
        """Elements of `dtype` in one vector register."""
        return max(1, self.vector_bytes // max(1, as_dtype(dtype).itemsize))


@functools.cache
def _host_unit() -> VectorUnit:
    """This machine's vector unit, from LLVM's host features as loom.target reads them (that
    package registers the target kinds, whose backends import this module: no import back)."""
    features = llvm.get_host_cpu_features()
    if features.get("avx512f"):
        return VectorUnit(64, 32, llvm.get_host_cpu_name() in HALF_WIDTH_CORES)
    if features.get("avx") or features.get("avx2"):
        return VectorUnit(32, 16)
    return VectorUnit(16, 32 if llvm.get_process_triple().startswith("aarch64") else 16)


def choose_tile(m: int, n: int, k: int, dtype: str | DataType, unit: VectorUnit) -> DenseTile:
    """The tile for an m x n product over k steps: the vectors of a row of the tile divide
    n's vectors when they can (a partial tile's accumulators are masked and stay in memory),
    and the rows divide m when a divisor is close (a partial tile guards every row at every
    step)."""
    lanes = unit.lanes(dtype)
    registers = 32 if unit.registers >= 32 else 16
    k_unroll = next(u for u in (K_UNROLL, 2, 1) if k % u == 0)
    n_vectors = -(-n // lanes)
    if m == 1:
        return DenseTile(1, min(GEMV_VECTORS[registers], n_vectors), lanes, k_unroll)
    most = MAX_VECTORS[registers]
    if n_vectors <= most + 2:
        vectors = n_vectors  # the whole row in one tile
    else:
        vectors = max(d for d in range(1, most + 1) if n_vectors % d == 0)
        if vectors * 2 < most:
            vectors = most  # no good divisor: full tiles and one partial
    budget = ACCUMULATORS[registers]
    rows = max(1, min(m, budget // vectors))
    divisors = [r for r in range(rows, (rows + 1) // 2 - 1, -1) if r > 0 and m % r == 0]
    if divisors:
        rows = divisors[0]
    return DenseTile(rows, vectors, lanes, k_unroll)


__all__ = ["HALF_WIDTH_CORES", "DenseTile", "VectorUnit", "choose_tile"]
