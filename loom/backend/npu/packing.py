"""Operands laid out as the NPU streams them: DIM-column slices of a matrix, one after another.

`compute` streams consecutive scratchpad rows of DIM int8 through a preloaded weight tile, and
`preload` reads DIM consecutive rows; so an operand staged for many computes is kept as
`T[t, r, c] = M[r, t * DIM + c]`: its columns cut into slices of DIM (the last one padded with
zeros), each slice's rows consecutive. A staging stage of this form is a copy of whole DRAM
rows (DIM elements each, or fewer in the padded last slice: its `mvin` zero-fills the rest,
`zero_fill_columns` in loom/backend/npu/padded_copies.py), so the `npu_mvin` pragma on its row
axis moves one slice per instruction.
"""

from __future__ import annotations

from loom import te
from loom.te.schedule import Schedule
from loom.te.tensor import Tensor

from .arch import DIM


def slices(extent: int) -> int:
    """How many DIM-wide slices cover `extent` columns."""
    return -(-extent // DIM)


def column_slices(matrix: Tensor, name: str) -> Tensor:
    """`T[t, r, c] = matrix[r, t * DIM + c]` (0 past the last column): shape
    (slices(cols), rows, DIM)."""
    rows, cols = matrix.shape

    def rule(t, r, c):
        column = t * DIM + c
        if cols % DIM == 0:
            return matrix[r, column]
        return te.if_then_else(column < cols, matrix[r, column], te.const(0, matrix.dtype))

    return te.compute((slices(cols), rows, DIM), rule, name=name)


def npu_rows(s: Schedule, tensor: Tensor, dim: int) -> None:
    """Rows of an NPU buffer are DIM elements apart, also when its tile is narrower (a tensor
    smaller than DIM): pad the stride of dimension `dim` (its rows) to DIM."""
    s[tensor].storage_align(tensor.op.axis[dim], DIM, 0)
