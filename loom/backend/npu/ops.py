"""Operator strategies for the NPU: int8 matmul and conv2d (NHWC) with bias, requantization
and optional ReLU.

Both compute `acc = bias + sum(int32(x) * int32(w))` in the accumulator, tile to DIM, stage
their operands in the scratchpad with `mvin`, tensorize the DIM x DIM x DIM product into
`preload`/`compute`, and write each output tile back through `mvout`, requantized.
"""

from __future__ import annotations

from loom import te
from loom.errors import LoomError
from loom.te.schedule import Schedule
from loom.te.tensor import Tensor

from .arch import ACC, DIM, SPAD
from .intrinsics import GEMM_BIAS
from .requant import integer, requantize


def _npu_rows(s: Schedule, tensor: Tensor, dim: int) -> None:
    """Rows of an NPU buffer are DIM elements apart, also when its tile is narrower (a tensor
    smaller than DIM): pad the stride of dimension `dim` (its rows) to DIM."""
    s[tensor].storage_align(tensor.op.axis[dim], DIM, 0)


def matmul(
    m: int,
    n: int,
    k: int,
    *,
    multiplier: int = 1,
    shift: int = 0,
    relu: bool = False,
    weights: str = "tile",
) -> tuple[Schedule, list[Tensor]]:
    """C = requantize(A @ B + bias): A (m, k) int8, B (k, n) int8, bias (n,) int32, C int8.
    `weights="tile"` stages one DIM x DIM tile of B per step; "resident" keeps the whole of B
    in the scratchpad (for at most DIM output columns), which must fit its capacity."""
    A = te.placeholder((m, k), "int8", name="A")
    B = te.placeholder((k, n), "int8", name="B")
    bias = te.placeholder((n,), "int32", name="bias")
    r = te.reduce_axis(k, name="k")
    acc = te.compute(
        (m, n),
        lambda i, j: te.sum(
            A[i, r].astype("int32") * B[r, j].astype("int32"), axis=r, init=bias[j]
        ),
        name="acc",
    )
    C = te.compute((m, n), lambda i, j: requantize(acc[i, j], multiplier, shift, relu), name="C")
    s = te.create_schedule(C.op)
    s[acc].set_scope(ACC)
    A_s = s.cache_read(A, SPAD, [acc])
    B_s = s.cache_read(B, SPAD, [acc])
    io, jo, ii, ji = s[C].tile(*C.op.axis, DIM, DIM)
    s[C].pragma(ii, "npu_mvout")
    s[acc].compute_at(s[C], jo)
    ai, aj = s[acc].op.axis
    (ak,) = s[acc].op.reduce_axis
    ko, ki = s[acc].split(ak, factor=DIM)
    s[acc].reorder(ko, ai, aj, ki)
    s[acc].tensorize(ai, GEMM_BIAS)
    _npu_rows(s, acc, 0)
    if weights not in ("tile", "resident"):
        raise LoomError(f"weights must be 'tile' or 'resident', got {weights!r}")
    if weights == "resident" and n > DIM:
        raise LoomError(f"resident weights need at most {DIM} output columns, got {n}")
    for stage in (A_s, B_s):
        _npu_rows(s, stage, 0)
        if stage is A_s or weights == "tile":
            s[stage].compute_at(s[acc], ko)
        s[stage].pragma(s[stage].op.axis[0], "npu_mvin")
    return s, [A, B, bias, C]


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
) -> tuple[Schedule, list[Tensor]]:
    """out = requantize(conv2d(data, kernel) + bias): data (N, H, W, C) int8, kernel
    (KH, KW, C, F) int8, bias (F,) int32, out (N, OH, OW, F) int8. Padding (with `pad_value`,
    a quantized input's zero point) is done on the host; each output row's pixels are the rows
    of the matrix product, the input channels its reduction, the output channels its
    columns."""
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
    n, h, w, c = data_shape
    kh, kw, kc, f = kernel_shape
    if kc != c:
        raise LoomError(f"conv2d_nhwc: data has {c} channels, the kernel {kc}")
    oh, ow = (h + 2 * padding - kh) // stride + 1, (w + 2 * padding - kw) // stride + 1
    if oh <= 0 or ow <= 0:
        raise LoomError(
            f"conv2d_nhwc: a {kh}x{kw} kernel does not fit the {h}x{w} input padded by {padding}"
        )
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
    # the rows of one A tile: DIM output pixels of one row, for one kernel position
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
    out = te.compute(
        (n, oh, ow, f), lambda *i: requantize(acc(*i), multiplier, shift, relu), name="out"
    )
    s = te.create_schedule(out.op)
    s[patches].set_scope(SPAD)
    s[acc].set_scope(ACC)
    K_s = s.cache_read(kernel, SPAD, [acc])
    b_, y_, x_, o_ = out.op.axis
    xo, oo, xi, oi = s[out].tile(x_, o_, DIM, DIM)
    s[out].pragma(xi, "npu_mvout")
    s[acc].compute_at(s[out], oo)
    an, ay, ax, ao = s[acc].op.axis
    ary, arx, arc = s[acc].op.reduce_axis
    co, ci = s[acc].split(arc, factor=DIM)
    s[acc].reorder(an, ay, ary, arx, co, ax, ao, ci)
    s[acc].tensorize(ax, GEMM_BIAS)
    _npu_rows(s, acc, 2)
    _npu_rows(s, patches, 2)
    _npu_rows(s, K_s, 2)
    for stage in (patches, K_s):
        s[stage].compute_at(s[acc], co)
        s[stage].pragma(s[stage].op.axis[0], "npu_mvin")
    return s, [data, kernel, bias, out]
