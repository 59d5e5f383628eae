"""A batch-1 dense layer (Gemm 1 x K @ (N x K)^T + bias, a classifier) with its weights cold in
DRAM, as in a model's run, and warm in the caches: loom against onnxruntime, one thread, in
one process, interleaved; medians of thread CPU time (a flush of 48 MB before each cold run).
`--rows` compares loom's one-row schedules: registers x rows of B per step
(dense_schedules.ROW_VECTORS x ROW_K_UNROLL).

    python bench/gemv.py [--k 1280] [--n 1000] [--runs 60] [--rows 4x8 4x16]
"""

from __future__ import annotations

import argparse
import pathlib
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import loom
from loom.backend.cpu import dense_schedules

FLUSH_BYTES = 48 << 20


def gemm_model(k: int, n: int, path: pathlib.Path) -> None:
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((n, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "b"], ["y"], transB=1)],
        "gemv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
        [numpy_helper.from_array(weight, "W"), numpy_helper.from_array(bias, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def _thread(fn) -> float:
    start = time.thread_time()
    fn()
    return time.thread_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=1280)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--rows", nargs="*", default=[], help="loom variants, e.g. 4x8 4x16")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "gemv.onnx"
        gemm_model(args.k, args.n, path)
        x = np.random.default_rng(1).standard_normal((1, args.k)).astype(np.float32)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        want = session.run(None, {"x": x})[0]
        loom.runtime.set_num_threads(1)
        runs = {}
        default = (dense_schedules.ROW_VECTORS, dense_schedules.ROW_K_UNROLL)
        variants = [tuple(int(v) for v in r.split("x")) for r in args.rows] or [default]
        for vectors, rows in variants:
            dense_schedules.ROW_VECTORS, dense_schedules.ROW_K_UNROLL = vectors, rows
            compiled = loom.compile(str(path))
            np.testing.assert_allclose(compiled(x=x)["y"], want, rtol=1e-4, atol=1e-4)
            label = f"loom {vectors}x{rows}" if args.rows else "loom"
            runs[label] = lambda c=compiled: c(x=x)
        dense_schedules.ROW_VECTORS, dense_schedules.ROW_K_UNROLL = default
    runs["onnxruntime"] = lambda: session.run(None, {"x": x})
    flush = np.zeros(FLUSH_BYTES, np.uint8)
    cold = {key: [] for key in runs}
    warm = {key: [] for key in runs}
    keys = list(runs)
    for run in range(args.runs):
        # each run starts at another one: none always comes first, after the flush's writes
        order = keys[run % len(keys) :] + keys[: run % len(keys)]
        for key in order:
            fn = runs[key]
            flush += 1  # evicts the weights (and everything else) from the caches
            cold[key].append(_thread(fn))
        for key in order:
            fn = runs[key]
            for _ in range(3):  # the weights in the caches, the flush's dirty lines written back
                fn()
            warm[key].append(_thread(fn))
    weight_bytes = args.k * args.n * 4
    reference = np.median(cold["onnxruntime"]), np.median(warm["onnxruntime"])
    print(f"1 x {args.k} x {args.n} Gemm, {weight_bytes / 1e6:.2f} MB of weights, 1 thread (ms)")
    for key in runs:
        c, w = np.median(cold[key]), np.median(warm[key])
        print(
            f"  {key:14s} cold {c * 1e3:6.3f} ({weight_bytes / c / 1e9:5.1f} GB/s, "
            f"ort/loom {reference[0] / c:4.2f})  warm {w * 1e3:6.3f} (ort/loom "
            f"{reference[1] / w:4.2f})"
        )


if __name__ == "__main__":
    main()
