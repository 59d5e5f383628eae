"""Targets (host detection, overrides) and the CPU schedules (loom.backend.cpu.strategies) at
awkward sizes."""

import numpy as np
import pytest

import loom
from loom import LoomError
from loom.backend.cpu import strategies as cpu
from loom.target import Target


def test_host_target_detection_and_override():
    host = Target("llvm")
    assert host.is_host and host.cpu and host.triple
    assert host.alignment >= 64 and host.alignment % host.vector_bytes == 0
    t = Target("llvm -mcpu=haswell -mattr=+avx2,+fma")
    assert t.cpu == "haswell" and t.features == "+avx2,+fma" and t.vector_bytes == 32
    arm = Target("llvm -mtriple=aarch64-linux-gnu")
    assert not arm.is_host and arm.vector_bytes == 16 and arm.cpu == "generic"
    assert Target("llvm -align=128").alignment == 128


def test_target_errors():
    with pytest.raises(LoomError, match=r"unknown target kind 'cuda'"):
        Target("cuda")
    with pytest.raises(LoomError, match=r"unknown target options \['foo'\]"):
        Target("llvm -foo=1")
    with pytest.raises(LoomError, match=r"must look like -key=value"):
        Target("llvm mcpu")


def test_code_for_an_overridden_cpu_uses_its_vectors():
    sch, args = cpu.elementwise_kernel(lambda x, y: x * y, (256,), 2)
    asm = loom.build(sch, args, target="llvm -mcpu=haswell -mattr=+avx2", name="mul").get_source(
        "asm"
    )
    assert "ymm" in asm and "zmm" not in asm


def test_build_for_another_triple_compiles_but_does_not_run_here():
    sch, args = cpu.elementwise_kernel(lambda x, y: x + y, (64,), 2, parallel=False)
    mod = loom.build(sch, args, target="llvm -mtriple=aarch64-linux-gnu -mattr=+neon", name="add")
    assert "fadd" in mod.get_source("asm") and "v0" in mod.get_source("asm")
    with pytest.raises(LoomError, match=r"compiled for llvm -mtriple=aarch64.* cannot run"):
        mod["add"]


@pytest.mark.parametrize("shape", [(37, 45, 29), (8, 32, 4), (1, 70, 3)])
def test_cpu_matmul_any_size(shape):
    m, n, k = shape
    sch, args = cpu.matmul(m, n, k)
    mod = loom.build(sch, args, name="mm")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    mod["mm"](a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    c2 = np.zeros((m, n), np.float32)  # the interpreter agrees on the same lowered program
    loom.ir.interpret(loom.lower(*cpu.matmul(m, n, k), name="mm"), a, b, c2)
    np.testing.assert_allclose(c, c2, rtol=1e-5, atol=1e-5)


def test_cpu_elementwise_2d():  # x * y + z: one fused multiply-add under -fp-contract=1
    sch, args = cpu.elementwise_kernel(lambda x, y, z: x * y + z, (33, 70), 3, chunk=256)
    mod = loom.build(sch, args, name="fma")
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal((33, 70)).astype(np.float32) for _ in range(3))
    out = np.zeros((33, 70), np.float32)
    mod["fma"](x, y, z, out)
    exact = x.astype(np.float64) * y + z  # a fused result is this, rounded once
    np.testing.assert_allclose(out, exact, rtol=1e-6, atol=1e-6)


def test_stack_buffers_over_the_targets_limit_are_a_build_error():
    from loom import te

    A = te.placeholder((1024,), name="A")
    T = te.compute((1024,), lambda i: A[i] + 1.0, name="T")
    C = te.compute((1024,), lambda i: T[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[T].set_scope("local")
    with pytest.raises(
        LoomError,
        match=r"allocates 4096 bytes on the stack .* more than the "
        r"target's limit of 1024; use scope 'global'",
    ):
        loom.build(s, [A, C], target="llvm -stack-limit=1024")
    loom.build(s, [A, C], target="llvm")  # within the default limit
