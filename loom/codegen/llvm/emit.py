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


LOOP_VECTORIZE_OPTION = "llvm-loop-vectorize"
"""Target option: 1 runs LLVM's loop vectorizer in the optimization pipeline, 0 (the default)
does not (docs/native.md, "What loom asks of LLVM's optimizer")."""


def loop_vectorize(target: Target) -> bool:
    """Whether `optimize` runs LLVM's loop vectorizer for `target` (-llvm-loop-vectorize=0|1).

    Off by default: loom vectorizes loops itself, from schedules, and LLVM 22's loop vectorizer
    miscompiles loads indexed by a masked induction variable plus an offset (`x[(k & 7) + b]`
    read as if it were `x[k + b]`) and takes time exponential in the length of a chain of
    min/max selects (tests/codegen/test_llvm_vectorizer.py has the reduced IR of each)."""
    value = target.option(LOOP_VECTORIZE_OPTION, "0")
    if value not in ("0", "1"):
        raise LoomError(f"target -{LOOP_VECTORIZE_OPTION} must be 0 or 1, got {value!r}")
    return value == "1"


def optimize(ir_text: str, target: Target) -> tuple[llvm.ModuleRef, llvm.TargetMachine]:
    """Parse, verify and optimize at the target's opt level: LLVM's default pipeline, without
    its loop vectorizer unless the target says -llvm-loop-vectorize=1 (`loop_vectorize`); then
    the target kind's rewrites of the optimized IR (`Backend.llvm_fixups`)."""
    _initialize()
    vectorize = loop_vectorize(target)
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
        pto.loop_vectorization = vectorize
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(module, pb)
    fixups = target.backend.llvm_fixups()
    if fixups:
        text = str(module)
        for fixup in fixups:
            text = fixup(text)
        module = _parse_fixed(text, target)
    return module, tm


def _parse_fixed(text: str, target: Target) -> llvm.ModuleRef:
    try:
        module = llvm.parse_assembly(text)
        module.verify()
    except RuntimeError as e:
        raise LoomError(
            f"the {target.kind} back end's LLVM IR rewrites made invalid IR (a loom bug): {e}"
        ) from None
    return module
