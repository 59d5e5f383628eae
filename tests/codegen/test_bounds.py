"""Buffer bounds end to end (check_bounds): an access that provably leaves its tensor is a build
error naming the stage, the access, the index and its range; a data-dependent index is checked
when the function runs, on the host (llvm, c), in the reference interpreter and on a device
(Hexagon under qemu), and a failed check is a LoomError naming the tensor and the index; with
"tir.disable_bound_checks" no check is left. Schedules whose accesses the schedule itself keeps
in range (the benchmark kernels) get no check."""

import re

import numpy as np
import pytest

import loom
from loom import LoomError, LoweringError, te
from loom.backend.cpu import strategies as cpu
from loom.ir import Call, For, ForKind
from loom.ir.visitor import post_order_visit
from loom.transform import PassContext

from ..hexagon.conftest import dev, hexagon_sim, requires_hexagon  # noqa: F401 (fixtures)

HOST = ["llvm", "c"]


def bound_checks(mod) -> list[str]:
    """The messages of the runtime bound checks in a lowered module."""
    found = []

    def visit(n):
        if isinstance(n, Call) and n.op == "require" and " is outside [0, " in n.args[2].value:
            found.append(n.args[2].value)

    for f in mod.functions:
        post_order_visit(f.body, visit)
    return found


def one_stage(shape, in_shape, rule):
    A = te.placeholder(in_shape, name="A")
    if len(shape) == 1:
        C = te.compute(shape, lambda i: rule(A, i), name="C")
    else:
        C = te.compute(shape, lambda i, j: rule(A, i, j), name="C")
    return te.create_schedule(C.op), [A, C]


# -- the reported programs: build errors -----------------------------------------------------
REPORTED = [
    ((16,), (16,), lambda A, i: A[i + 1000000], r"A\[\(i \+ 1000000\)\]", "[1000000, 1000015]"),
    ((16,), (16,), lambda A, i: A[i + 1], r"A\[\(i \+ 1\)\]", "[1, 16]"),
    ((16,), (16,), lambda A, i: A[i - 1], r"A\[\(i - 1\)\]", "[-1, 14]"),
    ((8,), (4,), lambda A, i: A[i], r"A\[i\]", "[0, 7]"),
]


@pytest.mark.parametrize("shape,in_shape,rule,access,values", REPORTED)
@pytest.mark.parametrize("target", [None, *HOST])
def test_reported_reads_are_build_errors(shape, in_shape, rule, access, values, target):
    sch, args = one_stage(shape, in_shape, rule)
    extent = in_shape[0]
    message = (
        rf"main: stage C reads {access} out of bounds: index .* \(dimension 0 of A, extent "
        rf"{extent}\) takes the values {re.escape(values)}, not all in \[0, {extent - 1}\]"
    )
    with pytest.raises(LoweringError, match=message):
        if target is None:
            loom.lower(sch, args)
        else:
            loom.build(sch, args, target=target)


def test_a_column_past_the_end_is_caught_in_its_own_dimension():
    """A[i, j + 1] of a 4x8 A: flattened, it would read the next row's first element."""
    sch, args = one_stage((4, 8), (4, 8), lambda A, i, j: A[i, j + 1])
    with pytest.raises(LoweringError, match=r"\(dimension 1 of A, extent 8\) takes the values"):
        loom.build(sch, args)


def test_out_of_range_behind_a_split_tail_guard():
    """The split by 8 guards i < 30; i + 1 still reaches 30 for the last guarded iteration."""
    sch, args = one_stage((30,), (30,), lambda A, i: A[i + 1])
    C = args[1]
    sch[C].split(C.op.axis[0], factor=8)
    with pytest.raises(LoweringError, match=r"takes the values \[1, 30\], not all in \[0, 29\]"):
        loom.build(sch, args)


def test_the_stage_is_the_one_that_reads():
    """The error names the intermediate stage B that reads A, not the output."""
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i + 2] * 2.0, name="B")
    C = te.compute((8,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(LoweringError, match=r"main: stage B reads A\[\(i \+ 2\)\]"):
        loom.build(s, [A, C])


# -- data-dependent indices: runtime checks ---------------------------------------------------
def gather(vectorize=False):
    A = te.placeholder((16,), name="A")
    idx = te.placeholder((8,), "int32", name="idx")
    C = te.compute((8,), lambda i: A[idx[i]], name="C")
    s = te.create_schedule(C.op)
    if vectorize:
        s[C].vectorize(C.op.axis[0])
    return s, [A, idx, C]


GATHER_ERROR = r"stage C reads A\[idx\[i\]\]: index idx\[i\] of dimension 0 is outside \[0, 16\)"


def gather_data():
    a = np.arange(16, dtype=np.float32) * 10
    i = np.array([0, 15, 3, 7, 1, 2, 9, 4], dtype=np.int32)
    return a, i, np.zeros(8, np.float32)


def assert_gather_checks(call):
    a, i, c = gather_data()
    call(a, i, c)
    np.testing.assert_array_equal(c, a[i])
    for bad in (16, -1, 1 << 30):
        i[5] = bad
        with pytest.raises(LoomError, match=GATHER_ERROR):
            call(a, i, c)


@pytest.mark.parametrize("vectorize", [False, True])
@pytest.mark.parametrize("target", HOST)
def test_gather_index_is_checked_at_run_time(target, vectorize):
    sch, args = gather(vectorize)
    lowered = loom.lower(sch, args, target=target)
    assert len(bound_checks(lowered)) == 1
    # a vectorized loop holding a check runs serially
    loops = []
    post_order_visit(lowered["main"].body, lambda n: loops.append(n) if isinstance(n, For) else 0)
    assert [lp.kind for lp in loops] == [ForKind.SERIAL]
    assert_gather_checks(loom.build(sch, args, target=target)["main"])


def test_gather_index_is_checked_by_the_interpreter():
    sch, args = gather()
    mod = loom.lower(sch, args)
    assert_gather_checks(lambda *arrays: loom.ir.interpret(mod, *arrays))


@pytest.mark.parametrize("target", HOST)
def test_disable_bound_checks_removes_the_check(target):
    sch, args = gather(vectorize=True)
    with PassContext(config={"tir.disable_bound_checks": True}):
        lowered = loom.lower(sch, args, target=target)
        mod = loom.build(sch, args, target=target)
    assert bound_checks(lowered) == []
    assert ("ramp(" in str(lowered)) == (target == "llvm")  # vectorized again (C: scalar IR)
    a, i, c = gather_data()
    mod["main"](a, i, c)
    np.testing.assert_array_equal(c, a[i])


@requires_hexagon
def test_gather_index_is_checked_on_hexagon(dev):  # noqa: F811 (the fixture)
    sch, args = gather()
    target = loom.target.hexagon("v66")
    assert len(bound_checks(loom.lower(sch, args, target=target))) == 1
    loaded = loom.build(sch, args, target=target, name="main").to_device(dev)
    assert_gather_checks(loaded["main"])


# -- schedules that keep their accesses in range get no check --------------------------------
@pytest.mark.parametrize("n", [1024, 100])
def test_benchmark_matmul_has_no_runtime_check(n):
    sch, args = cpu.matmul(n, n, n)
    assert bound_checks(loom.lower(sch, args, target="llvm")) == []


@pytest.mark.parametrize("n", [16 * 1024 * 1024, 1000])
def test_benchmark_elementwise_has_no_runtime_check(n):
    sch, args = cpu.elementwise_kernel(lambda x, y: x + y, (n,), 2)
    assert bound_checks(loom.lower(sch, args, target="llvm")) == []
