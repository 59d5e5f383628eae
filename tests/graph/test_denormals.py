"""A compiled model runs with denormals flushed to zero (x86's MXCSR FTZ and DAZ, the default
-fp-flush-denormals=1: loom/codegen/llvm/fast_math.py), its pool threads too, and leaves the
caller's modes as they were; -fp-flush-denormals=0 keeps IEEE denormals."""

import platform

import numpy as np
import pytest

import loom

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="-fp-flush-denormals acts on x86-64 only"
)

TINY = np.float32(2.0**-70)  # normal; TINY * TINY = 2^-140 is a denormal
DENORMAL = np.float32(2.0**-140)


def product_model(n: int) -> onnx.ModelProto:
    """y = x * z for float vectors of n elements."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "z"], ["y"])],
        "product",
        [helper.make_tensor_value_info(v, TensorProto.FLOAT, [n]) for v in ("x", "z")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_model_flushes_denormal_results_and_operands_by_default():
    compiled = loom.compile(product_model(4))
    x = np.array([TINY, DENORMAL, 1.0, 3.0], np.float32)
    z = np.array([TINY, 2.0, 2.0**-126, 0.5], np.float32)
    y = compiled(x=x, z=z)["y"]
    # 2^-140 flushed to zero; the denormal operand read as zero; normal results unchanged
    np.testing.assert_array_equal(y, np.array([0.0, 0.0, 2.0**-126, 1.5], np.float32))
    # the caller's thread computes with denormals again
    assert TINY * TINY == DENORMAL


def test_fp_flush_denormals_0_keeps_them():
    compiled = loom.compile(product_model(4), target="llvm -fp-flush-denormals=0")
    x = np.array([TINY, DENORMAL, 1.0, 3.0], np.float32)
    z = np.array([TINY, 2.0, 2.0**-126, 0.5], np.float32)
    np.testing.assert_array_equal(compiled(x=x, z=z)["y"], x * z)
    assert (x * z)[0] == DENORMAL


def test_pool_threads_flush_as_their_launcher_does():
    n = 1 << 22  # an elementwise kernel of many parallel tasks
    flushed = loom.compile(product_model(n))
    kept = loom.compile(product_model(n), target="llvm -fp-flush-denormals=0")
    x = np.full(n, TINY, np.float32)
    before = loom.runtime.num_threads()
    loom.runtime.set_num_threads(2)
    try:
        for _ in range(3):  # the pool's threads go back to their own modes after each launch
            assert not flushed(x=x, z=x)["y"].any()
            assert (kept(x=x, z=x)["y"] == DENORMAL).all()
    finally:
        loom.runtime.set_num_threads(before)


def test_a_bad_value_names_the_option():
    with pytest.raises(loom.LoomError, match="-fp-flush-denormals must be 0 or 1, got 'yes'"):
        loom.compile(product_model(4), target="llvm -fp-flush-denormals=yes")
