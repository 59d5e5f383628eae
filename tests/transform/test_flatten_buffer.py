"""flatten_buffer: hand-built IR before the pass and the IR expected after it (TVM's
before/expected style). Every access becomes a 1-d access of the buffer's storage (same data,
shape = storage size), strides (storage_align padding) included; parameters keep their N-d
buffers."""

from loom.ir import (
    Allocate,
    Broadcast,
    Buffer,
    FloatImm,
    For,
    IntImm,
    IRModule,
    PrimFunc,
    Ramp,
    Var,
    assert_structural_equal,
    decl_buffer,
    seq,
)
from loom.transform.flatten_buffer import flatten_buffer


def loop(i, extent, body):
    return For(i, IntImm(0), extent if isinstance(extent, Var) else IntImm(extent), "serial", body)


def flat(buf, size):
    """The 1-d view of `buf`'s storage the pass makes."""
    return Buffer(buf.name, buf.dtype, (size,), buf.data, (), buf.scope, buf.alignment)


def func(build, *params):
    return IRModule((PrimFunc("main", params, build(*params)),))


def matrices():
    return decl_buffer((4, 8), "float32", "A"), decl_buffer((4, 8), "float32", "B")


def test_2d_accesses_become_row_major_1d_accesses():
    def before(A, B):
        i, j = Var("i"), Var("j")
        return loop(i, 4, loop(j, 8, B.store(A[i, j], (i, j))))

    def expected(A, B):
        i, j = Var("i"), Var("j")
        Af, Bf = flat(A, 32), flat(B, 32)
        return loop(i, 4, loop(j, 8, Bf.store(Af[i * 8 + j], (i * 8 + j,))))

    after = flatten_buffer(func(before, *matrices()))
    assert_structural_equal(after, func(expected, *matrices()))
    assert [p.shape for p in after["main"].params] == [p.shape for p in matrices()]  # N-d params


def test_allocation_with_padded_strides():
    def before(A, B):
        i, j = Var("i"), Var("j")
        T = decl_buffer((4, 8), "float32", "T", scope="local", strides=(9, 1))  # storage_align
        body = seq(T.store(A[i, j], (i, j)), B.store(T[i, j], (i, j)))
        return Allocate(T, loop(i, 4, loop(j, 8, body)))

    def expected(A, B):
        i, j = Var("i"), Var("j")
        T = decl_buffer((35,), "float32", "T", scope="local")  # 3*9 + 7*1 + 1 elements
        Af, Bf = flat(A, 32), flat(B, 32)
        body = seq(T.store(Af[i * 8 + j], (i * 9 + j,)), Bf.store(T[i * 9 + j], (i * 8 + j,)))
        return Allocate(T, loop(i, 4, loop(j, 8, body)))

    assert_structural_equal(flatten_buffer(func(before, *matrices())), func(expected, *matrices()))


def test_symbolic_shape():
    def params():
        n = Var("n")
        return n, decl_buffer((n, 8), "float32", "D")

    def before(n, D):
        i, j = Var("i"), Var("j")
        return loop(i, n, loop(j, 8, D.store(FloatImm(0.0), (i, j))))

    def expected(n, D):
        i, j = Var("i"), Var("j")
        Df = flat(D, n * 8)
        return loop(i, n, loop(j, 8, Df.store(FloatImm(0.0), (i * 8 + j,))))

    assert_structural_equal(flatten_buffer(func(before, *params())), func(expected, *params()))


def test_vector_access_keeps_its_predicate():
    def before(A, B):
        index = Ramp(IntImm(0), IntImm(1), 4)
        mask = Broadcast(IntImm(1, "bool"), 4)
        return B.store(Broadcast(FloatImm(1.0), 4), (IntImm(1), index), mask)

    def expected(A, B):
        mask = Broadcast(IntImm(1, "bool"), 4)
        index = Ramp(IntImm(8), IntImm(1), 4)
        return flat(B, 32).store(Broadcast(FloatImm(1.0), 4), (index,), mask)

    assert_structural_equal(flatten_buffer(func(before, *matrices())), func(expected, *matrices()))


def test_compact_1d_buffers_are_left_alone():
    def params():
        return (decl_buffer((8,), "float32", "C"),)

    def build(C):
        i = Var("i")
        T = decl_buffer((8,), "float32", "T", scope="local")
        return Allocate(T, loop(i, 8, seq(T.store(C[i], (i,)), C.store(T[i], (i,)))))

    assert_structural_equal(flatten_buffer(func(build, *params())), func(build, *params()))
