"""What TVM's "Reduction" tutorial teaches, as a TVM user writes it, run with loom: a row sum
over symbolic shapes, split reduction loops, rfactor and the rewritten body, a 2-D reduction
(convolution), and a commutative reducer of one's own. The GPU cells (thread binding, cross-
thread reduction) are left out; the CPU build of the factored sum takes their place."""

import numpy as np

import loom as tvm
import loom.testing
from loom import te

# The row sum B[i] = sum_k A[i, k], over symbolic n and m.
n = te.var("n")
m = te.var("m")
A = te.placeholder((n, m), name="A")
k = te.reduce_axis((0, m), "k")
B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")

s = te.create_schedule(B.op)
print(tvm.lower(s, [A, B], simple_mode=True))

# Both the reduction axis and the row axis can be split: a nested reduction.
ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
xo, xi = s[B].split(B.op.axis[0], factor=32)
print(tvm.lower(s, [A, B], simple_mode=True))

# rfactor: partial sums over ki go to B.rf, whose first axis is ki; B then sums B.rf.
s = te.create_schedule(B.op)
ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
BF = s.rfactor(B, ki)
print(tvm.lower(s, [A, B], simple_mode=True))
print(s[B].op.body)

# The factored axis can run in parallel on the CPU (the tutorial binds it to GPU threads).
s[BF].parallel(BF.op.axis[0])
f = tvm.build(s, [A, B], "llvm")
dev = tvm.cpu(0)
rows, cols = 128, 200
a = tvm.nd.array(np.random.uniform(size=(rows, cols)).astype(A.dtype), dev)
b = tvm.nd.array(np.zeros(rows, dtype=B.dtype), dev)
f(a, b)
tvm.testing.assert_allclose(b.numpy(), np.sum(a.numpy(), axis=1), rtol=1e-4)

# A 3x3 convolution with unit strides, as a sum over two reduction axes.
n = te.var("n")
Input = te.placeholder((n, n), name="Input")
Filter = te.placeholder((3, 3), name="Filter")
di = te.reduce_axis((0, 3), name="di")
dj = te.reduce_axis((0, 3), name="dj")
Output = te.compute(
    (n - 2, n - 2),
    lambda i, j: te.sum(Input[i + di, j + dj] * Filter[di, dj], axis=[di, dj]),
    name="Output",
)
s = te.create_schedule(Output.op)
print(tvm.lower(s, [Input, Filter, Output], simple_mode=True))

# A reducer of one's own: the product of each row.
n = te.var("n")
m = te.var("m")
product = te.comm_reducer(lambda x, y: x * y, lambda t: tvm.tir.const(1, dtype=t), name="product")
A = te.placeholder((n, m), name="A")
k = te.reduce_axis((0, m), name="k")
B = te.compute((n,), lambda i: product(A[i, k], axis=k), name="B")
s = te.create_schedule(B.op)
f = tvm.build(s, [A, B], "llvm")
a = tvm.nd.array(np.random.uniform(0.5, 1.5, size=(16, 10)).astype(A.dtype), dev)
b = tvm.nd.array(np.zeros(16, dtype=B.dtype), dev)
f(a, b)
tvm.testing.assert_allclose(b.numpy(), np.prod(a.numpy(), axis=1), rtol=1e-5)
