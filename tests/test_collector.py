"""loom.collector: the cyclic collector's young generation runs rarely while loom compiles,
and the caller's thresholds come back afterwards, also after an error, a nested compile, or
one in another thread."""

import gc
import threading

import pytest

import loom
from loom import te
from loom.collector import COMPILE_THRESHOLD, fewer_collections
from loom.transform.pass_infra import PassContext


@pytest.fixture(autouse=True)
def default_thresholds():
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


@fewer_collections
def threshold_inside(inner=None):
    if inner is not None:
        return inner(), gc.get_threshold()
    return gc.get_threshold()


def test_the_young_threshold_is_raised_inside_and_restored_after():
    assert threshold_inside() == (COMPILE_THRESHOLD, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_nested_call_leaves_the_raised_threshold_to_the_outer_one():
    inner, outer_after_inner = threshold_inside(threshold_inside)
    assert inner == outer_after_inner == (COMPILE_THRESHOLD, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_an_error_restores_the_threshold():
    @fewer_collections
    def failing():
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        failing()
    assert gc.get_threshold() == (700, 10, 10)


def test_a_higher_threshold_and_automatic_collection_off_are_kept():
    gc.set_threshold(500_000, 5, 5)
    assert threshold_inside() == (500_000, 5, 5)
    gc.set_threshold(0, 10, 10)  # 0: automatic collection off
    assert threshold_inside() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)


def test_concurrent_calls_restore_the_threshold_when_the_last_one_leaves():
    entered, release = threading.Barrier(2), threading.Event()

    @fewer_collections
    def waiting():
        entered.wait()
        release.wait()

    thread = threading.Thread(target=waiting)
    thread.start()
    try:
        entered.wait()
        assert threshold_inside() == (COMPILE_THRESHOLD, 10, 10)
        assert gc.get_threshold() == (COMPILE_THRESHOLD, 10, 10)  # the thread's call is inside
    finally:
        release.set()
        thread.join()
    assert gc.get_threshold() == (700, 10, 10)


def test_build_lowers_with_the_raised_threshold():
    seen = []

    def record(mod):
        seen.append(gc.get_threshold())
        return mod

    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
    with PassContext(config={"tir.add_lower_pass": [(1, record)]}):
        loom.build(te.create_schedule(B.op), [A, B], name="add_one")
    assert seen == [(COMPILE_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)
