"""The device protocol's codec (docs/device-protocol.md): framing, and each command's payload.

Pure functions over bytes and a readable stream; no processes, sockets or sessions (the
session client builds on this). All integers are little-endian; addresses travel as u64.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from collections.abc import Sequence
from typing import Protocol

from loom.errors import DeviceError, LoomError
from loom.runtime.host_runtime import ARENA_STATS

PROTOCOL_VERSION = 1
REQUEST_MAGIC = b"LMRQ"
RESPONSE_MAGIC = b"LMRS"
HEADER = struct.Struct("<4sIQ")  # magic, command or status, payload length
STATUS_OK = 0
STATUS_ERROR = 1


class Command(enum.IntEnum):
    HELLO = 0
    ALLOC = 1
    FREE = 2
    WRITE = 3
    READ = 4
    LOAD_MODULE = 5
    LOOKUP = 6
    CALL = 7
    TIME = 8
    STATS = 9
    UNLOAD_MODULE = 10
    QUIT = 11


class Memory(enum.IntEnum):
    HEAP = 0
    VTCM = 1


class ProtocolError(LoomError):
    """The byte stream broke the framing: it ended early, or a header had the wrong magic."""


# An error response raises loom's DeviceError: one class for every device failure.


class Readable(Protocol):
    def read(self, n: int, /) -> bytes: ...


# -- framing ---------------------------------------------------------------------------------


def encode_request(command: int, payload: bytes = b"") -> bytes:
    """A request frame: the header, then the payload."""
    return HEADER.pack(REQUEST_MAGIC, int(command), len(payload)) + bytes(payload)


def read_exactly(stream: Readable, n: int, what: str) -> bytes:
    """n bytes from `stream` (which may return fewer per read), or a ProtocolError naming
    `what` was being read when the stream ended."""
    parts = []
    got = 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            raise ProtocolError(f"the device's stream ended after {got} of the {n} bytes of {what}")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def read_response(stream: Readable) -> tuple[int, bytes]:
    """The next response on `stream`: (status, payload)."""
    magic, status, length = HEADER.unpack(read_exactly(stream, HEADER.size, "a response header"))
    if magic != RESPONSE_MAGIC:
        raise ProtocolError(
            f"response header starts with {magic!r}, not {RESPONSE_MAGIC!r}: the stream is not "
            "the device protocol, or is out of step"
        )
    if status not in (STATUS_OK, STATUS_ERROR):
        raise ProtocolError(f"response has status {status}; the protocol knows 0 and 1")
    return status, read_exactly(stream, length, f"a {length}-byte response payload")


def check_response(command: Command, status: int, payload: bytes) -> bytes:
    """The payload of a success, or a DeviceError with the device's message."""
    if status == STATUS_ERROR:
        message = payload.decode("utf-8", errors="replace")
        raise DeviceError(f"device error in {Command(command).name}: {message}")
    return payload


def _unpack(fmt: str, payload: bytes, command: Command) -> tuple:
    s = struct.Struct(fmt)
    if len(payload) != s.size:
        raise ProtocolError(
            f"{command.name} response has {len(payload)} bytes of payload, expected {s.size}"
        )
    return s.unpack(payload)


# -- payloads, command by command ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Hello:
    version: int
    pointer_bytes: int
    vtcm_capacity: int
    heap_capacity: int
    description: str


def unpack_hello(payload: bytes) -> Hello:
    if len(payload) < 24:
        raise ProtocolError(f"HELLO response has {len(payload)} bytes, expected at least 24")
    version, pointer_bytes, vtcm, heap = struct.unpack_from("<IIQQ", payload)
    return Hello(version, pointer_bytes, vtcm, heap, payload[24:].decode("utf-8", "replace"))


def pack_alloc(nbytes: int, alignment: int, memory: Memory = Memory.HEAP) -> bytes:
    return struct.pack("<QQI", nbytes, alignment, int(memory))


def unpack_address(payload: bytes, command: Command = Command.ALLOC) -> int:
    """The u64 address that ALLOC and LOOKUP answer."""
    return _unpack("<Q", payload, command)[0]


def pack_free(address: int, memory: Memory = Memory.HEAP) -> bytes:
    return struct.pack("<QI", address, int(memory))


def pack_write(address: int, data: bytes | bytearray | memoryview) -> bytes:
    return struct.pack("<Q", address) + bytes(data)


def pack_read(address: int, nbytes: int) -> bytes:
    return struct.pack("<QQ", address, nbytes)


def unpack_module_id(payload: bytes) -> int:
    return _unpack("<I", payload, Command.LOAD_MODULE)[0]


def pack_lookup(module_id: int, name: str) -> bytes:
    return struct.pack("<I", module_id) + name.encode()


def pack_call(function: int, args: Sequence[int]) -> bytes:
    return struct.pack(f"<QI{len(args)}Q", function, len(args), *args)


def unpack_call(payload: bytes) -> int:
    """The function's status (always 0: a non-zero status is an error response)."""
    return _unpack("<i", payload, Command.CALL)[0]


def pack_time(function: int, number: int, repeat: int, args: Sequence[int]) -> bytes:
    return struct.pack(f"<QIII{len(args)}Q", function, number, repeat, len(args), *args)


def unpack_time(payload: bytes) -> list[int]:
    """Nanoseconds of each repeat (each for `number` calls)."""
    if len(payload) < 4:
        raise ProtocolError(f"TIME response has {len(payload)} bytes, expected at least 4")
    (repeat,) = struct.unpack_from("<I", payload)
    return list(_unpack(f"<{repeat}Q", payload[4:], Command.TIME))


@dataclasses.dataclass(frozen=True)
class ArenaStats:
    capacity: int
    in_use: int
    peak: int
    allocations: int
    frees: int
    failures: int
    live_blocks: int
    largest_free: int


def unpack_stats(payload: bytes) -> tuple[ArenaStats, ArenaStats]:
    """(VTCM statistics, heap statistics)."""
    values = _unpack(f"<{2 * len(ARENA_STATS)}q", payload, Command.STATS)
    n = len(ARENA_STATS)
    return ArenaStats(*values[:n]), ArenaStats(*values[n:])


def pack_module_id(module_id: int) -> bytes:
    """UNLOAD_MODULE's payload."""
    return struct.pack("<I", module_id)
