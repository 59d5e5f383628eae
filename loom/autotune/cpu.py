"""The CPU strategies with their knobs declared: `matmul` is
`loom.backend.cpu.strategies.matmul` with its register tile (rows, cols) and the reduction
steps unrolled (k_unroll) as knobs, the columns a multiple of the target's vector lanes."""

from __future__ import annotations

from loom.autotune.knobs import Knob, tunable
from loom.backend.cpu import strategies
from loom.backend.cpu.dense_tiles import VectorUnit
from loom.target import Target


def _cols(target: Target) -> tuple[int, ...]:
    lanes = VectorUnit.of(target).lanes("float32")
    return tuple(lanes * v for v in (1, 2, 3, 4))


matmul = tunable(
    "cpu.matmul",
    strategies.matmul,
    knobs=[
        Knob("rows", (1, 2, 4, 6, 8)),
        Knob("cols", _cols),
        Knob("k_unroll", (1, 2, 4, 8)),
    ],
)
