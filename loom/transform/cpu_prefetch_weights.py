"""cpu_prefetch_weights: software prefetch of a model's weights where the hardware prefetcher
does not follow them, for the CPU (llvm) backend.

A model's weights are read from memory once per run (they do not stay in the caches between
runs: 14 MB for mobilenet_v2). A convolution tile that broadcasts its weights one element per
output channel and step (conv_flat.py's 1x1 convolutions: 4 channels of a block read 16 bytes
per reduction step) reads a new cache line only every few steps of its reduction loop, a
stream slow enough, among the dozens of input lines each step loads, that the hardware
prefetcher of Zen 4 does not follow it: each of its lines was a miss paid in full (measured in
a run of the whole model: mobilenet_v2's 1x1 convolutions 576 -> 96 at 14x14 lost a third of
their time to their 221 KB of weights, 0.07 ms each).

A tile that loads its weights as vectors (conv_channels.py: 32 output channels, 128 bytes a
step) reads a block of them (40-123 KB for mobilenet_v2's 1x1 convolutions at 7x7) once
from memory, in its first row tile, faster than memory delivers, and then from the caches
for its other row tiles, which wait for nothing (measured in a run of the whole model:
prefetched as below, its 960 -> 320 convolution took 0.33 ms instead of 0.44, and the whole
model 7.6 ms instead of 8.0 with both kinds of prefetch).

This pass, run at the phase "flatten" (1-d accesses, loops as the schedule made them), gives
each innermost serial loop that reads the weights into a register tile (a reduction loop: its
body writes local buffers only) a `prefetch` at the top of its body:

- a slow stream (its index moves forward by at most MAX_STEP_BYTES per iteration): of the
  element the loop will read PREFETCH_BYTES later;
- a fast stream read in blocks (the nearest loop around the reduction loop whose variable
  the index reads, the block loop, moves it by at least a whole reduction's elements, and the
  loops between them, the tile loops, do not move it): of the next block, spread evenly over
  the current block's iterations (the tile loops' and the reduction loop's), a line
  (LINE_BYTES) per prefetch and at most MAX_LINES_PER_ITERATION prefetches per iteration, so
  that the next block streams in while the current one computes from the caches.

The weights are a kernel's parameter that every call of `main` (loom/graph/lower.py,
call_func) passes a constant of the model (CONSTANTS_ATTR), of at least MIN_BUFFER_BYTES.
Loops inside the body (unrolled or vectorized: the tile's channels and lanes) are taken at
their first iteration, and the address is clamped into the buffer. Activations, which the
previous kernel just wrote, mostly come from the caches, and are left alone (measured:
prefetching a matrix product's input rows cost magika's first one 3 %, a Resize's reads
quadrupled ppocrv4_det's Resize + Concat kernel), as are fast streams without blocks (a
prefetch 1 KB ahead of a vector per step cost 2-6 %). Prefetching changes no result.
"""

from __future__ import annotations

import math

from loom.ir import op
from loom.ir.buffer import Buffer
from loom.ir.expr import BufferLoad, Call, CallKind, IntImm, PrimExpr, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.simplify import simplify
from loom.ir.stmt import BufferStore, Evaluate, For, ForKind, SeqStmt, Stmt
from loom.ir.visitor import Mutator, free_vars, post_order_visit, substitute
from loom.memory.program import CONSTANTS_ATTR
from loom.transform.pass_infra import Pass, register_pass

PREFETCH_BYTES = 1024
"""How far ahead of the loop's reads the prefetch reaches: 16 cache lines, which a loop that
reads a line every few steps of a dozen multiply-adds needs longer than a miss to memory takes
to arrive."""

MAX_STEP_BYTES = 32
"""A stream advancing at most this much per iteration (half a cache line) is prefetched."""

LINE_BYTES = 64
"""A cache line: what one prefetch brings in."""

MAX_LINES_PER_ITERATION = 4
"""The most prefetches (lines) of the next block an iteration of the current one makes; a
block that needs more (a few row tiles of large channel counts: resnet18's stem, its 37 KB of
weights read by 14 lines an iteration) is left alone. resnet18's 3x3 convolutions at 7x7
(512 channels, 32 of them a block: 590 KB of weights a block for 7 row tiles) need 3 lines an
iteration; prefetched so on the Intel Xeon of issue 16 (AVX-512, 2 MB L2), the whole model
ran 10 % faster (21.6 -> 19.5 ms, one thread; 5.6 % at two), each of those convolutions 17 %
alone (1.23 -> 1.05 ms). Only one line an iteration had been prefetched before; a block read
faster was left alone, since prefetching part of it (a line an iteration, skipping lines)
had cost resnet18's 3x3 convolutions 1-2 %."""

MIN_BUFFER_BYTES = 32 * 1024
"""Smaller buffers are left alone: read from memory, they cost little."""


def index_step(index: PrimExpr, var: Var) -> int | None:
    """How many elements `index` (linear in `var`) moves per iteration, or None."""
    one = simplify(substitute(index, {var: IntImm(1)}) - substitute(index, {var: IntImm(0)}))
    return one.value if isinstance(one, IntImm) else None


def elements(buffer: Buffer) -> int | None:
    """The elements of `buffer`, or None if its shape is not constant."""
    if not all(isinstance(d, IntImm) for d in buffer.shape):
        return None
    return math.prod(d.value for d in buffer.shape)


def prefetch(buffer: Buffer, index: PrimExpr, write: bool = False) -> Stmt:
    """A software prefetch of `buffer[index]`'s cache line, for reading or for writing (the
    intrinsics `prefetch` and `prefetch_write`)."""
    address = op.call_intrin("handle", "address_of", buffer[index])
    return Evaluate(op.call_intrin("int32", "prefetch_write" if write else "prefetch", address))


def _has_serial_loop(stmt: Stmt) -> bool:
    found = []
    post_order_visit(
        stmt, lambda n: found.append(n) if isinstance(n, For) and n.kind == ForKind.SERIAL else None
    )
    return bool(found)


def _from_zero(loop: For) -> bool:
    return isinstance(loop.min, IntImm) and loop.min.value == 0


def writes_local_only(stmt: Stmt) -> bool:
    """Whether every store in `stmt` is to a local buffer (a tile's accumulators)."""
    scopes = set()
    post_order_visit(
        stmt, lambda n: scopes.add(n.buffer.scope) if isinstance(n, BufferStore) else None
    )
    return bool(scopes) and scopes <= {"local"}


class _Prefetch(Mutator):
    """Prefetches at the top of the innermost serial reduction loops reading one of
    `readonly` (buffers' data variables: the weights)."""

    def __init__(self, readonly: set[Var]):
        self.readonly = readonly
        self.around: list[For] = []  # the loops around the current one, outermost first

    def visit_For(self, loop: For) -> Stmt:
        if loop.kind != ForKind.SERIAL or _has_serial_loop(loop.body):
            self.around.append(loop)
            try:
                return self.generic_mutate(loop)
            finally:
                self.around.pop()
        if not writes_local_only(loop.body):
            return loop
        loads: list[BufferLoad] = []
        post_order_visit(
            loop.body,
            lambda n: (
                loads.append(n)
                if isinstance(n, BufferLoad) and n.buffer.data in self.readonly
                else None
            ),
        )
        inner: dict[Var, PrimExpr] = {}
        post_order_visit(
            loop.body, lambda n: inner.setdefault(n.loop_var, n.min) if isinstance(n, For) else None
        )
        prefetches, seen = [], set()
        for load in loads:
            found = self._prefetches(load, loop, inner)
            if found and load.buffer.name not in seen:
                seen.add(load.buffer.name)
                prefetches += found
        if not prefetches:
            return loop
        return loop.replace(body=SeqStmt((*prefetches, loop.body)))

    def _prefetches(self, load: BufferLoad, loop: For, inner: dict) -> list[Stmt]:
        count = elements(load.buffer)
        if len(load.indices) != 1 or load.indices[0].dtype.lanes != 1 or count is None:
            return []
        itemsize = load.buffer.dtype.bits // 8
        if count * itemsize < MIN_BUFFER_BYTES:
            return []
        first = {v: m for v, m in inner.items() if v in free_vars(load.indices[0])}
        index = substitute(load.indices[0], first)
        var = loop.loop_var
        step = index_step(index, var)
        if step is None or step <= 0:
            return []
        if step * itemsize <= MAX_STEP_BYTES:
            aheads = [substitute(index, {var: var + max(1, PREFETCH_BYTES // (step * itemsize))})]
        else:
            aheads = self._next_block(index, loop, step, itemsize)
        return [prefetch(load.buffer, op.max_(op.min_(simplify(a), count - 1), 0)) for a in aheads]

    def _next_block(self, index: PrimExpr, loop: For, step: int, itemsize: int) -> list[PrimExpr]:
        """The elements of the next block that iteration (tile loops, reduction loop) of the
        current block prefetches, a line apart: from the next block's start, plus the
        iteration's position among the block's iterations times the block's elements per
        iteration, as many lines as those elements span; none without a block loop (see
        above) or with more than MAX_LINES_PER_ITERATION lines."""
        if not isinstance(loop.extent, IntImm) or not _from_zero(loop):
            return []
        used = free_vars(index)
        tiles: list[For] = []  # between the block loop and the reduction loop, innermost first
        for around in reversed(self.around):
            if around.loop_var in used:
                block = index_step(index, around.loop_var)
                break
            if not (isinstance(around.extent, IntImm) and _from_zero(around)):
                return []
            tiles.append(around)
        else:
            return []
        reduction = loop.extent.value
        if block is None or block < reduction * step:
            return []
        iterations = reduction * math.prod(t.extent.value for t in tiles)
        per_iteration = -(-block // iterations)  # elements, rounded up (see below)
        if iterations * per_iteration >= 2**31:
            return []  # the offset would overflow int32
        lines = -(-per_iteration * itemsize // LINE_BYTES)
        if lines > MAX_LINES_PER_ITERATION:
            return []  # so many prefetches would cost more than they save
        position = IntImm(0)
        for t in reversed(tiles):  # outermost first
            position = position * t.extent.value + t.loop_var
        position = position * reduction + loop.loop_var
        start = {t.loop_var: IntImm(0) for t in tiles}
        start.update({around.loop_var: around.loop_var + 1, loop.loop_var: IntImm(0)})
        # whole elements per iteration, rounded up (no division in the loop: its last
        # iterations reach a little into the block after the next one)
        first = substitute(index, start) + position * per_iteration
        line = LINE_BYTES // itemsize
        return [first + k * line for k in range(lines)]


def prefetch_func(func: PrimFunc, weights: set[int]) -> PrimFunc:
    """`func` with prefetches of its parameters at the positions `weights` (buffers it does not
    write)."""
    written: set[Var] = set()
    post_order_visit(
        func.body, lambda n: written.add(n.buffer.data) if isinstance(n, BufferStore) else None
    )
    readonly = {
        p.data for k, p in enumerate(func.params) if k in weights and not isinstance(p, Var)
    }
    if not readonly - written:
        return func
    return func.with_body(_Prefetch(readonly - written).visit(func.body))


def weight_parameters(mod: IRModule) -> dict[str, set[int]]:
    """Per function of `mod`, the positions of its parameters that every call passes a
    constant of the model (a caller's CONSTANTS_ATTR buffer)."""
    constant, other = {}, {}
    for func in mod.functions:
        data = {buffer.data for buffer, _ in func.attr(CONSTANTS_ATTR, ())}

        def record(n, data=data) -> None:
            if not (isinstance(n, Call) and n.kind == CallKind.FUNCTION):
                return
            for k, arg in enumerate(n.args):
                (constant if arg in data else other).setdefault(n.op, set()).add(k)

        post_order_visit(func.body, record)
    return {name: found - other.get(name, set()) for name, found in constant.items()}


def _run(mod: IRModule) -> IRModule:
    weights = weight_parameters(mod)
    return mod.map_functions(lambda f: prefetch_func(f, weights.get(f.name, set())))


cpu_prefetch_weights = register_pass(Pass("cpu_prefetch_weights", _run))
