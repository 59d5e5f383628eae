"""`loom.lower`: from a schedule (or loop IR) to the lowered loop program."""

from __future__ import annotations

from collections.abc import Sequence

from loom.ir.expr import Var
from loom.ir.function import IRModule, PrimFunc
from loom.target import Target, as_target
from loom.te.schedule import Schedule
from loom.te.tensor import Tensor
from loom.transform import pipeline
from loom.transform.pass_infra import PassContext


def lower(
    inp: Schedule | PrimFunc | IRModule,
    args: Sequence[Tensor | Var] | None = None,
    name: str = "main",
    target: str | Target | None = None,
) -> IRModule:
    """Lower a schedule (with its argument list) or loop IR through the lowering pipeline.

    The passes run under the current `PassContext`, which may insert user passes at the phases
    of `loom.transform.pipeline.LOWER`. With a `target`, the target passes of `pipeline.BUILD`
    run too (memory scopes, pragmas, checks): the result is what the code generator receives.
    """
    if isinstance(inp, Schedule):
        if args is None:
            raise TypeError(
                "lower(schedule, args): the argument list (tensors and scalar vars) is required"
            )
        from loom.te.lower import lower_schedule

        mod = IRModule((lower_schedule(inp, list(args), name),))
    elif isinstance(inp, PrimFunc):
        mod = IRModule((inp,))
    elif isinstance(inp, IRModule):
        mod = inp
    else:
        raise TypeError(f"lower takes a Schedule, PrimFunc or IRModule, got {type(inp).__name__}")
    ctx = PassContext.current()
    passes = pipeline.LOWER
    if target is not None:
        mod = mod.with_attr("target", as_target(target))
        passes = pipeline.LOWER + pipeline.BUILD
    return ctx.run(pipeline.expand(passes, ctx), mod)


def build(
    inp: Schedule | PrimFunc | IRModule,
    args: Sequence[Tensor | Var] | None = None,
    target: str | Target = "llvm",
    name: str = "main",
):
    """Lower and compile to a callable `loom.runtime.Module` (as `tvm.build`).

    `target` is a string like "llvm" (the host CPU) or "llvm -mcpu=... -mattr=...", "c" (C
    compiled by the system compiler), or a Target.
    """
    target = as_target(target)
    from loom.backend.base import build_for_backend, is_backend

    if is_backend(target.kind):
        from loom.backend import get as get_backend

        return build_for_backend(get_backend(target.kind), inp, args, name, target)
    mod = lower(inp, args, name, target=target)
    if target.kind == "c":
        from loom.codegen.c import build_c

        return build_c(mod, target)
    if target.kind == "hexagon":
        from loom.codegen.llvm import build_device

        return build_device(mod, target)
    from loom.codegen.llvm import build_llvm

    return build_llvm(mod, target)
