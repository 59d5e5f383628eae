"""Predicated vector loads wider than a vector register on x86
(loom/codegen/llvm/register_pieces.py).

LLVM 22's X86 back end, splitting such a load into register-wide loads, loads a piece whose
mask is all false whole when that shows only in its own combines. The smallest case seen, on
AVX2 (`llc -mcpu=znver3`; lanes 8..15 came back as x[8..15] instead of zero):

    %s = splat (i1 %c)                                   ; %c true at run time
    %m = and <16 x i1> %s, <6 x true, 10 x false>
    %v = call <16 x float> @llvm.masked.load.v16f32.p0(ptr %x, <16 x i1> %m, zeroinitializer)

A padded row's copy is that load (the condition on its row, a constant for its columns once its
column loop is unrolled): a 5x5 convolution with asymmetric padding read the 4 elements after
each row into its last output column. loom splits the load itself; these compile such copies
for AVX2 (`-mcpu=haswell -mattr=+avx2`) and compare them with numpy, and check that no masked
load wider than a register reaches LLVM.
"""

import re

import llvmlite.binding as llvm
import numpy as np
import pytest

import loom
from loom import te

AVX2 = "llvm -mcpu=haswell -mattr=+avx2"  # 32-byte registers

needs_avx2 = pytest.mark.skipif(
    not llvm.get_host_cpu_features().get("avx2"),
    reason="runs AVX2 code: needs an x86-64 CPU with AVX2",
)


def padded_copy(rows, cols, top, left, width, lanes, unroll):
    """pad[h, w] = x[h - top, w - left] inside x, else 0: `width` columns (past x's right edge
    and to a partial last vector of `lanes`), the column loop split by `lanes` and vectorized,
    its outer loop unrolled or not."""
    x = te.placeholder((rows, cols), name="x")
    pad = te.compute(
        (rows + top, width),
        lambda h, w: te.if_then_else(
            te.all(h >= top, w >= left, w < cols + left), x[h - top, w - left], 0.0
        ),
        name="pad",
    )
    s = te.create_schedule(pad.op)
    outer, inner = s[pad].split(pad.op.axis[1], factor=lanes)
    s[pad].vectorize(inner)
    if unroll:
        s[pad].unroll(outer)
    return s, [x, pad]


def numpy_padded_copy(x, top, left, width):
    out = np.zeros((x.shape[0] + top, width), x.dtype)
    cols = min(x.shape[1], width - left)
    out[top:, left : left + cols] = x[:, :cols]
    return out


def widest_masked_load(module) -> int:
    """The most lanes of an llvm.masked.load whose mask is not a constant, in the module's
    optimized LLVM IR (a constant mask is right at any width)."""
    dynamic = r"@llvm\.masked\.load\.v(\d+)\w*\([^)]*<\d+ x i1> %"
    found = re.findall(dynamic, module.get_source("ll"))
    return max(map(int, found), default=0)


@needs_avx2
@pytest.mark.parametrize("unroll", [True, False], ids=["unrolled", "loop"])
@pytest.mark.parametrize(
    "rows, cols, top, left, width, lanes",
    [
        (23, 37, 2, 1, 44, 16),  # the convolution's padded rows: 41 columns to 44
        (5, 37, 1, 1, 44, 32),  # 32 lanes: the last 8 are past the row
        (4, 9, 1, 0, 20, 16),
        (3, 5, 1, 2, 12, 16),  # the row inside the first register
    ],
)
def test_padded_rows_copied_with_avx2_registers(rows, cols, top, left, width, lanes, unroll):
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype("float32")
    f = loom.build(*padded_copy(rows, cols, top, left, width, lanes, unroll), target=AVX2)
    out = np.full((rows + top, width), np.nan, "float32")
    f(x, out)
    np.testing.assert_array_equal(out, numpy_padded_copy(x, top, left, width))
    assert widest_masked_load(f) <= 8


@needs_avx2
def test_strided_reads_of_guarded_rows_with_avx2_registers():
    """Every second element of a row, the first 17 of the rows from the third on: an 8-lane
    stride-2 load spans 16 elements, two registers."""
    rows, cols = 6, 40
    x = te.placeholder((rows, cols), name="x")
    y = te.compute(
        (rows, cols // 2),
        lambda r, i: te.if_then_else(te.all(r >= 2, i < 17), x[r, i * 2], 0.0),
        name="y",
    )
    s = te.create_schedule(y.op)
    outer, inner = s[y].split(y.op.axis[1], factor=8)
    s[y].vectorize(inner)
    s[y].unroll(outer)
    f = loom.build(s, [x, y], target=AVX2)
    data = np.random.default_rng(1).standard_normal((rows, cols)).astype("float32")
    out = np.full((rows, cols // 2), np.nan, "float32")
    f(data, out)
    want = data[:, ::2].copy()
    want[:2] = 0
    want[:, 17:] = 0
    np.testing.assert_array_equal(out, want)
    assert widest_masked_load(f) <= 8


@needs_avx2
def test_a_convolution_with_asymmetric_padding_on_avx2():
    """The 5x5 convolution whose last output column read past its rows (compared with a
    direct numpy convolution)."""
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 4, 23, 37)).astype("float32")
    w = rng.standard_normal((8, 4, 5, 5)).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["out"], pads=[2, 1, 0, 3])],
        "m",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_empty_tensor_value_info("out")],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    got = loom.compile(model, target=AVX2)(x=x)["out"]
    padded = np.pad(x, ((0, 0), (0, 0), (2, 0), (1, 3)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (5, 5), axis=(2, 3))
    want = np.einsum("nchwij,ocij->nohw", windows, w)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
