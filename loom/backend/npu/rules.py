"""The NPU's pragma rules: copy loops between DRAM and its memories become instructions.

- `npu_mvin`: DRAM -> scratchpad (int8) or accumulator (int32): `config_ld(stride)` + `mvin`;
- `npu_mvout`: accumulator -> DRAM through the requantization `mvout` performs
  (`requantize(...)` in the compute rule): `config_st(stride, multiplier, shift, relu,
  rounding)` + `mvout`.
Rows of the NPU side must be consecutive rows of at most DIM elements; tiles at the edge of a
tensor (guarded loops) become shorter transfers.
"""

from __future__ import annotations

from loom import memory
from loom.errors import LoomError
from loom.ir import op
from loom.ir.expr import Call, IntImm, PrimExpr
from loom.memory.pragma import PragmaRule
from loom.transform.lower_pragma import CopyNest

from . import simulator as npu_sim
from .arch import ACC, DIM, SPAD, instruction_call, row_address
from .requant import match_requantize


def _host_address(nest: CopyNest, buffer, offset) -> PrimExpr:
    if memory.get(buffer.scope).address_space != "host":
        raise LoomError(
            f"the DRAM side {buffer.name} of an NPU transfer is in scope "
            f"{buffer.scope}, not host memory"
        )
    return op.call_intrin("handle", "address_of", buffer.load([offset]))


def _shape(nest: CopyNest, npu_side: str, what: str) -> tuple[PrimExpr, PrimExpr, int]:
    """(rows, columns, DRAM row stride in elements) of a transfer whose NPU side has
    consecutive rows of DIM elements."""
    dims = list(nest.dims)
    if not dims:
        dims = [(IntImm(1), 1, 1)]
    if len(dims) == 1:
        n, ss, ds = dims[0]
        if ss == 1 and ds == 1:
            if not isinstance(n, IntImm) or n.value <= DIM:
                return IntImm(1), n, 0
            if n.value % DIM:
                raise LoomError(
                    f"{what}: {n.value} contiguous elements do not fill whole {DIM}-element rows"
                )
            return IntImm(n.value // DIM), IntImm(DIM), DIM
        dims = [(n, ss, ds), (IntImm(1), 1, 1)]
    (rows, s_rows, d_rows), (cols, s_cols, d_cols) = dims
    npu_stride = d_rows if npu_side == "dst" else s_rows
    dram_stride = s_rows if npu_side == "dst" else d_rows
    npu_col, dram_col = (d_cols, s_cols) if npu_side == "dst" else (s_cols, d_cols)
    if npu_col != 1 or dram_col != 1:
        raise LoomError(f"{what}: the columns of a transfer must be contiguous on both sides")
    if npu_stride != DIM:
        raise LoomError(
            f"{what}: the NPU side's rows must be {DIM} elements apart, got {npu_stride}"
        )
    if isinstance(cols, IntImm) and cols.value > DIM:
        raise LoomError(f"{what}: a row of {cols.value} elements is wider than the NPU's {DIM}")
    return rows, cols, dram_stride


def _mvin(nest: CopyNest) -> list[Call]:
    if nest.dst.scope not in (SPAD, ACC):
        raise LoomError(
            f"npu_mvin writes {nest.dst.name} in scope {nest.dst.scope}; its "
            f"destination must be in {SPAD} or {ACC}"
        )
    rows, cols, stride = _shape(nest, "dst", "npu_mvin")
    return [
        instruction_call("npu_config_ld", stride * nest.src.dtype.itemsize),
        instruction_call(
            "npu_mvin",
            _host_address(nest, nest.src, nest.src_offset),
            row_address(nest.dst, nest.dst_offset, "npu_mvin"),
            rows,
            cols,
        ),
    ]


def _mvout(nest: CopyNest) -> list[Call]:
    if nest.src.scope != ACC:
        raise LoomError(
            f"npu_mvout reads {nest.src.name} in scope {nest.src.scope}; its "
            f"source must be the accumulator {ACC}"
        )
    if str(nest.dst.dtype) != "int8":
        raise LoomError(f"npu_mvout writes int8, but {nest.dst.name} is {nest.dst.dtype}")
    rows, cols, stride = _shape(nest, "src", "npu_mvout")
    p = nest.params
    rounding = npu_sim.rounding_code(p["rounding"], "npu_mvout")
    return [
        instruction_call(
            "npu_config_st", stride, p["multiplier"], p["shift"], int(p["relu"]), rounding
        ),
        instruction_call(
            "npu_mvout",
            _host_address(nest, nest.dst, nest.dst_offset),
            row_address(nest.src, nest.src_offset, "npu_mvout"),
            rows,
            cols,
        ),
    ]


MVIN = PragmaRule(
    "npu_mvin", "npu_mvin", make_calls=_mvin, doc="DRAM rows into the NPU scratchpad or accumulator"
)
MVOUT = PragmaRule(
    "npu_mvout",
    "npu_mvout",
    convert=match_requantize,
    make_calls=_mvout,
    doc="accumulator rows, requantized to int8, into DRAM",
)
