"""Arrays for loom kernels: `loom.nd.array`, `loom.nd.empty`, `loom.nd.zeros`.

The device argument says what kind of array is made (docs/tvm-compat.md, "Runtime API"):

- none: an aligned numpy array (loom's own kind; built functions take it the fastest);
- a host `Device` (`loom.cpu(0)`, `loom.device("llvm", 0)`): an `NDArray` with TVM's interface
  (`.numpy()`, `.shape`, `.dtype` as a string, `.device`, `copyfrom`, `copyto`);
- a device session (`loom.device("hexagon-sim")`): a `DeviceArray` in the device's memory.
"""

from __future__ import annotations

import operator

import numpy as np

from loom.abi.dtype import dtype as to_dtype
from loom.runtime.device_handle import Device, cpu
from loom.runtime.host_ndarray import NDArray
from loom.runtime.ndarray import DEFAULT_ALIGNMENT, zeros
from loom.runtime.ndarray import array as aligned_array
from loom.runtime.ndarray import empty as aligned_empty
from loom.runtime.session import DeviceArray, Session

__all__ = ["Device", "DeviceArray", "NDArray", "array", "cpu", "empty", "zeros"]


def array(
    data,
    device: Device | Session | None = None,
    dtype=None,
    alignment: int = DEFAULT_ALIGNMENT,
    memory: str = "heap",
):
    """A copy of `data` (anything numpy.asarray takes, or an NDArray) on `device` (TVM's
    `tvm.nd.array(x, dev)`): see the module's docstring for what each device gives."""
    _check_device(device, " (the second argument is the device, as in TVM; a dtype is dtype=)")
    if isinstance(data, NDArray | DeviceArray):
        data = data.numpy()
    if isinstance(device, Session):
        return DeviceArray.from_numpy(device, data, dtype, max(alignment, 128), memory)
    values = aligned_array(data, dtype=dtype, alignment=alignment)
    return values if device is None else NDArray(values, device)


def empty(
    shape,
    dtype="float32",
    device: Device | Session | int | None = None,
    alignment: int = DEFAULT_ALIGNMENT,
    memory: str = "heap",
):
    """An uninitialized array of `shape` and `dtype` on `device` (TVM's `tvm.nd.empty`). An int
    in the third place is an alignment in bytes, the place loom's calls gave it before the
    device took it: `loom.nd.empty((96,), "uint8", 64)`."""
    if isinstance(device, int) and not isinstance(device, bool):
        device, alignment = None, device
    _check_device(device)
    shape = _shape(shape)
    if isinstance(device, Session):
        np_dtype = to_dtype(dtype).numpy if isinstance(dtype, str) else np.dtype(dtype)
        return DeviceArray(device, shape, np_dtype, max(alignment, 128), memory)
    values = aligned_empty(shape, dtype, alignment)
    return values if device is None else NDArray(values, device)


def _check_device(device, hint: str = "") -> None:
    if device is not None and not isinstance(device, Device | Session):
        raise TypeError(
            f"device must be a loom Device (loom.cpu(0)) or a device session "
            f"(loom.device('hexagon-sim')), got {device!r}{hint}"
        )


def _shape(shape) -> tuple[int, ...]:
    """A shape as a tuple of ints: an int, or a sequence of ints or of IR constants (TVM takes
    `IntImm`s: their `value`)."""
    if isinstance(shape, int):
        return (shape,)
    try:
        return tuple(operator.index(getattr(s, "value", s)) for s in shape)
    except TypeError:
        raise TypeError(f"shape must be a sequence of ints, got {shape!r}") from None
