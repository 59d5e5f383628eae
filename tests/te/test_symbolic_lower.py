"""Symbolic shapes in loom.lower (issue 18, part 1, first step): te.var / te.size_var in
placeholder and compute shapes and reduction domains, splits and tiles by constant factors
(guarded where the factor is not proven to divide), compute_at with symbolic regions. Building
and calling such kernels: tests/tvm_compat/test_symbolic_shapes.py."""

import pytest

import loom
from loom import te
from loom.ir import op, structural_equal
from loom.ir.expr import Broadcast, IntImm, Var
from loom.ir.stmt import Allocate, For, ForKind
from loom.ir.visitor import post_order_visit
from tests.te.test_tensorize import gemm_intrin, matmul, tiled


def _same(a, b) -> bool:
    """Structural equality of expressions (or tuples and lists of them)."""
    return structural_equal(a, b)


def _func(mod):
    (func,) = list(mod)
    return func


def _loops(func) -> dict[str, For]:
    found: dict[str, For] = {}
    post_order_visit(
        func.body, lambda n: found.setdefault(n.loop_var.name, n) if isinstance(n, For) else None
    )
    return found


def _acceptance_schedule(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2 + 1, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].vectorize(xi)
    s[B].parallel(xo)
    return s, A, B


def test_the_acceptance_schedule_lowers_to_a_parallel_loop_over_the_split_with_a_guard():
    n = te.var("n")
    s, A, B = _acceptance_schedule(n)
    func = _func(loom.lower(s, [A, B]))
    A_buf, B_buf, n_param = func.params  # n: bound from A's shape by the caller
    assert _same([A_buf.shape, B_buf.shape, n_param], [(n,), (n,), n])
    loops = _loops(func)
    assert list(loops) == ["i.outer"]  # the inner loop became vector lanes
    outer = loops["i.outer"]
    assert outer.kind == ForKind.PARALLEL
    assert _same(outer.extent, op.floordiv(n + 3, 4))
    text = str(func)
    assert "parallel (i.outer: int32, 0, floordiv((n + 3), 4))" in text
    # the split does not provably divide n: the vector load and store are masked by i < n
    mask = "predicate=@likely((ramp((i.outer * 4), 1, 4) < broadcast(n, 4)))"
    assert text.count(mask) == 2, text


def test_a_two_dimensional_tile_guards_both_dimensions():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    C = te.compute((n, m), lambda i, j: A[i, j] + 1, name="C")
    s = te.create_schedule(C.op)
    s[C].tile(C.op.axis[0], C.op.axis[1], 8, 4)
    func = _func(loom.lower(s, [A, C]))
    loops = _loops(func)
    assert list(loops)[::-1] == ["i.outer", "j.outer", "i.inner", "j.inner"]
    assert _same(loops["i.outer"].extent, op.floordiv(n + 7, 8))
    assert _same(loops["j.outer"].extent, op.floordiv(m + 3, 4))
    assert _same((loops["i.inner"].extent, loops["j.inner"].extent), (IntImm(8), IntImm(4)))
    text = str(func)
    assert "if (@likely((((i.outer * 8) + i.inner) < n)))" in text
    assert "if (@likely((((j.outer * 4) + j.inner) < m)))" in text


def test_a_reduction_over_a_symbolic_domain():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((m, n), name="A")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((m,), lambda i: te.sum(A[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    s[C].split(k, factor=4)
    func = _func(loom.lower(s, [A, C]))
    loops = _loops(func)
    assert _same(loops["i"].extent, m)
    assert _same(loops["k.outer"].extent, op.floordiv(n + 3, 4))
    text = str(func)
    assert "C[i] = 0.0f" in text  # the identity, stored before the reduction loops
    assert "if (@likely((((k.outer * 4) + k.inner) < n)))" in text


def test_a_reduction_domain_with_a_start_runs_end_minus_start_times():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    r = te.reduce_axis((1, n), name="r")
    B = te.compute((1,), lambda i: te.max(A[r], axis=r), name="B")
    func = _func(loom.lower(te.create_schedule(B.op), [A, B]))
    assert _same(_loops(func)["r"].extent, n - 1)
    assert "A[(r + 1)]" in str(func)


def test_compute_at_inside_a_symbolic_loop_computes_a_constant_region():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2, name="B")
    C = te.compute((n,), lambda i: B[i] + 1, name="C")
    s = te.create_schedule(C.op)
    xo, _ = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xo)
    func = _func(loom.lower(s, [A, C]))
    allocations: list[Allocate] = []
    post_order_visit(func.body, lambda x: allocations.append(x) if isinstance(x, Allocate) else 0)
    # B is computed 4 elements at a time, inside the loop over floordiv(n + 3, 4)
    assert _same([a.buffer.shape for a in allocations], [(IntImm(4),)])
    outer = _loops(func)["i.outer"]
    assert _same(outer.extent, op.floordiv(n + 3, 4))
    text = str(outer)
    assert "B[i] = (A[((i.outer * 4) + i)] * 2.0f)" in text
    # the last block may pass the end of B's shape: its points are guarded
    assert text.count("if (@likely((((i.outer * 4) + i") == 2, text


def test_compute_at_a_row_of_symbolic_width_takes_the_whole_row():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] + 1, name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    func = _func(loom.lower(s, [A, C]))
    allocations: list[Allocate] = []
    post_order_visit(func.body, lambda x: allocations.append(x) if isinstance(x, Allocate) else 0)
    assert _same([a.buffer.shape for a in allocations], [(m,)])
    # B's row lies inside its shape: the loops over n and m need no guard (i < n inside the
    # loop over n)
    assert "if (" not in str(func), func


def test_size_var_is_a_non_negative_shape_variable():
    n = te.size_var("n")
    assert isinstance(n, Var) and n.name == "n" and str(n.dtype) == "int32"
    assert str(te.size_var("N", "int64").dtype) == "int64"
    s, A, B = _acceptance_schedule(n)
    assert _same(_loops(_func(loom.lower(s, [A, B])))["i.outer"].extent, op.floordiv(n + 3, 4))
    with pytest.raises(TypeError, match=r"size_var x must have an integer dtype, got float32"):
        te.size_var("x", "float32")


def test_an_expression_shape_needs_its_variables_in_the_argument_list():
    """A dimension that is a variable by itself is defined by the argument's shape; the
    variables of a compound dimension (k * 4) must be arguments."""
    k = te.var("k")
    A = te.placeholder((k * 4,), name="A")
    B = te.compute((k * 4,), lambda i: A[i] + 1, name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(loom.LoomError, match=r"scalar variables \['k'\] are used but not in"):
        loom.lower(s, [A, B])
    func = _func(loom.lower(s, [k, A, B]))
    assert func.params[0] is k
    assert _same(func.params[1].shape, (k * 4,))


def test_a_constant_expression_shape_becomes_an_int():
    assert te.placeholder((op.const(3) + 2,), name="A").shape == (5,)


@pytest.mark.parametrize(
    "entry, match",
    [
        (te.var("x", "float32"), r"integer expressions \(te.var\), got x"),
        (Broadcast(te.var("v"), 4), r"integer expressions \(te.var\), got "),
        (op.const(True), r"integer expressions \(te.var\), got True"),
    ],
)
def test_float_vector_and_bool_shape_entries_are_refused(entry, match):
    with pytest.raises(TypeError, match=match):
        te.placeholder((4, entry), name="A")


_n = te.var("n")


@pytest.mark.parametrize("dom", [(3, 3), (5, 2), 0, (_n, _n), (_n + 2, _n + 1)])
def test_a_reduction_domain_of_constant_extent_must_be_positive(dom):
    with pytest.raises(ValueError, match=r"reduce_axis r has an empty domain"):
        te.reduce_axis(dom, name="r")


def test_a_float_reduction_domain_is_refused():
    with pytest.raises(TypeError, match=r"reduce_axis r domain must be scalar integers"):
        te.reduce_axis((0, te.var("x", "float32")), name="r")


def test_fusing_symbolic_axes_multiplies_their_extents():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    C = te.compute((n, m), lambda i, j: A[i, j] + 1, name="C")
    s = te.create_schedule(C.op)
    fused = s[C].fuse(*C.op.axis)
    s[C].split(fused, nparts=4)
    loops = _loops(_func(loom.lower(s, [A, C])))
    assert _same(loops["i.j.fused.outer"].extent, IntImm(4))
    assert _same(loops["i.j.fused.inner"].extent, op.floordiv(n * m + 3, 4))


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_lowering_for_a_target_runs_the_build_passes(target):
    """An intermediate buffer of symbolic size is allocated at run time (loom_alloc)."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2, name="B")
    C = te.compute((n,), lambda i: B[i] + 1, name="C")
    text = str(loom.lower(te.create_schedule(C.op), [A, C], target=target))
    # the byte size in int64: n * 4 in int32 would wrap for n >= 2**29
    assert 'call_extern("loom_alloc", (cast(int64, n) * int64(4))' in text, text


def test_storage_align_of_a_symbolic_buffer_is_refused():
    n = te.var("n")
    A = te.placeholder((n, n), name="A")
    B = te.compute((n, n), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((n, n), lambda i, j: B[i, j] + 1, name="C")
    s = te.create_schedule(C.op)
    s[B].storage_align(B.op.axis[0], 16, 0)
    with pytest.raises(loom.ScheduleError, match=r"stage B: storage_align needs a buffer of"):
        loom.lower(s, [A, C])


def test_a_reduce_axis_of_a_symbolic_extent_runs_from_zero():
    n = te.var("n")
    k = te.reduce_axis(n, name="k")
    assert _same((k.dom.min, k.dom.extent), (IntImm(0), n))


def test_tensorize_of_a_constant_tile_inside_a_symbolic_loop():
    """The tile at the edge of m gets the extent left: min(4, m - 4 * i.outer)."""
    m = te.var("m")
    s, args = tiled(m, 8, 8)
    text = str(loom.lower(s, [m, *args]))
    assert "for (i.outer: int32, 0, floordiv((m + 3), 4))" in text
    assert "for (ti: int32, 0, min(4, (m - (i.outer * 4))))" in text


def test_tensorize_of_a_loop_of_symbolic_extent_is_refused():
    A, B, C = matmul(te.var("m"), 8, 8)
    s = te.create_schedule(C.op)
    s[C].tensorize(C.op.axis[0], gemm_intrin())
    with pytest.raises(
        loom.ScheduleError, match=r"tensorize needs loops of constant extent, but \['i'\]"
    ):
        loom.lower(s, [A, B, C])


def test_rfactor_of_a_symbolic_reduction():
    """rfactor splits a reduction over (0, n): the partial sums run floordiv(n + 3, 4) times,
    guarded, and the final stage sums the 4 partials."""
    n = te.var("n")
    A = te.placeholder((8, n), name="A")
    k = te.reduce_axis((0, n), name="k")
    B = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=4)
    s.rfactor(B, ki)
    func = _func(loom.lower(s, [A, B]))
    loops = _loops(func)
    assert _same(loops["k.outer"].extent, op.floordiv(n + 3, 4))
    assert _same(loops["k.inner.v"].extent, IntImm(4))
    assert "if (@likely((((k.outer * 4) + k.inner) < n)))" in str(func)
