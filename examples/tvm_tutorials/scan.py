"""What TVM's "Scan and Recurrent Kernel" tutorial teaches, as a TVM user writes it, run with
loom: a cumulative sum as `te.scan` (state placeholder, init, update) over symbolic shapes,
scheduled and built for the CPU; a scan cell of two stages; a scan with two states. The GPU
binding and the CUDA build are replaced by a split and an "llvm" build."""

import numpy as np

import loom as tvm
import loom.testing
from loom import te

# Cumulative sum over the rows of X: row t of the state is row t - 1 plus X[t].
m = te.var("m")
n = te.var("n")
X = te.placeholder((m, n), name="X")
s_state = te.placeholder((m, n))
s_init = te.compute((1, n), lambda _, i: X[0, i])
s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
s_scan = tvm.te.scan(s_init, s_update, s_state, inputs=[X])

# The init and the update are scheduled as stages of their own (never the time axis).
s = te.create_schedule(s_scan.op)
xo, xi = s[s_init].split(s_init.op.axis[1], factor=256)
xo, xi = s[s_update].split(s_update.op.axis[1], factor=256)
s[s_update].vectorize(xi)
print(tvm.lower(s, [X, s_scan], simple_mode=True))

fscan = tvm.build(s, [X, s_scan], "llvm", name="myscan")
dev = tvm.cpu(0)
n = 1024
m = 10
a_np = np.random.uniform(size=(m, n)).astype(s_scan.dtype)
a = tvm.nd.array(a_np, dev)
b = tvm.nd.array(np.zeros((m, n), dtype=s_scan.dtype), dev)
fscan(a, b)
tvm.testing.assert_allclose(b.numpy(), np.cumsum(a_np, axis=0), rtol=1e-5)

# A scan cell of two stages: s1 doubles the previous state, s2 adds X.
m = te.var("m")
n = te.var("n")
X = te.placeholder((m, n), name="X")
s_state = te.placeholder((m, n))
s_init = te.compute((1, n), lambda _, i: X[0, i])
s_update_s1 = te.compute((m, n), lambda t, i: s_state[t - 1, i] * 2, name="s1")
s_update_s2 = te.compute((m, n), lambda t, i: s_update_s1[t, i] + X[t, i], name="s2")
s_scan = tvm.te.scan(s_init, s_update_s2, s_state, inputs=[X])

s = te.create_schedule(s_scan.op)
xo, xi = s[s_update_s2].split(s_update_s2.op.axis[1], factor=32)
s[s_update_s1].compute_at(s[s_update_s2], xo)
print(tvm.lower(s, [X, s_scan], simple_mode=True))

fscan = tvm.build(s, [X, s_scan], "llvm")
x_np = np.random.uniform(size=(6, 40)).astype("float32")
expected = x_np.copy()
for t in range(1, 6):
    expected[t] = expected[t - 1] * 2 + x_np[t]
out = tvm.nd.array(np.zeros((6, 40), dtype="float32"), dev)
fscan(tvm.nd.array(x_np, dev), out)
tvm.testing.assert_allclose(out.numpy(), expected, rtol=1e-5)

# Two states: the second accumulates the first state's column 0.
m = te.var("m")
n = te.var("n")
l = te.var("l")
X = te.placeholder((m, n), name="X")
s_state1 = te.placeholder((m, n))
s_state2 = te.placeholder((m, l))
s_init1 = te.compute((1, n), lambda _, i: X[0, i])
s_init2 = te.compute((1, l), lambda _, i: 0.0)
s_update1 = te.compute((m, n), lambda t, i: s_state1[t - 1, i] + X[t, i])
s_update2 = te.compute((m, l), lambda t, i: s_state2[t - 1, i] + s_state1[t - 1, 0])
s_scan1, s_scan2 = tvm.te.scan(
    [s_init1, s_init2], [s_update1, s_update2], [s_state1, s_state2], inputs=[X]
)
s = te.create_schedule(s_scan1.op)
print(tvm.lower(s, [X, s_scan1, s_scan2], simple_mode=True))

fscan = tvm.build(s, [X, s_scan1, s_scan2], "llvm")
x_np = np.random.uniform(size=(5, 8)).astype("float32")
first = np.cumsum(x_np, axis=0)
second = np.zeros((5, 3), "float32")
for t in range(1, 5):
    second[t] = second[t - 1] + first[t - 1, 0]
out1 = tvm.nd.array(np.zeros((5, 8), dtype="float32"), dev)
out2 = tvm.nd.array(np.zeros((5, 3), dtype="float32"), dev)
fscan(tvm.nd.array(x_np, dev), out1, out2)
tvm.testing.assert_allclose(out1.numpy(), first, rtol=1e-5)
tvm.testing.assert_allclose(out2.numpy(), second, rtol=1e-5)
