"""The reference NPU's simulator (docs/npu.md): its C library, its runtime ABI, and Python
callers to drive it by hand.

The library (loom/backend/npu/native) provides the NPU's instructions (`npu_mvin`, `npu_compute`,
...) to code generated for the NPU, and simulator controls (`npu_reset`, `npu_read_counters`,
...) to tests. It executes each instruction at once and times it with the decoupled model of
docs/npu.md (load, execute and store queues; npu_timing.c): the counter `cycles` is when the
last instruction would finish, `serial_cycles` the sum of their costs.

Importing this module declares the instructions as the runtime library "npu_simulator". The
architecture constants (DIM, SPAD_ROWS, ...) are read from the simulator's header, npu_sim.h: one
source for C and Python. Each Python caller checks what C cannot (that an int fits its C type, that
the DRAM rows an instruction touches lie inside the numpy array given), then raises `LoomError`
with the simulator's own message when the instruction fails; a failed instruction changes nothing.

    npu_sim.reset()
    npu_sim.config_ld(16)
    npu_sim.mvin(a_tile, 0, 16, 16)                 # int8 rows into the scratchpad
    ...
    npu_sim.counters()["cycles"], npu_sim.counters()["serial_cycles"]
"""

from __future__ import annotations

import ctypes
import functools
import operator
import pathlib
import re
from collections.abc import Mapping

import numpy as np

from loom import abi
from loom.errors import LoomError
from loom.runtime import host_runtime
from loom.runtime.native_lib import build_library

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # numpy < 2
    from numpy import byte_bounds  # type: ignore[attr-defined,no-redef]

_DIR = pathlib.Path(__file__).parent / "native"
SOURCES = (_DIR / "npu_sim.c", _DIR / "npu_timing.c")
"""The simulator's C sources: the instructions (npu_sim.c) and the timing model (npu_timing.c)."""
_HEADER = _DIR / "npu_sim.h"


def _header_constants() -> dict[str, int]:
    """The integer `#define NPU_<NAME> <value>` lines of npu_sim.h, as {"<NAME>": value}."""
    found = re.findall(r"^#define NPU_(\w+) (0x[0-9a-fA-F]+|\d+)u?\b", _HEADER.read_text(), re.M)
    return {name: int(value, 0) for name, value in found}


_ARCH = _header_constants()
DIM = _ARCH["DIM"]
SPAD_ROWS = _ARCH["SPAD_ROWS"]
ACC_ROWS = _ARCH["ACC_ROWS"]
ACC_BASE = _ARCH["ACC_BASE"]
BANDWIDTH = _ARCH["BANDWIDTH"]
LOAD_LATENCY = _ARCH["LOAD_LATENCY"]
STORE_LATENCY = _ARCH["STORE_LATENCY"]
MAX_SHIFT = _ARCH["MAX_SHIFT"]


def _names(prefix: str) -> tuple[str, ...]:
    """The lowercase names of the header's `NPU_<prefix>_<NAME> <index>` constants, by index."""
    pairs = [(v, k[len(prefix) :].lower()) for k, v in _ARCH.items() if k.startswith(prefix)]
    return tuple(name for _, name in sorted(pairs))


COUNTERS = _names("COUNTER_")
"""The names of npu_read_counters' values, in its order (NPU_COUNTER_*)."""

CONFIG = _names("CONFIG_")
"""The names of npu_read_config's values, in its order (NPU_CONFIG_*)."""

ROUNDINGS = _names("ROUND_")
"""The names of mvout's roundings, by their value (NPU_ROUND_*): "half_up", "half_even"."""

_INT32 = (-(2**31), 2**31 - 1)
_UINT32 = (0, 2**32 - 1)


@functools.cache
def library_path() -> pathlib.Path:
    return build_library("libnpu_sim", list(SOURCES), ["-O2"])


@functools.cache
def library() -> ctypes.CDLL:
    """The loaded simulator; RTLD_GLOBAL so that NPU code loaded later resolves its symbols."""
    host_runtime.library()  # provides loom_set_last_error
    lib = ctypes.CDLL(str(library_path()), mode=ctypes.RTLD_GLOBAL)
    i32, u32, ptr = ctypes.c_int32, ctypes.c_uint32, ctypes.c_void_p
    argtypes = {
        "npu_config_ld": [i32],
        "npu_config_st": [i32, i32, i32, i32, i32],
        "npu_config_ex": [i32],
        "npu_mvin": [ptr, u32, i32, i32],
        "npu_mvout": [ptr, u32, i32, i32],
        "npu_preload": [u32, i32, i32, u32, i32, i32, i32],
        "npu_compute": [u32, i32, i32],
        "npu_fence": [],
        "npu_acquire": [],
        "npu_release": [],
        "npu_read_memory": [u32, i32, ptr],
    }
    for name, types in argtypes.items():
        fn = getattr(lib, name)
        fn.argtypes = types
        fn.restype = i32
    lib.npu_reset.argtypes = []
    lib.npu_reset.restype = None
    lib.npu_read_counters.argtypes = [ctypes.POINTER(ctypes.c_int64)]
    lib.npu_read_counters.restype = None
    lib.npu_read_config.argtypes = [ctypes.POINTER(ctypes.c_int32)]
    lib.npu_read_config.restype = None
    return lib


def _link_flags() -> list[str]:
    path = library_path()
    return [f"-L{path.parent}", f"-l:{path.name}", f"-Wl,-rpath,{path.parent}"]


def _instruction(name: str, params: str, doc: str) -> abi.ExternSymbol:
    """An instruction's declaration: int32 name(params), params as '[const] dtype name, ...'."""
    return abi.parse_declaration(f"int32 {name}({params})", sets_last_error=True, doc=doc)


LIBRARY = abi.RuntimeLibrary(
    "npu_simulator",
    ("cpu",),
    symbols=(
        _instruction("npu_config_ld", "int32 stride", "the DRAM row stride of mvin, in bytes"),
        _instruction(
            "npu_config_st",
            "int32 stride, int32 multiplier, int32 shift, int32 relu, int32 rounding",
            "the DRAM row stride of mvout (bytes) and its requantization",
        ),
        _instruction("npu_config_ex", "int32 dataflow", "the dataflow (0: weight stationary)"),
        _instruction(
            "npu_mvin",
            "const handle dram, uint32 addr, int32 rows, int32 cols",
            "DRAM rows into the scratchpad (int8) or the accumulator (int32), zero-filled",
        ),
        _instruction(
            "npu_mvout",
            "handle dram, uint32 addr, int32 rows, int32 cols",
            "accumulator rows, requantized to int8, into DRAM",
        ),
        _instruction(
            "npu_preload",
            "uint32 b, int32 b_rows, int32 b_cols, uint32 c, int32 c_rows, int32 c_cols, "
            "int32 accumulate",
            "the weights of the next compute, and its output rows",
        ),
        _instruction(
            "npu_compute",
            "uint32 a, int32 a_rows, int32 a_cols",
            "acc[c + r] (+)= A[r] x W for the rows of A at scratchpad address a",
        ),
        _instruction("npu_fence", "", "wait until every instruction has finished"),
        _instruction("npu_acquire", "", "wait until this thread owns the NPU"),
        _instruction("npu_release", "", "let the next thread own the NPU"),
    ),
    doc="the reference NPU's instructions (docs/npu.md), provided by its simulator "
    "(loom/backend/npu/native) or a vendor's library with the same symbols",
    link_flags=_link_flags,
    load=library,
)
abi.register_library(LIBRARY, replace=True)


# -- checks C cannot make ---------------------------------------------------------------------


def _int(insn: str, name: str, value: object, bounds: tuple[int, int], ctype: str) -> int:
    """`value` as a Python int, if it fits the C parameter (ctypes would silently wrap it)."""
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise LoomError(f"{insn}: {name} must be an int, got {value!r}") from None
    if not bounds[0] <= number <= bounds[1]:
        raise LoomError(f"{insn}: {name} = {number} does not fit in {ctype}")
    return number


def _i32(insn: str, name: str, value: object) -> int:
    return _int(insn, name, value, _INT32, "int32_t")


def _u32(insn: str, name: str, value: object) -> int:
    return _int(insn, name, value, _UINT32, "uint32_t")


def _moves(addr: int, rows: int, cols: int) -> bool:
    """Whether the simulator accepts a transfer's counts and rows, so that it will touch
    DRAM (it makes these checks itself and names the error; here they only decide whether
    the DRAM side needs checking)."""
    index, size = (addr - ACC_BASE, ACC_ROWS) if addr & ACC_BASE else (addr, SPAD_ROWS)
    return 1 <= cols <= DIM and 0 < rows <= size - index


def _check_dram(
    insn: str, dram: object, dtype: np.dtype, rows: int, cols: int, stride: int, moves: bool
) -> int:
    """The address of `dram`'s first element, once sure that (if the transfer `moves`) its
    `rows` DRAM rows of `cols` elements, `stride` bytes apart from it, lie inside the memory
    of the array that owns the data (a view may reach past its own end into its base, as a
    stride means)."""
    if not isinstance(dram, np.ndarray):
        raise TypeError(f"{insn}: dram must be a numpy array, got {type(dram).__name__}")
    if dram.dtype != dtype:
        raise TypeError(f"{insn}: dram has dtype {dram.dtype}; this transfer moves {dtype}")
    if insn == "npu_mvout" and not dram.flags.writeable:
        raise ValueError(f"{insn}: dram is read-only")
    start = dram.ctypes.data
    if not moves:
        return start
    row_bytes = cols * dtype.itemsize
    owner = dram
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    low, high = byte_bounds(owner)
    first = min(0, (rows - 1) * stride)
    end = max(0, (rows - 1) * stride) + row_bytes
    if start + first < low or start + end > high:
        raise ValueError(
            f"{insn}: {rows} rows of {row_bytes} bytes, {stride} bytes apart, span bytes "
            f"[{first}, {end}) from dram's first element; its memory spans "
            f"[{low - start}, {high - start})"
        )
    return start


def _run(status: int) -> None:
    if status != 0:
        raise LoomError(host_runtime.last_error())


def _element(address: int) -> np.dtype:
    """What a row of the memory at `address` holds: int32 in the accumulator, else int8."""
    return np.dtype(np.int32 if address & ACC_BASE else np.int8)


# -- simulator control ----------------------------------------------------------------------


def reset() -> None:
    """Zero both memories and the counters, drop a pending preload, restore the default
    configuration (strides 0, multiplier 1, shift 0, no ReLU, halves rounded up, weight
    stationary)."""
    library().npu_reset()


def counters() -> dict[str, int]:
    """The counters since the last reset, by the names of COUNTERS."""
    out = (ctypes.c_int64 * len(COUNTERS))()
    library().npu_read_counters(out)
    return dict(zip(COUNTERS, out))


def utilization(counts: Mapping[str, int] | None = None, macs: int | None = None) -> float:
    """The array's utilization, macs / (cycles * DIM * DIM), of `counts` (default: now), with
    the decoupled `cycles`. `macs` replaces the counter's (which counts every valid element a
    compute multiplies, zero padding included) by the problem's own, for the useful
    utilization."""
    counts = counters() if counts is None else counts
    cycles = counts["cycles"]
    macs = counts["macs"] if macs is None else macs
    return macs / (cycles * DIM * DIM) if cycles else 0.0


def config() -> dict[str, int]:
    """The configuration the next instructions use, by the names of CONFIG."""
    out = (ctypes.c_int32 * len(CONFIG))()
    library().npu_read_config(out)
    return dict(zip(CONFIG, out))


def read_memory(address: int, rows: int) -> np.ndarray:
    """A copy of `rows` rows from `address`: int8 (rows, DIM) in the scratchpad, int32
    (rows, DIM) in the accumulator."""
    address = _u32("npu_read_memory", "addr", address)
    rows = _i32("npu_read_memory", "rows", rows)
    limit = ACC_ROWS if address & ACC_BASE else SPAD_ROWS
    # A count the simulator rejects gets an empty buffer: nothing is written to it.
    out = np.zeros((rows if 0 <= rows <= limit else 0, DIM), _element(address))
    _run(library().npu_read_memory(address, rows, out.ctypes.data))
    return out


# -- instructions ---------------------------------------------------------------------------


def config_ld(stride: int) -> None:
    """Set mvin's DRAM row stride in bytes (0 repeats one row)."""
    _run(library().npu_config_ld(_i32("npu_config_ld", "stride", stride)))


def rounding_code(rounding: str | int, where: str = "npu_config_st") -> int:
    """The value of a rounding named in ROUNDINGS ("half_up", "half_even"); an int is taken
    as it is (the simulator checks it)."""
    if isinstance(rounding, str):
        if rounding not in ROUNDINGS:
            raise LoomError(
                f"{where}: rounding must be one of {', '.join(map(repr, ROUNDINGS))}, "
                f"got {rounding!r}"
            )
        return ROUNDINGS.index(rounding)
    return _i32(where, "rounding", rounding)


def config_st(
    stride: int,
    multiplier: int = 1,
    shift: int = 0,
    relu: bool = False,
    rounding: str | int = "half_up",
) -> None:
    """Set mvout's DRAM row stride in bytes and its requantization: multiplier, shift, ReLU
    and the rounding of halves ("half_up" or "half_even", or its value NPU_ROUND_*)."""
    insn = "npu_config_st"
    _run(
        library().npu_config_st(
            _i32(insn, "stride", stride),
            _i32(insn, "multiplier", multiplier),
            _i32(insn, "shift", shift),
            _i32(insn, "relu", relu),
            rounding_code(rounding, insn),
        )
    )


def config_ex(dataflow: int = 0) -> None:
    """Set the dataflow (0, weight stationary, is the only one)."""
    _run(library().npu_config_ex(_i32("npu_config_ex", "dataflow", dataflow)))


def mvin(dram: np.ndarray, addr: int, rows: int, cols: int) -> None:
    """Copy `rows` rows of `cols` elements from `dram` (int8 for a scratchpad address, int32
    for an accumulator address; row r at its first element + r * stride_ld bytes) to the rows
    from `addr`, zero-filling columns cols .. DIM - 1."""
    insn = "npu_mvin"
    addr, rows, cols = _u32(insn, "addr", addr), _i32(insn, "rows", rows), _i32(insn, "cols", cols)
    element = _element(addr)
    stride = config()["stride_ld"]
    moves = _moves(addr, rows, cols)
    pointer = _check_dram(insn, dram, element, rows, cols, stride, moves)
    _run(library().npu_mvin(pointer, addr, rows, cols))


def mvout(dram: np.ndarray, addr: int, rows: int, cols: int) -> None:
    """Requantize `cols` elements of `rows` accumulator rows from `addr` into the int8 array
    `dram` (row r at its first element + r * stride_st bytes)."""
    insn = "npu_mvout"
    addr, rows, cols = _u32(insn, "addr", addr), _i32(insn, "rows", rows), _i32(insn, "cols", cols)
    stride = config()["stride_st"]
    moves = bool(addr & ACC_BASE) and _moves(addr, rows, cols)
    pointer = _check_dram(insn, dram, np.dtype(np.int8), rows, cols, stride, moves)
    _run(library().npu_mvout(pointer, addr, rows, cols))


def preload(
    b: int, b_rows: int, b_cols: int, c: int, c_rows: int, c_cols: int, accumulate: bool
) -> None:
    """Load the weights from scratchpad rows `b` .. (zero outside b_rows x b_cols) and set the
    next compute's output: accumulator rows `c` .., c_rows x c_cols, added to or overwritten."""
    insn = "npu_preload"
    _run(
        library().npu_preload(
            _u32(insn, "b", b),
            _i32(insn, "b_rows", b_rows),
            _i32(insn, "b_cols", b_cols),
            _u32(insn, "c", c),
            _i32(insn, "c_rows", c_rows),
            _i32(insn, "c_cols", c_cols),
            _i32(insn, "accumulate", accumulate),
        )
    )


def compute(a: int, a_rows: int, a_cols: int) -> None:
    """Multiply the rows of A at scratchpad address `a` by the preloaded weights."""
    insn = "npu_compute"
    _run(
        library().npu_compute(
            _u32(insn, "a", a), _i32(insn, "a_rows", a_rows), _i32(insn, "a_cols", a_cols)
        )
    )


def fence() -> None:
    """Wait until every instruction has finished."""
    _run(library().npu_fence())


def acquire() -> None:
    """Wait until this thread owns the NPU (kernels built by loom do this themselves)."""
    _run(library().npu_acquire())


def release() -> None:
    """Let the next thread own the NPU; only its owner may."""
    _run(library().npu_release())
