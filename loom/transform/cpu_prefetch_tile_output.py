"""cpu_prefetch_tile_output: a register tile's output lines prefetched for writing one tile
ahead, for the CPU (llvm) backend.

A convolution's or a matrix product's register tile runs its reduction loop into local
accumulators, then its epilogue stores them (with bias, activation, a residual add) into the
output: a few vectors in as many rows or channel planes. When the output is larger than the
L2 cache can keep (resnet18's 800 KB at 56x56 x 64 channels), each of those stores goes to a
line that must first be read for ownership from L3 or memory, and the tile's stores wait for
it with the next tile's reduction stuck behind them. Here the tile loop prefetches for writing,
before its reduction (thousands of cycles of multiply-adds), the lines the next tile's
epilogue will store, as cpu_prefetch_output.py does for a row group's output row. Measured on
Zen 3, one thread, the single convolutions of bench/conv2d.py, runs alternated: resnet18's 3x3
convolution of 64 channels at 56x56 1-4 % faster, its first convolution (7x7/2, a 3.2 MB
output) 4-12 %; the whole of resnet18 0.1-0.8 % (runs shuffled; resnet18 alone has such
tiles among the four models). Prefetching the epilogue's reads of a residual the same way
gained nothing measurable and is not done.

The pass, run at the phase "flatten" (1-d accesses, loops as the schedule made them), finds
each serial loop (the tile loop) whose body is a sequence (under its allocations and lets)
holding a serial loop that stores into local buffers only (the reduction) followed by
statements that store into non-local buffers (the epilogue). It puts at the top of that
sequence a `prefetch_write` of every element the epilogue stores into a non-local buffer of at
least MIN_BUFFER_BYTES at the next iteration of the tile loop (the last iteration at its own,
so that the address stays in the buffer): the epilogue's unrolled loops at each iteration, its
vectorized ones at their first and last lane (their vector's lines), its other loops at their
first. Left alone: tiles whose reductions are short (MIN_TILE_UPDATES), stores that the next
tile makes within a line of this one's (LINE_BYTES: one stream, which the hardware prefetcher
follows) or that do not move with the tile loop, and epilogues that would take more than
MAX_PREFETCHES prefetches. Prefetching changes no result.
"""

from __future__ import annotations

from loom.ir import op
from loom.ir.buffer import Buffer
from loom.ir.expr import IntImm, PrimExpr, Ramp, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.simplify import simplify
from loom.ir.stmt import Allocate, BufferStore, For, ForKind, LetStmt, SeqStmt, Stmt
from loom.ir.structural import structural_equal
from loom.ir.visitor import Mutator, free_vars, substitute
from loom.transform.cpu_prefetch_weights import LINE_BYTES, elements, prefetch, writes_local_only
from loom.transform.pass_infra import Pass, register_pass

MIN_BUFFER_BYTES = 512 * 1024
"""Outputs smaller than this (the L2 cache of Zen 3) are left alone: their lines are mostly in
the L2 cache already (measured on Zen 3: prefetched, mobilenet_v2's 1x1 convolution 144 -> 24
at 56x56, a 301 KB output, was 1-3 % slower; from 1 MB on, only resnet18's first convolution
is left, and the whole model gained nothing)."""


MIN_TILE_UPDATES = 1024
"""A tile whose reductions update its accumulators fewer times than this (vector multiply-adds,
half a cycle each) is left alone: the reorder buffer (256 operations on Zen 3) overlaps its
stores' misses with the next tile's reduction already (measured on Zen 3: prefetched, the 1x1
convolutions 32 -> 64 at 112x112 and 48 -> 96 at 80x80, 256 and 576 updates a tile, were
7-8 % slower; resnet18's 3x3 convolution of 64 channels at 56x56, 4608, 1-4 % faster)."""

MAX_PREFETCHES = 64
"""An epilogue that would take more prefetches than this is left alone."""


def _is_reduction(stmt: Stmt) -> bool:
    """A serial loop whose stores all go to local buffers (a tile's accumulators)."""
    return isinstance(stmt, For) and stmt.kind == ForKind.SERIAL and writes_local_only(stmt)


def _updates(stmt: Stmt) -> int | None:
    """How many stores (a vector store counts once) `stmt` runs, or None if a loop's extent is
    not a constant."""
    if isinstance(stmt, BufferStore):
        return 1
    if isinstance(stmt, SeqStmt):
        counts = [_updates(s) for s in stmt.seq]
        return None if None in counts else sum(counts)
    if isinstance(stmt, For):
        inner = _updates(stmt.body)
        if inner is None or not isinstance(stmt.extent, IntImm):
            return None
        return inner if stmt.kind == ForKind.VECTORIZED else inner * stmt.extent.value
    if isinstance(stmt, (Allocate, LetStmt)):
        return _updates(stmt.body)
    return 0


def _tile_sequence(body: Stmt) -> SeqStmt | None:
    """The sequence under the tile loop's allocations and lets, or None."""
    while isinstance(body, (Allocate, LetStmt)):
        body = body.body
    return body if isinstance(body, SeqStmt) else None


def _with_sequence(body: Stmt, seq: SeqStmt) -> Stmt:
    """`body` with the sequence `_tile_sequence` finds in it replaced by `seq`."""
    if isinstance(body, (Allocate, LetStmt)):
        return body.replace(body=_with_sequence(body.body, seq))
    return seq


def _wanted(store: BufferStore, var: Var) -> bool:
    """Whether the epilogue's `store` is one to prefetch (module docstring)."""
    count = elements(store.buffer)
    return (
        store.buffer.scope != "local"
        and len(store.indices) == 1
        and count is not None
        and count * max(1, store.buffer.dtype.bits // 8) >= MIN_BUFFER_BYTES
        and var in free_vars(store.indices[0])
    )


def _stores(stmt: Stmt, var: Var, at: dict[Var, PrimExpr], found: list) -> None:
    """Append to `found` the (buffer, index) of every wanted store in `stmt` at the loop
    iterations the module docstring says; a store under a let of the epilogue is left alone."""
    if isinstance(stmt, SeqStmt):
        for s in stmt.seq:
            _stores(s, var, at, found)
    elif isinstance(stmt, For):
        if not (isinstance(stmt.min, IntImm) and isinstance(stmt.extent, IntImm)):
            return
        first, extent = stmt.min.value, stmt.extent.value
        if stmt.kind == ForKind.UNROLLED:
            values = range(first, first + extent)
        elif stmt.kind == ForKind.VECTORIZED:
            values = sorted({first, first + extent - 1})
        else:
            values = [first]
        for v in values:
            _stores(stmt.body, var, {**at, stmt.loop_var: IntImm(v, stmt.loop_var.dtype)}, found)
    elif isinstance(stmt, Allocate):
        _stores(stmt.body, var, at, found)
    elif isinstance(stmt, BufferStore) and _wanted(stmt, var):
        found.append((stmt.buffer, substitute(stmt.indices[0], at)))


def _prefetches(loop: For, epilogue: list[Stmt]) -> list[Stmt]:
    """The write prefetches of the next iteration's epilogue stores (module docstring)."""
    var = loop.loop_var
    stores: list[tuple[Buffer, PrimExpr]] = []
    for s in epilogue:
        _stores(s, var, {}, stores)
    chosen: list[tuple[Buffer, PrimExpr]] = []
    for buffer, index in stores:
        index = simplify(index)
        if isinstance(index, Ramp):  # a vector already: its first and last lane
            starts = [index.base, simplify(index.base + (index.lanes - 1) * index.stride)]
        else:
            starts = [index]
        step = simplify(substitute(starts[0], {var: var + 1}) - starts[0])
        itemsize = max(1, buffer.dtype.bits // 8)
        if not isinstance(step, IntImm) or abs(step.value) * itemsize <= LINE_BYTES:
            continue  # a stream the hardware prefetcher follows, or not a stride at all
        for start in starts:
            if not any(b is buffer and structural_equal(start, c) for b, c in chosen):
                chosen.append((buffer, start))
    if len(chosen) > MAX_PREFETCHES:
        return []
    following = op.min_(var + 1, simplify(loop.min + loop.extent - 1))
    prefetches: list[Stmt] = []
    for buffer, start in chosen:
        at = substitute(start, {var: following})
        at = simplify(op.max_(op.min_(at, elements(buffer) - 1), 0))
        prefetches.append(prefetch(buffer, at, write=True))
    return prefetches


class _PrefetchTileOutput(Mutator):
    def visit_For(self, loop: For) -> Stmt:
        new = self.generic_mutate(loop)
        seq = _tile_sequence(new.body) if new.kind == ForKind.SERIAL else None
        if seq is None:
            return new
        reductions = [k for k, s in enumerate(seq.seq) if _is_reduction(s)]
        if not reductions:
            return new
        work = [_updates(seq.seq[k]) for k in reductions]
        if None in work or sum(work) < MIN_TILE_UPDATES:
            return new
        prefetches = _prefetches(new, list(seq.seq[reductions[-1] + 1 :]))
        if not prefetches:
            return new
        return new.replace(body=_with_sequence(new.body, SeqStmt((*prefetches, *seq.seq))))


def prefetch_tile_output(func: PrimFunc) -> PrimFunc:
    """`func` with the write prefetches of the module docstring."""
    body = _PrefetchTileOutput().visit(func.body)
    return func if body is func.body else func.with_body(body)


def _run(mod: IRModule) -> IRModule:
    return mod.map_functions(prefetch_tile_output)


cpu_prefetch_tile_output = register_pass(Pass("cpu_prefetch_tile_output", _run))
