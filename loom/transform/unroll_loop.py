"""unroll_loop: loops marked unrolled become copies of their body, one per iteration.

Afterwards no `For` of kind unrolled is left; each copy has the loop variable replaced by its
constant value.
"""

from __future__ import annotations

from loom.errors import LoomError
from loom.ir.expr import IntImm
from loom.ir.function import PrimFunc
from loom.ir.op import add
from loom.ir.stmt import For, ForKind, Stmt, seq
from loom.ir.visitor import Mutator, substitute
from loom.transform.pass_infra import Pass, register_pass


class _Unroll(Mutator):
    def visit_For(self, loop: For) -> Stmt:
        loop = self.generic_mutate(loop)
        if loop.kind != ForKind.UNROLLED:
            return loop
        if not isinstance(loop.extent, IntImm):
            raise LoomError(
                f"loop {loop.loop_var.name} is marked unrolled but its extent "
                f"{loop.extent} is not a constant"
            )
        return seq(
            *[
                substitute(loop.body, {loop.loop_var: add(loop.min, k)})
                for k in range(loop.extent.value)
            ]
        )


def unroll_func(func: PrimFunc) -> PrimFunc:
    return func.with_body(_Unroll().visit(func.body))


unroll_loop = register_pass(Pass("unroll_loop", lambda mod: mod.map_functions(unroll_func)))
