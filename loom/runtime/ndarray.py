"""Aligned numpy arrays: `loom.nd.array` and `loom.nd.empty`.

They are ordinary numpy arrays whose data starts at an address that is a multiple of
`alignment` bytes, so kernels that assume aligned buffers take them without a copy.
"""

from __future__ import annotations

import numpy as np

from loom.ir.dtype import dtype as to_dtype

DEFAULT_ALIGNMENT = 64


def empty(shape, dtype="float32", alignment: int = DEFAULT_ALIGNMENT) -> np.ndarray:
    """An uninitialized C-contiguous array whose data is aligned to `alignment` bytes."""
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"alignment must be a power of two, got {alignment}")
    if isinstance(shape, int):
        shape = (shape,)
    np_dtype = to_dtype(dtype).numpy if isinstance(dtype, str) else np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize
    raw = np.empty(nbytes + alignment, np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset : offset + nbytes].view(np_dtype).reshape(shape)


def array(data, dtype=None, alignment: int = DEFAULT_ALIGNMENT, device=None) -> np.ndarray:
    """An aligned copy of `data` (anything numpy.asarray accepts)."""
    if device is not None:
        raise ValueError("arrays on devices come with device sessions; device must be None here")
    src = np.asarray(data, dtype=dtype)
    out = empty(src.shape, src.dtype, alignment)
    out[...] = src
    return out


def zeros(shape, dtype="float32", alignment: int = DEFAULT_ALIGNMENT) -> np.ndarray:
    out = empty(shape, dtype, alignment)
    out.fill(0)
    return out
