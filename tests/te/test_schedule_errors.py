"""Every invalid use of a schedule primitive raises ScheduleError naming the stage and axis."""

import pytest

from loom import ScheduleError, te


def two_stage():
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((16, 16), lambda i, j: B[i, j] + 1.0, name="C")
    return A, B, C, te.create_schedule(C.op)


def test_split_axis_of_another_stage():
    _, B, C, s = two_stage()
    with pytest.raises(ScheduleError, match=r"stage C: split: axis i .*belongs to stage B"):
        s[C].split(B.op.axis[0], factor=4)


def test_split_axis_already_split():
    _, _, C, s = two_stage()
    i = C.op.axis[0]
    s[C].split(i, factor=4)
    with pytest.raises(ScheduleError, match=r"stage C: split: axis i was already split"):
        s[C].split(i, factor=2)


def test_split_needs_exactly_one_amount():
    _, _, C, s = two_stage()
    with pytest.raises(ScheduleError, match=r"stage C: split of axis i needs exactly one"):
        s[C].split(C.op.axis[0])
    with pytest.raises(ScheduleError, match=r"stage C: split of axis i: factor/nparts must be"):
        s[C].split(C.op.axis[0], factor=0)


def test_reorder_axis_not_in_stage():
    _, B, C, s = two_stage()
    with pytest.raises(ScheduleError, match=r"stage C: reorder: axis j .*belongs to stage B"):
        s[C].reorder(C.op.axis[0], B.op.axis[1])


def test_reorder_duplicate_axis():
    _, _, C, s = two_stage()
    i = C.op.axis[0]
    with pytest.raises(ScheduleError, match=r"stage C: reorder: an axis is given twice"):
        s[C].reorder(i, i)


def test_compute_at_non_consumer_loop():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
    D = te.compute((16,), lambda i: A[i] * 3.0, name="D")
    C = te.compute((16,), lambda i: B[i] + D[i], name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=r"stage B: compute_at: stage D does not consume B"):
        s[B].compute_at(s[D], D.op.axis[0])


def test_compute_at_axis_not_of_parent():
    _, B, C, s = two_stage()
    with pytest.raises(
        ScheduleError,
        match=r"stage B: compute_at: axis i is not a loop of "
        r"stage C",
    ):
        s[B].compute_at(s[C], B.op.axis[0])


def test_compute_at_itself_and_output():
    _, B, C, s = two_stage()
    with pytest.raises(ScheduleError, match=r"stage B: compute_at into its own loop"):
        s[B].compute_at(s[B], B.op.axis[0])
    with pytest.raises(ScheduleError, match=r"stage C: compute_at: an output stage"):
        s[C].compute_at(s[B], B.op.axis[0])


def test_fuse_non_adjacent_and_mixed_kinds():
    A = te.placeholder((8, 8, 8), name="A")
    k = te.reduce_axis(8, "k")
    C = te.compute((8, 8), lambda i, j: te.sum(A[i, j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    with pytest.raises(
        ScheduleError,
        match=r"stage C: fuse: axes \['i', 'k'\] must be "
        r"consecutive",
    ):
        s[C].fuse(i, k)
    with pytest.raises(
        ScheduleError,
        match=r"stage C: fuse: cannot fuse reduction and "
        r"data-parallel",
    ):
        s[C].fuse(j, k)


def test_parallel_reduction_axis():
    A = te.placeholder((8, 8), name="A")
    k = te.reduce_axis(8, "k")
    C = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=r"stage C: parallel: axis k is a reduction axis"):
        s[C].parallel(k)


def test_inline_output_and_reduction():
    A = te.placeholder((8, 8), name="A")
    k = te.reduce_axis(8, "k")
    R = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="R")
    C = te.compute((8,), lambda i: R[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=r"stage R: compute_inline: a reduction"):
        s[R].compute_inline()
    with pytest.raises(ScheduleError, match=r"stage C: compute_inline: an output"):
        s[C].compute_inline()


def test_placeholder_stage_cannot_be_scheduled():
    A, _, _, s = two_stage()
    with pytest.raises(ScheduleError, match=r"stage A: set_scope applies to computed stages"):
        s[A].set_scope("local")


def test_storage_align_checks():
    _, B, C, s = two_stage()
    with pytest.raises(ScheduleError, match=r"stage B: storage_align: 'i' is not one of"):
        s[B].storage_align(C.op.axis[0], 8, 1)
    with pytest.raises(ScheduleError, match=r"stage B: storage_align needs factor > 0"):
        s[B].storage_align(B.op.axis[0], 8, 9)


def test_cache_write_after_split():
    _, _, C, s = two_stage()
    s[C].split(C.op.axis[0], factor=4)
    with pytest.raises(ScheduleError, match=r"stage C: cache_write must come before"):
        s.cache_write(C, "local")


def test_cache_read_non_reader():
    A, B, C, s = two_stage()
    with pytest.raises(ScheduleError, match=r"stage C: cache_read: it does not read A"):
        s.cache_read(A, "shared", [C])


def test_unknown_tensor_in_schedule():
    _, _, _, s = two_stage()
    other = te.placeholder((4,), name="Z")
    with pytest.raises(ScheduleError, match=r"Z is not a stage of this schedule"):
        s[other]


def test_axis_type_error():
    _, _, C, s = two_stage()
    with pytest.raises(TypeError, match=r"stage C: vectorize takes an axis"):
        s[C].vectorize("i")


def test_attach_loop_split_afterwards_is_reported_at_lowering():
    import loom

    A, B, C, s = two_stage()
    i, j = C.op.axis
    s[B].compute_at(s[C], i)
    s[C].split(i, factor=4)
    with pytest.raises(
        ScheduleError,
        match=r"stage B is computed at axis i of C, which was "
        r"split or fused afterwards",
    ):
        loom.lower(s, [A, C])


def test_reader_outside_the_attach_loop():
    import loom

    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="B")
    D = te.compute((8, 8), lambda i, j: B[i, j] * 2.0, name="D")
    C = te.compute((8, 8), lambda i, j: B[i, j] + D[i, j], name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])  # but D, at the root, reads B too
    with pytest.raises(ScheduleError, match=r"stage B is computed inside C but also read by D"):
        loom.lower(s, [A, C])
