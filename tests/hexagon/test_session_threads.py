"""One device session shared by threads: kernels called and arrays copied from many threads at
once, every result checked; a session restarted or closed while other threads use it (a clear
error in those threads, never a protocol out of step); and aliased arguments refused on the
device as on the host, with the same message."""

import gc
import re
import threading
from types import SimpleNamespace

import numpy as np
import pytest

import loom
from loom import DeviceError, LoomError, te
from loom.runtime.device.protocol import Command

from .conftest import requires_hexagon

pytestmark = requires_hexagon
TARGET = loom.target.hexagon("v66")
N = 64
THREADS = 6
HANG_GUARD = 300  # seconds; only a deadlock gets near it
SHARE = (
    r"arguments {} and {} share memory, but one is written; loom kernels assume distinct buffers"
)


def reverse_program():
    """B[i] = A[N - 1 - i] + k"""
    A = te.placeholder((N,), name="A", dtype="int32")
    k = te.var("k", dtype="int32")
    B = te.compute((N,), lambda i: A[N - 1 - i] + k, name="B")
    return te.create_schedule(B.op), [A, k, B]


def axpy_program():
    """C[i] = A[i] * s + B[i]"""
    A = te.placeholder((N,), name="A", dtype="int32")
    B = te.placeholder((N,), name="B", dtype="int32")
    s_ = te.var("s", dtype="int32")
    C = te.compute((N,), lambda i: A[i] * s_ + B[i], name="C")
    return te.create_schedule(C.op), [A, s_, B, C]


@pytest.fixture
def dev(dev):
    """The module's session, with a deadline that ends a test whose threads broke the
    protocol (a reply read by the wrong thread) soon instead of after two minutes."""
    dev.timeout, timeout = 20, dev.timeout
    yield dev
    dev.timeout = timeout


@pytest.fixture(scope="module")
def mods(hexagon_sim):
    return SimpleNamespace(
        rev=loom.build(*reverse_program(), target=TARGET, name="rev"),
        axpy=loom.build(*axpy_program(), target=TARGET, name="axpy"),
    )


def run_threads(target, count):
    """Run target(i) in `count` threads; the exceptions they raised, by thread."""
    raised = [None] * count

    def run(i):
        try:
            target(i)
        except BaseException as e:
            raised[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_GUARD)
    assert not any(t.is_alive() for t in threads), "a thread hung: a deadlock"
    return raised


def values(rng):
    return rng.integers(-1000, 1000, N, dtype=np.int32)


def test_many_threads_call_kernels_and_copy_arrays_on_one_session(dev, mods):
    rev = mods.rev.to_device(dev)["rev"]
    axpy = mods.axpy.to_device(dev)["axpy"]
    timer = mods.rev.to_device(dev).time_evaluator("rev", number=2, repeat=1)
    iterations = 30  # 28 exchanges each, 7 of them ALLOC
    gc.collect()
    before = dev.stats()["heap"]

    def work(i):
        rng = np.random.default_rng(i)
        for it in range(iterations):
            a = values(rng)
            out = np.full(N, -1, np.int32)
            rev(a, it, out)  # numpy arguments: copied in, run, copied back, freed
            np.testing.assert_array_equal(out, a[::-1] + it)
            x = loom.nd.array(a, device=dev)
            y = loom.nd.empty(N, "int32", device=dev)
            axpy(x, it, x, y)  # the same array twice, neither written: allowed
            np.testing.assert_array_equal(y.numpy(), a * it + a)
            rev(y, -i, x)
            np.testing.assert_array_equal(x.numpy(), (a * it + a)[::-1] - i)
            x.copyfrom(out)
            np.testing.assert_array_equal(x.numpy(), out)
            if it % 2:
                x.free()
                y.free()
            else:
                del x, y  # garbage collected: freed before the session's next request
            if i == 0 and it % 5 == 0:
                assert len(timer(a, 0, out).results) == 1
                assert dev.stats()["heap"]["allocations"] > before["allocations"]

    raised = run_threads(work, THREADS)
    assert raised == [None] * THREADS, raised
    gc.collect()
    after = dev.stats()["heap"]
    # every array and temporary was allocated and freed again: nothing leaked, nothing lost
    assert after["allocations"] - before["allocations"] >= THREADS * iterations * 7
    assert after["allocations"] - before["allocations"] == after["frees"] - before["frees"]
    assert after["in_use"] == before["in_use"]


def _workers_across_session_changes(dev, mods, change, changes, expected):
    """THREADS workers call kernels and copy arrays while `change()` (a restart or a close)
    runs `changes` times, each time once every worker has succeeded `m` times on the
    current runtime. Every success is checked; an error must match `expected` (else the
    worker fails, and the others stop). Returns each worker's errors: (type, message)."""
    m = 3
    cond = threading.Condition()
    state = [(0, 0)] * THREADS  # per worker: (generation of its module and array, successes)
    done = [0]
    failed = [False]

    def worker(w):
        rng = np.random.default_rng(w)
        errors = []
        fn = x = None
        while True:
            with cond:  # every change gives each worker one error, then it goes on
                if failed[0] or (
                    done[0] == changes
                    and len(errors) >= changes
                    and (dev.closed or state[w] >= (dev.generation, m))
                ):
                    return errors
            a = values(rng)
            try:
                if fn is None:
                    with dev.lock:  # a module and an array of one runtime
                        fn = mods.rev.to_device(dev)["rev"]
                        x = loom.nd.empty(N, "int32", device=dev)
                        generation = dev.generation
                out = np.zeros(N, np.int32)
                fn(a, w, out)
                np.testing.assert_array_equal(out, a[::-1] + w)
                x.copyfrom(a)
                y = loom.nd.empty(N, "int32", device=dev)
                fn(x, -w, y)
                np.testing.assert_array_equal(y.numpy(), a[::-1] - w)
            except LoomError as e:
                if not re.search(expected, str(e)):
                    raise
                errors.append((type(e), str(e)))  # not e: its traceback holds x, y
                fn = x = None
                continue
            with cond:
                count = state[w][1] + 1 if state[w][0] == generation else 1
                state[w] = (generation, count)
                cond.notify_all()

    def changer():
        for _ in range(changes):
            with cond:
                cond.wait_for(lambda: failed[0] or all(s >= (dev.generation, m) for s in state))
                if failed[0]:
                    return
                change()
                done[0] += 1
                cond.notify_all()

    results = [None] * THREADS

    def run(i):
        try:
            if i == THREADS:
                changer()
            else:
                results[i] = worker(i)
        except BaseException:
            with cond:
                failed[0] = True
                cond.notify_all()
            raise

    raised = run_threads(run, THREADS + 1)
    assert raised == [None] * (THREADS + 1), raised
    return results


def test_restart_while_other_threads_use_the_session(dev, mods):
    # the module's error, or the array's when the restart came between two of its uses
    expected = (
        r"^((rev|module #\d+) was loaded into|this array belonged to) an earlier runtime of "
        r"session hexagon-sim"
    )
    errors = _workers_across_session_changes(dev, mods, dev.restart, 2, expected)
    for found in errors:  # each restart: one clear error in each worker, then it goes on
        assert len(found) == 2, found
        assert all(issubclass(kind, LoomError) for kind, _ in found), found
    gc.collect()  # the workers' arrays of the last runtime: dropped, freed before STATS
    assert dev.stats()["heap"]["in_use"] == 0


def test_close_while_other_threads_use_the_session(dev, mods):
    expected = r"session hexagon-sim is closed; call restart\(\)"
    errors = _workers_across_session_changes(dev, mods, dev.close, 1, expected)
    for found in errors:
        assert len(found) == 1, found
        assert issubclass(found[0][0], DeviceError), found
    dev.restart()
    out = np.zeros(N, np.int32)
    mods.rev.to_device(dev)["rev"](np.arange(N, dtype=np.int32), 1, out)
    np.testing.assert_array_equal(out, np.arange(N)[::-1] + 1)


def test_a_restart_asked_for_during_a_call_waits_for_the_call(dev, mods, monkeypatch):
    rev = mods.rev.to_device(dev)["rev"]
    restarter = threading.Thread(target=dev.restart)
    request = dev.request

    def restart_then_request(command, payload=b""):
        if command is Command.CALL and restarter.ident is None:  # arguments written, not run
            restarter.start()
            restarter.join(0.5)  # a restart would get in here if the call let go of the session
        return request(command, payload)

    monkeypatch.setattr(dev, "request", restart_then_request)
    a = np.arange(N, dtype=np.int32)
    out = np.zeros(N, np.int32)
    rev(a, 3, out)  # every exchange of the call went to the runtime it was loaded into
    restarter.join(HANG_GUARD)
    monkeypatch.undo()
    np.testing.assert_array_equal(out, a[::-1] + 3)
    assert not restarter.is_alive()
    with pytest.raises(LoomError, match=r"^rev was loaded into an earlier runtime"):
        rev(a, 3, out)


def host_message(program, name, *args):
    with pytest.raises(ValueError) as info:
        loom.build(*program(), name=name)[name](*args)
    return str(info.value)


def test_the_same_device_array_as_input_and_output_is_refused(dev, mods):
    x = loom.nd.array(np.array([1, 2, 3, 4] * (N // 4), np.int32), device=dev)
    with pytest.raises(ValueError, match=SHARE.format("A", "B")) as info:
        mods.rev.to_device(dev)["rev"](x, 0, x)
    np.testing.assert_array_equal(x.numpy(), [1, 2, 3, 4] * (N // 4))  # nothing ran
    a = np.array([1, 2, 3, 4] * (N // 4), np.int32)
    assert str(info.value) == host_message(reverse_program, "rev", a, 0, a)

    axpy = mods.axpy.to_device(dev)["axpy"]
    y = loom.nd.empty(N, "int32", device=dev)
    with pytest.raises(ValueError, match=SHARE.format("B", "C")):
        axpy(x, 1, y, y)
    with pytest.raises(ValueError, match=SHARE.format("A", "C")):
        axpy(y, 1, x, y)
    axpy(x, 2, x, y)  # aliased inputs that are only read are fine
    np.testing.assert_array_equal(y.numpy(), np.array([3, 6, 9, 12] * (N // 4)))


def test_distinct_device_arrays_and_numpy_copies_are_not_aliases(dev, mods):
    rev = mods.rev.to_device(dev)["rev"]
    a = np.arange(N, dtype=np.int32)
    x = loom.nd.array(a, device=dev)
    y = loom.nd.empty(N, "int32", device=dev)  # allocated next to x, perhaps right after it
    rev(x, 0, y)
    np.testing.assert_array_equal(y.numpy(), a[::-1])
    rev(x.numpy(), 5, x)  # a numpy array is copied in: it never aliases a device array
    np.testing.assert_array_equal(x.numpy(), a[::-1] + 5)


def test_numpy_arguments_sharing_memory_are_refused_on_the_device(dev, mods):
    rev = mods.rev.to_device(dev)["rev"]
    axpy = mods.axpy.to_device(dev)["axpy"]
    a = np.arange(N, dtype=np.int32)
    with pytest.raises(ValueError, match=SHARE.format("A", "B")) as info:
        rev(a, 0, a)
    assert str(info.value) == host_message(reverse_program, "rev", a, 0, a)
    np.testing.assert_array_equal(a, np.arange(N))
    buf = np.arange(N + 8, dtype=np.int32)
    with pytest.raises(ValueError, match=SHARE.format("A", "B")) as info:
        rev(buf[:N], 0, buf[8:])  # overlapping views of one buffer
    assert str(info.value) == host_message(reverse_program, "rev", buf[:N], 0, buf[8:])
    out = np.zeros(N, np.int32)
    with pytest.raises(ValueError, match=SHARE.format("B", "C")):
        axpy(a, 1, out, out)
    axpy(a, 1, a, out)  # shared memory that is only read is fine, as on the host
    np.testing.assert_array_equal(out, 2 * a)


def test_a_freed_device_array_is_refused(dev, mods):
    x = loom.nd.array(np.arange(N, dtype=np.int32), device=dev)
    x.free()
    with pytest.raises(LoomError, match=r"rev: argument A was freed"):
        mods.rev.to_device(dev)["rev"](x, 0, np.zeros(N, np.int32))
    with pytest.raises(LoomError, match=r"this array was freed"):
        x.numpy()
