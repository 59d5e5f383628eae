"""`NDArray`: an array on a host `Device`, with TVM's interface (`loom.nd.array(x, loom.cpu(0))`).

It owns an aligned numpy buffer (loom/runtime/ndarray.py), so a built function takes it
without a copy: `NativeFunction` passes the buffer (`host_buffers`). As TVM's NDArray it is a
container, not an array library: `.numpy()` gives a copy to compute with, `.shape` is a tuple of
ints and `.dtype` a string ("float32").
"""

from __future__ import annotations

import warnings

import numpy as np

from loom.runtime.device_handle import Device
from loom.runtime.ndarray import DEFAULT_ALIGNMENT
from loom.runtime.ndarray import empty as aligned_empty
from loom.runtime.session import DeviceArray, Session


class NDArray:
    """An array in host memory on `device` (a `Device`); its data is aligned to 64 bytes."""

    __slots__ = ("_buffer", "_device")

    def __init__(self, buffer: np.ndarray, device: Device):
        if type(buffer) is not np.ndarray or not buffer.flags.c_contiguous:
            raise TypeError(f"buffer must be a C-contiguous numpy array, got {type(buffer)}")
        if not isinstance(device, Device):
            raise TypeError(f"device must be a loom Device (loom.cpu()), got {device!r}")
        self._buffer = buffer
        self._device = device

    @staticmethod
    def empty(shape: tuple[int, ...], dtype, device: Device) -> NDArray:
        return NDArray(aligned_empty(shape, dtype, DEFAULT_ALIGNMENT), device)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._buffer.shape

    @property
    def dtype(self) -> str:
        """The element type's name, as TVM gives it: "float32", "int8", "bool"."""
        return self._buffer.dtype.name

    @property
    def device(self) -> Device:
        return self._device

    @property
    def buffer(self) -> np.ndarray:
        """The array's memory as numpy sees it (no copy: writing it writes the array)."""
        return self._buffer

    def numpy(self) -> np.ndarray:
        """A copy of the contents as a numpy array."""
        return self._buffer.copy()

    def asnumpy(self) -> np.ndarray:
        """`numpy()` under its old name (TVM deprecates it too)."""
        warnings.warn(
            "NDArray.asnumpy() is deprecated, as in TVM; use NDArray.numpy()",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.numpy()

    def copyfrom(self, source) -> NDArray:
        """Copy `source` (an NDArray, or anything numpy.asarray takes, converted to this dtype)
        into this array; the shapes must be equal. Returns this array."""
        if isinstance(source, NDArray | DeviceArray):
            source = source.numpy()
        try:
            values = np.asarray(source, dtype=self._buffer.dtype)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"copyfrom: source must be array-like, got {type(source).__name__}: {e}"
            ) from None
        if values.shape != self.shape:
            raise ValueError(
                f"copyfrom: source has shape {values.shape}, this array has shape {self.shape}"
            )
        self._buffer[...] = values
        return self

    def copyto(self, target):
        """Copy this array into `target` (an array of the same shape; returned), or to a new
        array on `target` (a `Device`, or a device `Session`)."""
        if isinstance(target, NDArray | DeviceArray):
            if tuple(target.shape) != self.shape:
                raise ValueError(
                    f"copyto: target has shape {tuple(target.shape)}, this array {self.shape}"
                )
            target.copyfrom(self._buffer)
            return target
        if isinstance(target, Device):
            return NDArray.empty(self.shape, self._buffer.dtype, target).copyfrom(self._buffer)
        if isinstance(target, Session):
            return DeviceArray.from_numpy(target, self._buffer)
        raise ValueError(
            f"copyto: target must be an array, a Device or a Session, got {type(target).__name__}"
        )

    def __setitem__(self, index, value) -> None:
        """`a[:] = value` copies `value` in (the only assignment TVM's NDArray has)."""
        if index != slice(None) and index is not Ellipsis:
            raise ValueError("an NDArray is assigned as a whole: a[:] = value")
        self.copyfrom(value)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        # numpy functions (np.testing, np.asarray) read the contents
        out = self._buffer if not copy else self._buffer.copy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"<loom.nd.NDArray shape={self.shape}, {self._device}>\n{self._buffer!r}"

    def __str__(self) -> str:
        return str(self._buffer)


def host_buffers(args: tuple) -> tuple:
    """`args` with each NDArray replaced by its buffer: what a built function takes."""
    return tuple(a._buffer if type(a) is NDArray else a for a in args)
