"""Aligned numpy arrays: `loom.nd.array` and `loom.nd.empty`.

They are ordinary numpy arrays whose data starts at an address that is a multiple of
`alignment` bytes, so kernels that assume aligned buffers take them without a copy.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from loom.abi.dtype import dtype as to_dtype
from loom.runtime.session import DeviceArray

DEFAULT_ALIGNMENT = 64


def empty(
    shape, dtype="float32", alignment: int = DEFAULT_ALIGNMENT, device=None, memory: str = "heap"
):
    """An uninitialized C-contiguous array whose data is aligned to `alignment` bytes (on
    `device` if given)."""
    if device is not None:
        shape = (shape,) if isinstance(shape, int) else shape
        return DeviceArray(
            device,
            shape,
            to_dtype(dtype).numpy if isinstance(dtype, str) else dtype,
            max(alignment, 128),
            memory,
        )
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"alignment must be a power of two, got {alignment}")
    if isinstance(shape, int):
        shape = (shape,)
    np_dtype = to_dtype(dtype).numpy if isinstance(dtype, str) else np.dtype(dtype)
    nbytes = int(math.prod(shape)) * np_dtype.itemsize
    raw = np.empty(nbytes + alignment, np.uint8)
    # the address through the buffer protocol: `raw.ctypes.data` builds objects (a model call
    # allocates its outputs here, so this is on the path of every call)
    offset = (-ctypes.addressof(ctypes.c_char.from_buffer(raw))) % alignment
    return raw[offset : offset + nbytes].view(np_dtype).reshape(shape)


def array(data, dtype=None, alignment: int = DEFAULT_ALIGNMENT, device=None, memory: str = "heap"):
    """An aligned copy of `data` (anything numpy.asarray accepts): in host memory, or with
    `device=session` a DeviceArray in the device's heap (or `memory="vtcm"`)."""
    if device is not None:
        return DeviceArray.from_numpy(device, data, dtype, max(alignment, 128), memory)
    src = np.asarray(data, dtype=dtype)
    out = empty(src.shape, src.dtype, alignment)
    out[...] = src
    return out


def zeros(shape, dtype="float32", alignment: int = DEFAULT_ALIGNMENT) -> np.ndarray:
    out = empty(shape, dtype, alignment)
    out.fill(0)
    return out
