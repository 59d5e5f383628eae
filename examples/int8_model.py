"""A quantized ONNX model split between the reference NPU and the host (docs/models.md,
"Partitioning for a backend"): the NPU's graph patterns take its int8 convolutions and matrix
product, the host keeps the pooling, the flattening and the layout changes; the result is bit
for bit the model's integer arithmetic as ONNX specifies it (requantization rounding halves to
even, the NPU's NPU_ROUND_HALF_EVEN), checked against a numpy reference and against
onnxruntime. The second input has exact ties, where rounding halves up would give other values.

The model is built here with onnx.helper: x (int8, zero point 3) -> QLinearConv + Relu ->
MaxPool -> DequantizeLinear / Conv / Relu / QuantizeLinear -> Flatten -> QLinearMatMul -> y.

Run: python examples/int8_model.py
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

import loom
from loom.backend.npu import simulator as npu_sim

TITLE = "an int8 ONNX model on the reference NPU and the host, simulated"


def requantize(acc, multiplier, shift, relu, rounding="half_even"):
    """docs/npu.md, mvout: acc * M / 2^S of the int32 accumulator rounded to the nearest
    integer, halves to even (ONNX) or up, then saturated (and ReLU)."""
    wide = acc.astype(np.int32).astype(np.int64) * multiplier
    floor, rest, half = wide >> shift, wide & ((1 << shift) - 1), (1 << shift) // 2
    if rounding == "half_even":
        up = (rest > half) | ((rest == half) & (floor % 2 == 1))
    else:
        up = rest >= half
    y = np.clip(floor + (up if shift else 0), -128, 127)
    return (np.maximum(y, 0) if relu else y).astype(np.int8)


RNG = np.random.default_rng(7)
W1 = RNG.integers(-20, 21, (20, 3, 3, 3)).astype(np.int8)
B1 = RNG.integers(-3000, 3000, 20).astype(np.int32)
W2 = RNG.integers(-30, 31, (24, 20, 3, 3)).astype(np.int8)
B2 = RNG.integers(-3000, 3000, 24).astype(np.int32)
W3 = RNG.integers(-20, 21, (216, 10)).astype(np.int8)
# scales whose requantization factors are exact: conv1 7/2^11, conv2 5/2^11, matmul 3/2^8
SCALES = {"x_s": 2**-4, "w1_s": 7 * 2**-9, "r1_s": 2**-2, "w2_s": 5 * 2**-10, "b2_s": 5 * 2**-12}
SCALES |= {"c2_s": 2**-1, "w3_s": 3 * 2**-9, "y_s": 2**-2}
X_ZERO = 3


def scalar(name, value, dtype):
    return numpy_helper.from_array(np.array(value, dtype), name)


def int8_model(w_zero=0):
    """x (int8, zero point 3) -> QLinearConv+Relu -> MaxPool -> DQ/Conv/Relu/Q -> Flatten ->
    QLinearMatMul -> y (int8); the two convolutions' results r1 and c2 are outputs too."""
    consts = [scalar(k, v, np.float32) for k, v in SCALES.items()]
    consts += [
        scalar("x_z", X_ZERO, np.int8),
        scalar("z", 0, np.int8),
        scalar("w_z", w_zero, np.int8),
    ]
    consts += [scalar("z32", 0, np.int32)]
    consts += [numpy_helper.from_array(v, k) for k, v in (("w1", W1), ("b1", B1), ("w2", W2))]
    consts += [numpy_helper.from_array(v, k) for k, v in (("b2", B2), ("w3", W3))]
    node = helper.make_node
    nodes = [
        node(
            "QLinearConv",
            ["x", "x_s", "x_z", "w1", "w1_s", "w_z", "r1_s", "z", "b1"],
            ["c1"],
            pads=[1, 1, 1, 1],
            name="conv1",
        ),
        node("Relu", ["c1"], ["r1"], name="relu1"),
        node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        node("DequantizeLinear", ["p1", "r1_s", "z"], ["p1f"], name="dq_p1"),
        node("DequantizeLinear", ["w2", "w2_s", "z"], ["w2f"], name="dq_w2"),
        node("DequantizeLinear", ["b2", "b2_s", "z32"], ["b2f"], name="dq_b2"),
        node(
            "Conv", ["p1f", "w2f", "b2f"], ["c2f"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv2"
        ),
        node("Relu", ["c2f"], ["r2f"], name="relu2"),
        node("QuantizeLinear", ["r2f", "c2_s", "z"], ["c2"], name="q_c2"),
        node("Flatten", ["c2"], ["f"], name="flatten"),
        node(
            "QLinearMatMul",
            ["f", "c2_s", "z", "w3", "w3_s", "z", "y_s", "z"],
            ["y"],
            name="matmul",
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "int8net",
        [helper.make_tensor_value_info("x", TensorProto.INT8, (1, 3, 12, 12))],
        [
            helper.make_tensor_value_info("y", TensorProto.INT8, (1, 10)),
            helper.make_tensor_value_info("r1", TensorProto.INT8, (1, 20, 12, 12)),
            helper.make_tensor_value_info("c2", TensorProto.INT8, (1, 24, 3, 3)),
        ],
        consts,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.checker.check_model(m, full_check=True)
    return m


def conv_nchw(x, w, bias, stride, pad, pad_value):
    """int64 convolution of NCHW int8 data padded with `pad_value`."""
    xp = np.pad(
        x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=pad_value
    )
    _, _, kh, kw = w.shape
    oh = (xp.shape[2] - kh) // stride + 1
    ow = (xp.shape[3] - kw) // stride + 1
    acc = np.zeros((x.shape[0], w.shape[0], oh, ow), np.int64) + bias[None, :, None, None]
    for ry in range(kh):
        for rx in range(kw):
            win = xp[:, :, ry : ry + stride * oh : stride, rx : rx + stride * ow : stride]
            acc += np.einsum("nchw,fc->nfhw", win, w[:, :, ry, rx].astype(np.int64))
    return acc


def integer_reference(x, rounding="half_even"):
    """The model in integers, as ONNX specifies it and the NPU computes it: the zero point of x
    subtracted (3), the requantization factors 7/2^11, 5/2^11 and 3/2^8 applied exactly and
    rounded, halves to even (or up, for comparison)."""
    acc1 = conv_nchw(x.astype(np.int64) - X_ZERO, W1, B1, 1, 1, 0)
    r1 = requantize(acc1, 7, 11, True, rounding)
    p1 = r1.reshape(1, 20, 6, 2, 6, 2).max(axis=(3, 5))
    r2 = requantize(conv_nchw(p1, W2, B2, 2, 1, 0), 5, 11, True, rounding)
    acc3 = r2.reshape(1, -1).astype(np.int64) @ W3.astype(np.int64)
    y = requantize(acc3, 3, 8, False, rounding)
    return {"y": y, "r1": r1, "c2": r2}


def input_x(seed=0):
    return np.random.default_rng(seed).integers(-128, 128, (1, 3, 12, 12)).astype(np.int8)


TIE_SEED = 2
"""input_x(TIE_SEED) makes an exact tie in r1 whose floor is even: halves up gives one more."""


def onnxruntime_outputs(model, x):
    """The model's outputs as onnxruntime computes them (its CPU kernels, MLAS)."""
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return dict(zip(("y", "r1", "c2"), session.run(None, {"x": x})))


def same(a, b):
    return all(np.array_equal(a[name], b[name]) for name in a)


def run() -> bool:
    """Compile the model for the NPU, print where each kernel runs, run it on the simulator and
    check it against the integer reference and onnxruntime; True if both match."""
    print(f"=== {TITLE}")
    model = int8_model()
    compiled = loom.compile(model, target="npu")
    for group in compiled.info.groups:
        print(f"  {group['kernel']}: {' + '.join(group['ops'])}  [{group['target']}]")
    for planned in compiled.memory_plan.pools:  # docs/memory-planning.md
        pool = planned.pool
        print(
            f"  pool {pool.name} ({pool.placement}, {'/'.join(pool.accessible_from)}): "
            f"{len(planned.placed)} buffers in {planned.size} bytes, lower bound "
            f"{planned.plan.lower_bound}"
        )
    ok = True
    for seed in (0, TIE_SEED):
        x = input_x(seed)
        npu_sim.reset()
        got = compiled(x=x)
        counters = npu_sim.counters()
        want = integer_reference(x)
        by_ort = onnxruntime_outputs(model, x)
        up = integer_reference(x, "half_up")
        ties = sum(int(np.sum(up[name] != want[name])) for name in want)
        print(f"input_x({seed}): rounding halves up would change {ties} of its outputs")
        for reference, outputs in (("the numpy integer reference", want), ("onnxruntime", by_ort)):
            match = same(got, outputs)
            ok = ok and match
            verdict = "matches" if match else "DOES NOT MATCH"
            print(f"--- simulator: {verdict} {reference} (outputs {', '.join(want)}), bit for bit")
    print(
        f"NPU: {counters['compute']} compute, {counters['mvin']} mvin, {counters['mvout']} mvout "
        f"instructions, {counters['macs']} MACs in {counters['cycles']} cycles\n"
    )
    return ok


if __name__ == "__main__":
    sys.exit(0 if run() else 1)
