"""What the tensor-expression language accepts: numpy integers as shapes and domains, dtype None,
the bitwise reducers, and every operator on a te axis."""

import numpy as np
import pytest

import loom
from loom import te
from loom.ir import dtype as to_dtype
from loom.ir import op


def _run(s, args, inputs, out_shape, out_dtype, target="llvm"):
    mod = loom.build(s, args, target=target)
    out = np.zeros(out_shape, out_dtype)
    mod(*inputs, out)
    return out


@pytest.mark.parametrize("integral", [np.int64, np.int32, np.uint16, int])
def test_numpy_integers_are_shapes_and_domains(integral):
    n, k = integral(6), integral(5)
    A = te.placeholder((n, k), name="A")
    assert A.shape == (6, 5) and all(type(d) is int for d in A.shape)
    assert te.placeholder(n, name="V").shape == (6,)
    r = te.reduce_axis(k, name="r")
    r2 = te.reduce_axis((integral(1), k), name="r2")
    assert (r.dom.extent.value, r2.dom.min.value, r2.dom.extent.value) == (5, 1, 4)
    B = te.compute((n,), lambda i: te.sum(A[i, r], axis=r), name="B")
    assert B.shape == (6,)
    a = np.arange(30, dtype=np.float32).reshape(6, 5)
    out = _run(te.create_schedule(B.op), [A, B], [a], (6,), np.float32)
    np.testing.assert_allclose(out, a.sum(axis=1))


_REFUSED = r"shape must be a tuple of ints or integer expressions \(te.var\)"


@pytest.mark.parametrize(
    "shape, match",
    [
        ((True,), _REFUSED + r", got True"),
        ((np.bool_(True),), _REFUSED),
        (None, _REFUSED + r", got None"),
    ],
)
def test_non_integral_shapes_are_still_refused(shape, match):
    with pytest.raises(TypeError, match=match):
        te.placeholder(shape, name="A")


def test_dtype_none_is_the_default_of_the_argument():
    """As in TVM, a placeholder of dtype None is float32 (numpy would make it float64); a var of
    dtype None is int32, te.var's default. Where there is no default, None is refused."""
    assert te.placeholder((3,), dtype=None, name="A").dtype == to_dtype("float32")
    assert te.var("n", dtype=None).dtype == to_dtype("int32")
    with pytest.raises(TypeError, match=r"expected a dtype .* got None"):
        to_dtype(None)
    with pytest.raises(TypeError, match=r"got None"):
        op.cast(te.var("n"), None)


REDUCERS = [
    (te.bitwise_and, np.bitwise_and),
    (te.bitwise_or, np.bitwise_or),
    (te.bitwise_xor, np.bitwise_xor),
]


@pytest.mark.parametrize("reducer, ufunc", REDUCERS, ids=lambda r: getattr(r, "name", ""))
@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64", "bool"])
@pytest.mark.parametrize("target", ["llvm", "c"])
def test_bitwise_reducers_match_numpy(reducer, ufunc, dtype, target):
    rng = np.random.default_rng(1)
    A = te.placeholder((4, 7), dtype, name="A")
    k = te.reduce_axis(7, name="k")
    B = te.compute((4,), lambda i: reducer(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    if dtype == "bool":
        a = rng.integers(0, 2, (4, 7)).astype(bool)
        a[0] = True  # a row of all-true, for and
    else:
        a = rng.integers(0, 1 << 7, (4, 7)).astype(dtype) | np.array(0b1011, dtype)
    out = _run(s, [A, B], [a], (4,), a.dtype, target)
    np.testing.assert_array_equal(out, ufunc.reduce(a, axis=1))


def test_bitwise_reducers_with_where_and_an_empty_selection_give_the_identity():
    A = te.placeholder((3, 4), "int32", name="A")
    k = te.reduce_axis(4, name="k")
    outs = {
        "and": te.compute((3,), lambda i: te.bitwise_and(A[i, k], axis=k, where=i > 5), name="X"),
        "or": te.compute((3,), lambda i: te.bitwise_or(A[i, k], axis=k, where=i > 5), name="Y"),
    }
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    for name, out in outs.items():
        got = _run(te.create_schedule(out.op), [A, out], [a], (3,), np.int32)
        np.testing.assert_array_equal(got, -1 if name == "and" else 0)


@pytest.mark.parametrize("reducer", [te.bitwise_and, te.bitwise_or, te.bitwise_xor])
def test_bitwise_reducers_refuse_floats(reducer):
    A = te.placeholder((3, 4), "float32", name="A")
    k = te.reduce_axis(4, name="k")
    with pytest.raises(
        TypeError, match=rf"te.{reducer.name} reduces integers or bools, got float32"
    ):
        reducer(A[0, k], axis=k)


def test_a_reducer_given_two_values_combines_them_as_in_tvm():
    a, b = te.var("a"), te.var("b")
    assert str(te.bitwise_and(a, b)) == str(a & b)
    assert str(te.bitwise_xor(a, 6)) == str(a ^ 6)
    assert str(te.max(a, b)) == str(op.max_(a, b))
    with pytest.raises(TypeError, match=r"reduces over te.reduce_axis"):
        te.sum(a, [b])


def test_there_is_no_shift_reducer():
    """`<<` is neither associative nor commutative: a reduction with it would depend on the
    order of the loop (docs/schedules.md)."""
    assert not hasattr(te, "shift_left")
    assert not any(name.startswith("shift") for name in te.__all__)


def test_every_operator_works_on_a_reduce_axis():
    """A te axis stands for its variable: `k ^ 1`, `1 << k` and the rest build what they build
    on the variable."""
    k = te.reduce_axis(4, name="k")
    v = k.var
    pairs = [
        (k ^ 1, v ^ 1),
        (k & 3, v & 3),
        (k | 8, v | 8),
        (k << 2, v << 2),
        (k >> 1, v >> 1),
        (1 << k, op.shift_left(1, v)),
        (16 >> k, op.shift_right(16, v)),
        (6 ^ k, op.bitwise_xor(6, v)),
        (3 & k, op.bitwise_and(3, v)),
        (3 | k, op.bitwise_or(3, v)),
        (~k, ~v),
        (-k, -v),
        (k / 2, v / 2),
        (7 / k, op.div(7, v)),
        (7 // k, op.floordiv(7, v)),
        (7 % k, op.floormod(7, v)),
    ]
    for got, want in pairs:
        assert str(got) == str(want)


def test_a_reduction_indexed_with_bitwise_axis_expressions_matches_numpy():
    A = te.placeholder((4, 8), "int32", name="A")
    k = te.reduce_axis(8, name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k ^ 1] << (k & 3), axis=k), name="B")
    a = np.arange(32, dtype=np.int32).reshape(4, 8)
    idx = np.arange(8)
    want = (a[:, idx ^ 1] << (idx & 3)).sum(axis=1)
    for target in ("llvm", "c"):
        got = _run(te.create_schedule(B.op), [A, B], [a], (4,), np.int32, target)
        np.testing.assert_array_equal(got, want)
