"""Shared helpers of the benchmarks: timing loom and its reference the same way (wall and CPU
time, interleaved), the machine's measured FMA peak, printing a table."""

from __future__ import annotations

import argparse
import ctypes
import functools
import os
import statistics
import time
from collections.abc import Callable, Sequence

import llvmlite.binding as llvm
from llvmlite import ir

import loom


def median_seconds(fn: Callable[[], object], number: int, repeat: int) -> float:
    """Median over `repeat` rounds of the mean time of `number` calls (after one warm-up)."""
    fn()
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - start) / number)
    return statistics.median(rounds)


def machine_threads() -> int:
    return len(os.sched_getaffinity(0))


def only(
    parser: argparse.ArgumentParser,
    choice: str | None,
    names: Sequence[str],
    what: str,
    prefix: bool = False,
) -> list[str]:
    """The names `--only CHOICE` selects (those containing it, or starting with it with
    `prefix`; all without it); a usage error naming the choices when it selects none."""
    chosen = [n for n in names if not choice or (n.startswith(choice) if prefix else choice in n)]
    if not chosen:
        parser.error(f"--only {choice!r} matches no {what}; choose from: {', '.join(names)}")
    return chosen


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max([len(h), *(len(r[k]) for r in rows)]) for k, h in enumerate(headers)]
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median wall and process-CPU seconds of one call of `fn`, over `runs` calls (after one
    warm-up). CPU time counts every thread of the process: on a busy machine it shows the work
    done, where wall time also shows the waiting."""
    fn()
    walls, cpus = [], []
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def interleaved(fns: dict[str, Callable[[], object]], runs: int, rounds: int = 5) -> dict:
    """{name: (median wall s, median CPU s)} of each of `fns`, their runs interleaved in
    `rounds` rounds (each round times every function for runs // rounds calls), so that a
    change of the machine's load during the measurement affects all of them alike."""
    per_round = max(1, runs // rounds)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(timed(fn, per_round))
    return {
        name: tuple(statistics.median(t[k] for t in times) for k in (0, 1))
        for name, times in samples.items()
    }


_FMA_CHAINS = 12  # independent accumulators: enough to cover the FMA latency on 2 units


@functools.cache
def fma_peak_gflops(lanes: int | None = None, iterations: int = 20_000_000) -> float:
    """The measured single-thread peak of this core, GFLOP/s of float32 fused multiply-adds:
    a loop of `_FMA_CHAINS` independent vector FMAs of the host's widest float vector
    (`lanes`, default from loom's host target), compiled by LLVM and run once, timed by
    this thread's CPU time."""
    target = loom.target.Target("llvm")
    lanes = lanes or max(4, target.vector_bytes // 4)
    vec = ir.VectorType(ir.FloatType(), lanes)
    i64 = ir.IntType(64)
    module = ir.Module("fma_peak")
    fn = ir.Function(module, ir.FunctionType(ir.FloatType(), [i64]), "fma_peak")
    fma = ir.Function(module, ir.FunctionType(vec, [vec, vec, vec]), f"llvm.fma.v{lanes}f32")
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    count = b.phi(i64)
    count.add_incoming(ir.Constant(i64, 0), entry)
    accs = []
    for k in range(_FMA_CHAINS):
        acc = b.phi(vec)
        acc.add_incoming(ir.Constant(vec, [float(k)] * lanes), entry)
        accs.append(acc)
    scale = ir.Constant(vec, [0.999999] * lanes)
    step = ir.Constant(vec, [1e-7] * lanes)
    new = [b.call(fma, [acc, scale, step]) for acc in accs]
    for acc, value in zip(accs, new):
        acc.add_incoming(value, loop)
    nxt = b.add(count, ir.Constant(i64, 1))
    count.add_incoming(nxt, loop)
    b.cbranch(b.icmp_signed("<", nxt, fn.args[0]), loop, done)
    b.position_at_end(done)
    total = new[0]
    for value in new[1:]:
        total = b.fadd(total, value)
    b.ret(b.extract_element(total, ir.Constant(ir.IntType(32), 0)))

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=2
    )
    parsed = llvm.parse_assembly(str(module))
    engine = llvm.create_mcjit_compiler(parsed, tm)
    engine.finalize_object()
    run = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(engine.get_function_address("fma_peak"))
    run(1000)
    start = time.thread_time()  # this thread's CPU time: the core's rate while it runs it,
    run(iterations)  # whatever the machine and the process's other threads do
    seconds = time.thread_time() - start
    return iterations * _FMA_CHAINS * lanes * 2 / seconds / 1e9
