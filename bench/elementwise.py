"""Element-wise kernels and row reductions: loom's model path vs numpy and onnxruntime, same run.

Each workload is a one-node (or small) ONNX model compiled with `loom.compile` (the schedules a
model gets: loom/backend/cpu/reduce_schedules.py, group_schedules.py), its `main` called on
aligned arrays with a preallocated output, against its reference given a preallocated output
too (numpy's `out=`, onnxruntime's I/O binding). The two are measured interleaved, round by
round, at 1 and 2 threads; the table shows the medians of wall time and of CPU time
(time.process_time, all threads of the process: on a busy machine wall time also counts the
time the process waited) and the ratios reference / loom (above 1: loom is faster). numpy runs
on one thread whatever the count.

    python bench/elementwise.py [--elements 16777216] [--rows 1024] [--cols 1024] [--rounds 9]
        [--only add,chain,exp,softmax,rowsum,rowmean,layernorm]
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import common

import loom

ROUND_SECONDS = 0.05
"""Each round calls a function for about this long (one call at least)."""


@dataclasses.dataclass
class Workload:
    name: str
    model: object  # onnx.ModelProto
    inputs: dict[str, np.ndarray]
    reference: str  # "numpy" or "onnxruntime"
    numpy_fn: Callable[[dict, np.ndarray], object] | None = None  # (inputs, out) -> None
    rtol: float = 1e-5
    atol: float = 1e-6


def make_model(nodes, inputs: dict[str, np.ndarray], outputs, initializers=None):
    graph = helper.make_graph(
        nodes,
        "bench",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, x.shape) for k, x in inputs.items()],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def workloads(opts) -> list[Workload]:
    rng = np.random.default_rng(0)
    n, rows, cols = opts.elements, opts.rows, opts.cols

    # 2-D: onnx's shape inference with data propagation (loom's frontend asks for it) takes
    # 20 s over a 1-D tensor of 16M elements, which it treats as a possible shape
    shape = (n // 4096, 4096) if n % 4096 == 0 else (n,)

    def vec():
        return loom.nd.array(rng.standard_normal(shape).astype(np.float32))

    a, b, c = vec(), vec(), vec()
    m = loom.nd.array(rng.standard_normal((rows, cols)).astype(np.float32))
    axes = {"axes": np.array([1], np.int64)}
    bias = rng.standard_normal(cols).astype(np.float32)
    node = helper.make_node
    return [
        Workload(
            f"add {n}",
            make_model([node("Add", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"]),
            {"a": a, "b": b},
            "numpy",
            lambda x, out: np.add(x["a"], x["b"], out=out),
        ),
        Workload(
            f"relu(a*b+c) {n}",
            make_model(
                [
                    node("Mul", ["a", "b"], ["p"]),
                    node("Add", ["p", "c"], ["s"]),
                    node("Relu", ["s"], ["y"]),
                ],
                {"a": a, "b": b, "c": c},
                ["y"],
            ),
            {"a": a, "b": b, "c": c},
            "onnxruntime",
        ),
        Workload(
            f"exp {n}",
            make_model([node("Exp", ["a"], ["y"])], {"a": a}, ["y"]),
            {"a": a},
            "numpy",
            lambda x, out: np.exp(x["a"], out=out),
        ),
        Workload(
            f"softmax {rows}x{cols} rows",
            make_model([node("Softmax", ["x"], ["y"], axis=-1)], {"x": m}, ["y"]),
            {"x": m},
            "onnxruntime",
        ),
        Workload(
            f"row sum {rows}x{cols}",
            make_model(
                [node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], {"x": m}, ["y"], axes
            ),
            {"x": m},
            "numpy",
            lambda x, out: np.sum(x["x"], axis=1, out=out),
            rtol=1e-4,
            atol=1e-4,
        ),
        Workload(
            f"row mean {rows}x{cols}",
            make_model(
                [node("ReduceMean", ["x", "axes"], ["y"], keepdims=0)], {"x": m}, ["y"], axes
            ),
            {"x": m},
            "numpy",
            lambda x, out: np.mean(x["x"], axis=1, out=out),
            rtol=1e-4,
            atol=1e-5,
        ),
        Workload(
            f"layernorm {rows}x{cols}",
            make_model(
                [node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=-1)],
                {"x": m},
                ["y"],
                {"scale": rng.standard_normal(cols).astype(np.float32), "bias": bias},
            ),
            {"x": m},
            "onnxruntime",
            rtol=1e-4,
            atol=1e-4,
        ),
    ]


KEYS = ("add", "chain", "exp", "softmax", "rowsum", "rowmean", "layernorm")


def loom_runner(w: Workload) -> tuple[Callable[[], object], np.ndarray, float]:
    """A call of the compiled model's main on aligned arrays (the output preallocated), the
    output, and the compile time."""
    start = time.perf_counter()
    compiled = loom.compile(w.model, target="llvm")
    compile_s = time.perf_counter() - start
    main = compiled.module[compiled.info.main]
    ((_, shape, dt),) = compiled.info.outputs
    out = loom.nd.empty(shape, dt)
    pools = [
        loom.nd.empty((p["size"],), "uint8", alignment=p["alignment"])
        for p in compiled.info.caller_pools
    ]
    args = [w.inputs[name] for name in compiled.input_names] + [out] + pools
    return (lambda: main(*args)), out, compile_s


def reference_runner(w: Workload, threads: int) -> tuple[Callable[[], object], np.ndarray]:
    """The reference's call with a preallocated output, and the output."""
    if w.reference == "numpy":
        out = np.empty_like(loom_output_like(w))
        return (lambda: w.numpy_fn(w.inputs, out)), out
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # idle onnxruntime threads sleep instead of spinning on loom's second core
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(
        w.model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    binding = session.io_binding()
    for name, x in w.inputs.items():
        binding.bind_cpu_input(name, x)
    out = np.empty_like(loom_output_like(w))
    binding.bind_output(
        session.get_outputs()[0].name, "cpu", 0, np.float32, out.shape, out.ctypes.data
    )
    return (lambda: session.run_with_iobinding(binding)), out


def loom_output_like(w: Workload) -> np.ndarray:
    session = ort.InferenceSession(w.model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, dict(w.inputs))[0]


@dataclasses.dataclass
class Times:
    wall: float
    cpu: float


def interleaved(fa: Callable, fb: Callable, rounds: int) -> tuple[Times, Times]:
    """Median wall and CPU time per call of `fa` and `fb`, measured in alternating rounds."""
    fa(), fb()
    numbers = []
    for f in (fa, fb):
        start = time.perf_counter()
        f()
        numbers.append(max(1, int(ROUND_SECONDS / max(time.perf_counter() - start, 1e-7))))
    samples: list[list[tuple[float, float]]] = [[], []]
    for _ in range(rounds):
        for k, f in enumerate((fa, fb)):
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(numbers[k]):
                f()
            samples[k].append(
                (
                    (time.perf_counter() - wall) / numbers[k],
                    (time.process_time() - cpu) / numbers[k],
                )
            )
    return tuple(
        Times(statistics.median(w for w, _ in s), statistics.median(c for _, c in s))
        for s in samples
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--cols", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--only", default=",".join(KEYS), help=f"some of {','.join(KEYS)}")
    opts = parser.parse_args()
    chosen = opts.only.split(",")
    unknown = [k for k in chosen if k not in KEYS]
    if unknown:
        parser.error(f"unknown workloads {unknown}; choose from {list(KEYS)}")
    print(f"target {loom.target.Target('llvm')}; {common.machine_threads()} CPUs")
    print("ratio: reference / loom (above 1: loom faster); times in ms per call\n")
    rows = []
    for key, w in zip(KEYS, workloads(opts)):
        if key not in chosen:
            continue
        run_loom, got, compile_s = loom_runner(w)
        print(f"{w.name}: loom compile {compile_s:.2f} s", flush=True)
        for threads in (1, 2):
            loom.runtime.set_num_threads(threads)
            run_ref, want = reference_runner(w, threads)
            run_loom()
            run_ref()
            np.testing.assert_allclose(got, want, rtol=w.rtol, atol=w.atol, err_msg=w.name)
            lt, rt = interleaved(run_loom, run_ref, opts.rounds)
            rows.append(
                [
                    w.name,
                    str(threads),
                    w.reference,
                    ms(lt.wall),
                    ms(rt.wall),
                    f"{rt.wall / lt.wall:.2f}",
                    ms(lt.cpu),
                    ms(rt.cpu),
                    f"{rt.cpu / lt.cpu:.2f}",
                ]
            )
    print()
    common.print_table(
        [
            "workload",
            "threads",
            "reference",
            "loom wall",
            "ref wall",
            "wall ratio",
            "loom cpu",
            "ref cpu",
            "cpu ratio",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
