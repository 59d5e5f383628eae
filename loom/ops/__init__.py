"""The operator library: tensor-expression definitions of common operators."""

from loom.ops.nn import (
    broadcast_to,
    conv2d_nchw,
    depthwise_conv2d_nchw,
    elementwise,
    matmul,
    pad,
    pool2d,
    softmax,
)

__all__ = [
    "broadcast_to",
    "conv2d_nchw",
    "depthwise_conv2d_nchw",
    "elementwise",
    "matmul",
    "pad",
    "pool2d",
    "softmax",
]
