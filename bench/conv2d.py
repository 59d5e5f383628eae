"""Single convolution and pooling layers of real models: loom against onnxruntime (1 and 2
threads), in one process, runs interleaved; medians of wall and process-CPU time, GFLOP/s, the
ratios (onnxruntime time / loom time: above 1, loom is faster) and the largest difference.

Each layer is a one-node ONNX model (a Conv with its weights and bias as initializers, followed
by its activation when the model has one fused there; or a pooling node), compiled with
`loom.compile` as a model would be.

    python bench/conv2d.py [--runs 30] [--only NAME]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import pathlib
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import common

import loom


@dataclasses.dataclass(frozen=True)
class Layer:
    name: str
    x: tuple[int, int, int, int]  # N, C, H, W
    op: str = "Conv"  # Conv, MaxPool, AveragePool
    filters: int = 0
    kernel: int | tuple[int, int] = 3  # square, or (height, width)
    stride: int = 1
    pad: int = 1
    group: int = 1
    activation: str | None = None  # Relu, Clip (ReLU6), HardSwish
    bias: bool = True

    def kernel_hw(self) -> tuple[int, int]:
        return self.kernel if isinstance(self.kernel, tuple) else (self.kernel, self.kernel)

    def out_hw(self) -> tuple[int, int]:
        h, w = self.x[2:]
        (kh, kw), s, p = self.kernel_hw(), self.stride, self.pad
        return (h + 2 * p - kh) // s + 1, (w + 2 * p - kw) // s + 1

    def flops(self) -> int:
        oh, ow = self.out_hw()
        n, c = self.x[:2]
        window = math.prod(self.kernel_hw())
        if self.op != "Conv":
            return n * c * oh * ow * window
        return 2 * n * self.filters * oh * ow * (c // self.group) * window


LAYERS = [
    # the acceptance layers (issue 16)
    Layer("resnet18 3x3 64", (1, 64, 56, 56), filters=64),
    Layer("mobilenet dw 3x3 32", (1, 32, 112, 112), filters=32, group=32),
    Layer("pointwise 32->64 112", (1, 32, 112, 112), filters=64, kernel=1, pad=0),
    # more layers of resnet18, mobilenet_v2 and ppocrv4_det, with their activations
    Layer("resnet18 stem 7x7/2", (1, 3, 224, 224), filters=64, kernel=7, stride=2, pad=3),
    Layer("resnet18 3x3/2 64->128", (1, 64, 56, 56), filters=128, stride=2, activation="Relu"),
    Layer("resnet18 3x3 128 28", (1, 128, 28, 28), filters=128, activation="Relu"),
    Layer("resnet18 3x3/2 128->256", (1, 128, 28, 28), filters=256, stride=2, activation="Relu"),
    Layer("resnet18 3x3 256 14", (1, 256, 14, 14), filters=256, activation="Relu"),
    Layer("resnet18 3x3 512 7", (1, 512, 7, 7), filters=512, activation="Relu"),
    Layer("resnet18 3x3/2 256->512", (1, 256, 14, 14), filters=512, stride=2, activation="Relu"),
    Layer("resnet18 1x1/2 256->512", (1, 256, 14, 14), filters=512, kernel=1, stride=2, pad=0),
    Layer("resnet18 1x1/2 64->128", (1, 64, 56, 56), filters=128, kernel=1, stride=2, pad=0),
    Layer("resnet18 maxpool 3x3/2", (1, 64, 112, 112), op="MaxPool", stride=2),
    Layer("mobilenet stem 3x3/2", (1, 3, 224, 224), filters=32, stride=2, activation="Clip"),
    Layer(
        "mobilenet dw 3x3/2 96",
        (1, 96, 112, 112),
        filters=96,
        group=96,
        stride=2,
        activation="Clip",
    ),
    Layer(
        "mobilenet dw 3x3/2 144",
        (1, 144, 56, 56),
        filters=144,
        group=144,
        stride=2,
        activation="Clip",
    ),
    Layer("mobilenet pw 144->24 56", (1, 144, 56, 56), filters=24, kernel=1, pad=0),
    Layer(
        "mobilenet pw 96->576 14", (1, 96, 14, 14), filters=576, kernel=1, pad=0, activation="Clip"
    ),
    Layer("mobilenet pw 960->160 7", (1, 960, 7, 7), filters=160, kernel=1, pad=0),
    Layer(
        "ppocr pw 48->96 80", (1, 48, 80, 80), filters=96, kernel=1, pad=0, activation="HardSwish"
    ),
    Layer(
        "ppocr dw 5x5 96 40",
        (1, 96, 40, 40),
        filters=96,
        kernel=5,
        pad=2,
        group=96,
        activation="HardSwish",
    ),
    Layer("ppocr avgpool 2x2/2", (1, 96, 80, 80), op="AveragePool", kernel=2, stride=2, pad=0),
    # magika's one big convolution: rows one column wide
    Layer("magika 5x1 256->512", (1, 256, 512, 1), filters=512, kernel=(5, 1), pad=0),
]


def layer_model(layer: Layer) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    n, c, h, w = layer.x
    kh, kw = layer.kernel_hw()
    window = {"kernel_shape": [kh, kw], "strides": [layer.stride] * 2, "pads": [layer.pad] * 4}
    inits, nodes = [], []
    if layer.op == "Conv":
        weights = rng.standard_normal((layer.filters, c // layer.group, kh, kw)).astype("float32")
        weights *= np.float32(1 / np.sqrt(weights[0].size))
        inits.append(numpy_helper.from_array(weights, "w"))
        inputs = ["x", "w"]
        if layer.bias:
            bias = rng.standard_normal(layer.filters).astype("float32")
            inits.append(numpy_helper.from_array(bias, "b"))
            inputs.append("b")
        out = "y" if layer.activation is None else "conv"
        nodes.append(helper.make_node("Conv", inputs, [out], group=layer.group, **window))
        if layer.activation == "Clip":
            inits += [numpy_helper.from_array(np.float32(v), n) for v, n in ((0, "lo"), (6, "hi"))]
            nodes.append(helper.make_node("Clip", ["conv", "lo", "hi"], ["y"]))
        elif layer.activation is not None:
            nodes.append(helper.make_node(layer.activation, ["conv"], ["y"]))
    else:
        nodes.append(helper.make_node(layer.op, ["x"], ["y"], **window))
    graph = helper.make_graph(
        nodes,
        layer.name.replace(" ", "_"),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(layer.x))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def ort_session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    # its idle threads would otherwise spin between runs, taking loom's second core
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def preallocated_call(compiled, x: np.ndarray):
    """The model's `main` on arrays allocated once, as onnxruntime's arena reuses its memory:
    `compiled(x=x)` maps fresh output and workspace arrays at each call, and their page faults
    would cost more than a small layer."""
    info = compiled.info
    out = [loom.nd.empty(shape, dt) for _, shape, dt in info.outputs]
    pools = [loom.nd.empty((p["size"],), "uint8", p["alignment"]) for p in info.caller_pools]
    main = compiled.module[info.main]
    return lambda: main(x, *out, *pools)


def bench_layer(layer: Layer, runs: int, thread_counts: list[int], peak: float) -> list[list[str]]:
    model = layer_model(layer)
    # 64-byte aligned, as a layer's input inside a model is (its workspace): loom's runtime
    # copies a less aligned argument first, which would time a copy of the input
    x = loom.nd.empty(layer.x, "float32")
    x[...] = np.random.default_rng(1).standard_normal(layer.x)
    start = time.perf_counter()
    compiled = loom.compile(model)
    compile_s = time.perf_counter() - start
    rows = []
    for threads in thread_counts:
        session = ort_session(model, threads)
        want = session.run(None, {"x": x})[0]
        loom.runtime.set_num_threads(threads)
        got = compiled(x=x)["y"]
        error = float(np.max(np.abs(got.astype(np.float64) - want)))
        loom_fn = preallocated_call(compiled, x)
        ort_fn = lambda s=session: s.run(None, {"x": x})  # noqa: E731
        times = common.interleaved({"loom": loom_fn, "ort": ort_fn}, runs)
        (lw, lc), (ow, oc) = times["loom"], times["ort"]
        rows.append(
            [
                layer.name,
                str(threads),
                f"{compile_s:.1f}",
                f"{lw * 1e3:.3f}",
                f"{ow * 1e3:.3f}",
                f"{layer.flops() / lw / 1e9:.1f}",
                f"{layer.flops() / ow / 1e9:.1f}",
                f"{100 * layer.flops() / lc / 1e9 / peak:.0f}%",
                f"{ow / lw:.2f}",
                f"{oc / lc:.2f}" if lc > 0 else "-",
                f"{error:.1e}",
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="timed calls per engine")
    parser.add_argument("--only", help="only layers whose name contains this")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    opts = parser.parse_args()
    chosen = common.only(parser, opts.only, [ly.name for ly in LAYERS], "layer")
    layers = [ly for ly in LAYERS if ly.name in chosen]
    print(
        f"loom {loom.__version__} vs onnxruntime {ort.__version__}; {common.machine_threads()} "
        f"cores; medians of {opts.runs} calls in 5 interleaved rounds"
    )
    peak = common.fma_peak_gflops()
    print(f"measured FMA peak of one core: {peak:.0f} GFLOP/s (loom % peak: of its CPU time)")
    print("ratios: onnxruntime time / loom time (above 1: loom is faster)\n")
    rows = []
    for layer in layers:
        rows += bench_layer(layer, opts.runs, opts.threads, peak)
    headers = ["layer", "threads", "compile s", "loom ms", "ort ms", "loom GFLOP/s"]
    headers += ["ort GFLOP/s", "loom % peak", "wall ratio", "cpu ratio", "max abs err"]
    common.print_table(headers, rows)


if __name__ == "__main__":
    main()
