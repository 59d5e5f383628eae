"""The small parts of TVM v0.14's Python API that scripts rely on, through `import loom as tvm`
(loom issue 18): dtypes as strings, `==` on expressions, `A[i][j]`, float shapes, n-ary
`te.max`, `fuse()` of no axes, Target hosts, `lower`/`build` keywords, `tvm.TVMError`,
`te.schedule.InferBound`/`ScheduleOps`, `tvm.contrib.cc` and vector dtypes."""

import ctypes
import os
import pickle

import numpy as np
import pytest

import loom as tvm
from loom import te


def run(s, args, *arrays, target="llvm"):
    f = tvm.build(s, args, target)
    f(*arrays)


# -- 1. dtypes are strings -----------------------------------------------------------------------
def test_tensor_dtype_is_a_string_numpy_takes():
    A = te.placeholder((3, 4), name="A", dtype="int16")
    assert A.dtype == "int16" and isinstance(A.dtype, str)
    a = np.zeros(A.shape, dtype=A.dtype)
    assert a.dtype == np.int16
    assert {"int16": "found"}[A.dtype] == "found"
    assert str(A.dtype) == "int16" and f"{A.dtype}" == "int16"


def test_expression_dtype_is_a_string_with_its_fields():
    x = te.var("x", "int64")
    e = x.astype("float16")
    assert x.dtype == "int64" and e.dtype == "float16"
    assert (x > 1).dtype == "bool"
    assert e.dtype.bits == 16 and e.dtype.is_float and e.dtype.lanes == 1
    assert pickle.loads(pickle.dumps(e.dtype)) == "float16"


def test_a_dtype_cannot_be_changed():
    A = te.placeholder((3,), name="A")
    with pytest.raises(AttributeError, match="immutable"):
        A.dtype.bits = 64


# -- 2. == on expressions ------------------------------------------------------------------------
def test_equal_in_select_and_if_then_else_is_the_comparison():
    n = 16
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: te.if_then_else(A[i] == B[i], 1.0, A[i]), name="C")
    D = te.compute((n,), lambda i: te.select(A[i] != 0, A[i] * 2, -1.0), name="D")
    s = te.create_schedule([C.op, D.op])
    a = np.random.randint(0, 3, n).astype("float32")
    b = np.random.randint(0, 3, n).astype("float32")
    c, d = np.empty(n, "float32"), np.empty(n, "float32")
    run(s, [A, B, C, D], a, b, c, d)
    np.testing.assert_array_equal(c, np.where(a == b, 1.0, a))
    np.testing.assert_array_equal(d, np.where(a != 0, a * 2, -1.0))


def test_equal_combines_with_logical_operators():
    n = 8
    A = te.placeholder((n,), name="A", dtype="int32")
    B = te.compute((n,), lambda i: te.select((A[i] == 1) | (A[i] == 3), A[i], 0), name="B")
    s = te.create_schedule(B.op)
    a, b = np.arange(n, dtype="int32"), np.empty(n, "int32")
    run(s, [A, B], a, b)
    np.testing.assert_array_equal(b, np.where((a == 1) | (a == 3), a, 0))


def test_truth_of_equal_is_whether_the_values_are_the_same():
    x, y = te.var("x"), te.var("y")
    assert x == x and not (x == y) and x != y
    assert (x + 1) == (x + 1)  # the same IR value (TVM compares identity here)
    assert {x + 1: "sum"}[x + 1] == "sum" and (x * 2) in [x + 1, x * 2]
    assert not (x == 1)  # an expression is not a Python number
    assert tvm.ir.structural_equal(x + 1, x + 1)
    eq = te.var("a") == 0
    assert eq.asobject().dtype == "bool"


# -- 3. A[i][j] ----------------------------------------------------------------------------------
def test_chained_indexing_reads_an_element():
    A = te.placeholder((4, 5, 6), name="A")
    B = te.compute((4, 5, 6), lambda i, j, k: A[i][j][k] + A[i, j][k], name="B")
    s = te.create_schedule(B.op)
    a, b = np.random.rand(4, 5, 6).astype("float32"), np.empty((4, 5, 6), "float32")
    run(s, [A, B], a, b)
    np.testing.assert_allclose(b, 2 * a)
    assert A[0].dtype == "float32"


def test_a_partial_index_in_an_expression_is_a_clear_error():
    A = te.placeholder((4, 5), name="A")
    with pytest.raises(tvm.LoomError, match="A has 2 dimensions, used with 1 indices"):
        te.compute((4,), lambda i: A[i] + 1, name="B")


# -- 4. float shapes -----------------------------------------------------------------------------
def test_float_shapes_and_split_factors_from_division():
    N, bn = 64, 16
    A = te.placeholder((N / bn, bn), name="A")
    B = te.compute((N / bn, bn), lambda i, j: A[i, j] * 2, name="B")
    assert A.shape == (4, 16) and B.shape == (4, 16)
    s = te.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=bn / 4)
    a, b = np.random.rand(4, 16).astype("float32"), np.empty((4, 16), "float32")
    run(s, [A, B], a, b)
    np.testing.assert_allclose(b, 2 * a)


def test_a_fractional_shape_is_refused():
    with pytest.raises(ValueError, match=r"placeholder A shape: expected a whole number, got 2\.5"):
        te.placeholder((2.5, 4), name="A")
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i], name="B")
    with pytest.raises(
        ValueError, match=r"split of axis i: factor: expected a whole number, got 2\.5"
    ):
        te.create_schedule(B.op)[B].split(B.op.axis[0], factor=2.5)


# -- 5. te.max / te.min of several values --------------------------------------------------------
def test_max_and_min_of_several_values():
    n = 32
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.max(A[i], 0.25, A[n - 1 - i], A[(i + 3) % n]), name="B")
    C = te.compute((n,), lambda i: te.min(A[i], A[n - 1 - i], 0.5), name="C")
    k = te.reduce_axis((0, n), name="k")
    M = te.compute((1,), lambda _: te.max(A[k], axis=k), name="M")
    s = te.create_schedule([B.op, C.op, M.op])
    a = np.random.rand(n).astype("float32")
    b, c, m = np.empty(n, "float32"), np.empty(n, "float32"), np.empty(1, "float32")
    run(s, [A, B, C, M], a, b, c, m)
    expected = np.maximum.reduce([a, np.full(n, 0.25, "float32"), a[::-1], np.roll(a, -3)])
    np.testing.assert_array_equal(b, expected)
    np.testing.assert_array_equal(c, np.minimum.reduce([a, a[::-1], np.full(n, 0.5, "float32")]))
    assert m[0] == a.max()


# -- 6. fuse() of no axes ------------------------------------------------------------------------
def test_fuse_of_no_axes_gives_a_singleton_loop_to_annotate():
    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] + 1, name="B")
    s = te.create_schedule(B.op)
    outer = s[B].fuse()
    s[B].pragma(outer, "auto_unroll_max_step", 4)
    assert [iv.name for iv in s[B].leaf_iter_vars] == ["singleton", "i", "j"]
    a, b = np.random.rand(8, 8).astype("float32"), np.empty((8, 8), "float32")
    run(s, [A, B], a, b)
    np.testing.assert_allclose(b, a + 1)


# -- 7. Target hosts -----------------------------------------------------------------------------
def test_target_with_a_host():
    tgt = tvm.target.Target(target="llvm", host="llvm")
    assert tgt.kind == "llvm" and tgt.host.kind == "llvm"
    assert tvm.target.Target("c", host=tgt.host).host == tgt.host
    assert tvm.target.Target("llvm").host is None
    assert tvm.target.Target(tgt).host == tgt.host  # copied with its host
    with pytest.raises(TypeError, match="host must be a string or a Target"):
        tvm.target.Target("llvm", host=3)


def test_target_current_and_build_without_a_target():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 3, name="B")
    s = te.create_schedule(B.op)
    assert tvm.target.Target.current() is None
    with tvm.target.Target("c") as tgt:
        assert tvm.target.Target.current() is tgt
        f = tvm.build(s, [A, B])  # the entered target, as TVM
    assert tvm.target.Target.current() is None
    assert f.type_key == "c"
    g = tvm.build(s, [A, B], "llvm", target_host="llvm", name="triple")
    a, b = np.arange(8, dtype="float32"), np.empty(8, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a * 3)
    g(a, b)
    np.testing.assert_array_equal(b, a * 3)
    with pytest.raises(tvm.LoomError, match="no target is entered"):
        tvm.target.Target.current(allow_none=False)


# -- 8. lower / build keywords -------------------------------------------------------------------
def test_lower_takes_simple_mode_and_name():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1, name="B")
    s = te.create_schedule(B.op)
    simple = tvm.lower(s, [A, B], simple_mode=True, name="add_one")
    assert str(simple) == str(tvm.lower(s, [A, B], name="add_one"))
    assert "@add_one = primfn(A: Buffer(float32, [8]), B: Buffer(float32, [8]))" in str(simple)


# -- 9. tvm.TVMError and tvm.error ---------------------------------------------------------------
def test_tvm_error_is_loom_error():
    assert tvm.TVMError is tvm.LoomError and tvm.error.TVMError is tvm.LoomError
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=2)
    with pytest.raises(tvm.error.TVMError, match="already split"):
        s[B].vectorize(B.op.axis[0])


# -- 10. te.schedule.InferBound / ScheduleOps / normalize ----------------------------------------
def test_infer_bound_and_schedule_ops():
    A = te.placeholder((16, 16), name="A")
    B = te.compute((16, 16), lambda i, j: A[i, j] * 2, name="B")
    C = te.compute((16, 16), lambda i, j: B[i, j] + 1, name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xo)
    s = s.normalize()
    bounds = tvm.te.schedule.InferBound(s)
    rows = bounds[B.op.axis[0]]
    assert rows.extent.value == 4 and tvm.ir.structural_equal(rows.min, xo.var * 4)
    assert bounds[B.op.axis[1]].extent.value == 16
    assert [bounds[iv].extent.value for iv in (xo, xi)] == [4, 4]
    assert bounds[C.op.axis[0]].extent.value == 16
    stmt = tvm.te.schedule.ScheduleOps(s, bounds)
    text = str(stmt)
    assert text.startswith("for (i.outer: int32, 0, 4) {")
    assert "allocate(B: Pointer(global float32), float32, [4, 16])" in text
    assert "B[i, j] = (A[((i.outer * 4) + i), j] * 2.0f)" in text


def test_schedule_ops_refuses_what_is_not_a_bound_map():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1, name="B")
    with pytest.raises(TypeError, match="map of IterVar to Range"):
        tvm.te.schedule.ScheduleOps(te.create_schedule(B.op), [1, 2])


# -- 11. tvm.contrib.cc / clang ------------------------------------------------------------------
def test_create_shared_links_a_library(tmp_path):
    src = tmp_path / "twice.c"
    src.write_text("int twice(int x) { return 2 * x; }\n")
    lib = tmp_path / "libtwice.so"
    tvm.contrib.cc.create_shared(str(lib), [str(src)], options=["-O2"])
    assert ctypes.CDLL(str(lib)).twice(21) == 42
    assert tvm.contrib.cc.create_shared.output_format == "so"
    with pytest.raises(FileNotFoundError, match="no such files"):
        tvm.contrib.cc.create_shared(str(lib), [str(tmp_path / "missing.o")])
    with pytest.raises(tvm.LoomError, match="create_shared failed"):
        tvm.contrib.cc.create_shared(str(lib), [str(src)], options=["-no-such-flag"])


def test_export_library_links_with_create_shared(tmp_path):
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1, name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], "llvm")
    path = str(tmp_path / "add_one.so")
    f.export_library(path, fcompile=tvm.contrib.cc.create_shared)
    loaded = tvm.runtime.load_module(path)
    a, b = np.arange(8, dtype="float32"), np.empty(8, "float32")
    loaded(a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_clang_create_llvm_gives_llvm_ir():
    ir = tvm.contrib.clang.create_llvm("int add_one(int x) { return x + 1; }", options=["-O2"])
    assert "define" in ir and "add_one" in ir and "add nsw i32" in ir


# -- 12. vector dtypes ---------------------------------------------------------------------------
def test_a_vector_typed_tensor_is_refused_with_the_way_to_vectorize():
    with pytest.raises(TypeError, match=r"float32x4.*vectorize"):
        te.placeholder((8,), dtype="float32x4", name="A")


def test_contrib_utils_tempdir():
    temp = tvm.contrib.utils.tempdir()
    path = temp.relpath("x.txt")
    with open(path, "w") as f:
        f.write("x")
    assert temp.listdir() == ["x.txt"]
    root = temp.path
    temp.remove()
    assert not os.path.exists(root)
