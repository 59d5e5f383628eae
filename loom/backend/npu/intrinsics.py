"""The NPU's tensor intrinsic: a DIM x DIM x DIM int8 matrix product accumulated in int32,
with an optional bias that initializes the accumulator (docs/npu.md: preload, compute)."""

from __future__ import annotations

from loom import te
from loom.errors import LoomError
from loom.ir import op
from loom.ir.expr import IntImm, PrimExpr
from loom.ir.stmt import NOP, AssertStmt, Stmt, seq
from loom.te.tensorize import Region, TensorIntrin, TensorizeCall, decl_tensor_intrin

from .arch import DIM, instruction_call, row_address


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


def gemm(bias: bool = False) -> TensorIntrin:
    """C[i, j] = (bias[j] +) sum_k int32(A[i, k]) * int32(B[k, j]) over DIM x DIM x DIM."""
    a = te.placeholder((DIM, DIM), "int8", name="a")
    b = te.placeholder((DIM, DIM), "int8", name="b")
    k = te.reduce_axis(DIM, name="k")
    if bias:
        bias_t = te.placeholder((DIM,), "int32", name="bias")

        def rule(i, j):
            return te.sum(a[i, k].astype("int32") * b[k, j].astype("int32"), axis=k, init=bias_t[j])
    else:

        def rule(i, j):
            return te.sum(a[i, k].astype("int32") * b[k, j].astype("int32"), axis=k)

    c = te.compute((DIM, DIM), rule, name="c")
    return decl_tensor_intrin(c, _lower, name="npu_gemm_bias" if bias else "npu_gemm")


GEMM = gemm(bias=False)
GEMM_BIAS = gemm(bias=True)
