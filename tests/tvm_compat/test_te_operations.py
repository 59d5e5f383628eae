"""TVM's other TE operation kinds through `import loom as tvm` (docs/tvm-compat.md): `te.scan`
(recurrences over a time axis, one or several states), `te.extern` (a hand-written statement
as a stage), computes with several outputs and tuple reducers (argmax), and argument lists
holding two tensors of the same name (renamed `placeholder`, `placeholder_1`, as TVM does)."""

import subprocess
import sys

import numpy as np
import pytest

import loom as tvm
import loom.tir  # tvm.tir: the ir_builder, decl_buffer
from loom import te
from loom.errors import LoomError, LoweringError, ScheduleError
from loom.ir import stmt as irs

TARGETS = ["llvm", "c"]
HOW = ["interpreter", *TARGETS]


def run(how, s, args, *arrays):
    if how == "interpreter":
        tvm.ir.interpret(tvm.lower(s, args, name="f"), *arrays)
    else:
        tvm.build(s, args, how, name="f")(*arrays)


def cumsum_scan(m, n):
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    s_scan = tvm.te.scan(s_init, s_update, s_state, inputs=[X])
    return X, s_init, s_update, s_scan


# -- te.scan -------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", HOW)
def test_scan_with_the_default_schedule_is_a_cumulative_sum(how):
    m, n = 10, 24
    X, _, _, s_scan = cumsum_scan(m, n)
    s = te.create_schedule(s_scan.op)
    a = np.random.uniform(size=(m, n)).astype("float32")
    b = np.zeros((m, n), "float32")
    run(how, s, [X, s_scan], a, b)
    np.testing.assert_allclose(b, np.cumsum(a, axis=0), rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_scan_as_the_tutorial_schedules_it_splits_init_and_update(target):
    m, n = 10, 1024
    X, s_init, s_update, s_scan = cumsum_scan(m, n)
    s = te.create_schedule(s_scan.op)
    xo, xi = s[s_init].split(s_init.op.axis[1], factor=256)
    xo, xi = s[s_update].split(s_update.op.axis[1], factor=256)
    s[s_update].vectorize(xi)
    s[s_update].parallel(xo)
    fscan = tvm.build(s, [X, s_scan], target, name="myscan")
    dev = tvm.cpu(0)
    a_np = np.random.uniform(size=(m, n)).astype(s_scan.dtype)
    a = tvm.nd.array(a_np, dev)
    b = tvm.nd.array(np.zeros((m, n), dtype=s_scan.dtype), dev)
    fscan(a, b)
    np.testing.assert_allclose(b.numpy(), np.cumsum(a_np, axis=0), rtol=1e-5)


def test_scan_lowers_to_a_time_loop_writing_the_scan_buffer():
    m, n = te.var("m"), te.var("n")
    X, _, s_update, s_scan = cumsum_scan(m, n)
    s = te.create_schedule(s_scan.op)
    s[s_update].split(s_update.op.axis[1], factor=4)
    text = str(tvm.lower(s, [X, s_scan]))
    assert "for (scan.idx: int32, 0, (m - 1))" in text  # the time loop after init's row
    assert "allocate" not in text  # init and update write the scan's own buffer


def two_stage_cell(m, n):
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s1 = te.compute((m, n), lambda t, i: s_state[t - 1, i] * 2, name="s1")
    s2 = te.compute((m, n), lambda t, i: s1[t, i] + X[t, i], name="s2")
    s_scan = tvm.te.scan(s_init, s2, s_state, inputs=[X])
    return X, s1, s2, s_scan


def two_stage_expected(x):
    expected = x.copy()
    for t in range(1, x.shape[0]):
        expected[t] = expected[t - 1] * 2 + x[t]
    return expected


@pytest.mark.parametrize("how", HOW)
def test_a_scan_cell_of_two_stages_with_one_computed_at_the_other(how):
    X, s1, s2, s_scan = two_stage_cell(6, 40)
    s = te.create_schedule(s_scan.op)
    xo, xi = s[s2].split(s2.op.axis[1], factor=32)
    s[s1].compute_at(s[s2], xo)
    x = np.random.uniform(size=(6, 40)).astype("float32")
    out = np.zeros((6, 40), "float32")
    run(how, s, [X, s_scan], x, out)
    np.testing.assert_allclose(out, two_stage_expected(x), rtol=1e-5)


@pytest.mark.parametrize("how", HOW)
def test_a_stage_computed_at_the_scan_time_axis(how):
    X, s1, s2, s_scan = two_stage_cell(5, 16)
    s = te.create_schedule(s_scan.op)
    s[s1].compute_at(s[s_scan], s_scan.op.scan_axis)
    xo, xi = s[s2].split(s2.op.axis[1], factor=4)
    s[s2].parallel(xo)
    text = str(tvm.lower(s, [X, s_scan]))
    # s1 holds one time step (a row of 16) inside the time loop
    assert "allocate(s1: Pointer(global float32), float32, [16])" in text
    x = np.random.uniform(size=(5, 16)).astype("float32")
    out = np.zeros((5, 16), "float32")
    run(how, s, [X, s_scan], x, out)
    np.testing.assert_allclose(out, two_stage_expected(x), rtol=1e-5)


@pytest.mark.parametrize("how", HOW)
def test_scan_with_two_states(how):
    m, n, k = 5, 8, 3
    X = te.placeholder((m, n), name="X")
    s_state1 = te.placeholder((m, n))
    s_state2 = te.placeholder((m, k))
    s_init1 = te.compute((1, n), lambda _, i: X[0, i])
    s_init2 = te.compute((1, k), lambda _, i: 0.0)
    s_update1 = te.compute((m, n), lambda t, i: s_state1[t - 1, i] + X[t, i])
    s_update2 = te.compute((m, k), lambda t, i: s_state2[t - 1, i] + s_state1[t - 1, 0])
    s_scan1, s_scan2 = tvm.te.scan(
        [s_init1, s_init2], [s_update1, s_update2], [s_state1, s_state2], inputs=[X]
    )
    assert s_scan1.op is s_scan2.op and s_scan1.op.output(1) == s_scan2
    assert (s_scan1.shape, s_scan2.shape) == ((m, n), (m, k))
    s = te.create_schedule(s_scan1.op)
    x = np.random.uniform(size=(m, n)).astype("float32")
    first = np.cumsum(x, axis=0)
    second = np.zeros((m, k), "float32")
    for t in range(1, m):
        second[t] = second[t - 1] + first[t - 1, 0]
    out1, out2 = np.zeros((m, n), "float32"), np.zeros((m, k), "float32")
    run(how, s, [X, s_scan1, s_scan2], x, out1, out2)
    np.testing.assert_allclose(out1, first, rtol=1e-5)
    np.testing.assert_allclose(out2, second, rtol=1e-5)


@pytest.mark.parametrize("how", HOW)
def test_scan_with_two_initial_rows_reads_two_steps_back(how):
    m, n = 10, 4
    state = te.placeholder((m, n), name="state", dtype="int32")
    init = te.compute((2, n), lambda t, i: t + i, name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + state[t - 2, i], name="update")
    fib = te.scan(init, update, state, name="fib")
    s = te.create_schedule(fib.op)
    expected = np.zeros((m, n), "int32")
    expected[0], expected[1] = np.arange(n), np.arange(n) + 1
    for t in range(2, m):
        expected[t] = expected[t - 1] + expected[t - 2]
    out = np.zeros((m, n), "int32")
    run(how, s, [fib], out)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("target", TARGETS)
def test_a_compute_reading_the_scan_result(target):
    m, n = 6, 8
    X, _, _, s_scan = cumsum_scan(m, n)
    Y = te.compute((m, n), lambda i, j: s_scan[i, j] * 2, name="Y")
    s = te.create_schedule(Y.op)
    x = np.random.uniform(size=(m, n)).astype("float32")
    y = np.zeros((m, n), "float32")
    tvm.build(s, [X, Y], target)(x, y)
    np.testing.assert_allclose(y, np.cumsum(x, axis=0) * 2, rtol=1e-5)


def test_scan_errors_name_what_is_wrong():
    m, n = 6, 8
    X = te.placeholder((m, n), name="X")
    state = te.placeholder((m, n), name="state")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    with pytest.raises(ValueError, match="same number of tensors"):
        te.scan([init], [update, update], [state])
    with pytest.raises(TypeError, match=r"state_placeholder must be a te\.placeholder"):
        te.scan(init, update, update)
    narrow = te.compute((m, 4), lambda t, i: X[t, i], name="narrow")
    with pytest.raises(ValueError, match="dimension 1 of update narrow is 4"):
        te.scan(init, narrow, state)
    ints = te.compute((1, n), lambda _, i: te.const(0, "int32"), name="ints")
    with pytest.raises(TypeError, match="init ints has dtype int32"):
        te.scan(ints, update, state)
    whole = te.compute((m, n), lambda t, i: X[t, i], name="whole")
    with pytest.raises(ValueError, match="nothing is left to scan"):
        te.scan(whole, update, state)

    s_scan = te.scan(init, update, state)
    s = te.create_schedule(s_scan.op)
    with pytest.raises(LoweringError, match="state placeholder of scan scan"):
        tvm.lower(s, [X, state, s_scan])
    with pytest.raises(ScheduleError, match="stage scan"):
        s[s_scan].split(s_scan.op.scan_axis, factor=2)  # the time axis stays one loop
    with pytest.raises(LoomError, match=r"has 1 output, asked for output 1"):
        s_scan.op.output(1)

    X, s1, s2, s_scan = two_stage_cell(m, n)
    Y = te.compute((m, n), lambda i, j: s_scan[i, j] + s1[i, j], name="Y")
    s = te.create_schedule(Y.op)
    with pytest.raises(ScheduleError, match="computed inside scan but also read by Y"):
        tvm.lower(s, [X, Y])

    Y = te.compute((m, n), lambda i, j: s_scan[i, j] + s2[i, j], name="Y")
    s = te.create_schedule(Y.op)
    with pytest.raises(ScheduleError, match=r"s2 is the update of scan scan, .* but Y reads it"):
        tvm.lower(s, [X, Y])


# -- te.extern -----------------------------------------------------------------------------------
@pytest.mark.parametrize("how", HOW)
def test_extern_written_with_the_ir_builder(how):
    n = 64
    A = te.placeholder((n,), name="A")

    def extern_generator(ins, outs):
        ib = tvm.tir.ir_builder.create()
        a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="i") as i:
            c[i] = a[i] + 1.0
        return ib.get()

    C = te.extern(A.shape, [A], extern_generator, name="C")
    D = te.compute(C.shape, lambda i: C[i] * 2, name="D")
    s = te.create_schedule(D.op)
    a = np.random.uniform(size=n).astype("float32")
    d = np.zeros(n, "float32")
    run(how, s, [A, D], a, d)
    np.testing.assert_allclose(d, (a + 1) * 2, rtol=1e-6)


@pytest.mark.parametrize("how", HOW)
def test_extern_with_two_outputs_built_from_loop_ir(how):
    n = 16
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")

    def body(ins, outs):
        i = te.var("i")
        a, b = ins[0][i], ins[1][i]
        return irs.For(
            i,
            te.const(0),
            te.const(n),
            irs.ForKind.SERIAL,
            irs.seq(outs[0].store(a + b, [i]), outs[1].store(a * b, [i])),
        )

    S, P = te.extern([(n,), (n,)], [A, B], body, name="sp")
    assert S.op is P.op and S.op.num_outputs == 2 and S.op.input_tensors == [A, B]
    s = te.create_schedule([S.op])
    a, b = np.random.rand(n).astype("float32"), np.random.rand(n).astype("float32")
    sp, pp = np.zeros(n, "float32"), np.zeros(n, "float32")
    run(how, s, [A, B, S, P], a, b, sp, pp)
    np.testing.assert_allclose(sp, a + b, rtol=1e-6)
    np.testing.assert_allclose(pp, a * b, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_extern_reads_a_computed_tensor_and_takes_given_buffers(target):
    n = 32
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 3, name="B")
    Ab = tvm.tir.decl_buffer((n,), "float32", name="Ab")
    Cb = tvm.tir.decl_buffer((n,), "float32", name="Cb")

    def body(ins, outs):
        ib = tvm.tir.ir_builder.create()
        src, dst = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="i") as i:
            dst[i] = src[n - 1 - i]
        return ib.get()

    C = te.extern((n,), [B], body, name="C", in_buffers=[Ab], out_buffers=[Cb])
    s = te.create_schedule(C.op)
    a, c = np.random.rand(n).astype("float32"), np.zeros(n, "float32")
    tvm.build(s, [A, C], target)(a, c)
    np.testing.assert_allclose(c, (a + 3)[::-1], rtol=1e-6)


def test_extern_errors_name_what_is_wrong():
    n = 8
    A = te.placeholder((n,), name="A")
    with pytest.raises(TypeError, match="fcompute must return a statement"):
        te.extern((n,), [A], lambda ins, outs: "no", name="E")
    with pytest.raises(ValueError, match="cannot infer the output dtype"):
        te.extern((n,), [], lambda ins, outs: irs.NOP, name="E")
    with pytest.raises(ValueError, match="buffer W of in_buffers has shape"):
        te.extern(
            (n,),
            [A],
            lambda ins, outs: irs.NOP,
            name="E",
            in_buffers=[tvm.tir.decl_buffer((4,), "float32", name="W")],
        )
    with pytest.raises(TypeError, match="inputs must be tensors"):
        te.extern((n,), [3], lambda ins, outs: irs.NOP, name="E")

    E = te.extern((n,), [A], lambda ins, outs: outs[0].store(ins[0][0], [0]), name="E")
    s = te.create_schedule(E.op)
    with pytest.raises(LoweringError, match="placeholder A is read by E"):
        tvm.lower(s, [E])
    with pytest.raises(ScheduleError, match="stage E"):
        s[E].compute_inline()

    B = te.compute((n,), lambda i: A[i] + 1, name="B")
    F = te.extern((n,), [B], lambda ins, outs: outs[0].store(ins[0][0], [0]), name="F")
    G = te.compute((n,), lambda i: F[i] + B[i], name="G")
    s = te.create_schedule(G.op)
    s[B].compute_at(s[G], G.op.axis[0])
    with pytest.raises((ScheduleError, LoweringError), match="B"):
        tvm.lower(s, [A, G])


# -- several outputs and tuple reducers ---------------------------------------------------------
def argmax_reducer():
    def fcombine(x, y):
        lhs = te.if_then_else((x[1] >= y[1]), x[0], y[0])
        rhs = te.if_then_else((x[1] >= y[1]), x[1], y[1])
        return lhs, rhs

    def fidentity(t0, t1):
        return tvm.te.const(-1, t0), tvm.te.min_value(t1)

    return te.comm_reducer(fcombine, fidentity, name="argmax")


@pytest.mark.parametrize("how", HOW)
def test_argmax_with_a_tuple_reducer_gives_two_outputs(how):
    argmax = argmax_reducer()
    m, n = 12, 16
    idx = te.placeholder((m, n), name="idx", dtype="int32")
    val = te.placeholder((m, n), name="val", dtype="float32")
    k = te.reduce_axis((0, n), "k")
    T0, T1 = te.compute((m,), lambda i: argmax((idx[i, k], val[i, k]), axis=k), name="T")
    assert T0.op is T1.op and T0.op.output(1) == T1 and T0 != T1
    assert (T0.dtype, T1.dtype, T0.name, T1.name) == ("int32", "float32", "T.v0", "T.v1")
    s = te.create_schedule(T0.op)
    np_idx = np.repeat(np.arange(n, dtype="int32").reshape(1, n), m, axis=0)
    np_val = np.random.uniform(size=(m, n)).astype("float32")
    res0, res1 = np.zeros(m, "int32"), np.zeros(m, "float32")
    run(how, s, [idx, val, T0, T1], np_idx, np_val, res0, res1)
    np.testing.assert_array_equal(res0, np.argmax(np_val, axis=1))
    np.testing.assert_array_equal(res1, np.max(np_val, axis=1))


@pytest.mark.parametrize("target", TARGETS)
def test_argmax_scheduled_split_and_parallel(target):
    argmax = argmax_reducer()
    m, n = 16, 50
    idx = te.placeholder((m, n), name="idx", dtype="int32")
    val = te.placeholder((m, n), name="val", dtype="float32")
    k = te.reduce_axis((0, n), "k")
    T0, T1 = te.compute(
        (m,), lambda i: argmax((idx[i, k], val[i, k]), axis=k, where=k % 2 == 0), name="T"
    )
    s = te.create_schedule(T0.op)
    ko, ki = s[T0].split(k, factor=8)
    io, ii = s[T0].split(T0.op.axis[0], factor=4)
    s[T0].parallel(io)
    s[T0].reorder(io, ko, ii, ki)
    np_idx = np.repeat(np.arange(n, dtype="int32").reshape(1, n), m, axis=0)
    np_val = np.random.uniform(size=(m, n)).astype("float32")
    res0, res1 = np.zeros(m, "int32"), np.zeros(m, "float32")
    tvm.build(s, [idx, val, T0, T1], target)(np_idx, np_val, res0, res1)
    even = np_val[:, ::2]
    np.testing.assert_array_equal(res0, np.argmax(even, axis=1) * 2)
    np.testing.assert_array_equal(res1, np.max(even, axis=1))


@pytest.mark.parametrize("how", HOW)
def test_compute_with_two_outputs_computed_at_its_reader(how):
    m, n = 12, 16
    A = te.placeholder((m, n), name="A")
    B, C = te.compute((m, n), lambda i, j: (A[i, j] + 1, A[i, j] * 2), name="BC")
    D = te.compute((m, n), lambda i, j: B[i, j] - C[i, j], name="D")
    s = te.create_schedule(D.op)
    xo, xi = s[D].split(D.op.axis[1], factor=4)
    s[B].compute_at(s[D], xo)  # the stage of B and C: one stage, both outputs
    assert s[B] is s[C]
    a, d = np.random.rand(m, n).astype("float32"), np.zeros((m, n), "float32")
    run(how, s, [A, D], a, d)
    np.testing.assert_allclose(d, (a + 1) - a * 2, rtol=1e-6)


@pytest.mark.parametrize("how", HOW)
def test_compute_with_two_outputs_both_arguments_and_inlined(how):
    n = 16
    A = te.placeholder((n,), name="A")
    B, C = te.compute((n,), lambda i: (A[i] + 1, A[i] * 2), name="BC")
    s = te.create_schedule(B.op)
    b, c = np.zeros(n, "float32"), np.zeros(n, "float32")
    a = np.random.rand(n).astype("float32")
    run(how, s, [A, B, C], a, b, c)
    np.testing.assert_allclose(b, a + 1, rtol=1e-6)
    np.testing.assert_allclose(c, a * 2, rtol=1e-6)

    D = te.compute((n,), lambda i: C[i] - B[i], name="D")
    s = te.create_schedule(D.op)
    s[B].compute_inline()
    d = np.zeros(n, "float32")
    run(how, s, [A, D], a, d)
    np.testing.assert_allclose(d, a * 2 - (a + 1), rtol=1e-6)


def test_cache_read_into_a_compute_with_two_outputs_keeps_both():
    n = 16
    A = te.placeholder((n,), name="A")
    B, C = te.compute((n,), lambda i: (A[i] + 1, A[i] * 2), name="BC")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "global", [B.op])
    assert s[B].op.num_outputs == 2 and AA.op in [t.op for t in s[B].op.input_tensors]
    a, b, c = np.random.rand(n).astype("float32"), np.zeros(n, "float32"), np.zeros(n, "float32")
    tvm.build(s, [A, B, C], "llvm")(a, b, c)
    np.testing.assert_allclose(b, a + 1, rtol=1e-6)
    np.testing.assert_allclose(c, a * 2, rtol=1e-6)


def test_several_outputs_errors_name_what_is_wrong():
    argmax = argmax_reducer()
    n = 8
    A = te.placeholder((n, n), name="A")
    k = te.reduce_axis((0, n), "k")
    with pytest.raises(LoomError, match="only with one tuple reducer"):
        te.compute((n,), lambda i: (te.sum(A[i, k], axis=k), A[i, 0]), name="X")
    with pytest.raises(LoomError, match="a reduction must be the whole rule"):
        te.compute((n,), lambda i: argmax((k, A[i, k]), axis=k)[0] + 1, name="X")
    bad = te.comm_reducer(lambda x, y: x[0], lambda t0, t1: (0, 0), name="bad")
    with pytest.raises(ValueError, match="fcombine must return a tuple of 2 values"):
        T0, T1 = te.compute((n,), lambda i: bad((k, A[i, k]), axis=k), name="T")
        tvm.lower(te.create_schedule(T0.op), [A, T0, T1])
    T0, T1 = te.compute((n,), lambda i: argmax((k, A[i, k]), axis=k), name="T")
    with pytest.raises(LoomError, match="operation T has 2 outputs, asked for output 2"):
        T0.op.output(2)
    U = te.compute((n,), lambda i: T0[i] + 1, name="U")
    s = te.create_schedule(U.op)
    s[T0].compute_inline()
    with pytest.raises(ScheduleError, match="a reduction cannot be inlined"):
        tvm.lower(s, [A, U])


# -- argument names ------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_two_placeholders_of_the_default_name_are_renamed(target):
    n = 8
    A = te.placeholder((n,))
    B = te.placeholder((n,))
    C = te.placeholder((n,))
    D = te.compute((n,), lambda i: A[i] - B[i] * C[i])
    s = te.create_schedule(D.op)
    params = tvm.lower(s, [A, B, C, D]).functions[0].params
    assert [p.name for p in params] == ["placeholder", "placeholder_1", "placeholder_2", "compute"]
    f = tvm.build(s, [A, B, C, D], target)
    a, b, c = (np.random.rand(n).astype("float32") for _ in range(3))
    d = np.zeros(n, "float32")
    f(a, b, c, d)
    np.testing.assert_allclose(d, a - b * c, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="argument placeholder_1 must have shape"):
        f(a, np.zeros(3, "float32"), c, d)


def test_a_tensor_named_like_a_scalar_argument_is_the_one_renamed():
    n = te.var("n")
    A = te.placeholder((4,), name="n")
    B = te.compute((4,), lambda i: A[i] + n, name="B")
    s = te.create_schedule(B.op)
    params = tvm.lower(s, [A, n, B]).functions[0].params
    assert [p.name for p in params] == ["n_1", "n", "B"]
    with pytest.raises(LoweringError, match="two scalar arguments are named 'n'"):
        tvm.lower(s, [A, n, te.var("n"), B])


# -- call_packed: compiled code calling a registered Python function -----------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_extern_calling_a_registered_python_function_with_arrays(target):
    nn = 1024
    A = te.placeholder((nn,), name="A")

    def extern_generator(ins, outs):
        return tvm.tir.call_packed("my_extern_array_func1", ins[0], outs[0])

    C = te.extern(A.shape, [A], extern_generator, name="C")
    s = te.create_schedule(C.op)

    @tvm.register_func
    def my_extern_array_func1(aa, bb):
        aa.copyto(bb)

    f = tvm.build(s, [A, C], target)
    dev = tvm.cpu(0)
    a = tvm.nd.array(np.random.uniform(size=nn).astype(A.dtype), dev)
    c = tvm.nd.array(np.zeros(nn, dtype=C.dtype), dev)
    f(a, c)
    np.testing.assert_allclose(c.numpy(), a.numpy())


@pytest.mark.parametrize("target", TARGETS)
def test_a_packed_call_sees_shapes_and_writes_the_kernel_memory(target):
    A = te.placeholder((3, 4), name="A", dtype="int32")
    seen = []

    @tvm.register_func("test.packed.rowsum")
    def rowsum(a, out):
        seen.append((a.shape, a.dtype, out.shape, out.dtype))
        out.copyfrom(a.numpy().sum(axis=1).astype("int64"))

    R = te.extern(
        (3,),
        [A],
        lambda ins, outs: tvm.tir.call_packed("test.packed.rowsum", *ins, *outs),
        dtype="int64",
    )
    S = te.compute((3,), lambda i: R[i] * 10, name="S")
    s = te.create_schedule(S.op)
    a = np.arange(12, dtype="int32").reshape(3, 4)
    out = np.zeros(3, "int64")
    tvm.build(s, [A, S], target)(a, out)
    np.testing.assert_array_equal(out, a.sum(axis=1) * 10)
    assert seen == [((3, 4), "int32", (3,), "int64")]


@pytest.mark.parametrize("target", TARGETS)
def test_a_packed_function_that_raises_fails_the_kernel_with_its_error(target):
    A = te.placeholder((4,), name="A")

    @tvm.register_func("test.packed.boom")
    def boom(a, c):
        raise ValueError("bad value")

    C = te.extern(
        A.shape, [A], lambda ins, outs: tvm.tir.call_packed("test.packed.boom", *ins, *outs)
    )
    f = tvm.build(te.create_schedule(C.op), [A, C], target)
    with pytest.raises(LoomError, match=r"packed function 'test\.packed\.boom' raised ValueError"):
        f(np.zeros(4, "float32"), np.zeros(4, "float32"))
    D = te.extern(
        A.shape, [A], lambda ins, outs: tvm.tir.call_packed("test.packed.none", *ins, *outs)
    )
    f = tvm.build(te.create_schedule(D.op), [A, D], target)
    with pytest.raises(LoomError, match=r"no function is registered as 'test\.packed\.none'"):
        f(np.zeros(4, "float32"), np.zeros(4, "float32"))


def test_call_packed_errors_name_what_is_wrong():
    A = te.placeholder((4,), name="A")
    with pytest.raises(TypeError, match="argument 1 must be a buffer"):
        te.extern(A.shape, [A], lambda ins, outs: tvm.tir.call_packed("f", ins[0], 3))
    with pytest.raises(ValueError, match="at most 8"):
        te.extern(A.shape, [A], lambda ins, outs: tvm.tir.call_packed("f", *(ins * 9)))
    with pytest.raises(TypeError, match="non-empty str"):
        te.extern(A.shape, [A], lambda ins, outs: tvm.tir.call_packed("", *ins))


def test_extern_buffers_must_be_whole_compact_tensors():
    A = te.placeholder((4, 4), name="A")
    offset = tvm.tir.decl_buffer((4, 4), "float32", name="Ao", elem_offset=2)
    strided = tvm.tir.decl_buffer((4, 4), "float32", name="As", strides=[8, 1])
    for buf in (offset, strided):
        with pytest.raises(ValueError, match=f"buffer {buf.name} of in_buffers declares"):
            te.extern(A.shape, [A], lambda ins, outs: irs.NOP, in_buffers=[buf])


def test_an_exported_module_calling_a_packed_function_loads_in_a_new_process(tmp_path):
    A = te.placeholder((4,), name="A")
    C = te.extern(
        A.shape, [A], lambda ins, outs: tvm.tir.call_packed("test.packed.copy", *ins, *outs)
    )
    path = tmp_path / "packed.so"
    tvm.build(te.create_schedule(C.op), [A, C], "llvm").export_library(str(path))
    script = f"""
import subprocess
import sys

import numpy as np
import loom as tvm
import loom.runtime
import loom.runtime.packed_callback  # declares the library the module calls

@tvm.register_func("test.packed.copy")
def copy(a, c):
    c.copyfrom(a.numpy() + 1)

m = loom.runtime.load_module({str(path)!r})
c = np.zeros(4, "float32")
m(np.arange(4, dtype="float32"), c)
print(c.tolist())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1.0, 2.0, 3.0, 4.0]"


def test_te_const_takes_the_dtype_by_keyword_as_tvm():
    product = te.comm_reducer(lambda x, y: x * y, lambda t: te.const(1, dtype=t), name="prod")
    A = te.placeholder((3, 4), name="A", dtype="int32")
    k = te.reduce_axis((0, 4), "k")
    P = te.compute((3,), lambda i: product(A[i, k], axis=k), name="P")
    a, p = np.arange(1, 13, dtype="int32").reshape(3, 4), np.zeros(3, "int32")
    run("interpreter", te.create_schedule(P.op), [A, P], a, p)
    np.testing.assert_array_equal(p, a.prod(axis=1))


# -- review regressions ---------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_cache_read_into_a_two_output_stage_keeps_reads_of_its_second_output(target):
    m, n = 4, 5
    V = te.placeholder((m, n), name="V")
    B, C = te.compute((m, n), lambda i, j: (V[i, j] + 1, V[i, j] * 10), name="BC")
    D = te.compute((m, n), lambda i, j: C[i, j] * 2 + B[i, j], name="D")
    s = te.create_schedule(D.op)
    s.cache_read(V, "local", [B.op])
    v, d = np.random.rand(m, n).astype("float32"), np.zeros((m, n), "float32")
    tvm.build(s, [V, D], target)(v, d)
    np.testing.assert_allclose(d, v * 10 * 2 + v + 1, rtol=1e-6)
    with pytest.raises(
        ScheduleError, match=r"cache_read of an output of an operation with several"
    ):
        te.create_schedule(D.op).cache_read(C, "local", [D])
    with pytest.raises(ScheduleError, match=r"cache_write of an operation with several outputs"):
        te.create_schedule(D.op).cache_write(C, "local")


@pytest.mark.parametrize("target", TARGETS)
def test_a_symbolic_scan_body_stage_takes_one_row_per_time_step(target):
    m, n = te.var("m"), te.var("n")
    X, S = te.placeholder((m, n), name="X"), te.placeholder((m, n), name="S")
    init = te.compute((1, n), lambda t, i: X[0, i], name="init")
    P = te.compute((m, n), lambda t, i: S[t - 1, i] * 2, name="P")
    U = te.compute((m, n), lambda t, i: P[t, i] + X[t, i], name="U")
    r = te.scan(init, U, S, inputs=[X])
    s = te.create_schedule(r.op)
    s[U].split(U.op.axis[1], factor=4)
    assert "2147483" not in str(tvm.lower(s, [X, r]))  # no allocation sized by int32's range
    x = np.random.rand(7, 9).astype("float32")
    expected = x.copy()
    for t in range(1, 7):
        expected[t] = expected[t - 1] * 2 + x[t]
    out = np.zeros_like(x)
    tvm.build(s, [X, r], target)(x, out)
    np.testing.assert_allclose(out, expected, rtol=1e-5)


@pytest.mark.parametrize("role", ["update", "init"])
def test_inlining_a_scan_init_or_update_is_refused(role):
    X, s_init, s_update, s_scan = cumsum_scan(6, 8)
    s = te.create_schedule(s_scan.op)
    s[s_update if role == "update" else s_init].compute_inline()
    with pytest.raises(ScheduleError, match=rf"is the {role} of scan .* cannot be inlined"):
        tvm.lower(s, [X, s_scan])


def test_an_allocation_of_more_than_2_gib_has_its_byte_size_in_int64():
    n = 600_000_000
    A = te.placeholder((4,), name="A")

    def body(ins, outs):
        ib = tvm.tir.ir_builder.create()
        tmp = ib.allocate("float32", (n,), name="tmp")
        a, o = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, 4, name="i") as i:
            tmp[n - 1 - i] = a[i]
            o[i] = tmp[n - 1 - i] + 1.0
        return ib.get()

    E = te.extern((4,), [A], body, name="E")
    text = str(tvm.lower(te.create_schedule(E.op), [A, E], target="llvm"))
    assert "2400000000" in text and "-1894967296" not in text


@pytest.mark.parametrize("how", HOW)
def test_extern_bodies_reach_a_matrix_through_its_views(how):
    m, n = 4, 3
    A = te.placeholder((m, n), name="A")

    def body(ins, outs):
        ib = tvm.tir.ir_builder.create()
        flat_out = ib.buffer_ptr(outs[0])
        with ib.for_range(0, m, name="i") as i:
            row = tvm.tir.decl_buffer(
                (n,), "float32", name="row", data=ins[0].data, elem_offset=i * n
            )
            row_ptr = ib.buffer_ptr(row)
            with ib.for_range(0, n, name="j") as j:
                flat_out[i * n + j] = row_ptr[j] + 1.0  # a flat index into the 2-d output
        return ib.get()

    E = te.extern((m, n), [A], body, name="E")
    a, e = np.random.rand(m, n).astype("float32"), np.zeros((m, n), "float32")
    run(how, te.create_schedule(E.op), [A, E], a, e)
    np.testing.assert_allclose(e, a + 1, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_extern_copy_through_access_ptr(target):
    A = te.placeholder((4, 4), name="A")
    E = te.extern(
        (4, 4),
        [A],
        lambda ins, outs: tvm.tir.call_extern(
            "handle",
            "memcpy",
            outs[0].access_ptr("w"),
            ins[0].access_ptr("r"),
            tvm.tir.const(64, "uint64"),
        ),
        name="E",
    )
    a, e = np.random.rand(4, 4).astype("float32"), np.zeros((4, 4), "float32")
    tvm.build(te.create_schedule(E.op), [A, E], target)(a, e)
    np.testing.assert_array_equal(e, a)


@pytest.mark.parametrize("target", TARGETS)
def test_call_packed_of_row_views_passes_each_row(target):
    @tvm.register_func("test.row_times2", override=True)
    def row_times2(a, o):
        o.copyfrom(a.numpy() * 2)

    m, n = 4, 3
    A = te.placeholder((m, n), name="A")

    def body(ins, outs):
        ib = tvm.tir.ir_builder.create()
        with ib.for_range(0, m, name="i") as i:
            ra = tvm.tir.decl_buffer(
                (n,), "float32", name="ra", data=ins[0].data, elem_offset=i * n
            )
            ro = tvm.tir.decl_buffer(
                (n,), "float32", name="ro", data=outs[0].data, elem_offset=i * n
            )
            ib.emit(tvm.tir.call_packed("test.row_times2", ra, ro))
        return ib.get()

    E = te.extern((m, n), [A], body, name="E")
    a, o = np.random.rand(m, n).astype("float32"), np.zeros((m, n), "float32")
    tvm.build(te.create_schedule(E.op), [A, E], target)(a, o)
    np.testing.assert_allclose(o, a * 2)


@pytest.mark.parametrize("target", TARGETS)
def test_a_failing_packed_function_in_an_evaluate_node_fails_the_kernel(target):
    @tvm.register_func("test.always_fails", override=True)
    def always_fails(a, o):
        raise ValueError("should fail the kernel")

    A = te.placeholder((4,), name="A")
    E = te.extern(
        (4,),
        [A],
        lambda ins, outs: tvm.tir.SeqStmt(
            [tvm.tir.Evaluate(tvm.tir.call_packed("test.always_fails", ins[0], outs[0]))]
        ),
        name="E",
    )
    f = tvm.build(te.create_schedule(E.op), [A, E], target)
    with pytest.raises(LoomError, match=r"raised ValueError: should fail the kernel"):
        f(np.zeros(4, "float32"), np.zeros(4, "float32"))
