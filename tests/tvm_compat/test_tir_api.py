"""`tvm.tir` as TVM scripts use it, through `import loom as tvm` (docs/tvm-compat.md): buffers
declared with `tir.decl_buffer`, tensor intrinsics in TVM's form (`fcompute(ins, outs)` over
buffers bound to the tensorized region), the ir_builder, intrinsic and extern calls, and
`tvm.target.codegen`'s LLVM queries."""

import subprocess

import llvmlite.binding as llvm
import numpy as np
import pytest

import loom as tvm
from loom import abi, te

TARGETS = ["llvm", "c"]


def interpret(s, args, *arrays):
    tvm.ir.interpret(tvm.lower(s, args, name="f"), *arrays)


def run(how, s, args, *arrays):
    if how == "interpreter":
        interpret(s, args, *arrays)
    else:
        tvm.build(s, args, target=how, name="f")(*arrays)


# -- tensorize with TVM's decl_tensor_intrin ------------------------------------------------------
def intrin_gemv(m, l):
    """The tensorize tutorial's gemv: c[i] = sum_k a[k] * b[i, k], b's row stride a variable;
    the body written with the ir_builder."""
    a = te.placeholder((l,), name="a")
    b = te.placeholder((m, l), name="b")
    k = te.reduce_axis((0, l), name="k")
    c = te.compute((m,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")
    Ab = tvm.tir.decl_buffer(a.shape, a.dtype, name="A", offset_factor=1, strides=[1])
    Bb = tvm.tir.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1, strides=[te.var("s1"), 1])
    Cb = tvm.tir.decl_buffer(c.shape, c.dtype, name="C", offset_factor=1, strides=[1])

    def intrin_func(ins, outs):
        ib = tvm.tir.ir_builder.create()
        aa, bb = (ib.buffer_ptr(x) for x in ins)
        cc = ib.buffer_ptr(outs[0])
        with ib.for_range(0, m, name="ii") as i:
            cc[i] = 0.0
            with ib.for_range(0, l, name="kk") as kk:
                cc[i] = cc[i] + aa[kk] * bb[i, kk]
        return ib.get()

    return te.decl_tensor_intrin(c.op, intrin_func, binds={a: Ab, b: Bb, c: Cb})


def gemv_schedule(n, m, l, factor, intrin):
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((m, l), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=factor)
    s[C].reorder(x, yo, yi, z)
    s[C].tensorize(yi, intrin)
    return s, [A, B, C]


def gemv_data(n, m, l):
    rng = np.random.default_rng(0)
    a = rng.uniform(size=(n, l)).astype("float32")
    b = rng.uniform(size=(m, l)).astype("float32")
    return a, b, np.zeros((n, m), "float32")


@pytest.mark.parametrize("how", ["interpreter", *TARGETS])
def test_tensorize_gemv_with_an_ir_builder_body(how):
    n, m, l = 8, 32, 16
    s, args = gemv_schedule(n, m, l, 8, intrin_gemv(8, l))
    text = str(tvm.lower(s, args))
    assert "for (kk:" in text and "j.inner" not in text  # the intrinsic's loops replaced them
    a, b, c = gemv_data(n, m, l)
    run(how, s, args, a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5)


GEMV_C = """
#include <stdint.h>
int32_t gemv_update(float *cc, const float *aa, const float *bb, int32_t m, int32_t l,
                    int32_t stride) {
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < l; ++j) cc[i] += aa[j] * bb[i * stride + j];
  }
  return 0;
}
int32_t gemv_reset(float *cc, int32_t m) {
  for (int i = 0; i < m; ++i) cc[i] = 0.0f;
  return 0;
}
"""


@pytest.fixture
def gemv_library(tmp_path):
    """gemv_update and gemv_reset in a C library, declared to loom (conftest restores the
    registry after the test)."""
    source = tmp_path / "gemv.c"
    source.write_text(GEMV_C)
    lib = tmp_path / "libgemv.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(source)], check=True)
    flags = [f"-L{tmp_path}", "-lgemv", f"-Wl,-rpath,{tmp_path}"]
    abi.register_library(
        abi.RuntimeLibrary(
            "gemv_test",
            ("cpu",),
            symbols=(
                abi.parse_declaration(
                    "int32 gemv_update(handle cc, const handle aa, const handle bb, int32 m, "
                    "int32 l, int32 stride)"
                ),
                abi.parse_declaration("int32 gemv_reset(handle cc, int32 m)"),
            ),
            link_flags=lambda: flags,
        )
    )


def intrin_gemv_extern(m, l, reduction_parts=False, with_reset=True):
    """gemv as extern C calls on the operands' addresses (access_ptr) and b's row stride; with
    `reduction_parts`, (body, reset, update) as TVM's gemv tests return (reset None unless
    `with_reset`)."""
    a = te.placeholder((l,), name="a")
    b = te.placeholder((m, l), name="b")
    k = te.reduce_axis((0, l), name="k")
    c = te.compute((m,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")
    Bb = tvm.tir.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1, strides=[te.var("s1"), 1])

    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def update():
            ib = tvm.tir.ir_builder.create()
            ib.emit(
                tvm.tir.call_extern(
                    "int32",
                    "gemv_update",
                    cc.access_ptr("w"),
                    aa.access_ptr("r"),
                    bb.access_ptr("r"),
                    m,
                    l,
                    bb.strides[0],
                )
            )
            return ib.get()

        def reset():
            ib = tvm.tir.ir_builder.create()
            ib.emit(tvm.tir.call_extern("int32", "gemv_reset", cc.access_ptr("w"), m))
            return ib.get()

        body = tvm.tir.ir_builder.create()
        body.emit(reset())
        body.emit(update())
        if reduction_parts:
            return body.get(), reset() if with_reset else None, update()
        return body.get()

    return te.decl_tensor_intrin(
        c.op, intrin_func, binds={b: Bb}, default_buffer_params={"offset_factor": 1}
    )


@pytest.mark.parametrize("target", TARGETS)
def test_tensorize_gemv_calling_an_extern_c_function(gemv_library, target):
    n, m, l = 16, 64, 32
    s, args = gemv_schedule(n, m, l, 16, intrin_gemv_extern(16, l))
    assert "gemv_update" in str(tvm.lower(s, args))
    a, b, c = gemv_data(n, m, l)
    tvm.build(s, args, target=target, name="gemv")(a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5)


@pytest.mark.parametrize("with_reset", [True, False], ids=["reset", "no_reset"])
@pytest.mark.parametrize("target", TARGETS)
def test_reduction_split_outside_uses_reset_and_update(gemv_library, target, with_reset):
    """The reduction loop split, its outer part outside the tensorized region: reset before
    the outer reduction loop, update inside it (TVM's gemv test with (body, reset, update));
    without a reset, as TVM, the body in the first iteration of k.outer, the update after."""
    n, m, l = 8, 32, 64
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((m, l), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=16)
    zo, zi = s[C].split(z, factor=16)
    s[C].reorder(x, yo, zo, yi, zi)
    s[C].tensorize(yi, intrin_gemv_extern(16, 16, reduction_parts=True, with_reset=with_reset))
    text = str(tvm.lower(s, [A, B, C]))
    if with_reset:
        assert text.index("gemv_reset") < text.index("k.outer") < text.index("gemv_update")
    else:
        assert text.index("k.outer") < text.index("gemv_reset") < text.index("gemv_update")
    a, b, c = gemv_data(n, m, l)
    tvm.build(s, [A, B, C], target=target, name="gemv")(a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5)


def test_reduction_split_outside_needs_an_update():
    """A body alone cannot compute part of a reduction: refused, naming what is missing."""
    n, m, l = 8, 32, 64
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((m, l), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    yo, yi = s[C].split(C.op.axis[1], factor=8)
    zo, zi = s[C].split(C.op.reduce_axis[0], factor=16)
    s[C].reorder(C.op.axis[0], yo, zo, yi, zi)
    s[C].tensorize(yi, intrin_gemv(8, 16))
    with pytest.raises(tvm.ScheduleError, match=r"needs an update statement"):
        tvm.lower(s, [A, B, C])


def intrin_gemm(t, out_scope):
    """c = a @ b on t x t tiles, every operand's row stride a variable, the output in
    `out_scope`; no body: reset and update only, written with the ir_builder."""
    a = te.placeholder((t, t), name="a")
    b = te.placeholder((t, t), name="b")
    k = te.reduce_axis((0, t), name="k")
    c = te.compute((t, t), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
    binds = {
        x: tvm.tir.decl_buffer(
            x.shape,
            x.dtype,
            name=x.name.upper(),
            offset_factor=1,
            strides=[te.var(f"s{x.name}"), 1],
        )
        for x in (a, b)
    }
    binds[c] = tvm.tir.decl_buffer(
        c.shape, c.dtype, name="C", offset_factor=1, strides=[te.var("sc"), 1], scope=out_scope
    )

    def intrin_func(ins, outs):
        reset = tvm.tir.ir_builder.create()
        cc = reset.buffer_ptr(outs[0])
        with reset.for_range(0, t) as i:
            with reset.for_range(0, t) as j:
                cc[i, j] = 0.0
        update = tvm.tir.ir_builder.create()
        aa, bb, cc = (update.buffer_ptr(x) for x in (*ins, *outs))
        with update.for_range(0, t) as i:
            with update.for_range(0, t) as j:
                with update.for_range(0, t) as kk:
                    cc[i, j] = cc[i, j] + aa[i, kk] * bb[kk, j]
        return None, reset.get(), update.get()

    return te.decl_tensor_intrin(c.op, intrin_func, binds=binds)


@pytest.mark.parametrize("how", ["interpreter", *TARGETS])
def test_tensorize_a_cached_tile_with_symbolic_strides(how):
    """A matmul tile accumulated in a local cache (cache_write + compute_at): the intrinsic's
    output buffer is declared in scope "local", the strides bind to the tile's (8 in the
    cache, 32 in A and B)."""
    m, t = 32, 8
    A = te.placeholder((m, m), name="A")
    B = te.placeholder((m, m), name="B")
    k = te.reduce_axis((0, m), name="k")
    C = te.compute((m, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*C.op.axis, t, t)
    s[CL].compute_at(s[C], jo)
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=t)
    s[CL].reorder(ko, *s[CL].op.axis, ki)
    s[CL].tensorize(s[CL].op.axis[0], intrin_gemm(t, "local"))
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(size=(m, m)).astype("float32") for _ in range(2))
    c = np.zeros((m, m), "float32")
    run(how, s, [A, B, C], a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    s[CL].tensorize(s[CL].op.axis[0], intrin_gemm(t, "global"))
    with pytest.raises(
        tvm.ScheduleError, match=r"buffer C is declared in scope 'global', the region is in 'local'"
    ):
        tvm.lower(s, [A, B, C])


def intrin_vadd(n, offset_factor=0, strides=None):
    """z = x + y over n elements, as one extern-free ir_builder loop."""
    x = te.placeholder((n,), name="x")
    y = te.placeholder((n,), name="y")
    z = te.compute(x.shape, lambda i: x[i] + y[i], name="z")

    def intrin_func(ins, outs):
        ib = tvm.tir.ir_builder.create()
        xx, yy = (ib.buffer_ptr(b) for b in ins)
        zz = ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="v", kind="vectorize") as v:
            zz[v] = xx[v] + yy[v]
        return ib.get()

    params = {"offset_factor": offset_factor}
    if strides is not None:
        params["strides"] = strides
    return te.decl_tensor_intrin(z.op, intrin_func, default_buffer_params=params)


def vadd_schedule(length, factor, intrin):
    A = te.placeholder((length,), name="A")
    B = te.placeholder((length,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=factor)
    s[C].tensorize(xi, intrin)
    return s, [A, B, C]


@pytest.mark.parametrize("how", ["interpreter", *TARGETS])
def test_tensorize_elementwise_with_offset_factor(how):
    s, args = vadd_schedule(64, 16, intrin_vadd(16, offset_factor=16))
    a, b = np.arange(64, dtype="float32"), np.arange(64, dtype="float32") * 3
    c = np.zeros(64, "float32")
    run(how, s, args, a, b, c)
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize("how", ["interpreter", "llvm"])  # loom's C code is scalar
def test_intrinsic_body_with_vector_vload_and_vstore(how):
    """The body as one vector statement on the buffers (vload/vstore of float32x16), bound to
    each 16-element tile through its element offset."""
    x = te.placeholder((16,), name="x")
    y = te.placeholder((16,), name="y")
    z = te.compute(x.shape, lambda i: x[i] + y[i], name="z")

    def intrin_func(ins, outs):
        xx, yy = ins
        return outs[0].vstore([0], xx.vload([0], "float32x16") + yy.vload([0], "float32x16"))

    intrin = te.decl_tensor_intrin(z.op, intrin_func, default_buffer_params={"offset_factor": 16})
    s, args = vadd_schedule(64, 16, intrin)
    assert "ramp((i.outer * 16), 1, 16)" in str(tvm.lower(s, args))
    a, b, c = np.arange(64, dtype="float32"), np.ones(64, "float32"), np.zeros(64, "float32")
    run(how, s, args, a, b, c)
    np.testing.assert_array_equal(c, a + 1)


@pytest.mark.parametrize("how", ["interpreter", "llvm"])
def test_an_offset_not_a_multiple_of_offset_factor_fails_at_run_time(how):
    """Tiles of 16 start at multiples of 16, not always of 32: as TVM's buffer binding, the
    check elem_offset % offset_factor == 0 that cannot be decided when compiling runs with
    the program, which fails at the second tile."""
    s, args = vadd_schedule(64, 16, intrin_vadd(16, offset_factor=32))
    a = np.zeros(64, "float32")
    with pytest.raises(tvm.LoomError, match=r"offset of x is not a multiple of its offset_factor"):
        run(how, s, args, a, a, a.copy())


def test_a_constant_offset_not_a_multiple_of_offset_factor_is_refused():
    A = te.placeholder((24,), name="A")
    B = te.placeholder((16,), name="B")
    C = te.compute((16,), lambda i: A[i + 8] + B[i], name="C")
    s = te.create_schedule(C.op)
    s[C].tensorize(C.op.axis[0], intrin_vadd(16, offset_factor=16))
    with pytest.raises(
        tvm.ScheduleError,
        match=r"buffer x needs an element offset that is a multiple of its offset_factor 16, "
        r"the region starts at 8",
    ):
        tvm.lower(s, [A, B, C])


def test_a_buffer_without_offset_bound_inside_a_larger_one_is_refused():
    """Buffers declared without offset_factor start at offset 0: the second tile does not."""
    s, args = vadd_schedule(64, 16, intrin_vadd(16))
    with pytest.raises(tvm.ScheduleError, match=r"declare it with offset_factor"):
        tvm.lower(s, args)


def test_a_single_tile_binds_buffers_without_offset():
    s, args = vadd_schedule(16, 16, intrin_vadd(16))
    a, b, c = np.ones(16, "float32"), np.full(16, 2, "float32"), np.zeros(16, "float32")
    interpret(s, args, a, b, c)
    np.testing.assert_array_equal(c, 3)


def test_a_compact_buffer_bound_to_a_strided_region_is_refused():
    """A 4x4 tile of an 8x8 matrix has rows 8 apart; the intrinsic's buffers, declared
    without strides, are compact (rows 4 apart): refused, as TVM does."""
    x = te.placeholder((4, 4), name="x")
    y = te.compute((4, 4), lambda i, j: x[i, j] * 2.0, name="y")
    intrin = te.decl_tensor_intrin(
        y.op, lambda ins, outs: tvm.tir.Evaluate(0), default_buffer_params={"offset_factor": 1}
    )
    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    io, jo, ii, ji = s[B].tile(*B.op.axis, 4, 4)
    s[B].tensorize(ii, intrin)
    with pytest.raises(
        tvm.ScheduleError,
        match=r"buffer x is declared compact \(strides \[4, 1\]\), the region's strides are "
        r"\[8, 1\]",
    ):
        tvm.lower(s, [A, B])


def test_a_constant_stride_must_be_the_regions():
    a = te.placeholder((8,), name="a")
    b = te.placeholder((4, 8), name="b")
    k = te.reduce_axis((0, 8), name="k")
    c = te.compute((4,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")
    Bb = tvm.tir.decl_buffer(b.shape, b.dtype, name="B", offset_factor=1, strides=[12, 1])
    intrin = te.decl_tensor_intrin(
        c.op,
        lambda ins, outs: tvm.tir.Evaluate(0),
        binds={b: Bb},
        default_buffer_params={"offset_factor": 1},
    )
    s, args = gemv_schedule(4, 16, 8, 4, intrin)
    with pytest.raises(tvm.ScheduleError, match=r"stride 0 of B is declared 12, the region's is 8"):
        tvm.lower(s, args)


def test_tensorize_checks_the_computation_against_the_op():
    n, m, l = 8, 32, 16
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((m, l), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] + B[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    yo, yi = s[C].split(C.op.axis[1], factor=8)
    s[C].tensorize(yi, intrin_gemv(8, l))
    with pytest.raises(tvm.ScheduleError, match=r"the stage computes .* where the intrinsic"):
        tvm.lower(s, [A, B, C])


def test_partial_tiles_are_refused_in_tvms_form():
    """The buffers of TVM's form have the intrinsic's shape: a tile cut short at the edge of
    the tensor cannot be bound to them."""
    s, args = vadd_schedule(40, 16, intrin_vadd(16, offset_factor=16))
    with pytest.raises(tvm.ScheduleError, match=r"TVM's form takes whole tiles"):
        tvm.lower(s, args)


def test_decl_tensor_intrin_argument_errors():
    x = te.placeholder((4,), name="x")
    y = te.compute((4,), lambda i: x[i] * 2, name="y")
    z = te.compute((4,), lambda i: y[i] + 1, name="z")
    with pytest.raises(ValueError, match=r"input y is computed"):
        te.decl_tensor_intrin(z.op, lambda ins, outs: tvm.tir.Evaluate(0))
    other = te.placeholder((4,), name="other")
    with pytest.raises(ValueError, match=r"binds names .*other"):
        te.decl_tensor_intrin(
            y.op,
            lambda ins, outs: tvm.tir.Evaluate(0),
            binds={other: tvm.tir.decl_buffer((4,))},
        )
    with pytest.raises(TypeError, match=r"fcompute returns a statement or \(body, reset"):
        te.decl_tensor_intrin(y.op, lambda ins, outs: (tvm.tir.Evaluate(0),) * 4)
    with pytest.raises(TypeError, match=r"scalar_params are not supported"):
        te.decl_tensor_intrin(
            y.op, lambda ins, outs: tvm.tir.Evaluate(0), scalar_params=[te.var("s")]
        )
    with pytest.raises(ValueError, match=r"\(int32, shape \['4'\]\) bound to x \(float32"):
        te.decl_tensor_intrin(
            y.op,
            lambda ins, outs: tvm.tir.Evaluate(0),
            binds={x: tvm.tir.decl_buffer((4,), "int32")},
        )


def test_fcompute_receives_declared_buffers():
    x = te.placeholder((4, 8), name="x")
    y = te.compute((4, 8), lambda i, j: x[i, j] * 2, name="y")
    seen = []

    def fcompute(ins, outs):
        seen.extend([*ins, *outs])
        return tvm.tir.Evaluate(0)

    te.decl_tensor_intrin(y.op, fcompute, default_buffer_params={"offset_factor": 4})
    xb, yb = seen
    assert isinstance(xb, tvm.tir.Buffer) and [b.name for b in seen] == ["x", "y"]
    assert [int(d) for d in (e.value for e in xb.shape)] == [4, 8]
    assert xb.offset_factor == 4 and isinstance(xb.elem_offset, tvm.tir.Var)
    assert xb.elem_offset.name == "x_elem_offset" and xb.scope == "global"


# -- tir.decl_buffer ------------------------------------------------------------------------------
def test_decl_buffer_follows_tvm():
    n = te.var("n")
    s = te.var("s")
    b = tvm.tir.decl_buffer((n, 4), "int8", name="B", strides=[s, 1], data_alignment=64)
    assert b.name == "B" and b.dtype == "int8" and b.strides[0] is s and b.data_alignment == 64
    assert b.elem_offset == tvm.tir.const(0, "int32") and b.offset_factor == 0
    assert b.data.dtype == "handle" and b.data.name == "B"
    c = tvm.tir.decl_buffer((4,), data=b.data, elem_offset=2)
    assert c.data is b.data and c.elem_offset == tvm.tir.const(2)
    assert str(c.access_ptr("r")) == "@address_of(B[0])"  # printed by its data
    with pytest.raises(ValueError, match=r"access_mask must be"):
        c.access_ptr("x")
    with pytest.raises(TypeError, match=r"data must be a handle Var"):
        tvm.tir.decl_buffer((4,), data=te.var("p"))


# -- ir_builder -----------------------------------------------------------------------------------
def build_func(params, body, target):
    func = tvm.tir.PrimFunc(params, body).with_attr("global_symbol", "main")
    if target == "interpreter":
        return lambda *arrays: tvm.ir.interpret(func, *arrays)
    return tvm.build(func, target=target)


@pytest.mark.parametrize("how", ["interpreter", *TARGETS])
def test_ir_builder_program_runs(how):
    """relu of the first half, doubled second half, a running sum through an allocated
    scratch and a let."""
    n = 16
    A = tvm.tir.decl_buffer((n,), "float32", name="A")
    B = tvm.tir.decl_buffer((n,), "float32", name="B")
    S = tvm.tir.decl_buffer((1,), "float32", name="S")
    ib = tvm.tir.ir_builder.create()
    a, b, total = ib.buffer_ptr(A), ib.buffer_ptr(B), ib.buffer_ptr(S)
    acc = ib.allocate("float32", (1,), name="acc", scope="local")
    acc[0] = 0.0
    half = ib.let("half", n // 2)
    with ib.for_range(0, n, name="i") as i:
        with ib.if_scope(i < half):
            with ib.if_scope(a[i] > 0.0):
                b[i] = a[i]
            with ib.else_scope():
                b[i] = 0.0
        with ib.else_scope():
            b[i] = a[i] * 2.0
        acc[0] = acc[0] + b[i]
    with ib.new_scope():
        total[0] = acc[0]
    body = ib.get()
    a_np = np.random.default_rng(0).uniform(-1, 1, n).astype("float32")
    b_np, s_np = np.zeros(n, "float32"), np.zeros(1, "float32")
    build_func([A, B, S], body, how)(a_np, b_np, s_np)
    expected = np.concatenate([np.maximum(a_np[: n // 2], 0), a_np[n // 2 :] * 2])
    np.testing.assert_allclose(b_np, expected)
    np.testing.assert_allclose(s_np[0], expected.sum(), rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_ir_builder_loop_kinds_and_flat_indexing(target):
    """A 2-d buffer indexed by one flat index, a parallel outer loop and a vectorized inner
    loop."""
    A = tvm.tir.decl_buffer((8, 16), "int32", name="A")
    ib = tvm.tir.ir_builder.create()
    a = ib.buffer_ptr(A)
    with ib.for_range(0, 8, kind="parallel") as i:
        with ib.for_range(0, 16, kind="vectorize") as j:
            a[i * 16 + j] = i * 100 + j
    body = ib.get()
    kinds = []
    tvm.tir.stmt_functor.post_order_visit(
        body,
        lambda n: kinds.append((n.loop_var.name, n.kind)) if isinstance(n, tvm.tir.For) else None,
    )
    assert kinds == [("j", tvm.tir.ForKind.VECTORIZED), ("i", tvm.tir.ForKind.PARALLEL)]
    out = np.zeros((8, 16), "int32")
    build_func([A], body, target)(out)
    np.testing.assert_array_equal(out, np.arange(8)[:, None] * 100 + np.arange(16))


@pytest.mark.parametrize("target", TARGETS)
def test_ir_builder_body_of_an_extern_stage(target):
    """TVM's ir_builder test: te.extern's fcompute writes the loop with the ir_builder, over
    the buffers it receives, with a scratch buffer of its own."""
    n = 32
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")

    def vector_add(a, b, c):
        ib = tvm.tir.ir_builder.create()
        tmp = ib.allocate("float32", (n,), name="tmp", scope="local")
        aa, bb, cc = ib.buffer_ptr(a), ib.buffer_ptr(b), ib.buffer_ptr(c)
        with ib.for_range(0, n, name="i") as i:
            tmp[i] = aa[i] + bb[i]
        with ib.for_range(0, n, name="i") as i:
            cc[i] = tmp[i] * 2.0
        return ib.get()

    C = te.extern(
        A.shape,
        [A, B],
        lambda ins, outs: vector_add(ins[0], ins[1], outs[0]),
        name="vector_add",
        dtype="float32",
    )
    s = te.create_schedule(C.op)
    f = tvm.build(s, [A, B, C], target)
    a, b = np.arange(n, dtype="float32"), np.ones(n, "float32")
    c = np.zeros(n, "float32")
    f(a, b, c)
    np.testing.assert_array_equal(c, (a + b) * 2)


def test_ir_builder_names_loops_as_tvm():
    ib = tvm.tir.ir_builder.create()
    names = []
    for _ in range(5):
        with ib.for_range(0, 2) as v:
            names.append(v.name)
    assert names == ["i", "j", "k", "i_0", "i_1"]


def test_ir_builder_errors():
    ib = tvm.tir.ir_builder.create()
    with pytest.raises(RuntimeError, match=r"else_scope can only follow an if_scope"):
        ib.else_scope()
    A = tvm.tir.decl_buffer((4,), "float32", name="A")
    a = ib.buffer_ptr(A)
    with pytest.raises(ValueError, match=r"data type does not match content type int32"):
        a[0] = tvm.tir.const(1, "int32")
    with pytest.raises(ValueError, match=r"unknown kind 'thread_binding'"):
        ib.for_range(0, 4, kind="thread_binding")
    with pytest.raises(TypeError, match=r"emit takes a Stmt or a PrimExpr"):
        ib.emit("x")
    with pytest.raises(TypeError, match=r"if_scope condition must be a bool"):
        ib.if_scope(a[0])
    with ib.for_range(0, 4):
        with pytest.raises(RuntimeError, match=r"inside an open scope"):
            ib.get()


def test_pointer_and_scope_attr_build_ir():
    ib = tvm.tir.ir_builder.create()
    p = ib.pointer("float32", name="p")
    ib.scope_attr(p.asobject(), "pragma_note", 1)
    with ib.for_range(1, 10, name="i") as i:
        p[i] = p[i - 1] + 1.0
    body = ib.get()
    assert isinstance(body, tvm.tir.AttrStmt) and body.node is p.data
    loop = body.body
    assert isinstance(loop, tvm.tir.For) and loop.extent == tvm.tir.const(9)
    assert p.asobject().shape[0].name == "p_extent"  # loom's buffers have a length


def test_vector_content_type_indexes_lanes():
    A = tvm.tir.decl_buffer((16,), "float32", name="A")
    ib = tvm.tir.ir_builder.create()
    v = ib.buffer_ptr(A, shape=(16,))
    vec = tvm.tir.ir_builder.BufferVar(ib, v.asobject(), "float32x4")
    vec[1] = vec[0] + vec[2]
    out = np.arange(16, dtype="float32")
    build_func([A], ib.get(), "interpreter")(out)
    np.testing.assert_array_equal(out[4:8], np.arange(4) + np.arange(8, 12))


# -- intrinsics, extern calls, reinterpret --------------------------------------------------------
def test_tir_prefixed_intrinsic_names():
    x = te.var("x", "float32")
    assert tvm.tir.call_intrin("float32", "tir.exp", x) == tvm.tir.call_intrin("float32", "exp", x)
    assert tvm.tir.call_intrin("float32", "tir.sqrt", x).op == "sqrt"
    with pytest.raises(tvm.LoomError, match=r"unknown intrinsic 'tir.no_such'"):
        tvm.tir.call_intrin("float32", "tir.no_such", x)


@pytest.mark.parametrize("how", ["interpreter", *TARGETS])
def test_intrinsics_reinterpret_and_math_compute(how):
    A = te.placeholder((8,), "float32", name="A")
    bits = te.compute(A.shape, lambda i: tvm.tir.reinterpret("int32", A[i]), name="bits")
    e = te.compute(A.shape, lambda i: tvm.tir.call_intrin("float32", "tir.exp", A[i]), name="e")
    s = te.create_schedule([bits.op, e.op])
    a = np.linspace(-2, 2, 8).astype("float32")
    out_bits, out_e = np.zeros(8, "int32"), np.zeros(8, "float32")
    run(how, s, [A, bits, e], a, out_bits, out_e)
    np.testing.assert_array_equal(out_bits, a.view("int32"))
    np.testing.assert_allclose(out_e, np.exp(a), rtol=1e-6)


def test_reinterpret_checks_the_width():
    x = te.var("x", "float32")
    assert tvm.tir.reinterpret("float32", x) is x
    with pytest.raises(TypeError, match=r"same width"):
        tvm.tir.reinterpret("int64", x)


def test_reexports_are_loom_ir():
    i = te.var("i")
    assert tvm.tir.indexdiv(i, 4) == tvm.tir.floordiv(i, 4)
    assert tvm.tir.indexmod(i, 4) == tvm.tir.floormod(i, 4)
    assert isinstance(tvm.tir.const(1.5), tvm.tir.FloatImm)
    assert isinstance(tvm.tir.Select(i > 0, i, 0 - i), tvm.tir.PrimExpr)
    assert tvm.tir.all(i > 0, i < 4).dtype == "bool"
    assert tvm.tir.max_value("int8") == tvm.tir.IntImm("int8", 127)  # TVM's order: dtype first
    assert isinstance(tvm.tir.max_value("int8"), tvm.tir.IntImm)
    assert tvm.tir.FloatImm("float64", 0.5) == tvm.tir.const(0.5, "float64")
    assert isinstance(tvm.tir.SizeVar("n", "int32"), tvm.tir.Var)
    B = te.compute((4,), lambda i: i, name="B")
    func = tvm.lower(te.create_schedule(B.op), [B])
    assert isinstance(func["main"], tvm.tir.PrimFunc)


@pytest.mark.parametrize("how", ["interpreter", *TARGETS])
def test_statements_from_tvms_constructors(how):
    """For, Allocate, Evaluate, AttrStmt with TVM's arguments make loom's statements: B[i] =
    2 * A[i] through a scratch buffer."""
    A = tvm.tir.decl_buffer((8,), "int32", name="A")
    B = tvm.tir.decl_buffer((8,), "int32", name="B")
    i = tvm.tir.Var("i", "int32")
    tmp = tvm.tir.Var("tmp", "handle")
    T = tvm.ir.Buffer("tmp", "int32", (8,), tmp)
    body = tvm.tir.SeqStmt(
        [
            tvm.tir.For(i, 0, 8, tvm.tir.ForKind.SERIAL, tvm.tir.BufferStore(T, A[i] * 2, [i])),
            tvm.tir.For(i, 0, 8, tvm.tir.ForKind.SERIAL, tvm.tir.BufferStore(B, T[i], [i])),
            tvm.tir.Evaluate(0),
        ]
    )
    stmt = tvm.tir.Allocate(tmp, "int32", [8], True, body)
    stmt = tvm.tir.AttrStmt(None, "pragma_note", 1, stmt)
    assert isinstance(stmt, tvm.tir.AttrStmt) and isinstance(stmt.body, tvm.tir.Allocate)
    a, b = np.arange(8, dtype="int32"), np.zeros(8, "int32")
    build_func([A, B], stmt, how)(a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_call_extern_needs_a_declared_symbol():
    A = tvm.tir.decl_buffer((4,), "float32", name="A")
    ib = tvm.tir.ir_builder.create()
    ib.emit(tvm.tir.call_extern("int32", "not_declared_anywhere", A.access_ptr("w")))
    with pytest.raises(tvm.LoomError, match=r"not_declared_anywhere"):
        build_func([A], ib.get(), "llvm")


# -- tvm.target.codegen ---------------------------------------------------------------------------
def test_llvm_version_and_intrinsic_ids():
    assert tvm.target.codegen.llvm_version_major() == llvm.llvm_version_info[0]
    sqrt = tvm.target.codegen.llvm_lookup_intrinsic_id("llvm.sqrt")
    assert sqrt > 0
    assert (
        tvm.target.codegen.llvm_lookup_intrinsic_id("llvm.sqrt.f32") == sqrt
    )  # overloaded: a suffix
    assert tvm.target.codegen.llvm_lookup_intrinsic_id("llvm.x86.sse2.pmadd.wd") not in (0, sqrt)
    assert tvm.target.codegen.llvm_lookup_intrinsic_id("llvm.no.such.intrinsic") == 0
    assert tvm.target.codegen.llvm_lookup_intrinsic_id("sqrt") == 0
    ids = tvm.target.codegen._intrinsic_ids()
    assert sorted(ids.values()) == list(range(len(ids)))  # one name per ID, none missing
