"""A tile of output channels in the lanes reads its data rows first (conv_channels.rows_first).

Such a tile broadcasts, per reduction step (an input channel), a few elements of one input row
per pixel. From the data [n, c, h, w] each step reads another plane, a new cache line per
step; from the copy [n, h, c, w] the steps read consecutive rows. These compile the narrow
convolutions for an AVX2 CPU (whose cost model puts their channels in the lanes), compare them
with onnxruntime, and check where the tile's broadcasts read.
"""

import numpy as np
import pytest

import loom
from loom.ir.expr import IntImm, Var
from loom.ir.simplify import simplify
from loom.ir.visitor import free_vars, substitute
from tests.graph.test_conv_schedules import (
    conv_kernel,
    conv_model,
    loads_in,
    reduction_updates,
)

ort = pytest.importorskip("onnxruntime")

AVX2 = "llvm -mcpu=haswell -mattr=+avx2"

RNG = np.random.default_rng(0)

# (x shape, w shape, attributes, activation, row of the data that rows_first copies)
CASES = {
    "1x1 at 7x7": ((1, 96, 7, 7), (40, 96, 1, 1), {}, None, 7),
    # 168 channels: not in blocks of two registers, which lay a 1x1 convolution's pixels end
    # to end instead (conv_schedules._flat_pixels)
    "1x1 at 7x7, ReLU6": ((1, 64, 7, 7), (168, 64, 1, 1), {}, "Clip", 7),
    "3x3 at 7x7, padded": ((1, 32, 7, 7), (48, 32, 3, 3), {"pads": [1] * 4}, "Relu", 9),
    "3x3 at 14x14, padded": ((1, 16, 14, 14), (32, 16, 3, 3), {"pads": [1] * 4}, None, 16),
    "3x3 stride 2 from 14x14": (
        (1, 24, 14, 14),
        (32, 24, 3, 3),
        {"pads": [1] * 4, "strides": [2, 2]},
        "Relu",
        15,  # the padded columns read: 2 * 6 + 2 + 1
    ),
}


def compiled_and_checked(case):
    x_shape, w_shape, attrs, activation, _ = CASES[case]
    x = RNG.standard_normal(x_shape).astype("float32")
    w = RNG.standard_normal(w_shape).astype("float32")
    b = RNG.standard_normal(w_shape[:1]).astype("float32")
    m = conv_model(x, w, b, activation, **attrs)
    compiled = loom.compile(m, target=AVX2)
    got = compiled(x=x)["out"]
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)
    return compiled


def step(index, var: Var) -> int:
    one = simplify(substitute(index, {var: IntImm(1)}) - substitute(index, {var: IntImm(0)}))
    return int(one.value)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_channel_tile_broadcasts_from_consecutive_rows(case):
    compiled = compiled_and_checked(case)
    updates = reduction_updates(conv_kernel(compiled))
    assert updates and all(st.buffer.name.endswith(".lanes") for st in updates), updates
    broadcasts = [
        ld
        for st in updates
        for ld in loads_in(st.value)
        if ld.dtype.lanes == 1 and ld.buffer is not st.buffer
    ]
    assert broadcasts and all(ld.buffer.name.endswith(".rows") for ld in broadcasts), [
        ld.buffer.name for ld in broadcasts
    ]
    # the input channel's loop moves them by one row of the copy, not one plane of the data
    channel = next(v for v in free_vars(broadcasts[0].indices[0]) if v.name == "rc")
    row = CASES[case][4]
    assert all(step(ld.indices[0], channel) == row for ld in broadcasts), [
        ld.indices[0] for ld in broadcasts
    ]


def test_wide_rows_are_read_from_the_data():
    """A row wider than a cache line (56 columns) is a new line per step either way: the
    1x1 stride-2 convolution from 56x56 reads the data itself."""
    x = RNG.standard_normal((1, 16, 56, 56)).astype("float32")
    w = RNG.standard_normal((64, 16, 1, 1)).astype("float32")
    compiled = loom.compile(conv_model(x, w, strides=[2, 2]), target=AVX2)
    names = {
        ld.buffer.name
        for st in reduction_updates(conv_kernel(compiled))
        for ld in loads_in(st.value)
    }
    assert not any(name.endswith(".rows") for name in names), names
