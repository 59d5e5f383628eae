"""Schedules written by hand against the NPU's pieces (intrinsics, scopes, pragma rules): what
the strategies do not exercise, and what the backend must refuse."""

import threading

import numpy as np
import pytest

import loom
from loom import LoomError, te
from loom.backend import npu
from loom.backend.npu import simulator as npu_sim
from loom.backend.npu.arch import ACC, SPAD

from . import npu_reference as ref

DIM = npu_sim.DIM


def matmul_schedule(m, n, k, intrinsic, column_split=DIM):
    """The matmul strategy's schedule, with the intrinsic and the column split to choose."""
    bias_given = intrinsic is npu.BACKEND.intrinsics()["npu_gemm_bias"]
    A = te.placeholder((m, k), "int8", name="A")
    B = te.placeholder((k, n), "int8", name="B")
    bias = te.placeholder((n,), "int32", name="bias")
    r = te.reduce_axis(k, name="k")

    def product(i, j):
        terms = A[i, r].astype("int32") * B[r, j].astype("int32")
        return te.sum(terms, axis=r, init=bias[j]) if bias_given else te.sum(terms, axis=r)

    acc = te.compute((m, n), product, name="acc")
    C = te.compute((m, n), lambda i, j: npu.requantize(acc[i, j], 3, 4, False), name="C")
    s = te.create_schedule(C.op)
    s[acc].set_scope(ACC)
    A_s = s.cache_read(A, SPAD, [acc])
    B_s = s.cache_read(B, SPAD, [acc])
    _, _, ii, _ = s[C].tile(*C.op.axis, DIM, DIM)
    s[C].pragma(ii, "npu_mvout")
    s[acc].compute_at(s[C], s[C].leaf_iter_vars[1])
    ai, aj = s[acc].op.axis
    ajo, aji = s[acc].split(aj, factor=column_split)
    ko, ki = s[acc].split(s[acc].op.reduce_axis[0], factor=DIM)
    s[acc].reorder(ajo, ko, ai, aji, ki)
    s[acc].tensorize(ai, intrinsic)
    for t in (acc, A_s, B_s):
        s[t].storage_align(t.op.axis[0], DIM, 0)
    for stage in (A_s, B_s):
        s[stage].compute_at(s[acc], ko)
        s[stage].pragma(stage.op.axis[0], "npu_mvin")
    return s, [A, B, bias, C] if bias_given else [A, B, C]


@pytest.mark.parametrize("shape", [(16, 16, 16), (17, 5, 33), (1, 1, 1)])
def test_the_intrinsic_without_bias_zeroes_the_accumulator(shape):
    m, n, k = shape
    mod = loom.build(*matmul_schedule(m, n, k, npu.BACKEND.intrinsics()["npu_gemm"]), target="npu")
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    c = np.zeros((m, n), np.int8)
    mod(a, b, c)
    np.testing.assert_array_equal(c, ref.matmul(a, b, np.zeros(n, np.int64), 3, 4, False))


def test_a_region_starting_inside_a_row_is_refused():
    gemm = npu.BACKEND.intrinsics()["npu_gemm_bias"]
    with pytest.raises(
        LoomError,
        match=r"npu gemm C: acc starts at element \(j.outer \* 8\), which is not provably at "
        r"the start of a row",
    ):
        loom.build(*matmul_schedule(16, 16, 16, gemm, column_split=8), target="npu")


def test_a_parallel_loop_issuing_instructions_is_refused():
    sch, args = npu.BACKEND.strategy("matmul", 32, 32, 16, block_rows=16)  # two row blocks
    sch[args[3]].parallel(sch[args[3]].leaf_iter_vars[0])
    with pytest.raises(LoomError, match=r"parallel loop i.outer issues NPU instructions"):
        loom.build(sch, args, target="npu", name="mm")


def test_threads_take_turns_on_the_one_npu():
    mod = loom.build(*npu.BACKEND.strategy("matmul", 48, 48, 48, shift=7), target="npu")
    wrong = []

    def work(seed):
        a, b = (
            np.random.default_rng(seed).integers(-128, 128, (48, 48)).astype(np.int8)
            for _ in range(2)
        )
        bias = np.zeros(48, np.int32)
        for _ in range(15):
            c = np.zeros((48, 48), np.int8)
            mod(a, b, bias, c)
            wrong.append(not np.array_equal(c, ref.matmul(a, b, bias, 1, 7, False)))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wrong) == 45 and not any(wrong)


def test_inputs_may_be_read_only_and_the_same_array():
    mod = loom.build(*npu.BACKEND.strategy("matmul", 16, 16, 16), target="npu", name="mm")
    assert [p.written for p in mod.signatures["mm"].params] == [False, False, False, True]
    a = np.arange(256, dtype=np.int8).reshape(16, 16)
    a.flags.writeable = False
    bias = np.zeros(16, np.int32)
    c = np.zeros((16, 16), np.int8)
    mod["mm"](a, a, bias, c)
    np.testing.assert_array_equal(c, ref.matmul(a, a, bias, 1, 0, False))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"multiplier": 0}, r"multiplier in \[1, 2\^31\)"),
        ({"shift": 63}, r"shift in \[0, 62\]"),
        ({"relu": 2}, r"relu a bool"),
        ({"multiplier": 2.5}, r"multiplier must be an int"),
    ],
)
def test_requantization_parameters_are_checked(kwargs, message):
    with pytest.raises((TypeError, ValueError), match=message):
        npu.BACKEND.strategy("matmul", 4, 4, 4, **kwargs)


def test_numpy_integers_are_accepted_as_parameters():
    x = te.placeholder((4,), "int32", name="x")
    assert str(npu.requantize(x[0], np.int64(3), np.int32(4), np.bool_(True))) == str(
        npu.requantize(x[0], 3, 4, True)
    )
    s, args = npu.BACKEND.strategy("conv2d", (1, 4, 4, 1), (1, 1, 1, 1), stride=np.int64(2))
    assert args[-1].shape == (1, 2, 2, 1)


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (((1, 4, 4, 1), (1, 1, 1, 1)), {"stride": 0}, r"stride must be an int >= 1, got 0"),
        (((1, 4, 4, 1), (1, 1, 1, 1)), {"padding": -1}, r"padding must be an int >= 0, got -1"),
        (((1, 2, 2, 1), (3, 3, 1, 1)), {}, r"a 3x3 kernel does not fit the 2x2 input"),
        (((4, 4, 1), (1, 1, 1, 1)), {}, r"data_shape must be 4 sizes"),
        (((1, 4, 4, 2), (1, 1, 3, 1)), {}, r"data has 2 channels, the kernel 3"),
    ],
)
def test_conv2d_arguments_are_checked(args, kwargs, message):
    with pytest.raises(LoomError, match=message):
        npu.BACKEND.strategy("conv2d", *args, **kwargs)


def test_a_vectorized_host_stage_builds_for_the_c_generating_backend():
    sch, args = npu.BACKEND.strategy("conv2d", (1, 6, 6, 16), (3, 3, 16, 16), padding=1)
    padded = next(stage for stage in sch.stages if stage.op.name == "padded")
    _, inner = padded.split(padded.op.axis[3], factor=8)
    padded.vectorize(inner)
    mod = loom.build(sch, args, target="npu", name="conv")
    assert "ramp(" not in mod.imports[0].get_source("ir")  # the C back end got scalar IR
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, 6, 6, 16)).astype(np.int8)
    w = rng.integers(-128, 128, (3, 3, 16, 16)).astype(np.int8)
    bias = np.zeros(16, np.int32)
    out = np.zeros(args[3].shape, np.int8)
    mod["conv"](x, w, bias, out)
    np.testing.assert_array_equal(out, ref.conv2d_nhwc(x, w, bias, 1, 1, 1, 0, False))
