"""The NPU's tensor intrinsics: an int8 matrix product accumulated in int32, with an optional
bias that initializes the accumulator (docs/npu.md: preload, compute).

- `gemm()`: DIM x DIM x DIM, one weight tile and DIM rows of A;
- `gemm(rows=R)` (streaming, weight-stationary): R x DIM x DIM, one preload of a DIM x DIM
  weight tile and one compute streaming up to R rows of A through it into R accumulator rows
  (R <= ACC_ROWS; the rows of A are consecutive scratchpad rows). `GEMM_STREAM*` take
  R = ACC_ROWS, so a region of any height up to the accumulator's matches them.

A region's rows must be whole NPU rows (DIM elements apart); a tile cut short at the edge of a
tensor becomes shorter counts (rows, columns, reduction) of the same instructions."""

from __future__ import annotations

from loom import te
from loom.errors import LoomError
from loom.ir import op
from loom.ir.expr import IntImm, PrimExpr
from loom.ir.stmt import NOP, AssertStmt, Stmt, seq
from loom.te.tensorize import Region, TensorIntrin, TensorizeCall, decl_tensor_intrin

from .arch import ACC_ROWS, DIM, instruction_call, row_address


def instruction(name: str, *args) -> Stmt:
    """Issue an NPU instruction; a non-zero status fails with the simulator's last error."""
    return AssertStmt(op.equal(instruction_call(name, *args), 0), None, NOP)


def _rows(region: Region, axis: str, what: str) -> None:
    """The row axis of an operand must step by one NPU row."""
    if region.strides.get(axis) != DIM:
        raise LoomError(
            f"npu gemm: {what} ({region.buffer.name}) must have its rows {DIM} "
            f"elements apart along {axis}, got {region.strides.get(axis)}; use a "
            f"tile buffer of {DIM} columns"
        )


def _lower(call: TensorizeCall) -> dict[str, Stmt]:
    a, b, c = call.inputs["a"], call.inputs["b"], call.output
    _rows(a, "i", "A")
    _rows(b, "k", "B")
    _rows(c, "i", "C")
    ni, nj, nk = (call.extents[n] for n in ("i", "j", "k"))
    a_row = row_address(a.buffer, a.offset, "npu gemm A")
    b_row = row_address(b.buffer, b.offset, "npu gemm B")
    c_row = row_address(c.buffer, c.offset, "npu gemm C")
    update = seq(
        instruction("npu_preload", b_row, nk, nj, c_row, ni, nj, 1),
        instruction("npu_compute", a_row, ni, nk),
    )
    if "bias" in call.inputs:
        bias = call.inputs["bias"]
        reset = seq(
            instruction("npu_config_ld", IntImm(0)),  # every row gets the same bias
            instruction("npu_mvin", _address(bias), c_row, ni, nj),
        )
    else:  # a product with no weights written over the tile: zeros. The reset runs before
        # the operands are staged, so it names scratchpad row 0, which always exists.
        reset = seq(
            instruction("npu_preload", IntImm(0), IntImm(0), nj, c_row, ni, nj, 0),
            instruction("npu_compute", IntImm(0), ni, IntImm(0)),
        )
    return {"reset": reset, "update": update}


def _address(region: Region) -> PrimExpr:
    return op.call_intrin("handle", "address_of", region.buffer.load([region.offset]))


def gemm(bias: bool = False, rows: int = DIM) -> TensorIntrin:
    """C[i, j] = (bias[j] +) sum_k int32(A[i, k]) * int32(B[k, j]) over rows x DIM x DIM."""
    if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= ACC_ROWS:
        raise LoomError(f"npu gemm: rows must be an int in [1, {ACC_ROWS}], got {rows!r}")
    a = te.placeholder((rows, DIM), "int8", name="a")
    b = te.placeholder((DIM, DIM), "int8", name="b")
    k = te.reduce_axis(DIM, name="k")
    if bias:
        bias_t = te.placeholder((DIM,), "int32", name="bias")

        def rule(i, j):
            return te.sum(a[i, k].astype("int32") * b[k, j].astype("int32"), axis=k, init=bias_t[j])
    else:

        def rule(i, j):
            return te.sum(a[i, k].astype("int32") * b[k, j].astype("int32"), axis=k)

    c = te.compute((rows, DIM), rule, name="c")
    name = "npu_gemm" + ("_stream" if rows != DIM else "") + ("_bias" if bias else "")
    return decl_tensor_intrin(c, _lower, name=name)


GEMM = gemm(bias=False)
GEMM_BIAS = gemm(bias=True)
GEMM_STREAM = gemm(bias=False, rows=ACC_ROWS)
GEMM_STREAM_BIAS = gemm(bias=True, rows=ACC_ROWS)
