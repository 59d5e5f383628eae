"""The NPU simulator's decoupled timing model against docs/npu.md ("Cycle model").

Each test builds a short instruction sequence whose timeline follows from the document's
rules by hand: the expected `cycles` are computed here from the cost formulas and the
start/finish rules (written out in comments), never read from the simulator. A random test
then checks long sequences against the Python model of tests/npu/timing_model.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from loom.backend.npu import simulator as npu
from loom.errors import LoomError
from tests.npu.test_npu_simulator import Model, dram
from tests.npu.timing_model import compute_cycles, mvin_cycles, mvout_cycles

DIM, ACC_BASE = npu.DIM, npu.ACC_BASE
TILE_IN = mvin_cycles(DIM, DIM, 1)  # a DIM x DIM int8 tile: 8 + 16 = 24
TILE_OUT = mvout_cycles(DIM, DIM)  # 8 + 16 = 24
A, W = 0, DIM  # scratchpad rows of the A tile and of the weights
ZEROS = np.zeros((4 * DIM, DIM), np.int8)


@pytest.fixture(autouse=True)
def fresh_npu():
    npu.reset()
    yield
    npu.reset()


def cycles() -> int:
    npu.fence()
    return npu.counters()["cycles"]


def stage_a_and_w() -> int:
    """config_ld, then mvin of an A tile (scratchpad 0..15) and a weight tile (16..31), in the
    load queue: 0-1, 1-25, 25-49. Returns when the weights are in (49)."""
    npu.config_ld(DIM)
    npu.mvin(ZEROS, A, DIM, DIM)
    npu.mvin(ZEROS, W, DIM, DIM)
    return 1 + 2 * TILE_IN


def preload_and_compute(acc_row: int = 0, rows: int = DIM, accumulate: bool = False) -> None:
    npu.preload(W, DIM, DIM, ACC_BASE + acc_row, rows, DIM, accumulate)
    npu.compute(A, rows, DIM)


# -- the acceptance case: a load waits for the compute that still reads its rows ---------------


@pytest.mark.parametrize("conflict", [True, False])
def test_an_mvin_into_rows_a_pending_compute_reads_waits_for_it(conflict):
    loaded = stage_a_and_w()  # 49
    preload_and_compute()  # P 49-65 (reads W, written at 49); C starts 65, streams to 81
    compute_finish = loaded + DIM + compute_cycles(DIM)  # 65 + 31 = 96
    # The next A tile: into the rows the compute reads (A), or into free rows (64 ..).
    npu.mvin(ZEROS, A if conflict else 4 * DIM, DIM, DIM)
    if conflict:  # WAR: it starts when the compute has finished: 96-120
        expected = compute_finish + TILE_IN
    else:  # it starts after the previous load (49-73), overlapping the compute
        expected = max(compute_finish, loaded + TILE_IN)
    assert (compute_finish, expected) == ((96, 120) if conflict else (96, 96))
    assert cycles() == expected
    assert npu.counters()["serial_cycles"] == 1 + 3 * TILE_IN + DIM + compute_cycles(DIM)


# -- dependencies across queues --------------------------------------------------------------


@pytest.mark.parametrize("conflict", [True, False])
def test_raw_an_mvout_waits_for_the_compute_that_writes_its_rows(conflict):
    loaded = stage_a_and_w()
    preload_and_compute(acc_row=0)  # finishes at 49 + 16 + 31 = 96
    npu.config_st(DIM)  # store queue 0-1
    npu.mvout(ZEROS, ACC_BASE + (0 if conflict else DIM), DIM, DIM)
    compute_finish = loaded + DIM + compute_cycles(DIM)
    # conflict: 96-120; else 1-25, and the compute ends last
    expected = compute_finish + TILE_OUT if conflict else max(compute_finish, 1 + TILE_OUT)
    assert expected == (120 if conflict else 96)
    assert cycles() == expected


@pytest.mark.parametrize("conflict", [True, False])
def test_war_an_mvin_waits_for_the_preload_that_reads_its_rows(conflict):
    loaded = stage_a_and_w()  # 49
    npu.preload(W, DIM, DIM, ACC_BASE, DIM, DIM, 0)  # 49-65
    npu.mvin(ZEROS, W if conflict else 4 * DIM, DIM, DIM)  # new weights
    # conflict: after the preload read the old ones (65-89); else after the last load (49-73)
    expected = (loaded + DIM if conflict else loaded) + TILE_IN
    assert expected == (89 if conflict else 73)
    assert cycles() == expected


@pytest.mark.parametrize("conflict", [True, False])
def test_war_a_compute_waits_for_the_mvout_that_reads_its_rows(conflict):
    npu.config_st(DIM)  # store 0-1
    npu.mvout(np.zeros((512, DIM), np.int8), ACC_BASE, 512, DIM)  # acc 0..511: 1-521
    store_finish = 1 + mvout_cycles(512, DIM)
    loaded = stage_a_and_w()  # 49
    preload_and_compute(acc_row=0 if conflict else 512)  # P 49-65; C overwrites acc rows
    if conflict:  # C starts when the mvout has read the rows: 521, finishes 552
        expected = store_finish + compute_cycles(DIM)
    else:  # C 65-96, the mvout ends last
        expected = max(store_finish, loaded + DIM + compute_cycles(DIM))
    assert expected == (552 if conflict else 521)
    assert cycles() == expected


@pytest.mark.parametrize("conflict", [True, False])
def test_waw_a_bias_mvin_waits_for_the_compute_that_writes_its_rows(conflict):
    loaded = stage_a_and_w()
    preload_and_compute(acc_row=0)  # 65-96
    npu.config_ld(0)  # load 49-50
    bias = np.zeros(DIM, np.int32)
    npu.mvin(bias, ACC_BASE + (0 if conflict else DIM), DIM, DIM)  # a broadcast: 8 + 4 + 15
    broadcast = mvin_cycles(DIM, DIM, 4, stride=0)
    compute_finish = loaded + DIM + compute_cycles(DIM)
    expected = compute_finish + broadcast if conflict else max(compute_finish, 50 + broadcast)
    assert (broadcast, expected) == (27, 123 if conflict else 96)
    assert cycles() == expected


@pytest.mark.parametrize("conflict", [True, False])
def test_waw_a_compute_waits_for_the_mvin_that_writes_its_accumulator_rows(conflict):
    loaded = stage_a_and_w()  # 49
    npu.config_ld(0)  # 49-50
    npu.mvin(np.zeros(DIM, np.int32), ACC_BASE, 512, DIM)  # acc 0..511, broadcast: 50-573
    bias_finish = loaded + 1 + mvin_cycles(512, DIM, 4, stride=0)
    preload_and_compute(acc_row=0 if conflict else 512, accumulate=True)  # P 49-65
    if conflict:  # C waits for the bias rows: 573-604
        expected = bias_finish + compute_cycles(DIM)
    else:  # C 65-96, the bias ends last
        expected = max(bias_finish, loaded + DIM + compute_cycles(DIM))
    assert (bias_finish, expected) == (573, 604 if conflict else 573)
    assert cycles() == expected


# -- DRAM: an mvin after an mvout that writes its bytes, and the converse ----------------------


@pytest.mark.parametrize(
    "offset, rows, stride, conflict",
    [
        (0, DIM, DIM, True),  # the very bytes
        (15 * DIM, 1, DIM, True),  # one row of the mvout's last
        (15 * DIM + 15, 1, DIM, True),  # its last byte
        (16 * DIM, 1, DIM, False),  # the byte after: ranges are half-open
        (15 * DIM, DIM, -DIM, True),  # walks back over all of it
        (300, DIM, 0, False),  # a broadcast reads only its one row
        (16 * DIM, 5, 0, False),
        (15 * DIM + 8, 5, 0, True),
    ],
)
def test_raw_through_dram_an_mvin_waits_for_the_mvout_that_writes_its_bytes(
    offset, rows, stride, conflict
):
    c = np.zeros(1024, np.int8)
    npu.config_st(DIM)  # store 0-1
    npu.mvout(c, ACC_BASE, DIM, DIM)  # c[0:256]: 1-25
    npu.config_ld(stride)  # load 0-1
    npu.mvin(c[offset:], 64, rows, DIM)  # into rows nobody uses
    cost = mvin_cycles(rows, DIM, 1, stride)
    expected = 1 + TILE_OUT + cost if conflict else max(1 + TILE_OUT, 1 + cost)
    assert cycles() == expected


@pytest.mark.parametrize("conflict", [True, False])
def test_war_through_dram_an_mvout_waits_for_the_mvin_that_reads_its_bytes(conflict):
    buf = np.zeros(1024, np.int8)
    npu.config_ld(DIM)  # load 0-1
    npu.mvin(buf, A, DIM, DIM)  # reads buf[0:256]: 1-25
    npu.config_st(DIM)  # store 0-1
    npu.mvout(buf[0 if conflict else 256 :], ACC_BASE, DIM, DIM)
    expected = 1 + TILE_IN + TILE_OUT if conflict else max(1 + TILE_IN, 1 + TILE_OUT)
    assert expected == (49 if conflict else 25)
    assert cycles() == expected


@pytest.mark.parametrize("reader_first", [True, False])
def test_an_early_dram_access_still_delays_a_late_conflicting_one(reader_first):
    """Forty transfers in one queue, then one in the other queue over the first's bytes: the
    first's record must survive however many came after it (the simulator prunes only what
    can no longer delay anything)."""
    buf = np.zeros(64 * 256, np.int8)
    big = np.zeros(1024 * DIM, np.int8)
    npu.config_ld(DIM)  # load 0-1
    npu.config_st(DIM)  # store 0-1
    first, other = (npu.mvin, npu.mvout) if reader_first else (npu.mvout, npu.mvin)
    addr = A if reader_first else ACC_BASE
    for t in range(40):  # each 16 rows of 16 bytes: 1-25, 25-49, ...
        first(buf[t * 256 :], addr, DIM, DIM)
    # In the other queue: over the first transfer's bytes (it waits until 25), then a long
    # transfer of 1024 rows (8 + 1024 cycles) elsewhere.
    other(buf, A if first is npu.mvout else ACC_BASE, DIM, DIM)
    other(big, 4 * DIM if first is npu.mvout else ACC_BASE, 1024, DIM)
    first_finish, long_cost = 1 + TILE_IN, npu.STORE_LATENCY + 1024
    assert TILE_IN == TILE_OUT and npu.LOAD_LATENCY == npu.STORE_LATENCY
    expected = max(first_finish + TILE_IN + long_cost, 1 + 40 * TILE_IN)
    assert expected == 25 + 24 + 1032
    assert cycles() == expected


# -- what does not wait, and what always does ------------------------------------------------


@pytest.mark.parametrize("same_rows", [True, False])
def test_conflicts_inside_one_queue_add_no_wait(same_rows):
    loaded = stage_a_and_w()  # 49
    preload_and_compute(acc_row=0)  # P1 49-65, C1 65 (stream to 81) -96
    # C2 accumulates into C1's rows (a RAW inside the execute queue) or other rows: either
    # way it starts when C1's rows have entered the array (81), not when C1 finishes (96).
    preload_and_compute(acc_row=0 if same_rows else DIM, accumulate=True)  # P2 65-81
    expected = loaded + 2 * DIM + compute_cycles(DIM)  # C2 81-112
    assert expected == 112
    # Two mvins into the same rows, two mvouts onto the same bytes: each after the previous.
    npu.mvin(ZEROS, A, DIM, DIM)  # waits for C1/C2 reading A (96, 112): 112-136
    npu.mvin(ZEROS, A, DIM, DIM)  # 136-160
    expected = 112 + 2 * TILE_IN
    assert cycles() == expected


def test_a_fence_orders_everything_after_it():
    npu.config_ld(DIM)  # load 0-1
    npu.mvin(np.zeros((256, DIM), np.int8), 100, 256, DIM)  # 256 rows: 1-265
    long_load = 1 + mvin_cycles(256, DIM, 1)
    npu.fence()
    npu.config_st(DIM)  # store: nothing to wait for but the fence: 265-266
    npu.preload(W, DIM, DIM, ACC_BASE, DIM, DIM, 0)  # execute: 265-281
    assert npu.counters()["cycles"] == max(long_load + 1, long_load + DIM) == 281
    npu.fence()
    npu.config_st(DIM)  # 281-282
    assert cycles() == long_load + DIM + 1


def test_without_a_fence_other_queues_run_ahead():
    npu.config_ld(DIM)
    npu.mvin(np.zeros((256, DIM), np.int8), 100, 256, DIM)  # 1-265
    npu.config_st(DIM)  # 0-1
    npu.preload(W, DIM, DIM, ACC_BASE, DIM, DIM, 0)  # 0-16: its rows are not loaded here
    assert cycles() == 1 + mvin_cycles(256, DIM, 1) == 265


# -- the execute pipeline: double-buffered weights --------------------------------------------


def test_a_preload_overlaps_the_previous_compute():
    loaded = stage_a_and_w()
    npu.fence()  # 49
    tiles = 4
    for t in range(tiles):
        preload_and_compute(acc_row=t * DIM)
    # P1 49-65, C1 65 (stream) 81; P2 65-81 while C1 streams, C2 81-97; P3 waits for C1's
    # stream end (81): 81-97, C3 97-113; P4 97-113, C4 113-129, its last result at 144.
    expected = loaded + DIM + tiles * DIM + DIM - 1
    assert expected == 144
    counts = npu.counters()
    assert cycles() == expected
    assert counts["serial_cycles"] == loaded + tiles * (DIM + compute_cycles(DIM)) == 237
    assert counts["execute_busy"] == tiles * DIM


@pytest.mark.parametrize("second_rows", [0, 3])
def test_a_preload_waits_for_the_compute_two_before_to_stream(second_rows):
    loaded = stage_a_and_w()
    npu.fence()  # 49
    npu.config_ld(DIM)
    npu.mvin(np.zeros((256, DIM), np.int8), 64, 256, DIM)  # long A: 49-50, 50-314
    npu.fence()  # 314
    start = loaded + 1 + mvin_cycles(256, DIM, 1)
    npu.preload(W, DIM, DIM, ACC_BASE, 256, DIM, 0)  # P1 314-330
    npu.compute(64, 256, DIM)  # C1 330, streams to 586
    npu.preload(W, DIM, DIM, ACC_BASE + 256, DIM, DIM, 0)  # P2 330-346 (the other buffer)
    npu.compute(A, second_rows, DIM)  # C2 after C1's rows: 586, streams to 586 + second_rows
    # P3 refills the buffer C1 used: it waits for C1's stream end (586), not only for P2
    # (346): 586-602. (Were it free at 346, C3 would start at C2's stream end.)
    npu.preload(W, DIM, DIM, ACC_BASE + 512, DIM, DIM, 0)
    npu.compute(A, DIM, DIM)  # C3 at max(602, C2's stream end) = 602
    c1_stream_end = start + DIM + 256
    c3_start = max(c1_stream_end + DIM, c1_stream_end + second_rows)
    expected = c3_start + compute_cycles(DIM)
    assert (start, c1_stream_end, expected) == (314, 586, 633)
    assert cycles() == expected


def test_config_ex_waits_for_the_array_and_holds_the_next_preload():
    npu.preload(W, DIM, DIM, ACC_BASE, DIM, DIM, 0)  # P1 0-16
    npu.compute(A, DIM, DIM)  # C1 16, streams to 32, finishes 47
    npu.config_ex(0)  # after P1 and C1's stream: 32-33
    npu.preload(W, DIM, DIM, ACC_BASE, DIM, DIM, 0)  # P2 33-49 (not 16-32)
    npu.compute(A, DIM, DIM)  # C2 49, streams to 65, finishes 80
    assert cycles() == 33 + DIM + compute_cycles(DIM) == 80


# -- failed instructions -----------------------------------------------------------------------


def program(fail: bool) -> dict[str, int]:
    """A sequence with (if `fail`) a failing instruction of every kind between its steps."""

    def failing(call) -> None:
        if fail:
            with pytest.raises((LoomError, ValueError)):
                call()

    npu.reset()
    buf = np.zeros(1024, np.int8)
    npu.config_ld(DIM)
    failing(lambda: npu.mvin(buf, A, DIM, DIM + 1))
    npu.mvin(buf, A, DIM, DIM)
    failing(lambda: npu.mvin(buf, npu.SPAD_ROWS - 1, 2, DIM))
    npu.mvin(buf, W, DIM, DIM)
    failing(lambda: npu.compute(A, DIM, DIM))  # no preload
    failing(lambda: npu.preload(W, DIM, DIM, ACC_BASE, npu.ACC_ROWS + 1, DIM, 0))
    npu.preload(W, DIM, DIM, ACC_BASE, DIM, DIM, 0)
    failing(lambda: npu.compute(npu.SPAD_ROWS - 1, 2, DIM))
    npu.compute(A, DIM, DIM)
    failing(lambda: npu.config_st(DIM, -1))
    failing(lambda: npu.config_ex(1))
    npu.config_st(DIM)
    failing(lambda: npu.mvout(buf, ACC_BASE, DIM, 0))
    failing(lambda: npu.mvout(np.zeros(10, np.int8), ACC_BASE, DIM, DIM))  # refused by Python
    npu.mvout(buf, ACC_BASE, DIM, DIM)
    npu.fence()
    return npu.counters()


def test_failed_instructions_change_no_counter_and_no_time():
    assert program(fail=True) == program(fail=False)


# -- long random sequences against the Python model --------------------------------------------


def random_program(rng: np.random.Generator, steps: int) -> None:
    """Drive the simulator and the Python model with the same random instructions over a few
    rows and one DRAM buffer, so that dependencies of every kind occur; compare at the end."""
    model = Model()
    theirs = rng.integers(0, 256, 4096, dtype=np.uint8)
    ours = theirs.copy()
    stride_ld = stride_st = 0

    def dram_offset(rows: int, row_bytes: int, stride: int) -> int:
        low = max(0, -(rows - 1) * stride)
        high = len(theirs) - max(0, (rows - 1) * stride) - row_bytes
        return int(rng.integers(low, high + 1))

    for _ in range(steps):
        kind = rng.choice(
            ["config", "mvin", "mvout", "gemm", "fence"], p=[0.15, 0.3, 0.15, 0.37, 0.03]
        )
        if kind == "config":
            which = int(rng.integers(3))
            if which == 0:
                stride_ld = int(rng.choice([0, DIM, 64, 20, -DIM]))
                npu.config_ld(stride_ld)
                model.config_ld(stride_ld)
            elif which == 1:
                stride_st = int(rng.choice([0, DIM, 24, -DIM]))
                npu.config_st(stride_st, 3, 2, 0)
                model.config_st(stride_st, 3, 2, 0)
            else:
                npu.config_ex(0)
                model.config_ex(0)
        elif kind == "mvin":
            in_acc = rng.random() < 0.3
            rows, cols = int(rng.integers(0, 20)), int(rng.integers(1, DIM + 1))
            addr = (ACC_BASE if in_acc else 0) + int(rng.integers(0, 96))
            size = 4 if in_acc else 1
            offset = dram_offset(rows, cols * size, stride_ld)
            view = dram(theirs, offset, np.int32 if in_acc else np.int8)
            npu.mvin(view, addr, rows, cols)
            model.mvin(ours, offset, addr, rows, cols, view.ctypes.data)
        elif kind == "mvout":
            rows, cols = int(rng.integers(0, 20)), int(rng.integers(1, DIM + 1))
            addr = ACC_BASE + int(rng.integers(0, 96))
            offset = dram_offset(rows, cols, stride_st)
            view = dram(theirs, offset, np.int8)
            npu.mvout(view, addr, rows, cols)
            model.mvout(ours, offset, addr, rows, cols, view.ctypes.data)
        elif kind == "gemm":
            b, c, a = (int(x) for x in rng.integers(0, 96, 3))
            c_rows, a_rows = int(rng.integers(0, 40)), int(rng.integers(0, 40))
            args = (b, int(rng.integers(0, DIM + 1)), int(rng.integers(0, DIM + 1)))
            args += (ACC_BASE + c, c_rows, int(rng.integers(0, DIM + 1)), int(rng.integers(2)))
            npu.preload(*args)
            model.preload(*args)
            if rng.random() < 0.9:  # else the next preload replaces this one
                a_cols = int(rng.integers(0, DIM + 1))
                npu.compute(a, a_rows, a_cols)
                model.compute(a, a_rows, a_cols)
        else:
            npu.fence()
            model.fence()
    np.testing.assert_array_equal(theirs, ours)
    np.testing.assert_array_equal(npu.read_memory(0, 160), model.spad[:160])
    np.testing.assert_array_equal(npu.read_memory(ACC_BASE, 160), model.acc[:160])
    assert npu.counters() == model.counters
    assert model.counters["cycles"] < model.counters["serial_cycles"]  # queues overlapped


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_sequences_follow_the_documented_model(seed):
    random_program(np.random.default_rng(seed), 500)
