"""The freestanding device runtime (loom/runtime/native/device) under qemu user emulation:
every command of docs/device-protocol.md, the module loader, the compiler support routines,
the AArch64 build and the TCP transport.

Every request has a timeout, so a hung emulator fails a test instead of hanging it."""

from __future__ import annotations

import os
import pathlib
import re
import select
import shutil
import socket
import subprocess
import time

import numpy as np
import pytest

from loom.runtime.device import (
    build_device_library,
    compile_device_object,
    emulator,
    runtime_path,
)
from loom.runtime.device import protocol as p
from loom.runtime.device.emulation import INSTALL_QEMU_10, emulation
from loom.runtime.device.protocol import Command, Memory

TIMEOUT = 30.0  # seconds for one request, or for the runtime to start or exit

_TOOLS = {
    "clang": "clang",
    "ld.lld": "lld",
    "qemu-hexagon": "qemu-user",
    "qemu-aarch64": "qemu-user",
}
_missing = sorted(tool for tool in _TOOLS if shutil.which(tool) is None)
pytestmark = pytest.mark.skipif(
    bool(_missing),
    reason=f"needs {', '.join(_missing)} (Debian packages "
    f"{', '.join(sorted({_TOOLS[t] for t in _missing}))}; `make setup` installs them)",
)

# -- a client with timeouts ------------------------------------------------------------------


class Device:
    """One runtime process spoken to over its pipes, or over a TCP connection."""

    def __init__(self, proc: subprocess.Popen, sock: socket.socket | None = None):
        self.proc = proc
        self.sock = sock
        self.deadline = 0.0
        if sock is None:
            os.set_blocking(proc.stdin.fileno(), False)

    @classmethod
    def start(cls, isa: str = "hexagon", *args: str) -> Device:
        cmd = [emulator(isa), str(runtime_path(isa)), *args]
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        return cls(proc)

    def _remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the device did not answer within {TIMEOUT} s")
        return left

    def read(self, n: int) -> bytes:
        if self.sock is not None:
            self.sock.settimeout(self._remaining())
            return self.sock.recv(n)
        fd = self.proc.stdout.fileno()
        if not select.select([fd], [], [], self._remaining())[0]:
            raise TimeoutError(f"the device did not answer within {TIMEOUT} s")
        return os.read(fd, n)

    def _send(self, data: bytes) -> None:
        if self.sock is not None:
            self.sock.settimeout(self._remaining())
            self.sock.sendall(data)
            return
        fd = self.proc.stdin.fileno()
        view = memoryview(data)
        while view:
            if not select.select([], [fd], [], self._remaining())[1]:
                raise TimeoutError(f"the device did not read its input within {TIMEOUT} s")
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                pass

    def send_raw(self, data: bytes) -> None:
        self.deadline = time.monotonic() + TIMEOUT
        self._send(data)

    def request(self, command: int, payload: bytes = b"") -> tuple[int, bytes]:
        self.send_raw(p.encode_request(command, payload))
        return p.read_response(self)

    def ok(self, command: Command, payload: bytes = b"") -> bytes:
        status, answer = self.request(command, payload)
        return p.check_response(command, status, answer)

    def error(self, command: int, payload: bytes = b"") -> str:
        status, answer = self.request(command, payload)
        assert status == p.STATUS_ERROR, f"{command} succeeded; an error was expected"
        return answer.decode()

    # one method per command that the tests use often
    def alloc(self, nbytes: int, alignment: int = 8, memory: Memory = Memory.HEAP) -> int:
        return p.unpack_address(self.ok(Command.ALLOC, p.pack_alloc(nbytes, alignment, memory)))

    def free(self, address: int, memory: Memory = Memory.HEAP) -> None:
        self.ok(Command.FREE, p.pack_free(address, memory))

    def write(self, address: int, data: bytes) -> None:
        self.ok(Command.WRITE, p.pack_write(address, data))

    def read_memory(self, address: int, nbytes: int) -> bytes:
        return self.ok(Command.READ, p.pack_read(address, nbytes))

    def load(self, path: pathlib.Path) -> int:
        return p.unpack_module_id(self.ok(Command.LOAD_MODULE, path.read_bytes()))

    def lookup(self, module_id: int, name: str) -> int:
        return p.unpack_address(self.ok(Command.LOOKUP, p.pack_lookup(module_id, name)))

    def call(self, function: int, args: list[int]) -> int:
        return p.unpack_call(self.ok(Command.CALL, p.pack_call(function, args)))

    def stats(self) -> tuple[p.ArenaStats, p.ArenaStats]:
        return p.unpack_stats(self.ok(Command.STATS))

    def put(self, array: np.ndarray, memory: Memory = Memory.HEAP) -> int:
        address = self.alloc(max(array.nbytes, 1), 128, memory)
        self.write(address, array.tobytes())
        return address

    def get(self, address: int, dtype, count: int) -> np.ndarray:
        return np.frombuffer(self.read_memory(address, np.dtype(dtype).itemsize * count), dtype)

    def wait(self) -> int:
        """The exit status, once the process has ended (within the timeout)."""
        return self.proc.wait(timeout=TIMEOUT)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=TIMEOUT)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


# -- device libraries ------------------------------------------------------------------------

ADD_C = r"""
#include <stdint.h>
#include <stddef.h>
void *HexagonBackendAllocateVTCM(uint32_t nbytes, uint32_t alignment);
int32_t HexagonBackendFreeVTCM(void *p);
void loom_set_last_error(const char *message);
void *memcpy(void *dst, const void *src, size_t n);

/* data relocations: an imported function's address (R_HEX_32 / R_AARCH64_ABS64), a pointer
   to local data (RELATIVE); volatile, so the compiler cannot fold them away */
int32_t (*free_vtcm)(void *) = HexagonBackendFreeVTCM;
static int32_t one = 1;
static int32_t *volatile scale = &one;

/* c = a + b staged in VTCM, q = c / d (truncating): args a, b, c, q, &n, &d */
int32_t add(void *const *args) {
    const int32_t *a = args[0], *b = args[1];
    int32_t *c = args[2], *q = args[3];
    int32_t n = *(const int32_t *)args[4], d = *(const int32_t *)args[5];
    if (d == 0) {
        loom_set_last_error("add: division by zero");
        return 3;
    }
    int32_t *t = HexagonBackendAllocateVTCM((uint32_t)n * 4, 128);
    if (!t) return -1; /* the allocator has set the last error */
    if ((uintptr_t)t % 128 != 0) {
        loom_set_last_error("add: VTCM block is not 128-byte aligned");
        return 2;
    }
    for (int32_t i = 0; i < n; ++i) t[i] = (a[i] + b[i]) * *scale;
    memcpy(c, t, (size_t)n * 4);
    for (int32_t i = 0; i < n; ++i) q[i] = t[i] / d;
    return free_vtcm(t);
}
"""

MISSING_C = r"""
#include <stdint.h>
int32_t loom_missing_function(int32_t);
int32_t f(void *const *args) { return loom_missing_function(*(int32_t *)args[0]); }
"""

# The runtime's memcpy / memmove / memset on one buffer: each op is (kind, dst, src, n, value).
MEM_C = r"""
#include <stddef.h>
#include <stdint.h>
void *memcpy(void *, const void *, size_t);
void *memmove(void *, const void *, size_t);
void *memset(void *, int, size_t);

int32_t mem_ops(void *const *args) {
    uint8_t *buffer = args[0];
    const int32_t *ops = args[1];
    int32_t count = *(const int32_t *)args[2];
    for (int32_t i = 0; i < count; ++i, ops += 5) {
        if (ops[0] == 0) memcpy(buffer + ops[1], buffer + ops[2], (size_t)ops[3]);
        if (ops[0] == 1) memmove(buffer + ops[1], buffer + ops[2], (size_t)ops[3]);
        if (ops[0] == 2) memset(buffer + ops[1], ops[4], (size_t)ops[3]);
    }
    return 0;
}
"""

# Each routine the Hexagon backend calls, over arrays: a, b inputs, then the outputs.
SUPPORT_C = r"""
#include <stdint.h>
float __extendhfsf2(uint16_t);
uint16_t __truncsfhf2(float);
uint16_t __truncdfhf2(double);

#define N (*(const int32_t *)args[0])
int32_t int_ops(void *const *args) {
    const int32_t *a = args[1], *b = args[2];
    const int64_t *c = args[3], *d = args[4];
    int32_t *sq = args[5], *sr = args[6];
    uint32_t *uq = args[7], *ur = args[8];
    int64_t *lq = args[9], *lr = args[10];
    uint64_t *ulq = args[11], *ulr = args[12];
    for (int32_t i = 0; i < N; ++i) {
        sq[i] = a[i] / b[i];
        sr[i] = a[i] % b[i];
        uq[i] = (uint32_t)a[i] / (uint32_t)b[i];
        ur[i] = (uint32_t)a[i] % (uint32_t)b[i];
        lq[i] = c[i] / d[i];
        lr[i] = c[i] % d[i];
        ulq[i] = (uint64_t)c[i] / (uint64_t)d[i];
        ulr[i] = (uint64_t)c[i] % (uint64_t)d[i];
    }
    return 0;
}

int32_t float_ops(void *const *args) {
    const float *a = args[1], *b = args[2];
    float *div = args[3], *root = args[4];
    uint16_t *half = args[5];
    float *back = args[6];
    for (int32_t i = 0; i < N; ++i) {
        div[i] = a[i] / b[i];
        root[i] = __builtin_sqrtf(a[i]);
        half[i] = __truncsfhf2(a[i]);
        back[i] = __extendhfsf2((uint16_t)i);
    }
    return 0;
}

int32_t double_ops(void *const *args) {
    const double *a = args[1], *b = args[2];
    double *div = args[3], *mul = args[4], *root = args[5];
    uint16_t *half = args[6];
    for (int32_t i = 0; i < N; ++i) {
        div[i] = a[i] / b[i];
        mul[i] = a[i] * b[i];
        root[i] = __builtin_sqrt(a[i]);
        half[i] = __truncdfhf2(a[i]);
    }
    return 0;
}
"""


def _library(tmp: pathlib.Path, name: str, source: str, isa: str, *flags: str) -> pathlib.Path:
    c = tmp / f"{name}.c"
    c.write_text(source)
    obj = compile_device_object(c, tmp / f"{name}.o", isa, flags)
    return build_device_library([obj], tmp / f"{name}.so", isa)


@pytest.fixture(scope="module")
def libs(tmp_path_factory) -> dict[str, pathlib.Path]:
    tmp = tmp_path_factory.mktemp("device_libs")
    return {
        "add": _library(tmp, "add", ADD_C, "hexagon"),
        "add_v68": _library(tmp, "add_v68", ADD_C, "hexagon", "-mv68"),
        "add_v69": _library(tmp, "add_v69", ADD_C, "hexagon", "-mv69"),
        "add_v65": _library(tmp, "add_v65", ADD_C, "hexagon", "-mv65"),
        "missing": _library(tmp, "missing", MISSING_C, "hexagon"),
        "support": _library(tmp, "support", SUPPORT_C, "hexagon"),
        "mem": _library(tmp, "mem", MEM_C, "hexagon"),
        "add_aarch64": _library(tmp, "add_aarch64", ADD_C, "aarch64"),
    }


@pytest.fixture(scope="module")
def dev():
    device = Device.start("hexagon")
    yield device
    device.close()


@pytest.fixture(scope="module")
def add_module(dev, libs) -> tuple[int, int]:
    """(module id, address of `add`) in the shared device."""
    module_id = dev.load(libs["add"])
    return module_id, dev.lookup(module_id, "add")


def _run_add(dev: Device, function: int, a: np.ndarray, b: np.ndarray, d: int):
    n = len(a)
    args = [
        dev.put(a),
        dev.put(b),
        dev.alloc(4 * n, 128),
        dev.alloc(4 * n, 128),
        dev.put(np.array([n], np.int32)),
        dev.put(np.array([d], np.int32)),
    ]
    try:
        status, payload = dev.request(Command.CALL, p.pack_call(function, args))
        results = dev.get(args[2], np.int32, n), dev.get(args[3], np.int32, n)
    finally:
        for address in args:
            dev.free(address)
    return status, payload, results


# -- the commands ----------------------------------------------------------------------------


def test_hello(dev):
    hello = p.unpack_hello(dev.ok(Command.HELLO))
    assert hello == p.Hello(1, 4, 262144, 64 << 20, "loom-device-runtime 1 hexagon")


@pytest.mark.parametrize("memory", [Memory.HEAP, Memory.VTCM])
def test_alloc_write_read_round_trip(dev, memory):
    data = np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes()
    for alignment in (1, 64, 2048):
        address = dev.alloc(len(data), alignment, memory)
        assert address % alignment == 0
        dev.write(address, data)
        assert dev.read_memory(address, len(data)) == data
        dev.write(address + 100, b"loom")  # inside the block, at an offset
        assert dev.read_memory(address + 98, 8) == data[98:100] + b"loom" + data[104:106]
        dev.free(address, memory)


def test_out_of_range_accesses_are_errors_and_the_runtime_keeps_serving(dev):
    address = dev.alloc(16)
    assert "outside every heap and VTCM allocation" in dev.error(
        Command.WRITE, p.pack_write(address, bytes(17))
    )
    assert "READ of 17 bytes" in dev.error(Command.READ, p.pack_read(address, 17))
    assert "outside" in dev.error(Command.READ, p.pack_read(0, 4))
    assert "outside" in dev.error(Command.READ, p.pack_read(address, 2**64 - 1))
    assert "outside" in dev.error(Command.WRITE, p.pack_write(2**40, b"x"))
    dev.free(address)
    assert "outside" in dev.error(Command.READ, p.pack_read(address, 4))  # freed
    assert dev.error(Command.FREE, p.pack_free(address)) == (
        f"heap: free of {address:#x}, which is not an allocated block"
    )
    assert "not an allocated block" in dev.error(Command.FREE, p.pack_free(123, Memory.VTCM))
    assert "unknown memory 7" in dev.error(Command.FREE, p.pack_free(address, 7))
    assert "not a power of two" in dev.error(Command.ALLOC, p.pack_alloc(8, 12))
    assert "ALLOC payload has 3 bytes" in dev.error(Command.ALLOC, b"abc")
    assert p.unpack_hello(dev.ok(Command.HELLO)).version == 1


def test_framing_errors_keep_the_stream_in_step(dev):
    assert dev.error(99, b"12345") == "unknown command 99 (this runtime knows 0 to 11)"
    assert "larger than the 65536 bytes" in dev.error(Command.STATS, bytes(70000))
    assert "HELLO payload has 2 bytes" in dev.error(Command.HELLO, b"hi")
    # a bad magic: the runtime answers and reads the next 16 bytes as the next header
    dev.send_raw(b"XXXX" + bytes(12))
    status, message = p.read_response(dev)
    assert status == p.STATUS_ERROR and b"not the magic 'LMRQ'" in message
    assert p.unpack_hello(dev.ok(Command.HELLO)).pointer_bytes == 4


def test_vtcm_out_of_memory_message(dev):
    vtcm, _ = dev.stats()
    message = dev.error(Command.ALLOC, p.pack_alloc(1 << 20, 128, Memory.VTCM))
    assert message == (
        f"VTCM: cannot allocate 1048576 bytes aligned to 128 (capacity 262144, in use "
        f"{vtcm.in_use}, largest free block {vtcm.largest_free})"
    )
    assert dev.stats()[0].failures == vtcm.failures + 1
    assert "heap: cannot allocate" in dev.error(Command.ALLOC, p.pack_alloc(2**62, 8))


def test_stats_count_allocations_and_frees(dev):
    vtcm0, heap0 = dev.stats()
    heap_blocks = [dev.alloc(1000) for _ in range(3)]
    vtcm_blocks = [dev.alloc(4096, 2048, Memory.VTCM) for _ in range(2)]
    vtcm1, heap1 = dev.stats()
    assert heap1.allocations - heap0.allocations == 3
    assert heap1.in_use - heap0.in_use == 3000
    assert heap1.live_blocks - heap0.live_blocks == 3
    assert vtcm1.allocations - vtcm0.allocations == 2
    assert vtcm1.in_use - vtcm0.in_use == 8192
    assert vtcm1.peak >= vtcm1.in_use
    for address in heap_blocks:
        dev.free(address)
    for address in vtcm_blocks:
        dev.free(address, Memory.VTCM)
    vtcm2, heap2 = dev.stats()
    assert heap2.frees - heap0.frees == 3 and vtcm2.frees - vtcm0.frees == 2
    assert (heap2.in_use, vtcm2.in_use) == (heap0.in_use, vtcm0.in_use)
    assert vtcm2.capacity == 262144 and heap2.capacity == 64 << 20


def test_load_lookup_call(dev, add_module):
    _, add = add_module
    vtcm_before = dev.stats()[0]
    rng = np.random.default_rng(1)
    a = rng.integers(-(2**20), 2**20, 1000, dtype=np.int32)
    b = rng.integers(-(2**20), 2**20, 1000, dtype=np.int32)
    status, payload, (c, q) = _run_add(dev, add, a, b, -7)
    assert (status, p.unpack_call(payload)) == (p.STATUS_OK, 0)
    np.testing.assert_array_equal(c, a + b)
    np.testing.assert_array_equal(q, np.fix((a + b) / -7).astype(np.int32))
    vtcm_after = dev.stats()[0]  # the kernel freed its VTCM block
    assert vtcm_after.allocations == vtcm_before.allocations + 1
    assert vtcm_after.in_use == vtcm_before.in_use


@pytest.mark.parametrize("version", ["v68", "v69"])
def test_newer_versions_load_and_run(dev, libs, version):
    """The runtime (built for v66) loads modules of v66 to v73; the emulator decides what
    runs (qemu-hexagon 10 runs these; which versions a qemu runs the session checks)."""
    if emulation("hexagon").major < 10 and not os.environ.get("CI"):
        pytest.skip(
            f"qemu-hexagon {emulation('hexagon').version} runs v66/v67 only; {INSTALL_QEMU_10}"
        )
    module_id = dev.load(libs[f"add_{version}"])
    add = dev.lookup(module_id, "add")
    a, b = np.arange(100, dtype=np.int32), np.full(100, 3, np.int32)
    status, payload, (c, q) = _run_add(dev, add, a, b, 5)
    assert status == p.STATUS_OK, payload
    np.testing.assert_array_equal(c, a + b)
    np.testing.assert_array_equal(q, (a + b) // 5)
    dev.ok(Command.UNLOAD_MODULE, p.pack_module_id(module_id))


def test_a_failing_function_reports_the_device_last_error(dev, add_module):
    _, add = add_module
    status, payload, _ = _run_add(dev, add, np.ones(4, np.int32), np.ones(4, np.int32), 0)
    assert status == p.STATUS_ERROR
    assert payload.decode() == "function returned 3: add: division by zero"
    # and a failure inside the runtime: more VTCM than there is
    status, payload, _ = _run_add(dev, add, np.ones(70000, np.int32), np.ones(70000, np.int32), 1)
    assert status == p.STATUS_ERROR
    assert payload.decode().startswith(
        "function returned -1: VTCM: cannot allocate 280000 bytes aligned to 128 (capacity 262144"
    )


def test_time(dev, add_module):
    _, add = add_module
    n = 256
    args = [dev.put(np.ones(n, np.int32)) for _ in range(4)]
    args += [dev.put(np.array([n], np.int32)), dev.put(np.array([3], np.int32))]
    times = p.unpack_time(dev.ok(Command.TIME, p.pack_time(add, 3, 4, args)))
    assert len(times) == 4
    assert all(0 < t < 10**10 for t in times), times
    assert "number >= 1" in dev.error(Command.TIME, p.pack_time(add, 0, 4, args))
    for address in args:
        dev.free(address)


def test_calls_are_checked(dev, add_module):
    module_id, add = add_module
    assert "not in the code of a loaded module" in dev.error(
        Command.CALL, p.pack_call(add + 0x100000, [])
    )
    assert "wider than a 4-byte device address" in dev.error(
        Command.CALL, p.pack_call(add, [2**40])
    )
    assert "CALL payload has 13 bytes" in dev.error(Command.CALL, p.pack_call(add, []) + b"x")
    assert dev.error(Command.LOOKUP, p.pack_lookup(module_id, "bar")) == (
        f"module {module_id} has no function 'bar'"
    )
    # a defined symbol that is not a function is not found either
    assert "has no function 'free_vtcm'" in dev.error(
        Command.LOOKUP, p.pack_lookup(module_id, "free_vtcm")
    )


def test_modules_are_refused_with_the_reason(dev, libs):
    def refused(data: bytes) -> str:
        return dev.error(Command.LOAD_MODULE, data)

    assert refused(libs["missing"].read_bytes()) == (
        "unresolved symbol 'loom_missing_function' in module: the hexagon device runtime does "
        "not export it"
    )
    message = refused(libs["add_v65"].read_bytes())
    assert "Hexagon v65" in message and "v66, v67, v68, v69, v71 and v73 code only" in message
    assert "64-bit little-endian ELF file" in refused(libs["add_aarch64"].read_bytes())
    assert "not an ELF file" in refused(b"hello world, not a module")
    assert "program headers" in refused(libs["add"].read_bytes()[:200])
    assert "a module has 1 to" in refused(b"")
    # the runtime still serves, and loads a good module
    module_id = dev.load(libs["add"])
    dev.ok(Command.UNLOAD_MODULE, p.pack_module_id(module_id))


def test_corrupt_modules_never_crash_the_runtime(dev, libs):
    """Random damage to a module's headers and tables: each load is refused with a message or
    succeeds (the damage missed what the loader reads); the runtime always answers."""
    data = libs["add"].read_bytes()
    rng = np.random.default_rng(3)
    loaded = 0
    for _ in range(500):
        damaged = bytearray(data)
        for _ in range(rng.integers(1, 4)):
            at = rng.integers(0, 1024) if rng.random() < 0.7 else rng.integers(0, len(data))
            damaged[at] = rng.integers(0, 256)
        if rng.random() < 0.1:
            damaged = damaged[: rng.integers(0, len(damaged))]
        status, payload = dev.request(Command.LOAD_MODULE, bytes(damaged))
        if status == p.STATUS_OK:
            loaded += 1
            dev.request(Command.LOOKUP, payload + b"add")  # through a possibly damaged hash table
            dev.ok(Command.UNLOAD_MODULE, payload)
        else:
            payload.decode()  # always UTF-8, even when it quotes damaged names
    assert 0 < loaded < 500
    assert p.unpack_hello(dev.ok(Command.HELLO)).version == 1


def test_unload_module(dev, libs):
    module_id = dev.load(libs["add"])
    add = dev.lookup(module_id, "add")
    assert dev.read_memory(add, 4)  # code is readable while loaded
    dev.ok(Command.UNLOAD_MODULE, p.pack_module_id(module_id))
    assert dev.error(Command.LOOKUP, p.pack_lookup(module_id, "add")) == (
        f"no module {module_id} is loaded"
    )
    assert "not in the code of a loaded module" in dev.error(Command.CALL, p.pack_call(add, []))
    assert "outside" in dev.error(Command.READ, p.pack_read(add, 4))
    assert "no module" in dev.error(Command.UNLOAD_MODULE, p.pack_module_id(module_id))
    # a module loaded again (likely at the same address) runs its new code, not stale code
    again = dev.load(libs["add"])
    assert again != module_id
    status, _, (c, _) = _run_add(
        dev, dev.lookup(again, "add"), np.ones(8, np.int32), np.ones(8, np.int32), 1
    )
    assert status == p.STATUS_OK and (c == 2).all()
    dev.ok(Command.UNLOAD_MODULE, p.pack_module_id(again))


def test_quit_exits_with_status_0():
    device = Device.start("hexagon")
    try:
        # the VTCM region is aligned to its size: the first block starts there
        assert device.alloc(100, 1, Memory.VTCM) % 262144 == 0
        assert device.ok(Command.QUIT) == b""
        assert device.wait() == 0
    finally:
        device.close()


def test_end_of_stream_exits_with_status_0():
    device = Device.start("hexagon", "--vtcm", "4096", "--heap", "65536")
    try:
        hello = p.unpack_hello(device.ok(Command.HELLO))
        assert (hello.vtcm_capacity, hello.heap_capacity) == (4096, 65536)
        device.proc.stdin.close()
        assert device.wait() == 0
    finally:
        device.close()


def test_bad_command_line_exits_with_status_2():
    proc = subprocess.run(
        [emulator("hexagon"), str(runtime_path("hexagon")), "--vtcm", "lots"],
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 2
    assert b"--vtcm wants bytes, not 'lots'" in proc.stderr


# -- compiler support routines: bit-exact against numpy (IEEE correctly rounded) --------------


def _special_floats(dtype) -> np.ndarray:
    info = np.finfo(dtype)
    values = [0.0, -0.0, 1.0, -1.0, 2.0, 3.0, 0.1, info.max, -info.max, info.tiny, info.eps]
    values += [info.smallest_subnormal, -info.smallest_subnormal, np.inf, -np.inf, np.nan]
    values += [1.5 * info.tiny, info.tiny / 3, 65504.0, 65520.0, 6e-8, 3e-8, 2.98e-8]
    return np.array(values, dtype)


def _random_floats(rng, dtype, n) -> np.ndarray:
    """Random bit patterns (every exponent, subnormals, infinities, NaNs), half of them near 1
    (where products and quotients stay finite), plus the special values."""
    bits = np.dtype(dtype.str.replace("f", "u"))
    raw = rng.integers(0, np.iinfo(bits).max, n, dtype=bits, endpoint=True).view(dtype)
    near = rng.uniform(-4, 4, n).astype(dtype)
    return np.concatenate([_special_floats(dtype), raw, near])


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    uint = np.dtype(want.dtype.str.replace("f", "u"))
    got_bits, want_bits = got[~nan].view(uint), want[~nan].view(uint)
    bad = np.flatnonzero(got_bits != want_bits)[:5]
    assert bad.size == 0, (
        f"results differ in their bits: got {[hex(v) for v in got_bits[bad]]}, "
        f"want {[hex(v) for v in want_bits[bad]]}"
    )


def test_hexagon_compiler_support_routines(dev, libs):
    rng = np.random.default_rng(7)
    module_id = dev.load(libs["support"])
    blocks: list[int] = []

    def put(array):
        blocks.append(dev.put(array))
        return blocks[-1]

    def out(dtype, n):
        blocks.append(dev.alloc(np.dtype(dtype).itemsize * n, 128))
        return blocks[-1]

    # integers: C's truncating division; no zero divisors, no INT_MIN / -1
    n = 2000
    a = rng.integers(-(2**31) + 1, 2**31, n, dtype=np.int32)
    # divisors of every magnitude: shifted right by random amounts
    b = (rng.integers(-(2**31) + 1, 2**31, n) >> rng.integers(0, 31, n)).astype(np.int32)
    b[b == 0] = 1
    c = rng.integers(-(2**63) + 1, 2**63, n, dtype=np.int64) >> rng.integers(0, 63, n)
    d = rng.integers(-(2**63) + 1, 2**63, n, dtype=np.int64) >> rng.integers(0, 63, n)
    d[d == 0] = -1
    types = [np.int32, np.int32, np.uint32, np.uint32, np.int64, np.int64, np.uint64, np.uint64]
    outs = [out(t, n) for t in types]
    args = [put(np.array([n], np.int32)), put(a), put(b), put(c), put(d), *outs]
    dev.call(dev.lookup(module_id, "int_ops"), args)
    got = [dev.get(address, t, n) for address, t in zip(outs, types)]
    ua, ub, uc, ud = a.view(np.uint32), b.view(np.uint32), c.view(np.uint64), d.view(np.uint64)
    want = [
        (a - np.fmod(a, b)) // b,
        np.fmod(a, b),
        ua // ub,
        ua % ub,
        (c - np.fmod(c, d)) // d,
        np.fmod(c, d),
        uc // ud,
        uc % ud,
    ]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)

    # float: divide, square root, to and from half precision
    x = _random_floats(rng, np.dtype(np.float32), 3000)
    y = _random_floats(rng, np.dtype(np.float32), 3000)[rng.permutation(len(x))]
    n = len(x)
    outs = [out(np.float32, n), out(np.float32, n), out(np.uint16, n), out(np.float32, 65536)]
    args = [put(np.array([n], np.int32)), put(x), put(y), *outs]
    dev.call(dev.lookup(module_id, "float_ops"), args)
    with np.errstate(all="ignore"):
        _same_bits(dev.get(outs[0], np.float32, n), x / y)
        _same_bits(dev.get(outs[1], np.float32, n), np.sqrt(x))
        _same_bits(dev.get(outs[2], np.uint16, n).view(np.float16), x.astype(np.float16))
        halves = np.arange(n, dtype=np.uint16).view(np.float16)  # __extendhfsf2(i), i < n
        _same_bits(dev.get(outs[3], np.float32, n), halves.astype(np.float32))

    # double: divide, multiply, square root, to half precision
    x = _random_floats(rng, np.dtype(np.float64), 3000)
    y = _random_floats(rng, np.dtype(np.float64), 3000)[rng.permutation(len(x))]
    n = len(x)
    outs = [out(np.float64, n), out(np.float64, n), out(np.float64, n), out(np.uint16, n)]
    args = [put(np.array([n], np.int32)), put(x), put(y), *outs]
    dev.call(dev.lookup(module_id, "double_ops"), args)
    with np.errstate(all="ignore"):
        _same_bits(dev.get(outs[0], np.float64, n), x / y)
        _same_bits(dev.get(outs[1], np.float64, n), x * y)
        _same_bits(dev.get(outs[2], np.float64, n), np.sqrt(x))
        _same_bits(dev.get(outs[3], np.uint16, n).view(np.float16), x.astype(np.float16))

    for address in blocks:
        dev.free(address)
    dev.ok(Command.UNLOAD_MODULE, p.pack_module_id(module_id))


def test_memory_functions(dev, libs):
    """memcpy (non-overlapping), memmove (overlapping either way) and memset at every alignment
    and length around the word size, against the same operations in numpy."""
    rng = np.random.default_rng(11)
    size = 4096
    ops = []
    for _ in range(3000):
        kind = int(rng.integers(0, 3))
        n = int(rng.choice([rng.integers(0, 40), rng.integers(0, 600)]))
        dst = int(rng.integers(0, size - n + 1))
        if kind == 0:  # a source that does not overlap the destination
            choices = [
                x
                for x in (rng.integers(0, size - n + 1) for _ in range(20))
                if x + n <= dst or x >= dst + n
            ]
            if not choices:
                continue
            src = int(choices[0])
        else:
            src = int(np.clip(dst + rng.integers(-12, 13), 0, size - n))
        ops.append((kind, dst, src, n, int(rng.integers(0, 256))))
    buffer = rng.integers(0, 256, size, dtype=np.uint8)
    expected = buffer.copy()
    for kind, dst, src, n, value in ops:
        expected[dst : dst + n] = value if kind == 2 else expected[src : src + n].copy()
    module_id = dev.load(libs["mem"])
    args = [
        dev.put(buffer),
        dev.put(np.array(ops, np.int32)),
        dev.put(np.array([len(ops)], np.int32)),
    ]
    dev.call(dev.lookup(module_id, "mem_ops"), args)
    np.testing.assert_array_equal(dev.get(args[0], np.uint8, size), expected)
    for address in args:
        dev.free(address)
    dev.ok(Command.UNLOAD_MODULE, p.pack_module_id(module_id))


# -- AArch64 and TCP -------------------------------------------------------------------------


def test_aarch64_runtime(libs):
    device = Device.start("aarch64")
    try:
        hello = p.unpack_hello(device.ok(Command.HELLO))
        assert (hello.pointer_bytes, hello.description) == (8, "loom-device-runtime 1 aarch64")
        address = device.alloc(4096, 256, Memory.VTCM)
        assert address % 256 == 0
        device.write(address, bytes(range(256)) * 16)
        assert device.read_memory(address, 4096) == bytes(range(256)) * 16
        device.free(address, Memory.VTCM)
        add = device.lookup(device.load(libs["add_aarch64"]), "add")
        a = np.arange(100, dtype=np.int32)
        status, _, (c, q) = _run_add(device, add, a, 2 * a, 3)
        assert status == p.STATUS_OK
        np.testing.assert_array_equal(c, 3 * a)
        np.testing.assert_array_equal(q, a)
        assert "is a 32-bit little-endian ELF file" in device.error(
            Command.LOAD_MODULE, libs["add"].read_bytes()
        )
        device.ok(Command.QUIT)
        assert device.wait() == 0
    finally:
        device.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tcp_transport(libs):
    port = _free_port()
    cmd = [emulator("hexagon"), str(runtime_path("hexagon")), "--listen", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    device = None
    try:
        # the runtime says on standard error when it listens
        assert select.select([proc.stderr], [], [], TIMEOUT)[0], "the runtime did not listen"
        line = proc.stderr.readline().decode()
        assert re.search(rf"listening on 127\.0\.0\.1:{port}$", line.strip()), line
        sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        device = Device(proc, sock)
        assert p.unpack_hello(device.ok(Command.HELLO)).description.endswith("hexagon")
        add = device.lookup(device.load(libs["add"]), "add")
        a = np.arange(-50, 50, dtype=np.int32)
        status, _, (c, q) = _run_add(device, add, a, a, 2)
        assert status == p.STATUS_OK
        np.testing.assert_array_equal(c, 2 * a)
        np.testing.assert_array_equal(q, a)
        device.ok(Command.QUIT)
        assert proc.wait(timeout=TIMEOUT) == 0
    finally:
        if device is not None:
            device.close()
        else:
            proc.kill()
            proc.wait(timeout=TIMEOUT)
