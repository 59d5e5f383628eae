"""What TVM's "Schedule Primitives in TVM" tutorial teaches, as a TVM user writes it, run with
loom: one small computation over symbolic shapes per primitive (split by factor and by nparts,
tile, fuse, reorder, compute_at, compute_inline, compute_root), each printed by `tvm.lower`.
The `bind` cell (GPU threads) is left out."""

import numpy as np

import loom as tvm
from loom import te

n = te.var("n")
m = te.var("m")

# The default schedule: an element-wise product, row after row.
A = te.placeholder((m, n), name="A")
B = te.placeholder((m, n), name="B")
C = te.compute((m, n), lambda i, j: A[i, j] * B[i, j], name="C")
s = te.create_schedule([C.op])
print(tvm.lower(s, [A, B, C], simple_mode=True))

# split by a factor: an inner loop of 32.
A = te.placeholder((m,), name="A")
B = te.compute((m,), lambda i: A[i] * 2, name="B")
s = te.create_schedule(B.op)
xo, xi = s[B].split(B.op.axis[0], factor=32)
print(tvm.lower(s, [A, B], simple_mode=True))

# split by nparts: an outer loop of 32.
A = te.placeholder((m,), name="A")
B = te.compute((m,), lambda i: A[i], name="B")
s = te.create_schedule(B.op)
bx, tx = s[B].split(B.op.axis[0], nparts=32)
print(tvm.lower(s, [A, B], simple_mode=True))

# tile: 10x5 blocks over two axes.
A = te.placeholder((m, n), name="A")
B = te.compute((m, n), lambda i, j: A[i, j], name="B")
s = te.create_schedule(B.op)
xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
print(tvm.lower(s, [A, B], simple_mode=True))

# fuse: the two loops inside a tile become one.
A = te.placeholder((m, n), name="A")
B = te.compute((m, n), lambda i, j: A[i, j], name="B")
s = te.create_schedule(B.op)
xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
fused = s[B].fuse(xi, yi)
print(tvm.lower(s, [A, B], simple_mode=True))

# reorder: (i.inner, j.outer, i.outer, j.inner).
A = te.placeholder((m, n), name="A")
B = te.compute((m, n), lambda i, j: A[i, j], name="B")
s = te.create_schedule(B.op)
xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
s[B].reorder(xi, yo, xo, yi)
print(tvm.lower(s, [A, B], simple_mode=True))


def two_stages():
    """B = A + 1 feeding C = B * 2: the pipeline the compute_* primitives move around."""
    A = te.placeholder((m,), name="A")
    B = te.compute((m,), lambda i: A[i] + 1, name="B")
    C = te.compute((m,), lambda i: B[i] * 2, name="C")
    return A, B, C


def check(s, A, C):
    """Builds the schedule for a symbolic m and runs it at two lengths."""
    f = tvm.build(s, [A, C], "llvm")
    dev = tvm.cpu(0)
    for length in (7, 100):
        a = tvm.nd.array(np.random.uniform(size=length).astype(A.dtype), dev)
        c = tvm.nd.array(np.zeros(length, dtype=C.dtype), dev)
        f(a, c)
        np.testing.assert_allclose(c.numpy(), (a.numpy() + 1) * 2, rtol=1e-6)


# By default every stage is computed at the root, one after the other.
A, B, C = two_stages()
s = te.create_schedule(C.op)
print(tvm.lower(s, [A, B, C], simple_mode=True))
check(s, A, C)

# compute_at: B computed inside C's loop, one element at a time.
A, B, C = two_stages()
s = te.create_schedule(C.op)
s[B].compute_at(s[C], C.op.axis[0])
print(tvm.lower(s, [A, B, C], simple_mode=True))
check(s, A, C)

# compute_inline: B's expression substituted where C reads it.
A, B, C = two_stages()
s = te.create_schedule(C.op)
s[B].compute_inline()
print(tvm.lower(s, [A, B, C], simple_mode=True))
check(s, A, C)

# compute_root: undoes the compute_at.
A, B, C = two_stages()
s = te.create_schedule(C.op)
s[B].compute_at(s[C], C.op.axis[0])
s[B].compute_root()
print(tvm.lower(s, [A, B, C], simple_mode=True))
check(s, A, C)
