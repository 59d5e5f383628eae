"""Lowered text of representative schedules, checked against golden files
(`pytest --update-golden` rewrites them; review the diff)."""

import re

import loom
from loom import te
from tests.programs import seed_program


def test_seed_program_allocations_copies_and_add_in_order():
    s, args = seed_program()
    text = str(loom.lower(s, args, name="alloc_vtcm"))
    pattern = re.compile(
        r"allocate\(A_buf: Pointer\(local\.vtcm int8\), int8, \[2048\]\).*?"
        r"allocate\(B_buf: Pointer\(local\.vtcm int8\), int8, \[2048\]\).*?"
        r"for \((\w+): int32, 0, 2048\) \{\s*A_buf\[\1\] = A\[\1\]\s*\}\s*"
        r"for \((\w+): int32, 0, 2048\) \{\s*B_buf\[\2\] = B\[\2\]\s*\}\s*"
        r"for \((\w+): int32, 0, 2048\) \{\s*C\[\3\] = \(A_buf\[\3\] \+ B_buf\[\3\]\)\s*\}",
        re.S,
    )
    assert pattern.search(text), text


def test_seed_program_golden(golden):
    s, args = seed_program()
    golden("seed_alloc_vtcm", str(loom.lower(s, args, name="alloc_vtcm")))


def matmul(n=64, m=48, k=40):
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    r = te.reduce_axis(k, name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def test_tiled_matmul_golden(golden):
    A, B, C = matmul()
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 16, 16)
    s[C].parallel(io)
    s[CL].compute_at(s[C], jo)
    (k,) = s[CL].op.reduce_axis
    ko, ki = s[CL].split(k, factor=8)
    s[CL].reorder(ko, *s[CL].op.axis, ki)
    s[C].vectorize(ji)
    golden("tiled_matmul", str(loom.lower(s, [A, B, C], name="matmul")))


def test_non_divisible_split_guard_golden(golden):
    A = te.placeholder((30,), name="A")
    B = te.compute((30,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    text = str(loom.lower(s, [A, B], name="scale"))
    assert "if (@likely(" in text  # the tail is guarded
    golden("split_guard", text)


def test_vectorized_tail_becomes_masked_store_golden(golden):
    A = te.placeholder((30,), name="A")
    B = te.compute((30,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(xi)
    text = str(loom.lower(s, [A, B], name="add_one"))
    assert "predicate=" in text and "ramp(" in text
    golden("vectorized_tail", text)


def test_conv2d_compute_at_golden(golden):
    from loom.ops import conv2d_nchw

    data = te.placeholder((1, 4, 8, 8), name="data")
    kernel = te.placeholder((8, 4, 3, 3), name="kernel")
    out = conv2d_nchw(data, kernel, stride=2, padding=1, name="conv")
    s = te.create_schedule(out.op)
    padded = out.op.input_tensors[0]
    n, f, y, x = out.op.axis
    s[out].reorder(n, y, f, x)
    s[padded].compute_at(s[out], y)
    golden("conv2d_compute_at", str(loom.lower(s, [data, kernel, out], name="conv")))


def test_fuse_unroll_pragma_inline_storage_align_golden(golden):
    A = te.placeholder((8, 12), name="A")
    T = te.compute((8, 12), lambda i, j: A[i, j] * 3.0, name="T")
    U = te.compute((8, 12), lambda i, j: T[i, j] + 1.0, name="U")
    V = te.compute((8, 12), lambda i, j: U[i, j] - A[i, j], name="V")
    s = te.create_schedule(V.op)
    s[T].compute_inline()
    s[U].storage_align(U.op.axis[0], 16, 4)
    s[U].set_scope("shared")
    fused = s[V].fuse(*V.op.axis)
    fo, fi = s[V].split(fused, nparts=4)
    s[V].pragma(fo, "mvin")
    ii, ij = U.op.axis
    s[U].unroll(ij)
    golden("fuse_unroll_pragma_inline_align", str(loom.lower(s, [A, V], name="fused")))
