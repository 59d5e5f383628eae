"""Dead, hung and misused devices: each a clear DeviceError/LoomError/ValueError, the session
restartable, and the host process unchanged."""

import os
import signal

import numpy as np
import pytest

import loom
from loom import DeviceError, LoomError, te
from tests.hexagon.conftest import requires_hexagon
from tests.robustness.harness import refused

pytestmark = requires_hexagon
V66 = loom.target.hexagon("v66")


def reverse(target=V66):
    """The issue's aliasing program: B[i] = A[3 - i]."""
    A = te.placeholder((4,), name="A", dtype="int32")
    B = te.compute((4,), lambda i: A[3 - i], name="B")
    return loom.build(te.create_schedule(B.op), [A, B], target=target, name="rev")


@pytest.fixture
def session():
    with loom.device("hexagon-sim", timeout=5) as dev:
        yield dev


def test_the_same_device_array_as_input_and_output(session):
    rev = reverse().to_device(session)
    x = loom.nd.array(np.array([1, 2, 3, 4], np.int32), device=session)
    refused(
        lambda: rev(x, x),
        ValueError,
        r"rev: arguments A and B share memory, but one is written; loom kernels assume",
    )
    np.testing.assert_array_equal(x.numpy(), [1, 2, 3, 4])
    y = loom.nd.empty((4,), "int32", device=session)
    rev(x, y)
    np.testing.assert_array_equal(y.numpy(), [4, 3, 2, 1])


def test_a_device_process_killed_during_use(session):
    rev = reverse().to_device(session)
    os.kill(session.transport.proc.pid, signal.SIGKILL)
    refused(
        lambda: rev(np.arange(4, dtype=np.int32), np.zeros(4, np.int32)),
        DeviceError,
        r"the device runtime exited with status -9",
    )
    refused(lambda: session.stats(), DeviceError, r"session hexagon-sim is closed")
    session.restart()
    out = np.zeros(4, np.int32)
    reverse().to_device(session)(np.arange(4, dtype=np.int32), out)
    np.testing.assert_array_equal(out, [3, 2, 1, 0])


def test_a_hung_device_times_out(session):
    os.kill(session.transport.proc.pid, signal.SIGSTOP)
    refused(lambda: session.stats(), DeviceError, r"no reply to STATS within 5 s")
    session.restart()
    assert session.stats()["vtcm"]["in_use"] == 0


def test_a_module_from_an_earlier_runtime(session):
    rev = reverse().to_device(session)
    session.restart()
    refused(
        lambda: rev(np.zeros(4, np.int32), np.zeros(4, np.int32)),
        LoomError,
        r"was loaded into an earlier runtime of session hexagon-sim; load the module again",
    )


def test_an_array_of_another_session(session):
    rev = reverse().to_device(session)
    with loom.device("hexagon-sim") as other:
        x = loom.nd.array(np.zeros(4, np.int32), device=other)
        y = loom.nd.empty((4,), "int32", device=session)
        refused(lambda: rev(x, y), ValueError, r"rev: argument A lives on session")


def test_code_the_emulator_cannot_run(session):
    A = te.placeholder((64,), name="A", dtype="float32")
    B = te.compute((64,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])  # v73 HVX float: no qemu-hexagon implements it
    mod = loom.build(s, [A, B], target=loom.target.hexagon("v73"), name="f")
    refused(lambda: mod.to_device(session), LoomError, r"compile-only here")


def test_host_code_has_no_device(session):
    refused(
        lambda: reverse("llvm").to_device(session),
        LoomError,
        r"no module of this tree runs on a hexagon device",
    )


def test_unknown_device_kinds():
    refused(lambda: loom.device("cuda-sim"), LoomError, r"no device runtime for ISA 'cuda'")
