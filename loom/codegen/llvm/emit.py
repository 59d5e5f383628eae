"""LLVM modules to optimized IR, assembly and object code for a target."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import llvmlite.binding as llvm

from loom.errors import LoomError

if TYPE_CHECKING:  # the target package registers the kinds, which import this
    from loom.target.target import Target


@functools.cache
def _initialize() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    # Hexagon: address no global through the small-data pointer GP, which a module loaded into
    # the device runtime does not set up (LLVM options are process-global: set once, here).
    llvm.set_option("", "-hexagon-small-data-threshold=0")


def target_machine(target: Target) -> llvm.TargetMachine:
    """An LLVM target machine for `target` (position-independent code, for shared objects)."""
    _initialize()
    try:
        llvm_target = llvm.Target.from_triple(target.triple)
    except RuntimeError as e:
        raise LoomError(f"LLVM has no backend for triple {target.triple!r}: {e}") from None
    return llvm_target.create_target_machine(
        cpu=target.cpu,
        features=target.features,
        opt=target.opt_level,
        reloc="pic",
        codemodel="default",
    )


def optimize(ir_text: str, target: Target) -> tuple[llvm.ModuleRef, llvm.TargetMachine]:
    """Parse, verify and optimize at the target's opt level (LLVM's default pipeline)."""
    _initialize()
    try:
        module = llvm.parse_assembly(ir_text)
        module.verify()
    except RuntimeError as e:
        raise LoomError(f"loom generated invalid LLVM IR (a code generator bug): {e}") from None
    tm = target_machine(target)
    module.triple = target.triple
    module.data_layout = str(tm.target_data)
    if target.opt_level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=target.opt_level)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(module, pb)
    return module, tm
