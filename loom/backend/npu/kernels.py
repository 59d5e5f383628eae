"""What every NPU kernel is wrapped in, and what it may not contain.

There is one NPU and its state (configuration, pending preload, memories) belongs to the
instruction sequence using it: a kernel owns the NPU from `npu_acquire` to `npu_release` (on
every exit path), and ends with `npu_fence` so its results are in DRAM when it returns. A
parallel loop issuing instructions would interleave sequences, so it is a build error.
"""

from __future__ import annotations

from loom.backend.base import KERNEL_ATTR
from loom.errors import LoomError
from loom.ir.expr import Call
from loom.ir.function import IRModule, PrimFunc
from loom.ir.stmt import DeferStmt, Evaluate, For, ForKind, seq
from loom.ir.visitor import post_order_visit
from loom.transform.lower_parallel import PARALLEL_LOOP_ATTR, PARALLEL_TASK_ATTR
from loom.transform.pass_infra import module_pass

from .arch import instruction_call
from .intrinsics import instruction


def owned(kernel: PrimFunc) -> PrimFunc:
    """The kernel holding the NPU while its instructions run, fenced before it returns."""
    release = Evaluate(instruction_call("npu_release"))
    body = seq(kernel.body, instruction("npu_fence"))
    return kernel.with_body(seq(instruction("npu_acquire"), DeferStmt(release, body)))


def _issues_instructions(stmt) -> bool:
    found = []
    post_order_visit(
        stmt,
        lambda n: (
            found.append(n)
            if isinstance(n, Call) and n.kind == "extern" and n.op.startswith("npu_")
            else None
        ),
    )
    return bool(found)


@module_pass(name="npu_no_parallel_instructions")
def no_parallel_instructions(mod: IRModule) -> IRModule:
    def refuse(function: str, loop: str) -> LoomError:
        return LoomError(
            f"function {function}: parallel loop {loop} issues NPU instructions; there is one "
            "NPU, so its instruction sequences cannot run in parallel (make the loop serial)"
        )

    for func in mod:
        if func.attr(KERNEL_ATTR) is None:
            continue
        # a parallel loop of a kernel, or the task lower_parallel made of one
        if func.attr(PARALLEL_TASK_ATTR) is not None and _issues_instructions(func.body):
            raise refuse(func.attr(PARALLEL_TASK_ATTR), func.attr(PARALLEL_LOOP_ATTR))

        def check(n, func=func) -> None:
            if isinstance(n, For) and n.kind == ForKind.PARALLEL and _issues_instructions(n.body):
                raise refuse(func.name, n.loop_var.name)

        post_order_visit(func.body, check)
    return mod
