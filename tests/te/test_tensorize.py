"""tensorize: a matched region becomes the intrinsic's statements, built from the regions
(offsets, strides) and extents it receives; mismatches are ScheduleErrors naming the
difference."""

import numpy as np
import pytest

import loom
from loom import ScheduleError, te
from loom.ir import IntImm, Var, seq
from loom.ir.stmt import For
from loom.te.tensorize import decl_tensor_intrin

T = 4  # the intrinsic's tile


def gemm_intrin(tile=T, dtype="int32"):
    """C[i, j] = sum_k A[i, k] * B[k, j] on tile x tile x tile; lowered to plain loops over the
    regions it is given (a software intrinsic, to check what tensorize hands over)."""
    a = te.placeholder((tile, tile), dtype, name="a")
    b = te.placeholder((tile, tile), dtype, name="b")
    k = te.reduce_axis(tile, name="k")
    c = te.compute((tile, tile), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")

    def lower(call):
        A, B, C = call.inputs["a"], call.inputs["b"], call.output
        ni, nj, nk = (call.extents[n] for n in ("i", "j", "k"))
        i, j, kk = Var("ti"), Var("tj"), Var("tk")

        def at(region, **loops):
            offset = region.offset
            for name, v in loops.items():
                offset = offset + v * region.strides.get(name, 0)
            return (offset,)

        update = For(
            i,
            IntImm(0),
            ni,
            "serial",
            For(
                j,
                IntImm(0),
                nj,
                "serial",
                For(
                    kk,
                    IntImm(0),
                    nk,
                    "serial",
                    C.buffer.store(
                        C.buffer.load(at(C, i=i, j=j))
                        + A.buffer.load(at(A, i=i, k=kk)) * B.buffer.load(at(B, k=kk, j=j)),
                        at(C, i=i, j=j),
                    ),
                ),
            ),
        )
        reset = For(
            i,
            IntImm(0),
            ni,
            "serial",
            For(j, IntImm(0), nj, "serial", C.buffer.store(0, at(C, i=i, j=j))),
        )
        return {"reset": reset, "update": seq(update)}

    return decl_tensor_intrin(c, lower, name="gemm4")


def matmul(m, n, k):
    A = te.placeholder((m, k), "int32", name="A")
    B = te.placeholder((k, n), "int32", name="B")
    r = te.reduce_axis(k, name="r")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def tiled(m, n, k, intrin=None):
    A, B, C = matmul(m, n, k)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    (r,) = C.op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, T, T)
    ro, ri = s[C].split(r, factor=T)
    s[C].reorder(io, jo, ro, ii, ji, ri)
    s[C].tensorize(ii, intrin or gemm_intrin())
    return s, [A, B, C]


@pytest.mark.parametrize("shape", [(8, 8, 8), (10, 7, 9), (3, 13, 5)])
@pytest.mark.parametrize("how", ["interpreter", "llvm", "c"])
def test_tensorized_matmul_matches_numpy(shape, how):
    m, n, k = shape
    rng = np.random.default_rng(0)
    a = rng.integers(-9, 9, (m, k)).astype(np.int32)
    b = rng.integers(-9, 9, (k, n)).astype(np.int32)
    c = np.zeros((m, n), np.int32)
    sch, args = tiled(m, n, k)
    if how == "interpreter":
        mod = loom.lower(sch, args, name="mm")
        assert "for (ti:" in str(mod) and "r.inner" not in str(mod)  # ii, ji, ri replaced
        loom.ir.interpret(mod, a, b, c)
    else:
        loom.build(sch, args, target=how, name="mm")["mm"](a, b, c)
    np.testing.assert_array_equal(c, a @ b)


def test_wrong_loop_count():
    A, B, C = matmul(8, 8, 8)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    s[C].tensorize(j, gemm_intrin())
    with pytest.raises(
        ScheduleError,
        match=r"stage C: tensorize with gemm4: 2 loops from the "
        r"tensorize axis inward \['j', 'r'\], the intrinsic "
        r"has 3 axes",
    ):
        loom.lower(s, [A, B, C])


def test_loop_longer_than_the_intrinsic():
    A, B, C = matmul(8, 8, 8)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    (r,) = C.op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, T, 8)
    ro, ri = s[C].split(r, factor=T)
    s[C].reorder(io, jo, ro, ii, ji, ri)
    s[C].tensorize(ii, gemm_intrin())
    with pytest.raises(
        ScheduleError,
        match=r"loop j.inner has extent 8, more than the intrinsic's axis j \(4\)",
    ):
        loom.lower(s, [A, B, C])


def test_different_computation():
    A = te.placeholder((8, 8), "int32", name="A")
    B = te.placeholder((8, 8), "int32", name="B")
    r = te.reduce_axis(8, name="r")
    C = te.compute((8, 8), lambda i, j: te.sum(A[i, r] + B[r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(*C.op.axis, T, T)
    ro, ri = s[C].split(C.op.reduce_axis[0], factor=T)
    s[C].reorder(io, jo, ro, ii, ji, ri)
    s[C].tensorize(ii, gemm_intrin())
    with pytest.raises(
        ScheduleError,
        match=r"the stage computes \(A\[.*\] \+ B\[.*\]\) \(int32\) "
        r"where the intrinsic computes \(a\[i, k\] \* "
        r"b\[k, j\]\)",
    ):
        loom.lower(s, [A, B, C])


def test_operand_that_is_not_contiguous():
    A = te.placeholder((8, 8), "int32", name="A")
    B = te.placeholder((8, 8), "int32", name="B")
    r = te.reduce_axis(8, name="r")
    C = te.compute((8, 8), lambda i, j: te.sum(A[i, r] * B[j, r], axis=r), name="C")  # B^T
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(*C.op.axis, T, T)
    ro, ri = s[C].split(C.op.reduce_axis[0], factor=T)
    s[C].reorder(io, jo, ro, ii, ji, ri)
    s[C].tensorize(ii, gemm_intrin())
    with pytest.raises(
        ScheduleError,
        match=r"B \(the intrinsic's b\) is not contiguous along j "
        r"\(stride 8\)",
    ):
        loom.lower(s, [A, B, C])


def test_wrong_dtype_and_tensorize_argument():
    A, B, C = matmul(8, 8, 8)
    s = te.create_schedule(C.op)
    with pytest.raises(TypeError, match=r"tensorize takes a TensorIntrin"):
        s[C].tensorize(C.op.axis[0], "gemm")
    sch, args = tiled(8, 8, 8, gemm_intrin(dtype="int16"))
    with pytest.raises(
        ScheduleError,
        match=r"the stage computes \(A\[i, r\] \* B\[r, j\]\) "
        r"\(int32\) where the intrinsic computes "
        r"\(a\[i, k\] \* b\[k, j\]\) \(int16\)",
    ):
        loom.lower(sch, args)


def _gemm_indexed(a_index):
    """An 8x8x8 matmul whose A is read at A[i, a_index(r)], tiled for the 4x4x4 intrinsic."""
    A = te.placeholder((8, 8), "int32", name="A")
    B = te.placeholder((8, 8), "int32", name="B")
    r = te.reduce_axis(8, name="r")
    C = te.compute((8, 8), lambda i, j: te.sum(A[i, a_index(r)] * B[r, j], axis=r), name="C")
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(*C.op.axis, T, T)
    ro, ri = s[C].split(C.op.reduce_axis[0], factor=T)
    s[C].reorder(io, jo, ro, ii, ji, ri)
    return s, [A, B, C], ii


@pytest.mark.parametrize(
    "a_index", [lambda r: r // 2, lambda r: (r + 1) % 8], ids=["floordiv", "rotated"]
)
def test_an_operand_not_affine_in_a_loop_is_refused_naming_that_loop(a_index):
    """floordiv(r, 2) is not affine in the intrinsic's k: refused (it was read as constant in
    k, a silently wrong match), and the error names k, not the first loop."""
    s, args, ii = _gemm_indexed(a_index)
    with pytest.raises(ScheduleError, match=r"is not indexed affinely by loop k$"):
        s[args[2]].tensorize(ii, gemm_intrin())
        loom.lower(s, args, name="mm")


def test_an_index_affine_under_the_loop_ranges_matches():
    """(r // 4) * 4 + r % 4 is r once the tile loops' ranges are known: tensorized, and the
    result is the matmul's."""
    s, args, ii = _gemm_indexed(lambda r: (r // 4) * 4 + r % 4)
    s[args[2]].tensorize(ii, gemm_intrin())
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-9, 9, (8, 8)).astype(np.int32) for _ in range(2))
    c = np.zeros((8, 8), np.int32)
    loom.ir.interpret(loom.lower(s, args, name="mm"), a, b, c)
    np.testing.assert_array_equal(c, a @ b)
