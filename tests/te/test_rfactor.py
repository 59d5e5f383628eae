"""Schedule.rfactor: a reduction factored over one of its reduction loops into partial results
(a new stage) and their combination. Each schedule is run by the reference interpreter, LLVM
and C against numpy; the lowered loops are checked for the stage structure rfactor promises,
and every misuse is an error naming the argument."""

import numpy as np
import pytest

import loom
from loom import te
from loom.errors import LoomError, ScheduleError
from loom.ir.expr import Ramp
from loom.ir.stmt import BufferStore, For, ForKind
from loom.ir.visitor import post_order_visit

HOWS = ["interpreter", "llvm", "c"]
RNG = np.random.default_rng(0)


def run(s, args, inputs, how):
    """The outputs (the arguments after the inputs) computed by `how`."""
    outs = [np.zeros(t.shape, str(t.dtype)) for t in args[len(inputs) :]]
    arrays = [np.array(a) for a in inputs] + outs
    if how == "interpreter":
        loom.ir.interpret(loom.lower(s, args, name="f"), *arrays)
    else:
        loom.build(s, args, target=how, name="f")["f"](*arrays)
    return arrays[len(inputs) :]


def row_reduction(reducer, n, m, dtype="float32"):
    A = te.placeholder((n, m), dtype=dtype, name="A")
    k = te.reduce_axis(m, "k")
    B = te.compute((n,), lambda i: reducer(A[i, k], axis=k), name="B")
    return A, B, k


def data(shape, dtype):
    if dtype.startswith("float"):
        return RNG.uniform(-2, 2, shape).astype(dtype)
    return RNG.integers(-100, 100, shape).astype(dtype)


REDUCERS = {
    "sum": (te.sum, lambda a: a.sum(axis=1)),
    "max": (te.max, lambda a: a.max(axis=1)),
    "min": (te.min, lambda a: a.min(axis=1)),
    "prod": (te.prod, lambda a: a.prod(axis=1)),
}


def compare(got, want, exact):
    if exact:
        np.testing.assert_array_equal(got, want)
    else:  # the partial sums add the elements in another order
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def compare_sums(got, terms):
    """`got`, float32 sums of the rows of `terms` added in some order, against the rows'
    sums in float64. A relative tolerance suits only sums larger than their terms: a row of
    1000 terms of both signs whose sum nearly cancels (0.3257 from terms up to 2) differed
    from numpy's float32 sum (another order) by 1.3e-5, more than rtol=atol=1e-5 allowed,
    with both right. The rounding error grows with the terms, not the sum: n additions, each
    rounding a partial sum by at most half an ulp; partial sums of terms of random signs stay
    a few times the largest term, and their rounding errors partly cancel, so
    n * eps * max|term| bounds it with room (measured: a ninth of it at most, over 300 draws
    of this test's 16 rows of 1000; LLVM's and C's sums bit for bit the same)."""
    terms = np.asarray(terms, np.float64)
    n = terms.shape[1]
    bound = n * np.finfo(np.float32).eps * np.abs(terms).max(axis=1)
    error = np.abs(got.astype(np.float64) - terms.sum(axis=1))
    assert np.all(error <= bound), (error, bound)


# -- results --------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("reducer", sorted(REDUCERS))
@pytest.mark.parametrize("m, factor", [(64, 16), (100, 16), (7, 4), (33, 64)])
def test_each_reducer_split_and_factored_over_the_inner_loop(how, reducer, m, factor):
    fn, ref = REDUCERS[reducer]
    A, B, k = row_reduction(fn, 5, m)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=factor)
    BF = s.rfactor(B, ki)
    assert BF.shape == (factor, 5)
    a = data((5, m), "float32")
    if reducer == "prod":
        a = np.float32(1) + a * np.float32(0.01)  # a product of 100 factors stays finite
    (got,) = run(s, [A, B], [a], how)
    compare(got, ref(a), exact=reducer in ("max", "min"))


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
@pytest.mark.parametrize(
    "reducer, ref",
    [
        (te.sum, lambda a: a.sum(axis=1, dtype=a.dtype)),
        (te.max, lambda a: a.max(axis=1)),
        (te.min, lambda a: a.min(axis=1)),
        (te.bitwise_and, lambda a: np.bitwise_and.reduce(a, axis=1)),
        (te.bitwise_or, lambda a: np.bitwise_or.reduce(a, axis=1)),
        (te.bitwise_xor, lambda a: np.bitwise_xor.reduce(a, axis=1)),
    ],
    ids=["sum", "max", "min", "and", "or", "xor"],
)
def test_integer_reducers_give_the_same_result_exactly(how, dtype, reducer, ref):
    A, B, k = row_reduction(reducer, 4, 45, dtype)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=8)
    s.rfactor(B, ko)  # partial results of each block of 8 elements
    a = RNG.integers(0, 250, (4, 45)).astype(dtype)
    (got,) = run(s, [A, B], [a], how)
    np.testing.assert_array_equal(got, ref(a))


@pytest.mark.parametrize("how", HOWS)
def test_a_custom_comm_reducer(how):
    # the largest absolute value, as a commutative reducer of its own
    absmax = te.comm_reducer(
        lambda x, y: te.max(te.abs(x), te.abs(y)), lambda dt: te.const(0, dt), "absmax"
    )
    A, B, k = row_reduction(absmax, 6, 50)
    s = te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=8)
    s.rfactor(B, ki)
    a = data((6, 50), "float32")
    (got,) = run(s, [A, B], [a], how)
    np.testing.assert_array_equal(got, np.abs(a).max(axis=1))


@pytest.mark.parametrize("how", HOWS)
def test_the_typical_schedule_vectorized_partials_computed_at_the_row(how):
    n, m = 16, 1000
    A, B, k = row_reduction(te.sum, n, m)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=16)
    BF = s.rfactor(B, ki, factor_axis=1)  # B.rf[i, ki]
    assert BF.shape == (n, 16)
    i = s[B].op.axis[0]
    s[B].parallel(i)
    s[BF].compute_at(s[B], i)
    bi, bki, bko = s[BF].leaf_iter_vars
    s[BF].reorder(bi, bko, bki)
    s[BF].vectorize(bki)
    s[B].unroll(s[B].op.reduce_axis[0])
    a = data((n, m), "float32")
    (got,) = run(s, [A, B], [a], how)
    compare_sums(got, a)


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("which", ["k1", "k2.inner", "k2.outer"])
@pytest.mark.parametrize("factor_axis", [0, 1, -1])
def test_several_reduction_axes(how, which, factor_axis):
    A = te.placeholder((3, 6, 21), name="A")
    k1, k2 = te.reduce_axis(6, "k1"), te.reduce_axis(21, "k2")
    B = te.compute((3,), lambda i: te.sum(A[i, k1, k2] * 2.0, axis=[k1, k2]), name="B")
    s = te.create_schedule(B.op)
    k2o, k2i = s[B].split(k2, factor=4)
    axis = {"k1": k1, "k2.inner": k2i, "k2.outer": k2o}[which]
    BF = s.rfactor(B, axis, factor_axis=factor_axis)
    extent = {"k1": 6, "k2.inner": 4, "k2.outer": 6}[which]
    assert BF.shape == ((extent, 3) if factor_axis == 0 else (3, extent))
    # the other reduction loops, in the order they had, are the partial results' reduction
    others = [v.name for v in s[BF].op.reduce_axis]
    assert others == [v for v in ("k1", "k2.outer", "k2.inner") if v != which]
    a = data((3, 6, 21), "float32")
    (got,) = run(s, [A, B], [a], how)
    compare(got, (a * 2).sum(axis=(1, 2)), exact=False)


@pytest.mark.parametrize("how", HOWS)
def test_fused_reduction_axes_factored_completely(how):
    A = te.placeholder((4, 3, 5), name="A")
    k1, k2 = te.reduce_axis(3, "k1"), te.reduce_axis(5, "k2")
    B = te.compute((4,), lambda i: te.max(A[i, k1, k2], axis=[k1, k2]), name="B")
    s = te.create_schedule(B.op)
    fused = s[B].fuse(k1, k2)
    BF = s.rfactor(B, fused)
    assert BF.shape == (15, 4) and not s[BF].op.reduce_axis  # nothing left to reduce
    a = data((4, 3, 5), "float32")
    (got,) = run(s, [A, B], [a], how)
    np.testing.assert_array_equal(got, a.max(axis=(1, 2)))


@pytest.mark.parametrize("how", HOWS)
def test_where_condition_init_and_a_reader(how):
    n, m = 5, 30
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis(m, "k")
    B = te.compute(
        (n,),
        lambda i: te.sum(A[i, k], axis=k, where=te.not_equal(k % 3, i % 3), init=10.0),
        name="B",
    )
    C = te.compute((n,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    _, ki = s[B].split(k, factor=7)
    s.rfactor(B, ki)
    assert s[C].op.input_tensors[0].op is s[B].op  # C reads the rewritten B
    a = data((n, m), "float32")
    (got,) = run(s, [A, C], [a], how)
    mask = (np.arange(m)[None, :] % 3) != (np.arange(n)[:, None] % 3)
    compare(got, (10 + np.where(mask, a, 0).sum(axis=1)) * 2, exact=False)


@pytest.mark.parametrize("how", ["interpreter", "llvm"])
def test_a_factored_stage_factored_again_and_its_data_loops_kept(how):
    A, B, k = row_reduction(te.sum, 12, 40)
    s = te.create_schedule(B.op)
    io, ii = s[B].split(s[B].op.axis[0], factor=4)
    s[B].parallel(io)
    ko, ki = s[B].split(k, factor=8)
    BF = s.rfactor(B, ko)
    # the data-parallel loops and their kinds are kept; the reduction is over ko.v now
    assert [v.name for v in s[B].leaf_iter_vars] == ["i.outer", "i.inner", "k.outer.v"]
    assert s[B].loop_kinds == {io: ForKind.PARALLEL}
    BF2 = s.rfactor(B, s[B].op.reduce_axis[0])
    assert BF2.shape == (5, 12) and s[BF2].op.input_tensors[0].op is BF.op
    a = data((12, 40), "float32")
    (got,) = run(s, [A, B], [a], how)
    compare(got, a.sum(axis=1), exact=False)


@pytest.mark.parametrize("how", HOWS)
def test_partial_results_in_parallel(how):
    # a long reduction of few rows: the partial results of 8 blocks run on several threads
    n, m = 3, 4000
    A, B, k = row_reduction(te.max, n, m)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, nparts=8)
    BF = s.rfactor(B, ko)  # B.rf[ko, i]: each block's maximum
    block, i, inner = s[BF].leaf_iter_vars
    s[BF].parallel(block)
    inner_o, inner_i = s[BF].split(inner, factor=4)
    s[BF].unroll(inner_i)
    func = loom.lower(s, [A, B], name="f")["f"]
    kinds = []
    post_order_visit(func.body, lambda n: kinds.append(n.kind) if isinstance(n, For) else 0)
    assert ForKind.PARALLEL in kinds  # (the unrolled loop is gone: lowering unrolled it)
    a = data((n, m), "float32")
    (got,) = run(s, [A, B], [a], how)
    np.testing.assert_array_equal(got, a.max(axis=1))


# -- the loops ------------------------------------------------------------------------------------


def test_lowered_text():
    A, B, k = row_reduction(te.sum, 8, 100)
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=16)
    BF = s.rfactor(B, ki)
    text = str(loom.lower(s, [A, B], name="f"))
    assert "allocate(B.rf: Pointer(global float32), float32, [128])" in text
    # the partial results: a guard for the split that does not divide, the reduction over ko
    assert "for (k.outer: int32, 0, 7)" in text
    assert "if (@likely((((k.outer * 16) + k.inner) < 100)))" in text
    assert "A[(((i * 100) + (k.outer * 16)) + k.inner)]" in text
    # the combination over the new axis
    assert "for (k.inner.v: int32, 0, 16)" in text
    assert "B[i_1] = (B[i_1] + B.rf[((k.inner.v * 8) + i_1)])" in text
    assert [v.name for v in s[BF].leaf_iter_vars] == ["k.inner", "i", "k.outer"]


@pytest.mark.parametrize("m", [256, 250])
def test_the_partial_results_are_vector_accumulators(m):
    A, B, k = row_reduction(te.sum, 8, m)
    s = te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=16)
    BF = s.rfactor(B, ki, factor_axis=1)
    s[BF].compute_at(s[B], s[B].op.axis[0])
    i, fki, fko = s[BF].leaf_iter_vars
    s[BF].reorder(i, fko, fki)
    s[BF].vectorize(fki)
    lowered = loom.lower(loom.lower(s, [A, B], name="f"), target="llvm")
    stores = []
    post_order_visit(
        lowered["f"].body,
        lambda n: stores.append(n) if isinstance(n, BufferStore) and n.buffer.name == "B.rf" else 0,
    )
    # the identity and each update: 16-lane stores of consecutive elements
    assert stores and all(st.value.dtype.lanes == 16 for st in stores)
    assert all(isinstance(st.indices[0], Ramp) for st in stores)
    # a row the vector does not divide: the guard fails in the last iteration only, which
    # the vectorizer peels; the others are whole vectors, unmasked
    masked = [st for st in stores if st.predicate is not None]
    assert len(masked) == (m % 16 != 0)
    loops = []
    post_order_visit(lowered["f"].body, lambda n: loops.append(n) if isinstance(n, For) else 0)
    assert ForKind.VECTORIZED not in [f.kind for f in loops]  # all turned into vector code


# -- errors ---------------------------------------------------------------------------------------


def test_errors_name_the_argument():
    A, B, k = row_reduction(te.sum, 4, 32)
    C = te.compute((4,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    ko, ki = s[B].split(k, factor=8)
    with pytest.raises(ScheduleError, match=r"stage B: rfactor: axis i is not a reduction axis"):
        s.rfactor(B, s[B].op.axis[0])
    with pytest.raises(ScheduleError, match=r"rfactor: axis k was already split or fused"):
        s.rfactor(B, k)
    other = te.reduce_axis(4, "other")
    with pytest.raises(ScheduleError, match=r"axis other is not an axis of this stage"):
        s.rfactor(B, other)
    with pytest.raises(ScheduleError, match=r"rfactor: tensor C is not computed by a reduction"):
        s.rfactor(C, ki)
    with pytest.raises(ScheduleError, match=r"placeholder"):
        s.rfactor(A, ki)
    D = te.compute((4,), lambda i: A[i, 0], name="D")
    with pytest.raises(LoomError, match=r"rfactor: tensor D is not a stage of this schedule"):
        s.rfactor(D, ki)
    with pytest.raises(TypeError, match=r"rfactor: tensor must be a te.Tensor"):
        s.rfactor(s[B], ki)
    with pytest.raises(TypeError, match=r"rfactor: axis must be an IterVar"):
        s.rfactor(B, 0)
    with pytest.raises(ScheduleError, match=r"factor_axis 3 is out of range"):
        s.rfactor(B, ki, factor_axis=3)
    with pytest.raises(TypeError, match=r"factor_axis must be an int"):
        s.rfactor(B, ki, factor_axis=0.0)
    BF = s.rfactor(B, ki)
    for axis in (ki, ko):
        with pytest.raises(ScheduleError, match=rf"axis {axis.name} was already factored out"):
            s.rfactor(B, axis)
    with pytest.raises(ScheduleError, match=r"parallel: axis k.outer is a reduction axis"):
        s[BF].parallel(s[BF].op.reduce_axis[0])


def test_a_stage_computed_at_a_reduction_loop_is_refused():
    A, B, k = row_reduction(te.sum, 4, 32)
    T = te.compute((4, 32), lambda i, j: A[i, j] * 2.0, name="T")
    k2 = te.reduce_axis(32, "k2")
    B = te.compute((4,), lambda i: te.sum(T[i, k2], axis=k2), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k2, factor=8)
    s[T].compute_at(s[B], ko)
    with pytest.raises(ScheduleError, match=r"stage T is computed at reduction loop k2.outer"):
        s.rfactor(B, ki)
