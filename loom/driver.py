"""`loom.lower`: from a schedule (or loop IR) to the lowered loop program."""

from __future__ import annotations

from collections.abc import Sequence

from loom import lowering_cache
from loom.backend.base import checked_passes
from loom.collector import fewer_collections
from loom.ir.expr import Var
from loom.ir.function import IRModule, PrimFunc
from loom.memory.pool import POOLS_ATTR, Pool, check_pools
from loom.packaging import finish
from loom.target import Target, as_target
from loom.te.lower import lower_schedule
from loom.te.schedule import Schedule
from loom.te.tensor import Tensor
from loom.transform import pipeline
from loom.transform.pass_infra import PassContext


@fewer_collections
def lower(
    inp: Schedule | PrimFunc | IRModule,
    args: Sequence[Tensor | Var] | None = None,
    name: str = "main",
    target: str | Target | None = None,
    pools: Sequence[Pool] = (),
    simple_mode: bool = False,
) -> IRModule:
    """Lower a schedule (with its argument list) or loop IR through the lowering pipeline.

    `simple_mode` is TVM's flag for printing only the loop nest; loom's module prints as
    that already (one function, its parameters and its body), so the flag changes nothing.

    The passes run under the current `PassContext`, which may insert user passes at the phases
    of `loom.transform.pipeline.LOWER`. With a `target`, the target passes of `pipeline.BUILD`
    run too (memory scopes, pragmas, checks): the result is what the code generator receives.
    For an accelerator backend's target, the function is first split into the host function
    and the kernels (`Backend.partition`), and the backend's passes run at their phases.
    `pools` (loom.memory.Pool) are where the memory planner (plan_memory) places the
    program's buffers; without them, a caller-given workspace and a constant pool.
    """
    if not isinstance(simple_mode, bool):
        raise TypeError(f"lower: simple_mode must be a bool, got {simple_mode!r}")
    if isinstance(inp, Schedule):
        if args is None:
            raise TypeError(
                "lower(schedule, args): the argument list (tensors and scalar vars) is required"
            )
        mod = IRModule((lower_schedule(inp, list(args), name),))
    elif isinstance(inp, PrimFunc):
        mod = IRModule((inp,))
    elif isinstance(inp, IRModule):
        mod = inp
    else:
        raise TypeError(f"lower takes a Schedule, PrimFunc or IRModule, got {type(inp).__name__}")
    pools = check_pools(pools)
    ctx = PassContext.current()
    if target is None:
        return ctx.run(pipeline.expand(pipeline.LOWER, ctx), mod)
    target = as_target(target)
    backend = target.backend
    # a module given whole is already partitioned
    if backend.partitions and not isinstance(inp, IRModule):
        mod = backend.partition(mod.functions[0])
    backend_passes = checked_passes(backend)
    mod = mod.with_attr("target", target)
    if pools:
        mod = mod.with_attr(POOLS_ATTR, pools)
    return ctx.run(pipeline.expand(pipeline.LOWER + pipeline.BUILD, ctx, backend_passes), mod)


@fewer_collections
def build(
    inp: Schedule | PrimFunc | IRModule,
    args: Sequence[Tensor | Var] | None = None,
    target: str | Target | None = None,
    target_host: str | Target | None = None,
    name: str = "main",
    pools: Sequence[Pool] = (),
):
    """Lower and compile to a callable `loom.runtime.Module` (as `tvm.build`).

    `target` is a string like "llvm" (the host CPU) or "llvm -mcpu=... -mattr=...", "c" (C
    compiled by the system compiler), "hexagon ...", a registered accelerator's name, or a
    Target; None means the target entered with `with Target(...):`, else "llvm", as in TVM.
    `target_host` becomes the target's `host` (see `Target`). The target's kind (a registered
    `loom.backend.Backend`) generates the code; `loom.packaging.finish` resolves its symbols,
    links it and loads it. `pools`: as in `lower`.

    Building what was built before skips the work done then (docs/native.md, "Compile
    cache"): lowering (the same schedule, in this process: loom/lowering_cache.py), LLVM (the
    same lowered module and target, in this process or on disk) and linking.
    """
    if target is None:
        target = Target.current() or "llvm"
    target = as_target(target)
    if target_host is not None:
        target = Target(target, host=target_host)
    inputs = (inp, args, name, target, pools)
    mod = lowering_cache.lowered(inputs, lambda: lower(inp, args, name, target=target, pools=pools))
    return finish(target.backend.codegen(mod, target))
