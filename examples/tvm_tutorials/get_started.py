"""What TVM's "Working with Operators Using Tensor Expression" tutorial teaches, as a TVM user
writes it, run with loom: vector addition over a symbolic length (build, run, time, parallel,
vectorize, save and load the library), then a matrix multiplication optimized step by step
(blocking, vectorization, loop permutation, array packing, a write cache, parallel loops).
The GPU cells are left out."""

import timeit

import numpy as np

import loom as tvm
import loom.testing
from loom import te

# -- vector addition ------------------------------------------------------------------------------
tgt = tvm.target.Target(target="llvm", host="llvm")

n = te.var("n")
A = te.placeholder((n,), name="A")
B = te.placeholder((n,), name="B")
C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
s = te.create_schedule(C.op)
fadd = tvm.build(s, [A, B, C], tgt, name="myadd")

dev = tvm.device(tgt.kind.name, 0)
length = 1024
a = tvm.nd.array(np.random.uniform(size=length).astype(A.dtype), dev)
b = tvm.nd.array(np.random.uniform(size=length).astype(B.dtype), dev)
c = tvm.nd.array(np.zeros(length, dtype=C.dtype), dev)
fadd(a, b, c)
tvm.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())

TIMED_LENGTH = 32768
numpy_seconds = timeit.timeit(
    setup="import numpy as np\n"
    f"x = np.random.rand({TIMED_LENGTH}, 1).astype('float32')\n"
    f"y = np.random.rand({TIMED_LENGTH}, 1).astype('float32')\n",
    stmt="x + y",
    number=20,
)
timings = [("numpy", numpy_seconds / 20)]


def time_addition(func, label):
    """Times `func` on vectors longer than the ones it was checked with: `n` is symbolic."""
    x = tvm.nd.array(np.random.uniform(size=TIMED_LENGTH).astype(A.dtype), dev)
    y = tvm.nd.array(np.random.uniform(size=TIMED_LENGTH).astype(B.dtype), dev)
    z = tvm.nd.array(np.zeros(TIMED_LENGTH, dtype=C.dtype), dev)
    seconds = func.time_evaluator(func.entry_name, dev, number=5)(x, y, z).mean
    tvm.testing.assert_allclose(z.numpy(), x.numpy() + y.numpy())
    print(f"{label}: {seconds:f}")
    timings.append((label, seconds))


time_addition(fadd, "naive")

s[C].parallel(C.op.axis[0])
print(tvm.lower(s, [A, B, C], simple_mode=True))
fadd_parallel = tvm.build(s, [A, B, C], tgt, name="myadd_parallel")
fadd_parallel(a, b, c)
tvm.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
time_addition(fadd_parallel, "parallel")

# A fresh schedule: the loop split in two, the outer half on threads, the inner one in SIMD.
n = te.var("n")
A = te.placeholder((n,), name="A")
B = te.placeholder((n,), name="B")
C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
s = te.create_schedule(C.op)
outer, inner = s[C].split(C.op.axis[0], factor=4)
s[C].parallel(outer)
s[C].vectorize(inner)
fadd_vector = tvm.build(s, [A, B, C], tgt, name="myadd_vector")
time_addition(fadd_vector, "vector")
print(tvm.lower(s, [A, B, C], simple_mode=True))

for label, seconds in timings:
    print(f"{label:>20}\t{seconds:>20.9f}\t{seconds / timings[0][1]:>20.3f}")

# -- saving the module and loading it back --------------------------------------------------------
from loom.contrib import cc, utils  # noqa: E402  (the tutorial imports these here)

temp = utils.tempdir()
fadd.save(temp.relpath("myadd.o"))
cc.create_shared(temp.relpath("myadd.so"), [temp.relpath("myadd.o")])
print(temp.listdir())

fadd_loaded = tvm.runtime.load_module(temp.relpath("myadd.so"))
fadd_loaded(a, b, c)
tvm.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())

fadd.export_library(temp.relpath("myadd_pack.so"))
fadd_packed = tvm.runtime.load_module(temp.relpath("myadd_pack.so"))
fadd_packed(a, b, c)
tvm.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())

# -- matrix multiplication ------------------------------------------------------------------------
M = K = N = 256
dtype = "float32"
target = tvm.target.Target(target="llvm", host="llvm")
dev = tvm.device(target.kind.name, 0)
a = tvm.nd.array(np.random.rand(M, K).astype(dtype), dev)
b = tvm.nd.array(np.random.rand(K, N).astype(dtype), dev)
answer = np.dot(a.numpy(), b.numpy())

k = te.reduce_axis((0, K), "k")
A = te.placeholder((M, K), name="A")
B = te.placeholder((K, N), name="B")
C = te.compute((M, N), lambda x, y: te.sum(A[x, k] * B[k, y], axis=k), name="C")

matmul_timings = []


def check_and_time(s, label):
    func = tvm.build(s, [A, B, C], target=target, name="mmult")
    c = tvm.nd.array(np.zeros((M, N), dtype=dtype), dev)
    func(a, b, c)
    tvm.testing.assert_allclose(c.numpy(), answer, rtol=1e-5)
    seconds = func.time_evaluator(func.entry_name, dev, number=1)(a, b, c).mean
    print(f"{label}: {seconds:f}")
    matmul_timings.append((label, seconds))


s = te.create_schedule(C.op)
check_and_time(s, "none")
print(tvm.lower(s, [A, B, C], simple_mode=True))

# Blocking: 32x32 tiles of C, the reduction hoisted outside the tile.
bn = 32
xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
(k,) = s[C].op.reduce_axis
ko, ki = s[C].split(k, factor=4)
s[C].reorder(xo, yo, ko, ki, xi, yi)
check_and_time(s, "blocking")
print(tvm.lower(s, [A, B, C], simple_mode=True))

# Vectorization of the innermost loop, on the same schedule.
s[C].vectorize(yi)
check_and_time(s, "vectorization")
print(tvm.lower(s, [A, B, C], simple_mode=True))

# Loop permutation: xi outside ki, so A is read along its rows.
s = te.create_schedule(C.op)
xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
(k,) = s[C].op.reduce_axis
ko, ki = s[C].split(k, factor=4)
s[C].reorder(xo, yo, ko, xi, ki, yi)
s[C].vectorize(yi)
check_and_time(s, "loop permutation")
print(tvm.lower(s, [A, B, C], simple_mode=True))

# Array packing: B rearranged to [N / bn][K][bn], so the inner loop reads it contiguously.
packedB = te.compute((N / bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
C = te.compute(
    (M, N),
    lambda x, y: te.sum(A[x, k] * packedB[y // bn, k, tvm.tir.indexmod(y, bn)], axis=k),
    name="C",
)
s = te.create_schedule(C.op)
xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
(k,) = s[C].op.reduce_axis
ko, ki = s[C].split(k, factor=4)
s[C].reorder(xo, yo, ko, xi, ki, yi)
s[C].vectorize(yi)
x, y, z = s[packedB].op.axis
s[packedB].vectorize(z)
s[packedB].parallel(x)
check_and_time(s, "array packing")
print(tvm.lower(s, [A, B, C], simple_mode=True))

# Block caching: each tile accumulates in a write cache, then is copied to C.
s = te.create_schedule(C.op)
CC = s.cache_write(C, "global")
xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
s[CC].compute_at(s[C], yo)
xc, yc = s[CC].op.axis
(k,) = s[CC].op.reduce_axis
ko, ki = s[CC].split(k, factor=4)
s[CC].reorder(ko, xc, ki, yc)
s[CC].unroll(ki)
s[CC].vectorize(yc)
x, y, z = s[packedB].op.axis
s[packedB].vectorize(z)
s[packedB].parallel(x)
check_and_time(s, "block caching")
print(tvm.lower(s, [A, B, C], simple_mode=True))

# Parallelization of the outer tile loop, on the same schedule (annotating packedB's loops
# again, as the tutorial does, changes nothing).
s[C].parallel(xo)
x, y, z = s[packedB].op.axis
s[packedB].vectorize(z)
s[packedB].parallel(x)
check_and_time(s, "parallelization")
print(tvm.lower(s, [A, B, C], simple_mode=True))

for label, seconds in matmul_timings:
    print(f"{label:>20}\t{seconds:>20.9f}\t{seconds / matmul_timings[0][1]:>20.3f}")
