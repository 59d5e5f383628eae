"""What calling a built loom function from Python costs, next to references measured in the same
run: a bare ctypes call of the same function pointer (no checks at all) and numpy's
`np.add(a, b, out=c)` on 4 elements.

Kernels of 1, 3 and 8 arguments on 4 float32 elements each (their own work is a few
nanoseconds), called with loom.nd arrays (aligned, as the signature asks) and with plain numpy
arrays (numpy aligns small arrays to 16 bytes only: those are copied to aligned memory), as
`f(...)` with `f = mod[name]` kept, and as `mod[name](...)`. Each variant is timed in rounds
interleaved with the others; the table shows per-call medians of wall time and of CPU time
(time.process_time: on a busy machine wall time also counts the time the process waited), what
loom adds to the bare ctypes call, and the ratios against the target of issue 16 (2 µs per
call) and TVM's published 0.19 µs (above 1: loom is faster). A last pair of rows calls a tiny
compiled model (`loom.compile`, 3 nodes on 4 elements) next to onnxruntime's `run` of it.

    python bench/call.py [--rounds 15] [--number 20000]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time
import timeit

import numpy as np

import loom
from loom import te
from loom.runtime import call_native

try:  # only the model's row needs them
    import onnxruntime as ort
    from onnx import TensorProto, helper
except ImportError:
    ort = None

ELEMENTS = 4
TARGET_US = 2.0
TVM_US = 0.19


def kernel(arguments: int):
    """A module whose function `f<arguments>` sums `arguments - 1` inputs into its output (with
    one argument: writes the index)."""
    inputs = [te.placeholder((ELEMENTS,), name=f"X{k}") for k in range(arguments - 1)]

    def body(i):
        if not inputs:
            return i.astype("float32")
        acc = inputs[0][i]
        for x in inputs[1:]:
            acc = acc + x[i]
        return acc

    out = te.compute((ELEMENTS,), body, name="Y")
    name = f"f{arguments}"
    return loom.build(te.create_schedule(out.op), [*inputs, out], name=name), name


def variants(arguments: int) -> dict[str, tuple[str, dict]]:
    """label -> (statement, its globals): the calls timed for one kernel."""
    mod, name = kernel(arguments)
    fn = mod[name]
    aligned = [loom.nd.array(np.ones(ELEMENTS, np.float32)) for _ in range(arguments)]
    plain = [np.ones(ELEMENTS, np.float32) for _ in range(arguments)]
    argv = (ctypes.c_void_p * arguments)(*(a.ctypes.data for a in aligned))
    names = ", ".join(f"x{k}" for k in range(arguments))
    on = {f"x{k}": a for k, a in enumerate(aligned)}
    out = {
        "ctypes (no checks)": ("cfunc(argv)", {"cfunc": fn.cfunc, "argv": argv}),
        "loom f(...) loom.nd": (f"fn({names})", {"fn": fn, **on}),
        "loom mod[name](...) loom.nd": (f"mod[name]({names})", {"mod": mod, "name": name, **on}),
        "loom f(...) numpy": (
            f"fn({names})",
            {"fn": fn, **{f"x{k}": a for k, a in enumerate(plain)}},
        ),
    }
    fn(*aligned)  # both kinds of arrays pass the checks before anything is timed
    fn(*plain)
    return out


def model_variants() -> dict[str, tuple[str, dict]]:
    """A compiled model's call (Add, Relu, Mul on 4 elements: `Model.__call__` allocates its
    outputs and passes its pools), next to onnxruntime's `run` of the same model; {} without
    onnx and onnxruntime."""
    if ort is None:
        return {}
    nodes = [
        helper.make_node("Add", ["x", "y"], ["t"]),
        helper.make_node("Relu", ["t"], ["u"]),
        helper.make_node("Mul", ["u", "x"], ["z"]),
    ]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "tiny",
        [value(n, TensorProto.FLOAT, [ELEMENTS]) for n in "xy"],
        [value("z", TensorProto.FLOAT, None)],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    model = loom.compile(proto)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    x, y = (loom.nd.array(np.ones(ELEMENTS, np.float32)) for _ in range(2))
    np.testing.assert_array_equal(model(x, y)["z"], session.run(None, {"x": x, "y": y})[0])
    return {
        "model: onnxruntime run": (
            "run(None, {'x': x, 'y': y})",
            {"run": session.run, "x": x, "y": y},
        ),
        "model: loom model(x, y)": ("model(x, y)", {"model": model, "x": x, "y": y}),
    }


def measure(cases: dict[str, tuple[str, dict]], rounds: int, number: int) -> dict:
    """label -> (median wall seconds, median CPU seconds) per call, variants interleaved."""
    timers = {label: timeit.Timer(stmt, globals=g) for label, (stmt, g) in cases.items()}
    walls: dict[str, list[float]] = {label: [] for label in cases}
    cpus: dict[str, list[float]] = {label: [] for label in cases}
    for t in timers.values():
        t.timeit(number // 10)  # warm-up
    for _ in range(rounds):
        for label, t in timers.items():
            cpu = time.process_time()
            wall = t.timeit(number)
            cpus[label].append((time.process_time() - cpu) / number)
            walls[label].append(wall / number)
    return {
        label: (statistics.median(walls[label]), statistics.median(cpus[label])) for label in cases
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    why = call_native.unavailable()
    print(f"checks: {'in C (loom/runtime/native/host/loom_call.c)' if why is None else why}")
    a, b, c = (np.ones(ELEMENTS, np.float32) for _ in range(3))
    cases: dict[str, tuple[str, dict]] = {
        "numpy np.add(a, b, out=c)": ("add(a, b, out=c)", {"add": np.add, "a": a, "b": b, "c": c})
    }
    for arguments in (1, 3, 8):
        cases |= {f"{arguments} args: {k}": v for k, v in variants(arguments).items()}
    cases |= model_variants()
    results = measure(cases, args.rounds, args.number)

    headers = ["call", "wall µs", "CPU µs", "over ctypes µs", "2 µs / CPU", "TVM 0.19 / CPU"]
    rows = []
    for label, (wall, cpu) in results.items():
        bare = label.split(":")[0] + ": ctypes (no checks)"
        over = f"{(cpu - results[bare][1]) * 1e6:.2f}" if bare in results and bare != label else ""
        rows.append(
            [
                label,
                f"{wall * 1e6:.2f}",
                f"{cpu * 1e6:.2f}",
                over,
                f"{TARGET_US / (cpu * 1e6):.2f}",
                f"{TVM_US / (cpu * 1e6):.2f}",
            ]
        )
    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(headers)]
    print(
        "  ".join(
            h.ljust(w) if k == 0 else h.rjust(w) for k, (h, w) in enumerate(zip(headers, widths))
        )
    )
    for r in rows:
        print(
            "  ".join(
                x.ljust(w) if k == 0 else x.rjust(w) for k, (x, w) in enumerate(zip(r, widths))
            )
        )
    print(
        f"per call, medians of {args.rounds} interleaved rounds of {args.number} calls; ratios "
        "above 1: loom's call costs less than the target (2 µs) or TVM's (0.19 µs)"
    )


if __name__ == "__main__":
    main()
