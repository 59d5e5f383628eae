"""Device sessions (docs/architecture.md, decision 7): one device runtime, over pipes or TCP.

`loom.device("hexagon-sim")` starts the device runtime under `qemu-hexagon` and talks to it
through its standard input and output; `loom.device("hexagon", host=..., port=...)` connects to
a runtime listening on TCP (on a board, or under qemu with `--listen`). Every request has a
deadline. When the device process exits or stops answering, the request raises `DeviceError`
with the exit status (or the timeout) and the command, the session closes, and `restart()`
gives a fresh runtime. An error the device answers (a failed allocation, an unknown function)
raises `DeviceError` too, and the session keeps working.

A session may be shared by threads. Its `lock` (re-entrant) is held around every
request/response exchange, and around every operation made of several exchanges (a device
function's call: allocate, write, call, read back, free; an array's allocation and first
write), so another thread's exchange never comes between them. `close()` and `restart()` take
the lock too: they wait for the operation in progress, and the other threads' next use of the
old runtime's arrays and modules raises a clear error. A device array that is garbage
collected does not send FREE itself (a finalizer may run in the middle of an exchange): it is
queued, and freed before the session's next request.
"""

from __future__ import annotations

import collections
import os
import select
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from loom.errors import DeviceError, LoomError
from loom.runtime.device import protocol, runtime_path
from loom.runtime.device.emulation import Emulation, emulation
from loom.runtime.device.protocol import Command, Memory
from loom.runtime.device_handle import GPU_KINDS, Device, host_device, is_host_kind

DEFAULT_TIMEOUT = 120.0
_MEMORIES = {"heap": Memory.HEAP, "vtcm": Memory.VTCM}


class _Timeout(Exception):
    pass


class _Closed(Exception):
    pass


class _PipeTransport:
    """A runtime process whose stdin/stdout carry the protocol; stderr goes to a file that is
    quoted when the process dies."""

    def __init__(self, argv: list[str]):
        self.stderr = tempfile.TemporaryFile()
        self.argv = argv
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, bufsize=0
            )
        except OSError as e:
            raise DeviceError(f"cannot start the device runtime {argv[0]}: {e}") from None
        self.deadline = float("inf")

    def send(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise _Closed() from None

    def read(self, n: int) -> bytes:
        fd = self.proc.stdout.fileno()
        remaining = self.deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise _Timeout()
        data = os.read(fd, n)
        if not data:
            raise _Closed()
        return data

    def exit_status(self) -> int | None:
        try:
            return self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return None

    def diagnostics(self) -> str:
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace").strip()
        return text[-1000:]

    def close(self, kill: bool = False) -> None:
        if kill and self.proc.poll() is None:
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


class _SocketTransport:
    def __init__(self, host: str, port: int, timeout: float):
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise DeviceError(
                f"cannot connect to a device runtime at {host}:{port}: {e.strerror or e}"
            ) from None
        self.deadline = float("inf")

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            raise _Closed() from None

    def read(self, n: int) -> bytes:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise _Timeout()
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(n)
        except TimeoutError:
            raise _Timeout() from None
        except OSError:
            raise _Closed() from None
        if not data:
            raise _Closed()
        return data

    def exit_status(self) -> int | None:
        return None

    def diagnostics(self) -> str:
        return ""

    def close(self, kill: bool = False) -> None:
        self.sock.close()


class Session:
    """A connection to one device runtime; safe to share between threads (hold `lock` to make
    several requests one unit that no other thread's request comes between)."""

    def __init__(
        self,
        connect: Callable[[], object],
        name: str,
        timeout: float,
        emulation: Emulation | None = None,
        cpu: str | None = None,
    ):
        self._connect = connect
        self.name = name
        self.timeout = timeout
        self.emulation = emulation
        """The qemu emulator a simulator session runs the runtime under; None over TCP."""
        self.cpu = cpu
        """The core a simulator session emulates ("v73"), or None (qemu's default model)."""
        self.generation = 0
        self.transport = None
        self.closed = True
        self.last_command: Command | None = None
        self.lock = threading.RLock()
        # (generation, address, memory) of garbage-collected device arrays, freed before the
        # next request; appended to without the lock (deque appends are atomic)
        self._dropped: collections.deque[tuple[int, int, Memory]] = collections.deque()
        with self.lock:
            self._open()

    def _open(self) -> None:
        self._dropped.clear()
        self.transport = self._connect()
        self.closed = False
        self.generation += 1
        self.hello = protocol.unpack_hello(self.request(Command.HELLO))
        words = self.hello.description.split()
        self.isa = words[2] if len(words) > 2 else "unknown"

    @staticmethod
    def simulator(
        isa: str = "hexagon",
        vtcm_size: int | None = None,
        heap_size: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        cpu: str | None = None,
    ) -> Session:
        """Start the device runtime for `isa` under its qemu user emulator, as the core `cpu`
        (Hexagon: "v66" ... "v73"; by default the newest the emulator runs)."""
        emu = emulation(isa)
        cpu = emu.check_cpu(cpu)
        argv = [emu.path, *emu.cpu_arguments(cpu), str(runtime_path(isa))]
        if vtcm_size is not None:
            argv += ["--vtcm", str(int(vtcm_size))]
        if heap_size is not None:
            argv += ["--heap", str(int(heap_size))]
        return Session(lambda: _PipeTransport(argv), f"{isa}-sim", timeout, emu, cpu)

    @staticmethod
    def connect(host: str, port: int, timeout: float = DEFAULT_TIMEOUT) -> Session:
        """A runtime listening on TCP (`loom-device-runtime --listen HOST:PORT`)."""
        return Session(lambda: _SocketTransport(host, port, timeout), f"{host}:{port}", timeout)

    # -- requests --------------------------------------------------------------------------
    def check_open(self) -> None:
        """A DeviceError if the session is closed."""
        if self.closed:
            raise DeviceError(f"session {self.name} is closed; call restart() for a new one")

    def request(self, command: Command, payload: bytes = b"") -> bytes:
        """One request/response exchange (after freeing garbage-collected arrays), with the
        session's lock held: the payload of the response."""
        with self.lock:
            self.check_open()
            if command is not Command.QUIT:
                self._free_dropped()
            return self._exchange(command, payload)

    def _free_dropped(self) -> None:
        while self._dropped:
            generation, address, memory = self._dropped.popleft()
            if generation != self.generation:
                continue  # its runtime is gone, and its memory with it
            try:
                self._exchange(Command.FREE, protocol.pack_free(address, memory))
            except DeviceError:
                if self.closed:
                    raise  # the runtime died: say so now

    def _drop(self, generation: int, address: int, memory: Memory) -> None:
        """Free a garbage-collected array's memory before the next request."""
        self._dropped.append((generation, address, memory))

    def _exchange(self, command: Command, payload: bytes) -> bytes:
        self.last_command = command
        t = self.transport
        t.deadline = time.monotonic() + self.timeout
        try:
            t.send(protocol.encode_request(command, payload))
            status, body = protocol.read_response(t)
        except _Timeout:
            self._fail(
                f"no reply to {command.name} within {self.timeout:g} s; the device "
                "runtime was stopped"
            )
        except (_Closed, protocol.ProtocolError):
            status = t.exit_status()
            how = f"exited with status {status}" if status is not None else "closed the stream"
            self._fail(f"the device runtime {how} during {command.name}")
        if status == protocol.STATUS_ERROR:
            message = body.decode("utf-8", errors="replace")
            raise DeviceError(f"{self.name}: {command.name} failed: {message}")
        return body

    def _fail(self, message: str) -> None:
        diagnostics = self.transport.diagnostics()
        self.transport.close(kill=True)
        self.closed = True
        detail = f"\ndevice runtime output:\n{diagnostics}" if diagnostics else ""
        raise DeviceError(f"{self.name}: {message}{detail}")

    def alloc(self, nbytes: int, alignment: int = 128, memory: str = "heap") -> int:
        return protocol.unpack_address(
            self.request(Command.ALLOC, protocol.pack_alloc(nbytes, alignment, _memory(memory)))
        )

    def free(self, address: int, memory: str = "heap") -> None:
        self.request(Command.FREE, protocol.pack_free(address, _memory(memory)))

    def write(self, address: int, data: bytes) -> None:
        self.request(Command.WRITE, protocol.pack_write(address, data))

    def read(self, address: int, nbytes: int) -> bytes:
        return self.request(Command.READ, protocol.pack_read(address, nbytes))

    def load_module(self, shared_object: bytes) -> int:
        """Load a device library; a simulator session first refuses, with a LoomError, a module
        its emulator cannot run (emulation.Emulation.check_module)."""
        if self.emulation is not None:
            self.emulation.check_module(shared_object, self.cpu)
        return protocol.unpack_module_id(self.request(Command.LOAD_MODULE, shared_object))

    def unload_module(self, module_id: int) -> None:
        self.request(Command.UNLOAD_MODULE, protocol.pack_module_id(module_id))

    def lookup(self, module_id: int, name: str) -> int:
        return protocol.unpack_address(
            self.request(Command.LOOKUP, protocol.pack_lookup(module_id, name)), Command.LOOKUP
        )

    def call(self, function: int, args: Sequence[int]) -> None:
        protocol.unpack_call(self.request(Command.CALL, protocol.pack_call(function, args)))

    def time(self, function: int, args: Sequence[int], number: int, repeat: int) -> list[float]:
        """Seconds per call in each repeat, measured by the device's clock."""
        ns = protocol.unpack_time(
            self.request(Command.TIME, protocol.pack_time(function, number, repeat, args))
        )
        return [t / 1e9 / number for t in ns]

    def stats(self) -> dict[str, dict[str, int]]:
        """VTCM and heap statistics of the device (allocations, frees, bytes in use, ...)."""
        vtcm, heap = protocol.unpack_stats(self.request(Command.STATS))
        return {"vtcm": vars(vtcm), "heap": vars(heap)}

    # -- life cycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Ask the runtime to quit and wait for it (a dead session closes quietly). Waits for
        another thread's operation in progress; that thread's next request raises DeviceError."""
        with self.lock:
            if self.closed:
                return
            try:
                self.request(Command.QUIT)
            except DeviceError:
                pass
            if not self.closed:
                self.transport.close()
                self.closed = True

    def restart(self) -> Session:
        """Close this runtime (if it is still there) and start or connect a new one; device
        arrays and loaded modules of the old one are gone (using them raises an error).
        Waits for another thread's operation in progress."""
        with self.lock:
            if not self.closed:
                self.transport.close(kill=True)
                self.closed = True
            self._open()
        return self

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.hello.description
        core = f" ({self.cpu} under {self.emulation.describe()})" if self.emulation else ""
        return f"<loom.Session {self.name}{core}: {state}>"


def _memory(memory: str) -> Memory:
    try:
        return _MEMORIES[memory]
    except KeyError:
        raise LoomError(f"device memory must be 'heap' or 'vtcm', got {memory!r}") from None


class DeviceArray:
    """An array in a device's memory: `loom.nd.array(x, device=session)`; `.numpy()` reads it
    back. Freed by `free()`, or when garbage collected (before the session's next request, if
    its session is still the one it was made in)."""

    def __init__(
        self,
        session: Session,
        shape: tuple[int, ...],
        dtype,
        alignment: int = 128,
        memory: str = "heap",
    ):
        self.address = 0
        self.session = session
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.memory = memory
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self._memory = _memory(memory)
        with session.lock:  # the address and the generation of one runtime
            self.address = session.alloc(max(self.nbytes, 1), alignment, memory)
            self._generation = session.generation

    @staticmethod
    def from_numpy(
        session: Session, data, dtype=None, alignment: int = 128, memory: str = "heap"
    ) -> DeviceArray:
        src = np.ascontiguousarray(np.asarray(data, dtype=dtype))
        with session.lock:
            out = DeviceArray(session, src.shape, src.dtype, alignment, memory)
            out.copyfrom(src)
        return out

    @property
    def alive(self) -> bool:
        return not self.session.closed and self.session.generation == self._generation

    def _check_alive(self) -> None:
        self.session.check_open()
        if not self.alive:
            raise DeviceError(
                f"this array belonged to an earlier runtime of session {self.session.name}"
            )
        if not self.address:
            raise LoomError(f"this array was freed (on session {self.session.name})")

    def copyfrom(self, data) -> None:
        src = np.ascontiguousarray(np.asarray(data, dtype=self.dtype))
        if src.shape != self.shape:
            raise ValueError(f"copyfrom: expected shape {self.shape}, got {src.shape}")
        with self.session.lock:
            self._check_alive()
            self.session.write(self.address, src.tobytes())

    def numpy(self) -> np.ndarray:
        with self.session.lock:
            self._check_alive()
            data = self.session.read(self.address, self.nbytes)
        return np.frombuffer(data, self.dtype).reshape(self.shape).copy()

    def free(self) -> None:
        with self.session.lock:
            address, self.address = self.address, 0
            if address and self.alive:
                self.session.free(address, self.memory)

    def __del__(self) -> None:
        # never a request here: a finalizer may run in the middle of this session's exchange
        try:
            if self.address and self.alive:
                self.session._drop(self._generation, self.address, self._memory)
        except Exception:
            pass

    def __repr__(self) -> str:
        state = f"at 0x{self.address:x}" if self.address else "freed"
        return (
            f"<DeviceArray {self.dtype}{list(self.shape)} {state} ({self.memory}) on "
            f"{self.session.name}>"
        )


def device(
    kind: str | int = "hexagon-sim",
    dev_id: int = 0,
    *,
    host: str | None = None,
    port: int | None = None,
    vtcm_size: int | None = None,
    heap_size: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    cpu: str | None = None,
) -> Session | Device:
    """A device session: "hexagon-sim" / "aarch64-sim" start the device runtime under qemu
    (as the core `cpu`: "v66" ... "v73" on Hexagon, by default the newest the installed
    qemu-hexagon runs); "hexagon" / "aarch64" with host= and port= connect to a runtime
    listening on TCP. The host, "cpu", "llvm" or "c" (TVM's names), gives the handle
    `loom.cpu(dev_id)` instead (loom/runtime/device_handle.py)."""
    if is_host_kind(kind):
        if any(v is not None for v in (host, port, vtcm_size, heap_size, cpu)):
            raise LoomError(f"device {kind!r} is the host: it takes only dev_id")
        return host_device(kind, dev_id)
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a device's name such as 'hexagon-sim', got {kind!r}")
    if kind.partition(" ")[0] in GPU_KINDS:
        raise LoomError(f"loom has no runtime for {kind!r} devices (no GPU support)")
    if dev_id != 0:
        raise LoomError(f"a device session is one device: dev_id must be 0, got {dev_id!r}")
    if kind.endswith("-sim"):
        if host is not None or port is not None:
            raise LoomError(f"device {kind!r} is a local simulator; host/port are for TCP")
        return Session.simulator(kind[: -len("-sim")], vtcm_size, heap_size, timeout, cpu)
    if cpu is not None:
        raise LoomError(f"cpu= is for simulators ('{kind}-sim'); a device over TCP is what it is")
    if host is None or port is None:
        raise LoomError(
            f"device {kind!r} needs host= and port= of a listening runtime (or use "
            f"'{kind}-sim' for the simulator)"
        )
    session = Session.connect(host, int(port), timeout)
    if session.isa != kind:
        session.close()
        raise DeviceError(f"the runtime at {host}:{port} is a {session.isa} device, not {kind}")
    return session
