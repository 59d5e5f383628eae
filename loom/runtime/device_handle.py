"""The host device handle: `loom.cpu(0)`, `loom.device("llvm", 0)` (TVM's `Device`).

A `Device` names where an array lives, as a (device type, device id) pair with DLPack's type
numbers. loom runs compiled code in this process only on the host CPU, so the one device type a
handle is made for is the CPU (`kDLCPU` = 1); an accelerator is reached through a device
session (`loom.device("hexagon-sim")`, loom/runtime/session.py) instead.
"""

from __future__ import annotations

from loom.errors import LoomError

KDL_CPU = 1
"""DLPack's device type of the host CPU."""

HOST_KINDS = ("cpu", "llvm", "c")
"""The names `loom.device` takes for the host, as TVM's device table has them."""

# TVM's device names that loom has no runtime for: a clear error instead of "needs host=".
GPU_KINDS = ("cuda", "gpu", "nvptx", "cl", "opencl", "vulkan", "metal", "rocm", "webgpu")


class Device:
    """Where an array lives: `device_type` (DLPack's number: 1 for the CPU) and `device_id`.
    Equal when both are; printed as TVM prints it, `cpu(0)`."""

    __slots__ = ("device_id", "device_type")

    def __init__(self, device_type: int, device_id: int = 0):
        if device_type != KDL_CPU:
            raise LoomError(
                f"device_type must be {KDL_CPU} (the host CPU), got {device_type!r}; "
                "accelerators are device sessions: loom.device('hexagon-sim')"
            )
        if isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 0:
            raise ValueError(f"device_id must be an int >= 0, got {device_id!r}")
        self.device_type = device_type
        self.device_id = device_id

    @property
    def exist(self) -> bool:
        """Whether the device is there: the host always is."""
        return True

    def sync(self) -> None:
        """Wait for the device's work to finish: a host call returns when its work is done."""

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Device)
            and self.device_type == other.device_type
            and self.device_id == other.device_id
        )

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __repr__(self) -> str:
        return f"cpu({self.device_id})"


def cpu(dev_id: int = 0) -> Device:
    """The host CPU's handle (TVM's `tvm.cpu`)."""
    return Device(KDL_CPU, dev_id)


def is_host_kind(kind: object) -> bool:
    """Whether `loom.device(kind)` means the host: "cpu", "llvm", "c" (a target's text such as
    "llvm -mcpu=znver4" by its first word, as TVM reads it) or DLPack's CPU number."""
    if isinstance(kind, str):
        words = kind.split()
        return bool(words) and words[0] in HOST_KINDS
    return isinstance(kind, int) and not isinstance(kind, bool) and kind == KDL_CPU


def host_device(kind: object, dev_id: int = 0) -> Device:
    """The handle `loom.device(kind, dev_id)` returns for a host kind."""
    if not is_host_kind(kind):
        raise LoomError(f"{kind!r} is not the host; host devices are {', '.join(HOST_KINDS)}")
    return Device(KDL_CPU, dev_id)
