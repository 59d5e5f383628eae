"""The generated sources of an LLVM build ("ir", "ll", "asm"), made when first read.

Printing the loop IR and the optimized LLVM IR and emitting assembly took as long as making the
object code (a third of the 1024 matmul's build), for text that nobody reads unless they ask
`module.get_source(...)`. `LLVMSources` is the module's `sources` mapping: its keys are known at
once, each text is made on first access by compiling the module again (deterministic: the same
IR, the same LLVM), and kept.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from loom.codegen.llvm.emit import optimize
from loom.codegen.llvm.module import generate
from loom.codegen.signature import module_signatures
from loom.ir.function import IRModule
from loom.ir.printer import to_text

if TYPE_CHECKING:  # the target package registers the kinds, which import this
    from loom.target.target import Target

FORMATS = ("ir", "ll", "asm")


class LLVMSources(Mapping):
    """ "ir" (the final loop IR), "ll" (the optimized LLVM IR) and "asm" of `mod` compiled for
    `target`, each made on first access."""

    def __init__(self, mod: IRModule, target: Target):
        self._mod = mod
        self._target = target
        self._texts: dict[str, str] = {}
        self._lock = threading.Lock()

    def __getitem__(self, fmt: str) -> str:
        if fmt not in FORMATS:
            raise KeyError(fmt)
        with self._lock:
            if fmt not in self._texts:
                if fmt == "ir":
                    self._texts["ir"] = to_text(self._mod)
                else:
                    self._texts.update(self._compile())
            return self._texts[fmt]

    def _compile(self) -> dict[str, str]:
        signatures = module_signatures(self._mod, self._target.alignment)
        llvm_module, tm = optimize(str(generate(self._mod, self._target, signatures)), self._target)
        return {"ll": str(llvm_module), "asm": tm.emit_assembly(llvm_module)}

    def __iter__(self) -> Iterator[str]:
        return iter(FORMATS)

    def __len__(self) -> int:
        return len(FORMATS)

    def __contains__(self, fmt: object) -> bool:
        return fmt in FORMATS

    def __repr__(self) -> str:
        made = ", ".join(self._texts) or "none yet"
        return f"<LLVMSources {', '.join(FORMATS)} (made: {made})>"
