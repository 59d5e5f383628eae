"""The NPU backend's pass `zero_fill_columns` (phase "schedule"): a staging copy whose row ends
in zero padding becomes a copy of the shorter row, which `mvin` zero-fills.

A stage `T[.., c] = if_then_else(c < bound, src[...], 0)` under the `npu_mvin` pragma (an
operand's last DIM-column slice, loom/backend/npu/packing.py) reads past `src` where it pads;
`mvin` writes zeros to the columns `cols .. DIM - 1` of each row (docs/npu.md), so the copy
of the columns below `bound` computes the same scratchpad rows: the store becomes
`if (c < bound) T[.., c] = src[...]`, which lower_pragmas turns into an `mvin` of fewer
columns. Only a guard on the innermost loop, indexing the last dimension of T with stride 1,
and the padding value 0 qualify (anything else is left to lower_pragmas, which refuses it).
"""

from __future__ import annotations

from loom.ir import op
from loom.ir.expr import LT, Call, IntImm, PrimExpr
from loom.ir.function import IRModule
from loom.ir.simplify import simplify
from loom.ir.stmt import AttrStmt, BufferStore, For, IfThenElse, Stmt
from loom.ir.visitor import Mutator, free_vars, substitute
from loom.transform.pass_infra import module_pass

PRAGMA = "pragma_npu_mvin"


def _padded(value: PrimExpr) -> tuple[PrimExpr, PrimExpr] | None:
    """(condition, value) of `if_then_else(condition, value, 0)`."""
    if isinstance(value, Call) and value.op == "if_then_else":
        cond, then, other = value.args
        if isinstance(other, IntImm) and other.value == 0:
            return cond, then
    return None


def _bounds_column(cond: PrimExpr, column: For, index: PrimExpr) -> bool:
    """Whether every conjunct of `cond` is `e < b` with `e` varying with the column loop only
    (stride 1), and `index` (the last index of the store) steps by 1 with that loop."""
    v = column.loop_var

    def step(e: PrimExpr) -> PrimExpr:
        return simplify(substitute(e, {v: v + 1}) - e)

    if step(index) != IntImm(1, index.dtype):
        return False
    for c in op.conjuncts(cond):
        if not isinstance(c, LT) or v not in free_vars(c.a) or v in free_vars(c.b):
            return False
        if step(c.a) != IntImm(1, c.a.dtype):
            return False
    return True


class _ZeroFill(Mutator):
    def visit_AttrStmt(self, s: AttrStmt) -> Stmt:
        s = self.generic_mutate(s)
        if s.key != PRAGMA:
            return s
        loops: list[For] = []
        stmt = s.body
        while isinstance(stmt, For | AttrStmt | IfThenElse) and not (
            isinstance(stmt, IfThenElse) and stmt.else_case is not None
        ):
            if isinstance(stmt, For):
                loops.append(stmt)
            stmt = stmt.then_case if isinstance(stmt, IfThenElse) else stmt.body
        if not loops or not isinstance(stmt, BufferStore):
            return s
        padded = _padded(stmt.value)
        if padded is None or not _bounds_column(padded[0], loops[-1], stmt.indices[-1]):
            return s
        guarded = IfThenElse(padded[0], stmt.replace(value=padded[1]))
        return s.replace(body=_replace(s.body, stmt, guarded))


def _replace(root: Stmt, old: Stmt, new: Stmt) -> Stmt:
    if root is old:
        return new
    if isinstance(root, IfThenElse):
        return root.replace(then_case=_replace(root.then_case, old, new))
    return root.replace(body=_replace(root.body, old, new))


@module_pass(name="npu_zero_fill_columns")
def zero_fill_columns(mod: IRModule) -> IRModule:
    return mod.map_functions(lambda f: f.with_body(_ZeroFill().visit(f.body)))
