"""unroll_loop: loops marked unrolled become copies of their body, one per iteration.

Afterwards no `For` of kind unrolled is left; each copy has the loop variable replaced by its
constant value. Unrolled loops inside unrolled loops multiply: a function may hold at most
`MAX_UNROLL` copies of a body (PassContext config "tir.max_unroll" changes the limit), beyond
which the build would take longer than a few seconds (4000 copies of a one-line body build in
about 3.5 s, 20,000 in 17 s); more is a LoomError naming the loop, what it writes, its extent
and the limit.

`pragma(axis, "unroll_explicit", False)` on an unrolled axis (TVM's name) leaves the copies to
the back end instead: the loop stays, marked `UNROLL_FULL` (LLVM's `llvm.loop.unroll.full`, C's
`#pragma GCC unroll`), and the compiler unrolls it completely. That is for loops whose variable
does not need to be a constant in loom's IR (it indexes no register tile, decides no branch):
their copies would only cost loom's passes time (a matmul's reduction steps: a third of its
first build). Its copies count towards the limit as loom's would (the back end would make
them). `unroll_explicit` True, or no pragma, unrolls here.
"""

from __future__ import annotations

from typing import Any

from loom.errors import LoomError
from loom.ir.expr import IntImm
from loom.ir.function import PrimFunc
from loom.ir.op import add
from loom.ir.stmt import UNROLL_FULL, AttrStmt, BufferStore, For, ForKind, Stmt, seq
from loom.ir.visitor import Mutator, post_order_visit, substitute
from loom.transform.pass_infra import Pass, PassContext, register_config, register_pass

UNROLL_EXPLICIT = "pragma_unroll_explicit"

MAX_UNROLL = 1024
"""The default limit on the copies of a body that unrolling makes in one function."""


def _check_limit(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LoomError(f"config 'tir.max_unroll' takes a positive int, got {value!r}")
    return value


register_config(
    "tir.max_unroll",
    _check_limit,
    f"the most copies of a loop body that unrolling may make (default {MAX_UNROLL})",
)


def _written(loop: For) -> str:
    names: dict[str, None] = {}

    def record(n) -> None:
        if isinstance(n, BufferStore):
            names.setdefault(n.buffer.name)

    post_order_visit(loop.body, record)
    return f" (writing {', '.join(names)})" if names else ""


class _Unroll(Mutator):
    def __init__(self, func: PrimFunc, limit: int):
        self.func = func
        self.limit = limit
        self.copies = 1  # copies the unrolled loops around the current statement make

    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        if attr.key != UNROLL_EXPLICIT:
            return self.generic_mutate(attr)
        around: list[AttrStmt] = []  # the loop's other pragmas, between this one and the loop
        loop = attr.body
        while type(loop) is AttrStmt and loop.node is attr.node:
            around.append(loop)
            loop = loop.body
        if type(loop) is not For or loop.loop_var is not attr.node:
            return self.visit(attr.body)  # lowering dropped the loop (one iteration)
        if loop.kind != ForKind.UNROLLED:
            raise LoomError(
                f"function {self.func.name}: pragma unroll_explicit on loop "
                f"{loop.loop_var.name}, which is {loop.kind.value}, not unrolled: "
                "it applies to an axis given to unroll()"
            )
        if type(attr.value) is not IntImm:
            raise LoomError(
                f"function {self.func.name}: pragma unroll_explicit on loop {loop.loop_var.name} "
                f"takes True or False, got {attr.value}"
            )
        result = self.visit_For(loop) if attr.value.value else self._keep(loop)
        for pragma in reversed(around):
            result = pragma.replace(body=result)
        return result

    def _keep(self, loop: For) -> Stmt:
        """The unrolled `loop` as a serial loop the back end unrolls completely (UNROLL_FULL);
        its copies count towards the limit as loom's would."""
        saved, self.copies = self.copies, self._copies(loop)
        try:
            loop = self.generic_mutate(loop)
        finally:
            self.copies = saved
        return loop.replace(
            kind=ForKind.SERIAL, annotations=(*loop.annotations, (UNROLL_FULL, True))
        )

    def _copies(self, loop: For) -> int:
        """The copies of its body the unrolled `loop` makes, with the unrolled loops around it;
        a LoomError if its extent is not a constant or they are more than the limit."""
        if not isinstance(loop.extent, IntImm):
            raise LoomError(
                f"loop {loop.loop_var.name} is marked unrolled but its extent "
                f"{loop.extent} is not a constant"
            )
        total = self.copies * loop.extent.value
        if total > self.limit:
            around = f", inside unrolled loops of {self.copies} copies," if self.copies > 1 else ""
            raise LoomError(
                f"function {self.func.name}: unrolling loop {loop.loop_var.name}{_written(loop)} "
                f"of extent {loop.extent.value}{around} makes {total} copies of its body, more "
                f"than the limit of {self.limit} (PassContext config 'tir.max_unroll'; "
                "docs/schedules.md): unroll a smaller split of the loop"
            )
        return total

    def visit_For(self, loop: For) -> Stmt:
        if loop.kind != ForKind.UNROLLED:
            return self.generic_mutate(loop)
        saved, self.copies = self.copies, self._copies(loop)
        try:
            loop = self.generic_mutate(loop)
        finally:
            self.copies = saved
        return seq(
            *[
                substitute(loop.body, {loop.loop_var: add(loop.min, k)})
                for k in range(loop.extent.value)
            ]
        )


def unroll_func(func: PrimFunc, limit: int = MAX_UNROLL) -> PrimFunc:
    return func.with_body(_Unroll(func, limit).visit(func.body))


def _run(mod):
    limit = PassContext.current().get_config("tir.max_unroll", MAX_UNROLL)
    return mod.map_functions(lambda f: unroll_func(f, limit))


unroll_loop = register_pass(Pass("unroll_loop", _run))
