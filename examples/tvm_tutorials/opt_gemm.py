"""What TVM's "How to optimize GEMM on CPU" tutorial teaches, as a TVM user writes it, run with
loom: a float32 matrix multiplication (512x512 here, where the tutorial takes 1024, to keep the
naive baseline short), from the default schedule through blocking, vectorization, loop
permutation, array packing and a write cache to parallel loops; each schedule is built, checked
against numpy, timed once and printed by `tvm.lower`."""

import timeit

import numpy

import loom as tvm
import loom.testing
from loom import te

M = K = N = 512
dtype = "float32"
target = "llvm"
dev = tvm.device(target, 0)

a = tvm.nd.array(numpy.random.rand(M, K).astype(dtype), dev)
b = tvm.nd.array(numpy.random.rand(K, N).astype(dtype), dev)
numpy_seconds = timeit.timeit(lambda: numpy.dot(a.numpy(), b.numpy()), number=2) / 2
print(f"Numpy running time: {numpy_seconds:f}")
answer = numpy.dot(a.numpy(), b.numpy())

k = te.reduce_axis((0, K), "k")
A = te.placeholder((M, K), name="A")
B = te.placeholder((K, N), name="B")
C = te.compute((M, N), lambda m, n: te.sum(A[m, k] * B[k, n], axis=k), name="C")


def run(s, label):
    """Builds the schedule, checks its product against numpy and times one run."""
    func = tvm.build(s, [A, B, C], target=target, name="mmult")
    assert func
    c = tvm.nd.array(numpy.zeros((M, N), dtype=dtype), dev)
    func(a, b, c)
    tvm.testing.assert_allclose(c.numpy(), answer, rtol=1e-5)
    evaluator = func.time_evaluator(func.entry_name, dev, number=1)
    print(f"{label}: {evaluator(a, b, c).mean:f}")
    print(tvm.lower(s, [A, B, C], simple_mode=True))


# Baseline: the default schedule, three nested loops.
s = te.create_schedule(C.op)
run(s, "Baseline")

bn = 32  # a 32x32 float block is 4 KB, well inside a 32 KB L1 data cache
kfactor = 4


def blocked(order):
    """C tiled in bn x bn blocks, its reduction split by kfactor, the loops in `order`."""
    s = te.create_schedule(C.op)
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    (kaxis,) = s[C].op.reduce_axis
    ko, ki = s[C].split(kaxis, factor=kfactor)
    loops = {"mo": mo, "no": no, "mi": mi, "ni": ni, "ko": ko, "ki": ki}
    s[C].reorder(*(loops[name] for name in order.split()))
    return s, ni


# Blocking: the reduction hoisted outside the block loops.
s, ni = blocked("mo no ko ki mi ni")
run(s, "Opt1")

# Vectorization of the block's inner row.
s, ni = blocked("mo no ko ki mi ni")
s[C].vectorize(ni)
run(s, "Opt2")

# Loop permutation: mi outside ki, so A is read along its rows.
s, ni = blocked("mo no ko mi ki ni")
s[C].vectorize(ni)
run(s, "Opt3")

# Array packing: B stored as [N / bn][K][bn], read contiguously by the vectorized loop.
packedB = te.compute(
    (N / bn, K, bn), lambda bigN, k, littleN: B[k, bigN * bn + littleN], name="packedB"
)
C = te.compute(
    (M, N),
    lambda m, n: te.sum(A[m, k] * packedB[n // bn, k, tvm.tir.indexmod(n, bn)], axis=k),
    name="C",
)
s, ni = blocked("mo no ko mi ki ni")
s[C].vectorize(ni)
bigN, _, littleN = s[packedB].op.axis
s[packedB].vectorize(littleN)
s[packedB].parallel(bigN)
run(s, "Opt4")


def cached(parallel):
    """Each block accumulated in a write cache computed at the block, then copied to C."""
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bn, bn)
    s[CC].compute_at(s[C], no)
    mc, nc = s[CC].op.axis
    (kaxis,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kaxis, factor=kfactor)
    s[CC].reorder(ko, mc, ki, nc)
    s[CC].vectorize(nc)
    s[CC].unroll(ki)
    if parallel:
        s[C].parallel(mo)
    bigN, _, littleN = s[packedB].op.axis
    s[packedB].vectorize(littleN)
    s[packedB].parallel(bigN)
    return s


# Write cache for blocks.
run(cached(parallel=False), "Opt5")

# Parallel: the outer block loop on threads.
run(cached(parallel=True), "Opt6")
