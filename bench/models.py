"""Whole models: loom (1 and 2 threads) against onnxruntime (1 and 2 threads), in one process,
runs interleaved, medians of wall time and of process CPU time, and the ratios (above 1: loom is
faster), then the geometric mean of the wall ratios at each thread count. The models are the
ones `python scripts/fetch-models.py` put in the models cache, plus a small CNN built here, so
the bench runs on a machine without the cache.

    python bench/models.py [--runs 20] [--only NAME] [--models-dir DIR]

Inputs: the shapes of MODEL_SHAPES (as tests/models runs the models), else every dimension onnx
leaves symbolic is 1, unless --shape NAME=D0,D1,... says otherwise.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import common

import loom

MODEL_SHAPES = {  # inputs whose size the model leaves open, as tests/models runs them
    "magika": {"bytes": (1, 2048)},
    "silero_vad_16k_op15": {"input": (1, 512), "state": (2, 1, 128)},
    "ppocrv4_det": {"x": (1, 3, 320, 320)},
    "ppocrv4_rec": {"x": (1, 3, 48, 320)},
    "ppocr_mobile_v2_cls": {"x": (1, 3, 48, 192)},
    "nudenet_320n": {"images": (1, 3, 320, 320)},
}


def models_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("LOOM_MODELS_DIR", "~/.cache/loom/models")).expanduser()


def small_cnn() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = {
        "w1": rng.standard_normal((16, 3, 3, 3)).astype("float32") * 0.2,
        "w2": rng.standard_normal((32, 16, 3, 3)).astype("float32") * 0.1,
        "w3": rng.standard_normal((10, 32)).astype("float32") * 0.1,
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w3"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def feeds_for(session: ort.InferenceSession, shapes: dict) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    feeds = {}
    for i in session.get_inputs():
        shape = shapes.get(i.name) or tuple(d if isinstance(d, int) else 1 for d in i.shape)
        dt = np.dtype(helper.tensor_dtype_to_np_dtype(_onnx_type(i.type)))
        if dt.kind == "f":
            feeds[i.name] = rng.standard_normal(shape).astype(dt)
        else:
            feeds[i.name] = np.zeros(shape, dt)
    return feeds


def _onnx_type(ort_type: str) -> int:
    name = ort_type.removeprefix("tensor(").removesuffix(")")
    names = {"float": "FLOAT", "double": "DOUBLE", "float16": "FLOAT16", "bool": "BOOL"}
    return getattr(TensorProto, names.get(name, name.upper()))


def bench_model(name: str, model, shapes: dict, runs: int) -> list[list[str]]:
    sessions = {}
    for threads in (1, 2):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        # its idle threads would otherwise spin between runs, taking loom's second core
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sessions[threads] = ort.InferenceSession(
            model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model),
            opts,
            providers=["CPUExecutionProvider"],
        )
    feeds = feeds_for(sessions[1], shapes)
    start = time.perf_counter()
    compiled = loom.compile(model, shapes={k: v.shape for k, v in feeds.items()})
    compile_s = time.perf_counter() - start
    want = sessions[1].run(None, feeds)
    got = compiled(**feeds)
    error = max(
        float(np.max(np.abs(g.astype(np.float64) - w))) if w.size else 0.0
        for g, w in zip(got.values(), want)
    )
    rows = []
    for threads in (1, 2):
        loom.runtime.set_num_threads(threads)
        # interleaved: loom's and onnxruntime's runs alternate, round by round
        session = sessions[threads]
        loom_times, ort_times = [], []
        for _ in range(max(1, runs // 5)):
            loom_times.append(common.timed(lambda: compiled(**feeds), 5))
            ort_times.append(common.timed(lambda s=session: s.run(None, feeds), 5))
        lw, lc = (statistics.median(t[k] for t in loom_times) for k in (0, 1))
        ow, oc = (statistics.median(t[k] for t in ort_times) for k in (0, 1))
        rows.append(
            [
                name,
                str(threads),
                str(len(compiled.kernels)),
                f"{compile_s:.1f}",
                f"{lw * 1e3:.2f}",
                f"{ow * 1e3:.2f}",
                f"{ow / lw:.3f}",
                f"{oc / lc:.3f}" if lc > 0 else "-",
                f"{error:.1e}",
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs per engine (>= 20)")
    parser.add_argument("--only", help="only models whose name contains this")
    parser.add_argument("--models-dir", type=pathlib.Path, default=models_dir())
    parser.add_argument("--shape", action="append", default=[], help="NAME=D0,D1,...")
    opts = parser.parse_args()
    shapes = {}
    for text in opts.shape:
        key, _, dims = text.partition("=")
        shapes[key] = tuple(int(d) for d in dims.split(","))
    models = [("small_cnn", small_cnn())]
    models += [(p.stem, p) for p in sorted(opts.models_dir.glob("**/*.onnx"))]
    chosen = common.only(parser, opts.only, [n for n, _ in models], "model")
    models = [(n, m) for n, m in models if n in chosen]
    print(f"loom {loom.__version__} vs onnxruntime {ort.__version__}; medians of {opts.runs} runs")
    print("ratios: onnxruntime time / loom time (above 1: loom is faster)")
    print(f"this core's measured float32 FMA peak: {common.fma_peak_gflops():.0f} GFLOP/s\n")
    rows = []
    for name, model in models:
        try:
            rows += bench_model(name, model, {**MODEL_SHAPES.get(name, {}), **shapes}, opts.runs)
        except Exception as e:  # a model loom cannot compile yet is reported, not hidden
            print(f"{name}: not compiled: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
    headers = ["model", "threads", "kernels", "compile s", "loom ms", "ort ms"]
    common.print_table([*headers, "wall ratio", "cpu ratio", "max abs err"], rows)
    for threads in ("1", "2"):
        ratios = [float(r[6]) for r in rows if r[1] == threads]
        if ratios:
            mean = statistics.geometric_mean(ratios)
            print(
                f"{threads} thread(s): wall ratios' geometric mean {mean:.3f}, {len(ratios)} models"
            )


if __name__ == "__main__":
    main()
