"""Schedules for CPUs: a packed, register-blocked matmul and a streaming elementwise kernel.

Both return `(schedule, args)` ready for `loom.build`. The tile sizes are parameters; the
defaults suit x86-64 with AVX2 or AVX-512 and AArch64 NEON (the vector loops are split to the
target's vector width by LLVM).
"""

from __future__ import annotations

from collections.abc import Callable

from loom import te
from loom.ir.expr import PrimExpr
from loom.ops.nn import elementwise
from loom.te.schedule import Schedule
from loom.te.tensor import Tensor


def matmul(
    m: int,
    n: int,
    k: int,
    dtype: str = "float32",
    *,
    rows: int = 8,
    cols: int = 32,
    k_unroll: int = 4,
    parallel: bool = True,
) -> tuple[Schedule, list[Tensor]]:
    """C = A @ B with B packed into panels of `cols` columns, and a micro-kernel computing a
    `rows` x `cols` tile of C in registers.

    - packedB[p, k, c] = B[k, p*cols + c]: each panel is contiguous, read with vector loads;
    - C is cached in a `local` (stack) tile of rows x cols, computed at the tile loop; the rows
      and the unrolled reduction steps are unrolled and the columns vectorized, so every access
      to the tile has a constant index and LLVM keeps the whole tile in vector registers;
    - panels run in parallel; the tile is copied out with vector stores.
    """
    A = te.placeholder((m, k), dtype, name="A")
    B = te.placeholder((k, n), dtype, name="B")
    panels = -(-n // cols)
    packed = te.compute(
        (panels, k, cols),
        lambda p, r, c: (
            te.if_then_else(p * cols + c < n, B[r, p * cols + c], te.const(0, dtype))
            if n % cols
            else B[r, p * cols + c]
        ),
        name="packedB",
    )
    r = te.reduce_axis(k, name="k")
    C = te.compute(
        (m, n), lambda i, j: te.sum(A[i, r] * packed[j // cols, r, j % cols], axis=r), name="C"
    )
    s = te.create_schedule(C.op)
    tile = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], rows, cols)
    s[C].reorder(jo, io, ii, ji)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    s[tile].compute_at(s[C], io)
    ti, tj = s[tile].op.axis
    (tk,) = s[tile].op.reduce_axis
    ko, ki = s[tile].split(tk, factor=k_unroll)
    s[tile].reorder(ko, ki, ti, tj)
    s[tile].unroll(ki)
    s[tile].unroll(ti)
    s[tile].vectorize(tj)
    p, _, c = s[packed].op.axis
    s[packed].vectorize(c)
    if parallel:
        s[C].parallel(jo)
        s[packed].parallel(p)
    return s, [A, B, C]


def elementwise_kernel(
    fn: Callable[..., PrimExpr],
    shape: tuple[int, ...],
    n_inputs: int,
    dtype: str = "float32",
    *,
    chunk: int = 1 << 16,
    vector: int = 16,
    parallel: bool = True,
) -> tuple[Schedule, list[Tensor]]:
    """out = fn(in_0, ..., in_{n-1}) element by element, streaming at memory speed: the flattened
    iteration space is cut into `chunk`-element blocks (run in parallel), each block into
    `vector`-lane vector operations."""
    inputs = [te.placeholder(shape, dtype, name=f"X{k}") for k in range(n_inputs)]
    out = elementwise(fn, *inputs, name="Y")
    s = te.create_schedule(out.op)
    flat = s[out].fuse(*out.op.axis) if len(shape) > 1 else out.op.axis[0]
    outer, inner = s[out].split(flat, factor=chunk)
    _, lanes = s[out].split(inner, factor=vector)
    s[out].vectorize(lanes)
    if parallel:
        s[out].parallel(outer)
    return s, [*inputs, out]
