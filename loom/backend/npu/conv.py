"""The NPU's conv2d strategy (NHWC, int8, bias, requantization, optional ReLU): weight-
stationary streaming over a flattened grid (docs/npu-strategies.md).

Stride 1: the padded input of one image is a matrix of PH * PW rows (pixels, row-major) by C
columns (channels), staged in the scratchpad in DIM-channel slices (loom/backend/npu/packing.py).
Output pixel (y, x) computed at the virtual row q = y * PW + x reads input row
q + ry * PW + rx for the kernel position (ry, rx): for a fixed (ry, rx) and DIM-channel slice,
the rows of a block of output rows are CONSECUTIVE input rows, so one preload of that DIM x DIM
weight tile and one compute stream the whole block (NY output rows of PW virtual pixels; the
KW - 1 pixels past each row's end are computed and never stored). The block's rows of input
(with the KH - 1 rows below it) are staged once for all its output-channel tiles.

Stride > 1 strides the input rows of an output row, so each output row (or each piece of up
to ACC_ROWS / 2 pixels of it) streams its own patch rows (an `mvin` with a DRAM stride of
`stride` pixels) per kernel position and channel slice; so does stride 1 when not even one
output row of the grid fits the memories.
"""

from __future__ import annotations

from loom import te
from loom.errors import LoomError
from loom.te.schedule import Schedule
from loom.te.tensor import Tensor

from .arch import ACC, ACC_ROWS, DIM, SPAD, SPAD_ROWS
from .intrinsics import GEMM_STREAM_BIAS
from .packing import npu_rows, slices
from .requant import integer, requantize


def _check(data_shape, kernel_shape, stride, padding, pad_value) -> tuple[int, int, int]:
    for name, shape in (("data_shape", data_shape), ("kernel_shape", kernel_shape)):
        if not isinstance(shape, tuple | list) or len(shape) != 4:
            raise LoomError(f"conv2d_nhwc: {name} must be 4 sizes, got {shape!r}")
    stride = integer("conv2d_nhwc", "stride", stride)
    padding = integer("conv2d_nhwc", "padding", padding)
    pad_value = integer("conv2d_nhwc", "pad_value", pad_value)
    if not -128 <= pad_value <= 127:
        raise LoomError(f"conv2d_nhwc: pad_value must be an int8, got {pad_value}")
    if stride < 1:
        raise LoomError(f"conv2d_nhwc: stride must be an int >= 1, got {stride!r}")
    if padding < 0:
        raise LoomError(f"conv2d_nhwc: padding must be an int >= 0, got {padding!r}")
    _, h, w, c = data_shape
    kh, kw, kc, _ = kernel_shape
    if kc != c:
        raise LoomError(f"conv2d_nhwc: data has {c} channels, the kernel {kc}")
    if h + 2 * padding < kh or w + 2 * padding < kw:
        raise LoomError(
            f"conv2d_nhwc: a {kh}x{kw} kernel does not fit the {h}x{w} input padded by {padding}"
        )
    return stride, padding, pad_value


def conv2d_nhwc(
    data_shape: tuple[int, int, int, int],
    kernel_shape: tuple[int, int, int, int],
    *,
    stride: int = 1,
    padding: int = 0,
    multiplier: int = 1,
    shift: int = 0,
    relu: bool = False,
    pad_value: int = 0,
    rounding: str = "half_up",
) -> tuple[Schedule, list[Tensor]]:
    """out = requantize(conv2d(data, kernel) + bias): data (N, H, W, C) int8, kernel
    (KH, KW, C, F) int8, bias (F,) int32, out (N, OH, OW, F) int8, halves rounded as
    `rounding` says ("half_up" or "half_even"). Padding (with `pad_value`, a quantized input's
    zero point) is done on the host; the output pixels are the rows of the matrix product, the
    input channels (per kernel position) its reduction, the output channels its columns."""
    stride, padding, pad_value = _check(data_shape, kernel_shape, stride, padding, pad_value)
    n, h, w, c = data_shape
    kh, kw, _, f = kernel_shape
    data = te.placeholder(data_shape, "int8", name="data")
    kernel = te.placeholder(kernel_shape, "int8", name="kernel")
    bias = te.placeholder((f,), "int32", name="bias")
    if padding:
        p = padding
        padded = te.compute(
            (n, h + 2 * p, w + 2 * p, c),
            lambda b, y, x, ch: te.if_then_else(
                te.all(y >= p, y < h + p, x >= p, x < w + p),
                data[b, y - p, x - p, ch],
                te.const(pad_value, "int8"),
            ),
            name="padded",
        )
    else:
        padded = data
    requant = {"multiplier": multiplier, "shift": shift, "relu": relu, "rounding": rounding}
    pw, oh, ow = w + 2 * padding, h + 2 * padding - kh + 1, w + 2 * padding - kw + 1
    rows = _grid_block(oh, pw, ow, kh, slices(c)) if stride == 1 else None
    if rows is not None:
        s, out = _flat_grid(padded, kernel, bias, rows, requant)
    else:
        s, out = _output_rows(padded, kernel, bias, stride, requant)
    return s, [data, kernel, bias, out]


def _grid_block(oh: int, pw: int, ow: int, kh: int, ct: int) -> int | None:
    """Output rows per block: the most, dividing OH (a short last block would cut the input
    block's copy in the middle of a padded row, which no single mvin describes), whose
    accumulator rows ((NY - 1) * PW + OW, two copies) and input rows (NY + KH - 1 padded rows
    per channel slice, two copies, and two weight tiles) fit; None when not even one row does
    (a very wide or deep input: the output-row strategy tiles the row)."""
    for ny in (d for d in range(oh, 0, -1) if oh % d == 0):
        copies = 2 if ny < oh else 1
        acc_rows = (ny - 1) * pw + ow
        spad_rows = copies * ct * (ny + kh - 1) * pw + 2 * DIM
        if 2 * acc_rows <= ACC_ROWS and spad_rows <= SPAD_ROWS:
            return ny
    return None


def _flat_grid(padded: Tensor, kernel: Tensor, bias: Tensor, ny: int, requant: dict):
    n, ph, pw, c = padded.shape
    kh, kw, _, f = kernel.shape
    oh, ow = ph - kh + 1, pw - kw + 1
    ct = slices(c)
    # the padded input as (channel slice, image, pixel row-major, DIM channels)
    grid = te.compute(
        (ct, n, ph * pw, DIM),
        lambda t, b, q, ch: _channel(padded, t, ch, b, q // pw, q % pw),
        name="data.npu.spad",
    )
    ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    # channels in DIM-wide slices; past c the grid holds zeros, so the weight tile's rows there
    # add nothing (as A's last slice in ops.matmul)
    rt, rc = te.reduce_axis(ct, "rt"), te.reduce_axis(DIM, "rc")
    acc = te.compute(
        (n, (oh - 1) * pw + ow, f),
        lambda b, q, o: te.sum(
            grid[rt, b, q + ry * pw + rx, rc].astype("int32")
            * kernel[ry, rx, rt * DIM + rc, o].astype("int32"),
            axis=[ry, rx, rt, rc],
            init=bias[o],
        ),
        name="acc",
    )
    out = te.compute(
        (n, oh, ow, f),
        lambda b, y, x, o: requantize(acc[b, y * pw + x, o], **requant),
        name="out",
    )
    s = te.create_schedule(out.op)
    s[acc].set_scope(ACC)
    s[grid].set_scope(SPAD)
    K_s = s.cache_read(kernel, SPAD, [acc])
    b_, y_, x_, o_ = out.op.axis
    yo, yi = s[out].split(y_, factor=ny)
    oo, oi = s[out].split(o_, factor=DIM)
    s[out].reorder(b_, yo, oo, yi, x_, oi)
    # whole output rows leave in one mvout when they are consecutive accumulator rows
    s[out].pragma(yi if pw == ow else x_, "npu_mvout")
    s[acc].compute_at(s[out], oo)
    ab, aq, ao = s[acc].op.axis
    s[acc].reorder(ab, ry, rx, rt, aq, ao, rc)
    s[acc].tensorize(aq, GEMM_STREAM_BIAS)
    npu_rows(s, acc, 1)
    npu_rows(s, K_s, 2)
    gq = s[grid].op.axis[2]
    gy, _ = s[grid].split(gq, factor=pw)  # padded rows: the copy's index is affine
    s[grid].pragma(gy, "npu_mvin")  # one mvin per channel slice: its rows are whole rows
    s[grid].compute_at(s[out], yo)
    s[K_s].pragma(s[K_s].op.axis[2], "npu_mvin")
    s[K_s].compute_at(s[acc], rt)
    for stage in (acc, grid, K_s):
        s[stage].double_buffer()
    return s, out


def _channel(padded: Tensor, t, ch, *index):
    """Channel `t * DIM + ch` of `padded` at `index`, 0 past the last channel."""
    c = padded.shape[3]
    channel = t * DIM + ch
    if c % DIM == 0:
        return padded[(*index, channel)]
    return te.if_then_else(channel < c, padded[(*index, channel)], te.const(0, "int8"))


def _output_rows(padded: Tensor, kernel: Tensor, bias: Tensor, stride: int, requant: dict):
    """Per output row (in pieces of up to ACC_ROWS / 2 pixels), kernel position and channel
    slice, the row's patches (one mvin with a DRAM stride of `stride` pixels) stream through
    the weight tile."""
    n, ph, pw, c = padded.shape
    kh, kw, _, f = kernel.shape
    oh, ow = (ph - kh) // stride + 1, (pw - kw) // stride + 1
    patches = te.compute(
        (n, oh, ow, kh, kw, c),
        lambda b, y, x, ry, rx, ch: padded[b, y * stride + ry, x * stride + rx, ch],
        name="patches",
    )
    ry, rx, rc = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx"), te.reduce_axis(c, "rc")
    acc = te.compute(
        (n, oh, ow, f),
        lambda b, y, x, o: te.sum(
            patches[b, y, x, ry, rx, rc].astype("int32") * kernel[ry, rx, rc, o].astype("int32"),
            axis=[ry, rx, rc],
            init=bias[o],
        ),
        name="acc",
    )
    out = te.compute((n, oh, ow, f), lambda *i: requantize(acc(*i), **requant), name="out")
    s = te.create_schedule(out.op)
    s[patches].set_scope(SPAD)
    s[acc].set_scope(ACC)
    K_s = s.cache_read(kernel, SPAD, [acc])
    b_, y_, x_, o_ = out.op.axis
    cols = min(ow, ACC_ROWS // 2)
    xo, oo, xi, oi = s[out].tile(x_, o_, cols, DIM)
    s[out].pragma(xi, "npu_mvout")
    s[acc].compute_at(s[out], oo)
    an, ay, ax, ao = s[acc].op.axis
    ary, arx, arc = s[acc].op.reduce_axis
    co, ci = s[acc].split(arc, factor=DIM)
    s[acc].reorder(an, ay, ary, arx, co, ax, ao, ci)
    s[acc].tensorize(ax, GEMM_STREAM_BIAS)
    npu_rows(s, acc, 2)
    npu_rows(s, patches, 2)
    npu_rows(s, K_s, 2)
    for stage in (patches, K_s):
        s[stage].compute_at(s[acc], co)
        s[stage].pragma(s[stage].op.axis[0], "npu_mvin")
    for stage in (acc, patches, K_s):
        s[stage].double_buffer()
    return s, out
