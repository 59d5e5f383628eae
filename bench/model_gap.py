"""Where a compiled model's time goes beyond the sum of its kernels: main's own overhead, or the
kernels' cold caches. One process, one thread, runs interleaved, medians: each kernel's own
median of its thread's CPU time, the model's and onnxruntime's wall and CPU time:

- model: `compiled(**feeds)`, the whole model;
- sequence: the kernels called one by one from Python, in main's order, on arrays laid out as
  the memory plan lays out the pools (the same offsets and the same sharing): what main does,
  without main;
- sequence, weights warm: the same, each kernel's constants read just before it (untimed);
- sequence, activations warm: the same, each kernel's other arguments (its inputs and outputs
  in the pools, not a pool it takes whole) read just before it: what its activations' cold
  caches cost it (its outputs too: a store to a line not in the cache first reads it);
- hot: each kernel alone, run again on the data it just ran on (the kernel sum of a per-kernel
  profile);
- hot fresh: the same on fresh arrays, one per argument;
- onnxruntime, one thread.

Then, per kernel, its sequence time next to onnxruntime's time for the same nodes (a session
with profiling on, run interleaved with the others: its `*_kernel_time` events, in sequence
like a real run). A loom kernel computes the ONNX nodes of its group (`compiled.graph`'s fused
node's body); onnxruntime names a node it rewrote (NCHWc convolutions with their activation and
residual Add) after the tensor it writes plus `_nchwc`, and keeps the names of the others. So
an onnxruntime node belongs to the loom kernel that computes the node of that name or the node
that writes that tensor; nodes of its own (ReorderInput/Output) count in the totals only.

The model's CPU time (a preempted run does not count) - sequence is main's own cost (its calls
and status checks); sequence - hot is what the kernels lose to cold caches in a real run, and
sequence - weights warm the part of it that is the constants (weights read from DRAM once per
run). Main's pools against fresh arrays: hot runs the kernels on the pools, `hot fresh` on
fresh arrays of their own; equal times mean the placement (offsets that alias in the caches)
costs nothing. The table of kernels lists the largest losses, with the constants' bytes each
reads and the bandwidth that loss would mean.

    python bench/model_gap.py [--only mobilenet_v2] [--runs 20] [--top 10]
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import json
import pathlib
import sys
import time

import numpy as np
import onnxruntime as ort

import loom
from loom.graph.lower import c_name

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import models as bench_models

WARM = "sequence, weights warm"
ACTIVATIONS_WARM = "sequence, activations warm"


class Call:
    """One call of main's body: the kernel's entry point, its argument vector, the arrays in it
    and which of them are constants."""

    def __init__(self, name: str, entry, arrays: list[np.ndarray], constants: list[np.ndarray]):
        self.name = name
        self.entry = entry
        self.arrays = arrays  # kept alive: argv holds their addresses
        self.constants = constants
        self.argv = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])

    def __call__(self) -> None:
        status = self.entry(self.argv)
        if status != 0:
            raise loom.LoomError(f"{self.name} failed (status {status})")


def planned_calls(
    compiled, feeds: dict[str, np.ndarray]
) -> tuple[list[Call], dict[str, np.ndarray]]:
    """main's calls on arrays placed as the plan places them: each pool one array, each planned
    buffer a view at its offset; the inputs as given, the outputs fresh. Kernels are called
    through their raw entry points: their arguments share a pool, on purpose. Also returns
    the model's outputs the calls write, by output name."""
    plan = compiled.memory_plan
    pools = {
        p.pool.name: loom.nd.empty((max(p.size, 1),), "uint8", p.pool.alignment) for p in plan.pools
    }
    for pool in pools.values():
        pool[...] = 0
    placed = {b.buffer: b for p in plan.pools for b in p.placed}
    for name, value in compiled.graph.constants.items():
        b = placed.get(c_name(name))
        if b is not None and b.pool in pools:
            data = np.ascontiguousarray(value).view(np.uint8).reshape(-1)
            pools[b.pool][b.offset : b.offset + data.size] = data
    interface = {c_name(n): a for n, a in feeds.items()}
    for name, shape, dt in compiled.info.outputs:
        interface[c_name(name)] = loom.nd.empty(shape, dt)
    main = compiled.lowered.module.functions[0]
    calls = []
    for stmt in main.body.seq:
        call = stmt.condition.a  # assert(call_func(kernel, args...) == 0)
        function = compiled.module[call.op]
        names = [v.name for v in call.args]
        names += [p.name for p in function.signature.params[len(names) :]]  # its pool params
        arrays, constants = [], []
        for param, name in zip(function.signature.params, names):
            shape, dt = tuple(param.shape), np.dtype(str(param.dtype))
            if name in interface:
                arrays.append(interface[name])
                continue
            if name.startswith("pool_") and name[5:] in pools:
                arrays.append(pools[name[5:]])
                continue
            b = placed[name]
            nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            view = pools[b.pool][b.offset : b.offset + nbytes].view(dt).reshape(shape)
            arrays.append(view)
            if plan[b.pool].pool.kind == "constant":
                constants.append(view)
        calls.append(Call(call.op, function.cfunc, arrays, constants))
    outputs = {name: interface[c_name(name)] for name, _, _ in compiled.info.outputs}
    return calls, outputs


def fresh_calls(calls: list[Call]) -> list[Call]:
    """The same calls on fresh arrays with the same contents, one per argument (a pool a kernel
    takes for its own buffers: one fresh array per pool, shared)."""
    fresh_pools: dict[int, np.ndarray] = {}
    out = []
    for call in calls:
        arrays = []
        for a in call.arrays:
            if a.base is None and a.dtype == np.uint8 and a.ndim == 1:  # a whole pool
                if id(a) not in fresh_pools:
                    fresh_pools[id(a)] = loom.nd.empty(a.shape, a.dtype)
                arrays.append(fresh_pools[id(a)])
                continue
            copy = loom.nd.empty(a.shape, a.dtype)
            copy[...] = a
            arrays.append(copy)
        constants = [b for a, b in zip(call.arrays, arrays) if any(a is c for c in call.constants)]
        out.append(Call(call.name, call.entry, arrays, constants))
    return out


def _cpu(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def _wall(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _thread(fn) -> float:
    """CPU seconds of this thread: a kernel runs on it (one thread), and time the machine gives
    to other processes does not count."""
    start = time.thread_time()
    fn()
    return time.thread_time() - start


def _activations(call: Call) -> list[np.ndarray]:
    """A call's arguments that are neither constants nor whole pools."""
    return [
        a
        for a in call.arrays
        if not any(a is c for c in call.constants)
        and not (a.base is None and a.dtype == np.uint8 and a.ndim == 1)
    ]


def per_kernel(calls: list[Call], warm: str = "") -> np.ndarray:
    """Each kernel's seconds in one pass of the sequence; `warm` ("constants",
    "activations"): those arguments of each kernel read just before it, untimed."""
    times = np.zeros(len(calls))
    for k, call in enumerate(calls):
        if warm:
            for a in call.constants if warm == "constants" else _activations(call):
                a.sum()
        times[k] = _thread(call)
    return times


def hot(calls: list[Call]) -> np.ndarray:
    """Each kernel's seconds when run again on the data it just ran on."""
    times = np.zeros(len(calls))
    for k, call in enumerate(calls):
        call()
        times[k] = min(_thread(call) for _ in range(3))
    return times


def kernel_nodes(compiled) -> list[set[str]]:
    """Per kernel of main (graph node order), the names of the ONNX nodes it computes and of
    the tensors they write."""
    names = []
    for node in compiled.graph.nodes:
        body = node.attr("body")
        nodes = body.nodes if body is not None else [node]
        names.append({n.name for n in nodes} | {t for n in nodes for t in n.outputs})
    return names


def ort_node_times(profile: str) -> dict[str, list[float]]:
    """Seconds of each onnxruntime node per run, from a profiling session's JSON file."""
    times: dict[str, list[float]] = collections.defaultdict(list)
    with open(profile) as f:
        events = json.load(f)
    pathlib.Path(profile).unlink()
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            times[e["name"][: -len("_kernel_time")]].append(e["dur"] * 1e-6)
    return times


def ort_per_kernel(compiled, profile: str, kernels: int) -> tuple[np.ndarray, float, list[str]]:
    """onnxruntime's median seconds per loom kernel (the sum of its nodes'), its total, and
    the nodes matched to no kernel."""
    owners = kernel_nodes(compiled)
    per_kernel = np.zeros(kernels)
    total, unmatched = 0.0, []
    for node, seconds in ort_node_times(profile).items():
        median = float(np.median(seconds))
        total += median
        key = node.removesuffix("_nchwc")
        owner = next((k for k, names in enumerate(owners) if key in names), None)
        if owner is None:
            unmatched.append(node)
        else:
            per_kernel[owner] += median
    return per_kernel, total, unmatched


def measure(name: str, runs: int, top: int) -> None:
    path = bench_models.models_dir() / f"{name}.onnx"
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feeds = bench_models.feeds_for(session, bench_models.MODEL_SHAPES.get(name, {}))
    options.enable_profiling = True
    profiled = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    compiled = loom.compile(str(path), shapes={k: v.shape for k, v in feeds.items()})
    loom.runtime.set_num_threads(1)
    calls, outputs = planned_calls(compiled, feeds)

    def sequence():
        for call in calls:
            call()

    samples: dict[str, list] = {}
    for _ in range(2):
        compiled(**feeds)
        sequence()
    for out, want in compiled(**feeds).items():  # the sequence is main's, or it measures nothing
        if not np.array_equal(outputs[out], want):
            raise AssertionError(f"{name}: the kernels called one by one do not compute {out}")
    fresh = fresh_calls(calls)  # after the sequence ran: real intermediate values
    for _ in range(2):
        session.run(None, feeds)
        profiled.run(None, feeds)
    measurements = {
        "model cpu": lambda: _cpu(lambda: compiled(**feeds)),
        "model": lambda: _wall(lambda: compiled(**feeds)),
        "sequence": lambda: per_kernel(calls),
        WARM: lambda: per_kernel(calls, "constants"),
        ACTIVATIONS_WARM: lambda: per_kernel(calls, "activations"),
        "hot": lambda: hot(calls),
        "hot fresh": lambda: hot(fresh),
        "onnxruntime cpu": lambda: _cpu(lambda: session.run(None, feeds)),
        "onnxruntime": lambda: _wall(lambda: session.run(None, feeds)),
        "onnxruntime profiled": lambda: _wall(lambda: profiled.run(None, feeds)),
    }
    order = list(measurements)
    for run in range(runs):
        # each run starts at another measurement: none always follows the same one (the one
        # before leaves the caches in its own state)
        for key in order[run % len(order) :] + order[: run % len(order)]:
            samples.setdefault(key, []).append(measurements[key]())
    kernels = {k: np.median(np.array(v), axis=0) for k, v in samples.items()}
    total = {k: float(np.sum(v)) for k, v in kernels.items()}
    print(f"\n{name}: {len(calls)} kernels, medians (ms) of {runs} interleaved runs, 1 thread")
    for key in (
        "model",
        "model cpu",
        "sequence",
        WARM,
        ACTIVATIONS_WARM,
        "hot",
        "hot fresh",
        "onnxruntime",
        "onnxruntime cpu",
    ):
        print(f"  {key:28s} {total[key] * 1e3:8.2f}")
    gaps = (
        ("main's own cost (model cpu - sequence)", total["model cpu"] - total["sequence"]),
        ("cold caches (sequence - hot)", total["sequence"] - total["hot"]),
        ("  of it the weights (sequence - warm)", total["sequence"] - total[WARM]),
        ("  the activations (sequence - act. warm)", total["sequence"] - total[ACTIVATIONS_WARM]),
    )
    for label, seconds in gaps:
        print(f"  {label:42s} {seconds * 1e3:6.2f} ms")
    _print_against_ort(compiled, calls, kernels, profiled.end_profiling(), top)
    loss = kernels["sequence"] - kernels["hot"]
    print(f"  the {top} largest losses to cold caches in the sequence:")
    for k in np.argsort(-loss)[:top]:
        weights = sum(c.nbytes for c in calls[k].constants)
        rate = f"{weights / loss[k] / 1e9:5.1f} GB/s" if loss[k] > 0 and weights else ""
        print(
            f"    {calls[k].name[:60]:60s} seq {kernels['sequence'][k] * 1e3:6.3f} "
            f"hot {kernels['hot'][k] * 1e3:6.3f} ms, weights {weights / 1e6:5.2f} MB {rate}"
        )


def _print_against_ort(compiled, calls, kernels, profile: str, top: int) -> None:
    ort_kernel, ort_total, unmatched = ort_per_kernel(compiled, profile, len(calls))
    seq, warm, hot_ = kernels["sequence"], kernels[WARM], kernels["hot"]
    acts = kernels[ACTIVATIONS_WARM]
    print(
        f"  onnxruntime's nodes (profiled, in sequence) {ort_total * 1e3:6.2f} ms, of them "
        f"matched to loom's kernels {ort_kernel.sum() * 1e3:6.2f} (unmatched: "
        f"{', '.join(unmatched) or 'none'})"
    )
    print(f"  the {top} kernels where loom loses most to onnxruntime in sequence (ms):")
    print(
        f"    {'kernel':58s} {'seq':>6s} {'w warm':>6s} {'a warm':>6s} {'hot':>6s} {'ort':>6s} "
        f"{'loss':>6s} {'weights':>8s}"
    )
    loss = seq - ort_kernel
    for k in np.argsort(-loss)[:top]:
        weights = sum(c.nbytes for c in calls[k].constants)
        print(
            f"    {calls[k].name[:58]:58s} {seq[k] * 1e3:6.3f} {warm[k] * 1e3:6.3f} "
            f"{acts[k] * 1e3:6.3f} {hot_[k] * 1e3:6.3f} {ort_kernel[k] * 1e3:6.3f} "
            f"{loss[k] * 1e3:+6.3f} {weights / 1e6:6.2f}MB"
        )
    wins, losses = loss[loss < 0].sum(), loss[loss > 0].sum()
    print(
        f"    total: loom {seq.sum() * 1e3:.2f}, onnxruntime {ort_kernel.sum() * 1e3:.2f} ms; "
        f"loom loses {losses * 1e3:.2f} ms on {int((loss > 0).sum())} kernels and wins "
        f"{-wins * 1e3:.2f} on {int((loss < 0).sum())}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="a model name (repeatable)")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    stored = sorted(p.stem for p in bench_models.models_dir().glob("*.onnx"))
    names = args.only or ["mobilenet_v2", "resnet18"]
    unknown = [name for name in names if name not in stored]
    if unknown:
        choices = ", ".join(stored) or f"none in {bench_models.models_dir()} (make models)"
        parser.error(f"model {unknown[0]!r} is not stored; choose --only from: {choices}")
    for name in names:
        measure(name, args.runs, args.top)


if __name__ == "__main__":
    main()
