"""Build time of the 1024 matmul (`loom.backend.cpu.strategies.matmul`): each stage of a first
build (no compile cache), the whole first build, a rebuild of the unchanged kernel (the compile
cache in memory: lowering, LLVM and linking skipped), and a rebuild from the disk cache alone (as
in a new process: lowered again, LLVM and linking skipped). Median wall and CPU time.
`--llvm-passes N` also prints the N LLVM passes that take longest in the first build's
optimization and code generation (LLVM's -time-passes, summed over each pass's instances).

TVM is not installed here: its figure is the one measured in issue 16 on this machine (35 ms
for the same matmul's tvm.build), printed as the reference.

    python bench/build.py [--size 1024] [--runs 7] [--llvm-passes 15]
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import re
import statistics
import sys
import tempfile
import time

import llvmlite.binding as llvm

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import common

import loom
from loom import lowering_cache
from loom.backend.base import checked_passes
from loom.backend.cpu import strategies
from loom.codegen.llvm import emit
from loom.codegen.llvm.module import generate
from loom.codegen.signature import module_signatures
from loom.ir.function import IRModule
from loom.runtime import compile_cache, elf
from loom.runtime.library import SharedLibrary
from loom.runtime.linker import link_host_shared, resolve_symbols
from loom.runtime.native_lib import cache_dir
from loom.target import as_target
from loom.te.lower import lower_schedule
from loom.transform import pipeline
from loom.transform.pass_infra import PassContext

TVM_MS = 35.0  # issue 16: tvm.build of the 1024 matmul on this machine


class Stages:
    """Times of named stages, wall and CPU, over several runs."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}
        self._run: dict[str, tuple[float, float]] = {}

    def time(self, name: str, fn):
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        w, c = time.perf_counter() - w, time.process_time() - c
        pw, pc = self._run.get(name, (0.0, 0.0))
        self._run[name] = (pw + w, pc + c)  # a pass that runs twice counts twice
        return result

    def end_run(self) -> None:
        for name, (w, c) in self._run.items():
            self.wall.setdefault(name, []).append(w)
            self.cpu.setdefault(name, []).append(c)
        self._run = {}

    def rows(self) -> list[tuple[str, float, float]]:
        return [
            (n, statistics.median(self.wall[n]) * 1e3, statistics.median(self.cpu[n]) * 1e3)
            for n in self.wall
        ]


def staged_build(n: int, stages: Stages) -> None:
    """What loom.build does for the matmul, stage by stage, without the compile cache."""
    target = as_target("llvm")
    s, args = strategies.matmul(n, n, n)
    mod = stages.time("lower: te", lambda: IRModule((lower_schedule(s, list(args), "matmul"),)))
    mod = mod.with_attr("target", target)
    ctx = PassContext.current()
    passes = pipeline.expand(pipeline.LOWER + pipeline.BUILD, ctx, checked_passes(target.backend))
    for p in passes:
        mod = stages.time(f"lower: {p.name}", lambda p=p, mod=mod: p(mod))
    sigs = stages.time("llvm: signatures", lambda: module_signatures(mod, target.alignment))
    ir_module = stages.time("llvm: IR generation", lambda: generate(mod, target, sigs))
    text = stages.time("llvm: IR text", lambda: str(ir_module))
    module, tm = stages.time("llvm: parse + O3", lambda: emit.optimize(text, target))
    obj = stages.time("llvm: object code", lambda: tm.emit_object(module))
    undefined = stages.time("link: symbols", lambda: elf.parse(obj).undefined_symbols())
    resolve_symbols(undefined, target.device)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        o, so = pathlib.Path(tmp) / "m0.o", pathlib.Path(tmp) / "m.so"
        o.write_bytes(obj)
        stages.time("link: ld", lambda: link_host_shared([o], so, standalone=True))
        stages.time("load: dlopen", lambda: SharedLibrary(so))
    stages.end_run()


_TIMING_ROW = re.compile(r"^\s*(?:[\d.]+ \(\s*[\d.]+%\)\s+){3}([\d.]+) \(\s*[\d.]+%\)\s+(.+)$")


def llvm_passes(n: int, runs: int) -> tuple[float, list[tuple[str, float]]]:
    """LLVM's wall time per first build (optimization and code generation) and its passes
    by time, each summed over its instances (`InstCombinePass #3`), from -time-passes."""
    target = as_target("llvm")
    mod = loom.lower(*strategies.matmul(n, n, n), name="matmul", target=target)
    text = str(generate(mod, target, module_signatures(mod, target.alignment)))
    llvm.set_option("", "-time-passes")
    for _ in range(runs):
        module, tm = emit.optimize(text, target)
        tm.emit_object(module)
    report = llvm.report_and_reset_timings()
    llvm.set_option("", "-time-passes=false")
    by_pass: collections.Counter[str] = collections.Counter()
    total = 0.0
    for line in report.splitlines():
        m = _TIMING_ROW.match(line)
        if m is None:
            continue
        name, ms = re.sub(r" #\d+$", "", m.group(2).strip()), float(m.group(1)) * 1e3 / runs
        if name == "Total":
            total += ms
        else:
            by_pass[name] += ms
    return total, by_pass.most_common()


def build(n: int):
    return loom.build(*strategies.matmul(n, n, n), name="matmul")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--llvm-passes", type=int, default=0, metavar="N")
    opts = parser.parse_args()
    n = opts.size
    os.environ["LOOM_KERNEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="loom-bench-build-")
    print(f"matmul {n}x{n}x{n}; target {as_target('llvm')}; LLVM {llvm.llvm_version_info}")

    os.environ["LOOM_CACHE"] = "0"
    build(n)  # imports, the host runtime, LLVM's initialization: once per process
    stages = Stages()
    for _ in range(opts.runs):
        staged_build(n, stages)
    rows = stages.rows()
    print("\nfirst build, by stage (no compile cache)")
    table = [[name, f"{w:.2f}", f"{c:.2f}"] for name, w, c in rows]
    wall, cpu = sum(r[1] for r in rows), sum(r[2] for r in rows)
    table.append(["sum of stages", f"{wall:.2f}", f"{cpu:.2f}"])
    common.print_table(["stage", "wall ms", "CPU ms"], table)

    first = common.timed(lambda: build(n), opts.runs)
    os.environ["LOOM_CACHE"] = "1"

    def from_disk():
        compile_cache.clear_memory()
        lowering_cache.clear()
        build(n)

    build(n)  # fills the cache
    rebuild = common.timed(lambda: build(n), opts.runs)
    disk = common.timed(from_disk, opts.runs)
    print("\nloom.build of the matmul")
    common.print_table(
        ["build", "wall ms", "CPU ms", "TVM ms", "TVM / loom (wall)"],
        [
            [label, f"{w * 1e3:.2f}", f"{c * 1e3:.2f}", f"{TVM_MS:.0f}", f"{TVM_MS / w / 1e3:.2f}"]
            for label, (w, c) in [
                ("first build (no cache)", first),
                ("rebuild, unchanged kernel", rebuild),
                ("rebuild from the disk cache", disk),
            ]
        ],
    )

    if opts.llvm_passes:
        total, passes = llvm_passes(n, opts.runs)
        print(f"\nLLVM passes of a first build (wall ms; all passes: {total:.1f} ms)")
        common.print_table(
            ["pass", "ms", "share"],
            [[name, f"{ms:.2f}", f"{ms / total:.0%}"] for name, ms in passes[: opts.llvm_passes]],
        )


if __name__ == "__main__":
    main()
