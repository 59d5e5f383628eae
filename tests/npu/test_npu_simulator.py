"""The reference NPU's simulator against docs/npu.md.

`Model` below is the NPU written in numpy from the document (not from the C): each test drives
the simulator through loom.backend.npu.simulator's callers and the model with the same instructions,
then compares both memories, the configuration and every counter. Requantization is checked
against Python's exact integers, and a tiled matmul against numpy's integer product.
"""

from __future__ import annotations

import pathlib
import re
import threading
from collections.abc import Callable

import numpy as np
import pytest

from loom import abi
from loom.backend.npu import simulator as npu
from loom.errors import LoomError
from tests.npu.timing_model import (
    LOAD,
    STORE,
    Rows,
    Timing,
    compute_cycles,
    dram_bytes,
    mvin_bytes,
    mvin_cycles,
    mvout_cycles,
)
from tests.thread_sanitizer import assert_race_free

DIM, SPAD_ROWS, ACC_ROWS, ACC_BASE = npu.DIM, npu.SPAD_ROWS, npu.ACC_ROWS, npu.ACC_BASE
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

NPU_NATIVE = pathlib.Path(npu.__file__).parent / "native"


def requantize(x: int, multiplier: int, shift: int, relu: bool, rounding: int = 0) -> int:
    """The document's requantization on exact integers (>> on a Python int floors): halves
    up (rounding 0) or to even (1), written as a comparison with the half, not as mvout's sum."""
    floor, rest = divmod(x * multiplier, 1 << shift)
    half = (1 << shift) / 2  # 0.5 when shift is 0: no rest reaches it
    y = floor + (rest > half or (rest == half and (rounding == 0 or floor % 2 == 1)))
    y = min(max(y, -128), 127)
    return max(y, 0) if relu else y


def wrap_int32(values: np.ndarray) -> np.ndarray:
    return ((values.astype(np.int64) - INT32_MIN) % 2**32 + INT32_MIN).astype(np.int32)


class Model:
    """The NPU of docs/npu.md. DRAM is a uint8 buffer and a byte offset into it; `address` is
    where the simulator saw those bytes (for the timing model's DRAM dependencies)."""

    def __init__(self) -> None:
        self.spad = np.zeros((SPAD_ROWS, DIM), np.int8)
        self.acc = np.zeros((ACC_ROWS, DIM), np.int32)
        # The defaults before any config instruction.
        self.config = dict(
            stride_ld=0, stride_st=0, multiplier=1, shift=0, relu=0, dataflow=0, rounding=0
        )
        self.pending: dict | None = None
        self.counters = dict.fromkeys(npu.COUNTERS, 0)
        self.timing = Timing()

    def _retire(self, kind: str, cost: int, busy: str | None = None) -> None:
        self.counters[kind] += 1
        self.counters["serial_cycles"] += cost
        if busy:
            self.counters[busy] += cost
        self.counters["cycles"] = self.timing.latest

    def config_ld(self, stride: int) -> None:
        self.config["stride_ld"] = stride
        self.timing.transfer("config_ld", LOAD)
        self._retire("config", 1, "load_busy")

    def config_st(
        self, stride: int, multiplier: int, shift: int, relu: int, rounding: int = 0
    ) -> None:
        self.config.update(
            stride_st=stride, multiplier=multiplier, shift=shift, relu=relu, rounding=rounding
        )
        self.timing.transfer("config_st", STORE)
        self._retire("config", 1, "store_busy")

    def config_ex(self, dataflow: int) -> None:
        self.config["dataflow"] = dataflow
        self.timing.config_ex()
        self._retire("config", 1)

    def mvin(
        self, buf: np.ndarray, offset: int, addr: int, rows: int, cols: int, address: int
    ) -> None:
        in_acc = addr >= ACC_BASE
        memory, row, dtype = (
            (self.acc, addr - ACC_BASE, np.int32) if in_acc else (self.spad, addr, np.int8)
        )
        size = np.dtype(dtype).itemsize
        starts = offset + np.arange(rows) * self.config["stride_ld"]
        index = starts[:, None] + np.arange(cols * size)[None, :]
        assert rows == 0 or (index.min() >= 0 and index.max() < len(buf))
        memory[row : row + rows] = 0
        memory[row : row + rows, :cols] = buf[index].view(dtype)
        stride = self.config["stride_ld"]
        self.counters["bytes_in"] += mvin_bytes(rows, cols, size, stride)
        cost = mvin_cycles(rows, cols, size, stride)
        written = Rows("acc" if in_acc else "spad", row, rows, "w")
        source = dram_bytes(address, rows, cols * size, stride, "r")
        self.timing.transfer("mvin", LOAD, [written], source, cost)
        self._retire("mvin", cost, "load_busy")

    def mvout(
        self, buf: np.ndarray, offset: int, addr: int, rows: int, cols: int, address: int
    ) -> None:
        c = self.config
        for r in range(rows):
            values = [
                requantize(int(x), c["multiplier"], c["shift"], bool(c["relu"]), c["rounding"])
                for x in self.acc[addr - ACC_BASE + r, :cols]
            ]
            start = offset + r * c["stride_st"]
            buf[start : start + cols] = np.array(values, np.int8).view(np.uint8)
        self.counters["bytes_out"] += rows * cols
        cost = mvout_cycles(rows, cols)
        read = Rows("acc", addr - ACC_BASE, rows, "r")
        target = dram_bytes(address, rows, cols, c["stride_st"], "w")
        self.timing.transfer("mvout", STORE, [read], target, cost)
        self._retire("mvout", cost, "store_busy")

    def preload(self, b, b_rows, b_cols, c, c_rows, c_cols, accumulate) -> None:
        weights = np.zeros((DIM, DIM), np.int64)
        weights[:b_rows, :b_cols] = self.spad[b : b + b_rows, :b_cols]
        self.pending = dict(
            W=weights, b_rows=b_rows, c=c - ACC_BASE, c_rows=c_rows, c_cols=c_cols, acc=accumulate
        )
        self.timing.preload([Rows("spad", b, b_rows, "r")])
        self._retire("preload", DIM)

    def compute(self, a: int, a_rows: int, a_cols: int) -> None:
        p = self.pending
        assert p is not None
        rows = min(a_rows, p["c_rows"])
        lhs = np.zeros((rows, DIM), np.int64)
        lhs[:, :a_cols] = self.spad[a : a + rows, :a_cols]
        out = self.acc[p["c"] : p["c"] + rows, : p["c_cols"]]
        base = out.astype(np.int64) if p["acc"] else 0
        out[...] = wrap_int32(base + (lhs @ p["W"])[:, : p["c_cols"]])
        self.pending = None
        self.counters["macs"] += rows * p["c_cols"] * min(a_cols, p["b_rows"])
        out_rows = Rows("acc", p["c"], rows, "rw" if p["acc"] else "w")
        self.timing.compute(a_rows, [Rows("spad", a, a_rows, "r"), out_rows])
        self.counters["execute_busy"] += a_rows
        self._retire("compute", compute_cycles(a_rows))

    def fence(self) -> None:
        self.timing.fence()
        self._retire("fence", 0)


def dram(buf: np.ndarray, offset: int, dtype: type) -> np.ndarray:
    """The simulator's view of `buf` from byte `offset` (a view, so strides may reach back)."""
    size = np.dtype(dtype).itemsize
    return buf[offset : offset + (len(buf) - offset) // size * size].view(dtype)


class Both:
    """Drives the simulator and the model with the same instructions."""

    def __init__(self) -> None:
        self.model = Model()

    def config_ld(self, stride: int) -> None:
        npu.config_ld(stride)
        self.model.config_ld(stride)

    def config_st(
        self, stride: int, multiplier: int = 1, shift: int = 0, relu: int = 0, rounding: int = 0
    ) -> None:
        npu.config_st(stride, multiplier, shift, relu, rounding)
        self.model.config_st(stride, multiplier, shift, relu, rounding)

    def config_ex(self, dataflow: int) -> None:
        npu.config_ex(dataflow)
        self.model.config_ex(dataflow)

    def mvin(self, buf: np.ndarray, offset: int, addr: int, rows: int, cols: int) -> None:
        view = dram(buf, offset, np.int32 if addr >= ACC_BASE else np.int8)
        npu.mvin(view, addr, rows, cols)
        self.model.mvin(buf, offset, addr, rows, cols, view.ctypes.data)

    def mvout(self, buf: np.ndarray, offset: int, addr: int, rows: int, cols: int) -> np.ndarray:
        """Runs mvout on two copies of `buf`, checks they agree, returns the simulator's."""
        theirs, ours = buf.copy(), buf.copy()
        view = dram(theirs, offset, np.int8)
        npu.mvout(view, addr, rows, cols)
        self.model.mvout(ours, offset, addr, rows, cols, view.ctypes.data)
        np.testing.assert_array_equal(theirs, ours)
        return theirs

    def preload(self, *args: int) -> None:
        npu.preload(*args)
        self.model.preload(*args)

    def compute(self, a: int, a_rows: int, a_cols: int) -> None:
        npu.compute(a, a_rows, a_cols)
        self.model.compute(a, a_rows, a_cols)

    def fence(self) -> None:
        npu.fence()
        self.model.fence()

    def check(self) -> None:
        np.testing.assert_array_equal(npu.read_memory(0, SPAD_ROWS), self.model.spad)
        np.testing.assert_array_equal(npu.read_memory(ACC_BASE, ACC_ROWS), self.model.acc)
        assert npu.config() == self.model.config
        assert npu.counters() == self.model.counters


@pytest.fixture(autouse=True)
def fresh_npu():
    npu.reset()
    yield
    npu.reset()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(2024)


def random_bytes(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 256, n, dtype=np.uint8)


# -- the declaration ------------------------------------------------------------------------


def header_text() -> str:

    return (NPU_NATIVE / "npu_sim.h").read_text()


def test_constants_mirror_the_header():
    defines = dict(re.findall(r"#define NPU_(\w+) (\w+)", header_text()))
    value = {k: int(v.rstrip("u"), 0) for k, v in defines.items() if v.rstrip("u")[0].isdigit()}
    for name in ("DIM", "SPAD_ROWS", "ACC_ROWS", "ACC_BASE", "BANDWIDTH"):
        assert getattr(npu, name) == value[name], name
    assert (npu.LOAD_LATENCY, npu.STORE_LATENCY) == (value["LOAD_LATENCY"], value["STORE_LATENCY"])
    assert value["NCOUNTERS"] == len(npu.COUNTERS)
    for index, name in enumerate(npu.COUNTERS):
        assert value[f"COUNTER_{name.upper()}"] == index
    assert value["NCONFIG"] == len(npu.CONFIG)
    for index, name in enumerate(npu.CONFIG):
        assert value[f"CONFIG_{name.upper()}"] == index


def test_abi_declares_every_instruction_as_the_header_does():
    assert abi.get_library("npu_simulator") == npu.LIBRARY
    prototypes = re.findall(r"^int32_t (npu_\w+)\(([^)]*)\);", header_text(), re.M | re.S)
    declared = {name: " ".join(params.split()) for name, params in prototypes}  # const too
    declared.pop("npu_read_memory")  # a simulator control, not an instruction
    assert {s.name for s in npu.LIBRARY.symbols} == set(declared)
    for symbol in npu.LIBRARY.symbols:
        assert symbol.sets_last_error
        args = symbol.c_declaration().split("(", 1)[1].rstrip(")").replace("void * ", "void *")
        assert args == declared[symbol.name], symbol.name
        assert hasattr(npu.library(), symbol.name)
    assert npu.LIBRARY.provides("npu_mvin") and not npu.LIBRARY.provides("npu_reset")
    assert any(flag.startswith("-l:libnpu_sim") for flag in npu.LIBRARY.link_flags())


# -- data movement --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stride, rows, cols, addr, offset",
    [
        (16, 16, 16, 0, 0),
        (40, 7, 5, 100, 3),
        (0, 9, 16, SPAD_ROWS - 9, 0),  # stride 0 repeats one row; the last rows exist
        (3, 20, 3, 7, 1),  # rows overlap in DRAM
        (-24, 6, 10, 500, 200),  # walks back from the first element
        (16, 0, 4, SPAD_ROWS - 1, 0),
    ],
)
def test_mvin_into_the_scratchpad_zero_fills(rng, stride, rows, cols, addr, offset):
    both = Both()
    both.mvin(random_bytes(rng, 4096), 0, 0, SPAD_ROWS, DIM)  # stride 0: one garbage row
    both.config_ld(stride)
    both.mvin(random_bytes(rng, 1024), offset, addr, rows, cols)
    both.check()
    if rows:
        written = npu.read_memory(addr, rows)
        assert not written[:, cols:].any()


@pytest.mark.parametrize(
    "stride, rows, cols, acc_row, offset",
    [(64, 16, 16, 0, 0), (28, 11, 7, 300, 8), (0, 4, 16, ACC_ROWS - 4, 4), (-64, 3, 2, 9, 512)],
)
def test_accumulator_round_trip_with_strides(rng, stride, rows, cols, acc_row, offset):
    both = Both()
    both.config_ld(0)
    both.mvin(random_bytes(rng, 64), 0, ACC_BASE, ACC_ROWS, DIM)
    both.config_ld(stride)
    source = random_bytes(rng, 1024)
    both.mvin(source, offset, ACC_BASE + acc_row, rows, cols)
    both.check()
    # int32 values in int8 range come back unchanged through an identity mvout.
    small = rng.integers(-128, 128, (rows, cols)).astype(np.int32)
    both.config_ld(cols * 4)
    both.mvin(small.view(np.uint8).ravel(), 0, ACC_BASE + acc_row, rows, cols)
    both.config_st(cols)
    out = both.mvout(np.zeros(rows * cols, np.uint8), 0, ACC_BASE + acc_row, rows, cols)
    np.testing.assert_array_equal(out.view(np.int8).reshape(rows, cols), small)
    both.check()


def test_mvout_strides_leave_other_dram_bytes_alone(rng):
    both = Both()
    both.config_ld(DIM * 4)
    values = rng.integers(-300, 300, (8, DIM)).astype(np.int32)  # some saturate
    both.mvin(values.view(np.uint8).ravel(), 0, ACC_BASE + 10, 8, DIM)
    sentinel = np.full(400, 0xA5, np.uint8)
    for stride, offset in [(37, 0), (-20, 300), (0, 5)]:
        both.config_st(stride)
        out = both.mvout(sentinel, offset, ACC_BASE + 10, 8, 11)
        rows = [offset + r * stride for r in range(8)]
        touched = np.zeros(400, bool)
        for start in rows:
            touched[start : start + 11] = True
        assert (out[~touched] == 0xA5).all()
        if stride == 0:  # every row lands on the same bytes: the last one stays
            np.testing.assert_array_equal(
                out[5:16].view(np.int8), np.clip(values[7, :11], -128, 127)
            )
    both.check()


def test_the_last_configuration_applies(rng):
    both = Both()
    buf = random_bytes(rng, 2048)
    both.config_ld(100)
    both.config_ld(32)
    both.mvin(buf, 0, 50, 16, 16)
    both.config_st(1, 5, 1, 1)
    both.config_st(16, 3, 2, 0)
    both.config_ld(DIM * 4)
    both.mvin(buf, 0, ACC_BASE, 4, DIM)
    both.mvout(np.zeros(64, np.uint8), 0, ACC_BASE, 4, DIM)
    both.config_ex(0)
    both.check()


# -- the systolic array ---------------------------------------------------------------------


def load_tile(both: Both, rng, addr: int, rows: int = DIM) -> None:
    both.config_ld(DIM)
    both.mvin(random_bytes(rng, rows * DIM), 0, addr, rows, DIM)


def test_full_tile_product_with_and_without_accumulation(rng):
    both = Both()
    a = rng.integers(-128, 128, (DIM, DIM), dtype=np.int8)
    b = rng.integers(-128, 128, (DIM, DIM), dtype=np.int8)
    c0 = rng.integers(-(2**20), 2**20, (DIM, DIM)).astype(np.int32)
    both.config_ld(DIM)
    both.mvin(a.view(np.uint8).ravel(), 0, 0, DIM, DIM)
    both.mvin(b.view(np.uint8).ravel(), 0, DIM, DIM, DIM)
    both.config_ld(DIM * 4)
    both.mvin(c0.view(np.uint8).ravel(), 0, ACC_BASE + 32, DIM, DIM)
    product = a.astype(np.int64) @ b.astype(np.int64)

    both.preload(DIM, DIM, DIM, ACC_BASE + 32, DIM, DIM, 1)
    both.compute(0, DIM, DIM)
    np.testing.assert_array_equal(npu.read_memory(ACC_BASE + 32, DIM), c0 + product)
    both.preload(DIM, DIM, DIM, ACC_BASE + 32, DIM, DIM, 1)
    both.compute(0, DIM, DIM)
    np.testing.assert_array_equal(npu.read_memory(ACC_BASE + 32, DIM), c0 + 2 * product)
    both.preload(DIM, DIM, DIM, ACC_BASE + 32, DIM, DIM, 0)
    both.compute(0, DIM, DIM)
    np.testing.assert_array_equal(npu.read_memory(ACC_BASE + 32, DIM), product)
    both.check()


PARTIAL = [
    # a_rows, a_cols, b_rows, b_cols, c_rows, c_cols, accumulate
    (16, 16, 16, 16, 16, 5, 1),
    (7, 16, 16, 16, 16, 16, 0),
    (16, 16, 16, 16, 3, 16, 1),
    (16, 9, 16, 16, 16, 16, 0),
    (16, 16, 4, 16, 16, 16, 1),
    (16, 16, 16, 6, 16, 16, 0),
    (16, 16, 16, 6, 16, 12, 1),  # columns 6..11 get 0 (+ acc), 12.. untouched
    (5, 3, 11, 13, 9, 7, 1),
    (12, 14, 2, 15, 4, 1, 0),
    (0, 16, 16, 16, 16, 16, 0),  # no rows: nothing changes
    (16, 0, 16, 16, 16, 16, 0),  # A is all zero: overwrites with 0
    (16, 16, 0, 0, 16, 16, 1),
    (16, 16, 16, 16, 0, 16, 0),
    (16, 16, 16, 16, 16, 0, 0),
]


@pytest.mark.parametrize("a_rows, a_cols, b_rows, b_cols, c_rows, c_cols, accumulate", PARTIAL)
def test_partial_tiles(rng, a_rows, a_cols, b_rows, b_cols, c_rows, c_cols, accumulate):
    both = Both()
    load_tile(both, rng, 40)  # A, with garbage outside a_rows x a_cols
    load_tile(both, rng, 200)  # W, with garbage outside b_rows x b_cols
    both.config_ld(0)
    both.mvin(random_bytes(rng, 64), 0, ACC_BASE, 64, DIM)
    before = npu.read_memory(ACC_BASE + 20, DIM)
    both.preload(200, b_rows, b_cols, ACC_BASE + 20, c_rows, c_cols, accumulate)
    both.compute(40, a_rows, a_cols)
    both.check()
    after = npu.read_memory(ACC_BASE + 20, DIM)
    rows = min(a_rows, c_rows)
    np.testing.assert_array_equal(after[:, c_cols:], before[:, c_cols:])
    np.testing.assert_array_equal(after[rows:], before[rows:])
    # Straight from the document: A and W are zero outside their sizes.
    a = np.zeros((DIM, DIM), np.int64)
    a[:a_rows, :a_cols] = npu.read_memory(40, DIM)[:a_rows, :a_cols]
    w = np.zeros((DIM, DIM), np.int64)
    w[:b_rows, :b_cols] = npu.read_memory(200, DIM)[:b_rows, :b_cols]
    expected = wrap_int32((before.astype(np.int64) if accumulate else 0) + a @ w)
    np.testing.assert_array_equal(after[:rows, :c_cols], expected[:rows, :c_cols])


LONG = [
    # a, a_rows, a_cols, b_rows, b_cols, c row, c_rows, c_cols, accumulate
    (0, 256, 16, 16, 16, 0, 256, 16, 0),  # 256 rows of A through one preloaded weight tile
    (100, 300, 9, 12, 16, 17, 300, 7, 1),
    (SPAD_ROWS - 40, 40, 16, 16, 16, ACC_ROWS - 40, 40, 16, 1),  # the last rows of both
    (7, 50, 16, 16, 16, 3, 20, 16, 0),  # c_rows < a_rows: only 20 rows are written
    (7, 20, 16, 16, 16, 3, 50, 16, 1),  # a_rows < c_rows
    (0, 0, 16, 16, 16, 0, ACC_ROWS, 16, 0),
]


@pytest.mark.parametrize("a, a_rows, a_cols, b_rows, b_cols, c, c_rows, c_cols, accumulate", LONG)
def test_one_preload_streams_many_rows(
    rng, a, a_rows, a_cols, b_rows, b_cols, c, c_rows, c_cols, accumulate
):
    both = Both()
    both.config_ld(DIM)
    both.mvin(random_bytes(rng, SPAD_ROWS * DIM), 0, 0, SPAD_ROWS, DIM)
    both.config_ld(DIM * 4)
    acc_values = rng.integers(-(2**20), 2**20, (ACC_ROWS, DIM)).astype(np.int32)
    both.mvin(acc_values.view(np.uint8).ravel(), 0, ACC_BASE, ACC_ROWS, DIM)
    b = 500  # the weights
    both.preload(b, b_rows, b_cols, ACC_BASE + c, c_rows, c_cols, accumulate)
    both.compute(a, a_rows, a_cols)
    both.check()
    # Straight from the document: numpy's product over the rows both counts cover.
    rows = min(a_rows, c_rows)
    lhs = npu.read_memory(0, SPAD_ROWS)[a : a + rows].astype(np.int64)
    lhs[:, a_cols:] = 0
    w = np.zeros((DIM, DIM), np.int64)
    w[:b_rows, :b_cols] = npu.read_memory(b, DIM)[:b_rows, :b_cols]
    expected = acc_values.astype(np.int64)
    base = expected[c : c + rows, :c_cols] if accumulate else 0
    expected[c : c + rows, :c_cols] = base + (lhs @ w)[:, :c_cols]
    np.testing.assert_array_equal(npu.read_memory(ACC_BASE, ACC_ROWS), wrap_int32(expected))
    assert npu.counters()["macs"] == rows * c_cols * min(a_cols, b_rows)


def test_broadcast_mvin_reads_one_row_once(rng):
    bias = rng.integers(-(2**30), 2**30, DIM).astype(np.int32)
    npu.config_ld(0)
    npu.mvin(bias, ACC_BASE + 8, 100, DIM)  # one DRAM row into 100 accumulator rows
    np.testing.assert_array_equal(npu.read_memory(ACC_BASE + 8, 100), np.tile(bias, (100, 1)))
    npu.mvin(bias.view(np.int8)[:5], 30, 7, 5)  # and 5 bytes into 7 scratchpad rows
    counts = npu.counters()
    assert counts["bytes_in"] == DIM * 4 + 5
    # LOAD_LATENCY + ceil(row bytes / BANDWIDTH) + rows - 1, by hand: 8 + 4 + 99 and 8 + 1 + 6
    assert counts["cycles"] == 1 + (8 + 4 + 99) + (8 + 1 + 6)
    npu.config_ld(DIM * 4)  # a non-zero stride: every row is read
    npu.mvin(np.tile(bias, 3), ACC_BASE, 3, DIM)
    assert npu.counters()["bytes_in"] == counts["bytes_in"] + 3 * DIM * 4


def test_accumulation_wraps_in_int32():
    both = Both()
    ones = np.full(DIM * DIM, 0x80, np.uint8)  # -128 everywhere: each product is 16 * 16384
    both.config_ld(DIM)
    both.mvin(ones, 0, 0, DIM, DIM)
    near_max = np.full((DIM, DIM), INT32_MAX - 1000, np.int32)
    both.config_ld(DIM * 4)
    both.mvin(near_max.view(np.uint8).ravel(), 0, ACC_BASE, DIM, DIM)
    both.preload(0, DIM, DIM, ACC_BASE, DIM, DIM, 1)
    both.compute(0, DIM, DIM)
    expected = wrap_int32(np.full((DIM, DIM), INT32_MAX - 1000 + 16 * 128 * 128, np.int64))
    np.testing.assert_array_equal(npu.read_memory(ACC_BASE, DIM), expected)
    assert (expected < 0).all()
    both.check()


def test_preload_copies_the_weights(rng):
    both = Both()
    load_tile(both, rng, 0)
    load_tile(both, rng, 16)
    both.preload(16, DIM, DIM, ACC_BASE, DIM, DIM, 0)
    load_tile(both, rng, 16)  # overwrite the weights' rows after the preload
    both.compute(0, DIM, DIM)
    both.check()


# -- requantization -------------------------------------------------------------------------

EXTREMES = [INT32_MIN, INT32_MIN + 1, -(2**30), -65536, -129, -128, -1, 0, 1, 127, 128]
EXTREMES += [2**16, 2**30, INT32_MAX - 1, INT32_MAX]


def test_requantization_is_bit_exact(rng):
    values = np.array(
        EXTREMES + list(rng.integers(INT32_MIN, INT32_MAX, DIM * DIM - len(EXTREMES), np.int64)),
        np.int64,
    ).astype(np.int32)
    npu.config_ld(DIM * 4)
    npu.mvin(values, ACC_BASE + 100, DIM, DIM)
    multipliers = [0, 1, 2, 3, 1000, 123456789, 2**30, 2**31 - 2, 2**31 - 1]
    multipliers += [int(m) for m in rng.integers(0, 2**31, 3)]
    exact = [int(v) for v in values]
    out = np.empty((DIM, DIM), np.int8)
    for multiplier in multipliers:
        for shift in range(npu.MAX_SHIFT + 1):
            for relu in (False, True):
                for rounding in (0, 1):
                    npu.config_st(DIM, multiplier, shift, relu, rounding)
                    npu.mvout(out, ACC_BASE + 100, DIM, DIM)
                    expected = [requantize(x, multiplier, shift, relu, rounding) for x in exact]
                    assert out.ravel().tolist() == expected, (multiplier, shift, relu, rounding)


def test_requantization_rounds_half_up():
    values = np.array([5, -5, 6, -6, 7, -7, 4, -4] + [0] * 8, np.int32)
    npu.config_ld(0)
    npu.mvin(values, ACC_BASE, 1, DIM)
    npu.config_st(0, 1, 2, 0)
    out = np.empty(DIM, np.int8)
    npu.mvout(out, ACC_BASE, 1, DIM)
    # 5/4 = 1.25 -> 1, -5/4 -> -1, 6/4 = 1.5 -> 2, -6/4 = -1.5 -> -1, 7/4 -> 2, -7/4 -> -2
    assert out[:8].tolist() == [1, -1, 2, -1, 2, -2, 1, -1]
    assert npu.config()["rounding"] == 0  # the default, named NPU_ROUND_HALF_UP
    assert npu.ROUNDINGS == ("half_up", "half_even")


def test_requantization_rounds_halves_to_even():
    values = np.array([5, -5, 6, -6, 7, -7, 2, -2, 10, -10, 14, -14, 18, -18, 0, 1], np.int32)
    npu.config_ld(0)
    npu.mvin(values, ACC_BASE, 1, DIM)
    npu.config_st(0, 1, 2, 0, "half_even")
    assert npu.config()["rounding"] == 1
    out = np.empty(DIM, np.int8)
    npu.mvout(out, ACC_BASE, 1, DIM)
    # 1.25 -> 1, 1.5 -> 2, -1.5 -> -2, 0.5 -> 0, -0.5 -> 0, 2.5 -> 2, 3.5 -> 4, 4.5 -> 4
    assert out.tolist() == [1, -1, 2, -2, 2, -2, 0, 0, 2, -2, 4, -4, 4, -4, 0, 0]
    npu.config_st(0, 1, 2, 0, 1)  # the value NPU_ROUND_HALF_EVEN is the same instruction
    npu.mvout(out, ACC_BASE, 1, DIM)
    assert out[:4].tolist() == [1, -1, 2, -2]


def numpy_round_shift(v: np.ndarray, shift: int, even: bool) -> np.ndarray:
    """v / 2^shift rounded, in numpy: np.round rounds halves to even, floor(x + 0.5) up (exact
    in float64 for |v| < 2^52)."""
    quotient = v.astype(np.float64) / 2.0**shift
    return np.round(quotient) if even else np.floor(quotient + 0.5)


@pytest.mark.parametrize("multiplier", [1, 3, 5, 7, 255])
def test_both_roundings_match_numpy_at_ties_positive_and_negative(rng, multiplier):
    out = np.empty((DIM, DIM), np.int8)
    for shift in range(1, 32):
        # x * M an odd multiple of 2^(shift - 1): every value is a tie, of either parity and
        # sign, small enough not to saturate (and one pair that does)
        limit = max(1, min(2**31 >> shift, 256 // multiplier))
        odd = 2 * rng.integers(-limit, limit, DIM * DIM - 2, dtype=np.int64) + 1
        ties = np.concatenate([odd * 2 ** (shift - 1), [2**31 - 2 ** (shift - 1)] * 2])
        ties[-1] = -ties[-1]
        ties = np.clip(ties, INT32_MIN, INT32_MAX).astype(np.int32)
        npu.config_ld(DIM * 4)
        npu.mvin(ties.reshape(DIM, DIM), ACC_BASE, DIM, DIM)
        got = {}
        for rounding, even in (("half_up", False), ("half_even", True)):
            npu.config_st(DIM, multiplier, shift, 0, rounding)
            npu.mvout(out, ACC_BASE, DIM, DIM)
            wide = ties.astype(np.int64) * multiplier
            expected = np.clip(numpy_round_shift(wide, shift, even), -128, 127)
            np.testing.assert_array_equal(out.ravel(), expected, err_msg=f"{shift} {rounding}")
            got[rounding] = out.copy()
        # the roundings differ at the ties whose floor is even, about half of them
        assert 0 < np.sum(got["half_up"] != got["half_even"]) < DIM * DIM


# -- a matmul by hand -----------------------------------------------------------------------


def tiles(size: int) -> list[tuple[int, int]]:
    """(start, extent) of the DIM-sized tiles of an axis of `size`; the last may be short."""
    return [(t, min(DIM, size - t)) for t in range(0, size, DIM)]


def test_tiled_matmul_48x40x24(rng):
    m, k, n = 48, 40, 24
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    a_tile = {}  # (i, kk) -> scratchpad address
    b_tile = {}
    addr = 0
    npu.config_ld(k)  # A's rows are k bytes apart in DRAM
    for i, rows in tiles(m):
        for kk, depth in tiles(k):
            npu.mvin(a[i:, kk:], addr, rows, depth)
            a_tile[i, kk], addr = addr, addr + DIM
    npu.config_ld(n)
    for kk, depth in tiles(k):
        for j, cols in tiles(n):
            npu.mvin(b[kk:, j:], addr, depth, cols)
            b_tile[kk, j], addr = addr, addr + DIM

    c_tile = {}
    for i, rows in tiles(m):
        for j, cols in tiles(n):
            c = c_tile[i, j] = ACC_BASE + len(c_tile) * DIM
            for step, (kk, depth) in enumerate(tiles(k)):
                npu.preload(b_tile[kk, j], depth, cols, c, rows, cols, step > 0)
                npu.compute(a_tile[i, kk], rows, depth)
    npu.fence()

    product = a.astype(np.int64) @ b.astype(np.int64)
    for (i, j), c in c_tile.items():
        cols = min(DIM, n - j)
        np.testing.assert_array_equal(
            npu.read_memory(c, DIM)[:, :cols], product[i : i + DIM, j : j + cols]
        )
    for multiplier, shift, relu in [(12345, 24, False), (12345, 24, True), (1, 0, False)]:
        out = np.full((m, n), 99, np.int8)
        npu.config_st(n, multiplier, shift, relu)  # C's rows are n bytes apart
        for (i, j), c in c_tile.items():
            npu.mvout(out[i:, j:], c, min(DIM, m - i), min(DIM, n - j))
        expected = [[requantize(int(x), multiplier, shift, relu) for x in row] for row in product]
        np.testing.assert_array_equal(out, np.array(expected, np.int8))

    counts = npu.counters()
    assert counts["macs"] == m * k * n
    assert counts["bytes_in"] == m * k + k * n
    assert counts["bytes_out"] == 3 * m * n
    assert (counts["preload"], counts["compute"]) == (3 * 2 * 3, 3 * 2 * 3)
    assert 0 < npu.utilization(counts) < 1


# -- errors ---------------------------------------------------------------------------------

BUF8 = np.zeros(64, np.int8)
BUF32 = np.zeros(64, np.int32)
A_END = f"outside 0 .. {ACC_ROWS - 1}"
S_END = f"outside 0 .. {SPAD_ROWS - 1}"

ERRORS: list[tuple[str, Callable[[], None], str]] = [
    # mvin: scratchpad and accumulator rows, counts
    (
        "mvin past spad",
        lambda: npu.mvin(BUF8, SPAD_ROWS - 2, 3, 16),
        f"npu_mvin: addr = 0x00003ffe with 3 rows reaches scratchpad row 16384, {S_END}",
    ),
    (
        "mvin spad start",
        lambda: npu.mvin(BUF8, SPAD_ROWS, 0, 16),
        f"npu_mvin: addr = 0x00004000 is scratchpad row 16384, {S_END}",
    ),
    (
        "mvin spad far",
        lambda: npu.mvin(BUF8, 0x7FFFFFFF, 1, 16),
        f"npu_mvin: addr = 0x7fffffff is scratchpad row 2147483647, {S_END}",
    ),
    (
        "mvin past acc",
        lambda: npu.mvin(BUF32, ACC_BASE + ACC_ROWS - 1, 2, 16),
        f"npu_mvin: addr = 0x800003ff with 2 rows reaches accumulator row 1024, {A_END}",
    ),
    (
        "mvin acc start",
        lambda: npu.mvin(BUF32, 0xFFFFFFFF, 1, 1),
        f"npu_mvin: addr = 0xffffffff is accumulator row 2147483647, {A_END}",
    ),
    ("mvin cols 0", lambda: npu.mvin(BUF8, 0, 1, 0), "npu_mvin: cols = 0 is outside 1 .. 16"),
    ("mvin cols 17", lambda: npu.mvin(BUF8, 0, 1, 17), "npu_mvin: cols = 17 is outside 1 .. 16"),
    ("mvin rows -1", lambda: npu.mvin(BUF8, 0, -1, 4), "npu_mvin: rows = -1 is outside 0 .. 16384"),
    (
        "mvin rows big",
        lambda: npu.mvin(BUF8, 0, SPAD_ROWS + 1, 4),
        "npu_mvin: rows = 16385 is outside 0 .. 16384",
    ),
    (
        "mvin acc rows big",
        lambda: npu.mvin(BUF32, ACC_BASE, ACC_ROWS + 1, 4),
        "npu_mvin: rows = 1025 is outside 0 .. 1024",
    ),
    # mvout
    (
        "mvout from spad",
        lambda: npu.mvout(BUF8, 16, 1, 16),
        "npu_mvout: addr = 0x00000010 is an address in the scratchpad; it must be in the "
        "accumulator (0x80000000 .. 0x800003ff)",
    ),
    (
        "mvout past acc",
        lambda: npu.mvout(BUF8, ACC_BASE + 1000, 25, 1),
        f"npu_mvout: addr = 0x800003e8 with 25 rows reaches accumulator row 1024, {A_END}",
    ),
    (
        "mvout acc start",
        lambda: npu.mvout(BUF8, ACC_BASE + ACC_ROWS, 0, 1),
        f"npu_mvout: addr = 0x80000400 is accumulator row 1024, {A_END}",
    ),
    (
        "mvout cols 0",
        lambda: npu.mvout(BUF8, ACC_BASE, 1, 0),
        "npu_mvout: cols = 0 is outside 1 .. 16",
    ),
    (
        "mvout cols 17",
        lambda: npu.mvout(BUF8, ACC_BASE, 1, 17),
        "npu_mvout: cols = 17 is outside 1 .. 16",
    ),
    (
        "mvout rows",
        lambda: npu.mvout(BUF8, ACC_BASE, -3, 1),
        "npu_mvout: rows = -3 is outside 0 .. 1024",
    ),
    # preload
    (
        "preload b in acc",
        lambda: npu.preload(ACC_BASE, 1, 1, ACC_BASE, 1, 1, 0),
        "npu_preload: b = 0x80000000 is an address in the accumulator; it must be in the "
        "scratchpad (0x00000000 .. 0x00003fff)",
    ),
    (
        "preload past spad",
        lambda: npu.preload(SPAD_ROWS - 4, 5, 1, ACC_BASE, 1, 1, 0),
        f"npu_preload: b = 0x00003ffc with 5 rows reaches scratchpad row 16384, {S_END}",
    ),
    (
        "preload c in spad",
        lambda: npu.preload(0, 1, 1, 5, 1, 1, 0),
        "npu_preload: c = 0x00000005 is an address in the scratchpad; it must be in the "
        "accumulator (0x80000000 .. 0x800003ff)",
    ),
    (
        "preload past acc",
        lambda: npu.preload(0, 1, 1, ACC_BASE + ACC_ROWS - 1, 2, 1, 0),
        f"npu_preload: c = 0x800003ff with 2 rows reaches accumulator row 1024, {A_END}",
    ),
    (
        "preload b_rows",
        lambda: npu.preload(0, 17, 1, ACC_BASE, 1, 1, 0),
        "npu_preload: b_rows = 17 is outside 0 .. 16",
    ),
    (
        "preload b_cols",
        lambda: npu.preload(0, 1, -1, ACC_BASE, 1, 1, 0),
        "npu_preload: b_cols = -1 is outside 0 .. 16",
    ),
    (
        "preload c_rows",
        lambda: npu.preload(0, 1, 1, ACC_BASE, ACC_ROWS + 1, 1, 0),
        f"npu_preload: c_rows = {ACC_ROWS + 1} is outside 0 .. {ACC_ROWS}",
    ),
    (
        "preload c_cols",
        lambda: npu.preload(0, 1, 1, ACC_BASE, 1, 99, 0),
        "npu_preload: c_cols = 99 is outside 0 .. 16",
    ),
    (
        "preload accumulate",
        lambda: npu.preload(0, 1, 1, ACC_BASE, 1, 1, 2),
        "npu_preload: accumulate = 2 is outside 0 .. 1",
    ),
    # compute
    (
        "compute a in acc",
        lambda: npu.compute(ACC_BASE + 3, 1, 1),
        "npu_compute: a = 0x80000003 is an address in the accumulator; it must be in the "
        "scratchpad (0x00000000 .. 0x00003fff)",
    ),
    (
        "compute past spad",
        lambda: npu.compute(SPAD_ROWS - 1, 2, 1),
        f"npu_compute: a = 0x00003fff with 2 rows reaches scratchpad row 16384, {S_END}",
    ),
    (
        "compute a_rows",
        lambda: npu.compute(0, SPAD_ROWS + 1, 1),
        f"npu_compute: a_rows = {SPAD_ROWS + 1} is outside 0 .. {SPAD_ROWS}",
    ),
    (
        "compute a_cols",
        lambda: npu.compute(0, 1, -2),
        "npu_compute: a_cols = -2 is outside 0 .. 16",
    ),
    (
        "compute without preload",
        lambda: npu.compute(0, 16, 16),
        "npu_compute: no preload since the last compute",
    ),
    # configuration
    (
        "multiplier -1",
        lambda: npu.config_st(16, -1, 0, 0),
        "npu_config_st: multiplier = -1 is outside 0 .. 2147483647",
    ),
    (
        "shift 63",
        lambda: npu.config_st(16, 1, 63, 0),
        "npu_config_st: shift = 63 is outside 0 .. 62",
    ),
    (
        "shift -1",
        lambda: npu.config_st(16, 1, -1, 0),
        "npu_config_st: shift = -1 is outside 0 .. 62",
    ),
    ("relu 2", lambda: npu.config_st(16, 1, 0, 2), "npu_config_st: relu = 2 is outside 0 .. 1"),
    (
        "rounding 2",
        lambda: npu.config_st(16, 1, 1, 0, 2),
        "npu_config_st: rounding = 2 is outside 0 .. 1 (0 rounds halves up, 1 halves to even)",
    ),
    (
        "rounding -1",
        lambda: npu.config_st(16, 1, 1, 0, -1),
        "npu_config_st: rounding = -1 is outside 0 .. 1",
    ),
    (
        "rounding name",
        lambda: npu.config_st(16, 1, 1, 0, "even"),
        "npu_config_st: rounding must be one of 'half_up', 'half_even', got 'even'",
    ),
    (
        "rounding not int",
        lambda: npu.config_st(16, 1, 1, 0, 1.5),
        "npu_config_st: rounding must be an int",
    ),
    ("dataflow 1", lambda: npu.config_ex(1), "npu_config_ex: dataflow = 1 is outside 0 .. 0"),
    ("dataflow -1", lambda: npu.config_ex(-1), "npu_config_ex: dataflow = -1 is outside 0 .. 0"),
    # simulator control, and what only Python can see
    (
        "read_memory",
        lambda: npu.read_memory(ACC_BASE + ACC_ROWS - 2, 3),
        f"npu_read_memory: addr = 0x800003fe with 3 rows reaches accumulator row 1024, {A_END}",
    ),
    ("read_memory rows", lambda: npu.read_memory(0, -1), "npu_read_memory: rows = -1 is outside"),
    (
        "addr not uint32",
        lambda: npu.mvin(BUF8, 2**32, 1, 1),
        "npu_mvin: addr = 4294967296 does not fit",
    ),
    (
        "rows not int32",
        lambda: npu.compute(0, 2**31, 1),
        "npu_compute: a_rows = 2147483648 does not",
    ),
    ("stride not int", lambda: npu.config_ld(1.5), "npu_config_ld: stride must be an int"),
]


def snapshot() -> tuple:
    return (
        npu.read_memory(0, SPAD_ROWS),
        npu.read_memory(ACC_BASE, ACC_ROWS),
        npu.config(),
        npu.counters(),
    )


@pytest.mark.parametrize("call, message", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_name_the_value_and_change_nothing(rng, call, message):
    npu.config_ld(0)
    npu.mvin(random_bytes(rng, 16).view(np.int8), 0, SPAD_ROWS, DIM)
    npu.mvin(random_bytes(rng, 64).view(np.int32), ACC_BASE, ACC_ROWS, DIM)
    npu.config_st(DIM, 7, 3, 1)
    npu.preload(0, DIM, DIM, ACC_BASE, DIM, DIM, 1)
    npu.compute(0, DIM, DIM)  # consumes the preload: the next compute has none
    before = snapshot()
    with pytest.raises(LoomError, match=re.escape(message)):
        call()
    after = snapshot()
    for old, new in zip(before, after):
        np.testing.assert_equal(new, old)


def test_a_failed_instruction_keeps_a_pending_preload(rng):
    load_tile(Both(), rng, 0)
    npu.preload(0, DIM, DIM, ACC_BASE, DIM, DIM, 0)
    with pytest.raises(LoomError, match="a = 0x00003ff0 with 20 rows"):
        npu.compute(SPAD_ROWS - DIM, 20, DIM)
    npu.compute(0, DIM, DIM)  # the preload is still there
    with pytest.raises(LoomError, match="no preload since the last compute"):
        npu.compute(0, DIM, DIM)


def test_dram_outside_the_array_is_refused_before_the_simulator_runs():
    npu.config_ld(16)
    with pytest.raises(ValueError, match=r"span bytes \[0, 48\) .* spans \[0, 32\)"):
        npu.mvin(np.zeros(32, np.int8), 0, 3, 16)
    npu.config_ld(-16)
    with pytest.raises(ValueError, match=r"span bytes \[-16, 16\)"):
        npu.mvin(np.zeros(32, np.int8), 0, 2, 16)
    npu.mvin(np.zeros(32, np.int8)[16:], 0, 2, 16)  # a view may reach back into its base
    with pytest.raises(TypeError, match="dram has dtype int8; this transfer moves int32"):
        npu.mvin(np.zeros(64, np.int8), ACC_BASE, 1, 16)
    with pytest.raises(ValueError, match="read-only"):
        out = np.zeros(16, np.int8)
        out.flags.writeable = False
        npu.mvout(out, ACC_BASE, 1, 16)
    assert npu.counters()["mvin"] == 1


# -- reset and counters ---------------------------------------------------------------------


def test_reset_restores_the_defaults(rng):
    load_tile(Both(), rng, 7)
    npu.config_st(3, 9, 4, 1)
    npu.preload(7, DIM, DIM, ACC_BASE, DIM, DIM, 0)
    npu.reset()
    assert not npu.read_memory(0, SPAD_ROWS).any()
    assert not npu.read_memory(ACC_BASE, ACC_ROWS).any()
    assert npu.config() == Model().config
    assert npu.counters() == dict.fromkeys(npu.COUNTERS, 0)
    with pytest.raises(LoomError, match="no preload"):
        npu.compute(0, 1, 1)


def test_counters_follow_the_cycle_model(rng):
    buf8, buf32 = np.zeros(4096, np.int8), np.zeros(1024, np.int32)
    npu.config_ld(16)
    npu.config_st(16, 1, 0, 0)
    npu.config_ex(0)
    npu.mvin(buf8, 0, 16, 16)
    npu.mvin(buf8, 16, 5, 3)
    npu.mvin(buf32, ACC_BASE, 3, 5)
    npu.mvin(buf8, 0, 0, 16)
    npu.preload(0, 16, 16, ACC_BASE, 16, 16, 0)
    npu.compute(0, 16, 16)
    npu.preload(0, 5, 16, ACC_BASE, 7, 9, 1)
    npu.compute(0, 10, 3)
    npu.preload(0, 16, 16, ACC_BASE, 16, 16, 1)
    npu.compute(0, 0, 16)
    with pytest.raises(LoomError):
        npu.mvin(buf8, 0, 1, 17)  # a failed instruction is not counted
    npu.mvout(np.zeros(256, np.int8), ACC_BASE, 16, 16)
    npu.mvout(np.zeros(64, np.int8), ACC_BASE, 3, 5)
    npu.fence()
    npu.fence()

    serial = 3 * 1
    serial += mvin_cycles(16, 16, 1) + mvin_cycles(5, 3, 1) + mvin_cycles(3, 5, 4)
    serial += mvin_cycles(0, 16, 1)
    serial += 3 * DIM + compute_cycles(16) + compute_cycles(10) + compute_cycles(0)
    serial += mvout_cycles(16, 16) + mvout_cycles(3, 5)
    assert serial == 3 + 24 + 9 + 12 + 8 + 48 + 31 + 25 + 0 + 24 + 9  # the formulas, by hand

    # The decoupled timeline, (start, finish) per instruction, from the document's rules:
    # load queue: config_ld 0-1, mvin 1-25 (spad 0..15), 25-34 (spad 16..20), 34-46 (acc 0..2),
    #   46-54 (no rows);
    # store queue: config_st 0-1;
    # execute queue: config_ex 0-1;
    #   P1 reads spad 0..15 (written at 25): 25-41;
    #   C1 writes acc 0..15 (acc 0..2 written at 46): start 46, stream end 62, finish 77;
    #   P2 (its weight buffer's previous user is none): after P1, 41-57;
    #   C2 after P2 and C1's stream: start 62, stream end 72, finish 87;
    #   P3 waits for C1's stream end (the buffer it fills) and P2: 62-78;
    #   C3 (no rows): start 78 (after P3 and C2's stream), finish 78;
    # store queue: mvout reads acc 0..15, written by C1 (77) and C2 (87, rows 0..6): 87-111;
    #   mvout 111-120. The fences end at 120.
    assert mvout_cycles(16, 16) == 24 and mvout_cycles(3, 5) == 9
    cycles = 87 + 24 + 9
    counts = npu.counters()
    assert counts == {
        "cycles": cycles,
        "bytes_in": 256 + 15 + 60,
        "bytes_out": 256 + 15,
        "macs": 16 * 16 * 16 + min(10, 7) * 9 * min(3, 5),
        "mvin": 4,
        "mvout": 2,
        "preload": 3,
        "compute": 3,
        "config": 3,
        "fence": 2,
        "serial_cycles": serial,
        "load_busy": 1 + 24 + 9 + 12 + 8,
        "execute_busy": 16 + 10 + 0,
        "store_busy": 1 + 24 + 9,
    }
    assert npu.utilization(counts) == counts["macs"] / (cycles * DIM * DIM)
    assert npu.utilization({"cycles": 0, "macs": 0}) == 0.0
    assert npu.utilization(counts, macs=1000) == 1000 / (cycles * DIM * DIM)


def test_only_one_thread_owns_the_npu_and_only_the_owner_releases_it():
    with pytest.raises(LoomError, match=r"npu_release: this thread does not own the NPU"):
        npu.release()
    npu.acquire()
    try:
        with pytest.raises(LoomError, match=r"npu_acquire: this thread already owns the NPU"):
            npu.acquire()
        other = []
        thread = threading.Thread(target=lambda: other.append(_release_elsewhere()))
        thread.start()
        thread.join()
        assert other == ["npu_release: this thread does not own the NPU"]
    finally:
        npu.release()
    npu.acquire()  # free again
    npu.release()


def _release_elsewhere() -> str:
    try:
        npu.release()
    except LoomError as e:
        return str(e)
    return "released"


def test_ownership_orders_instruction_sequences_under_thread_sanitizer(tmp_path):
    native = NPU_NATIVE
    driver = pathlib.Path(__file__).with_name("npu_ownership_stress.c")
    sources = [driver, *npu.SOURCES]
    [out] = assert_race_free(tmp_path / "npu_stress", sources, flags=[f"-I{native}"])
    assert out == f"failures 0 macs {4 * 500 * 16**3}\n"
