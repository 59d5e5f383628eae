"""The float32 math functions of loom/codegen/llvm/vecmath.py against numpy, over the whole range.

Each function runs as a vectorized TE kernel (16 lanes) and as scalar code, built for the host
and, on x86-64, for a CPU without fused multiply-add (`-mcpu=x86-64`: every `llvm.fmuladd` is
then a multiply and an add). Inputs: every 2^12-th float32 bit pattern (about a million values,
both signs: zeros, denormals, normals, infinities, NaNs), random values where the function
varies, and the special values (thresholds of overflow and underflow, the smallest and largest
denormals and normals). The reference is numpy's float64 function (math.erf for erf) rounded to
float32. Every result must be within the documented bound (vecmath.ULP_BOUNDS) of it, counted as
the number of float32 values between the two, and exactly NaN, an infinity or a signed zero
where the reference is.
"""

from __future__ import annotations

import functools
import math
import platform
import re

import numpy as np
import pytest

import loom
from loom import te
from loom.backend.cpu.strategies import elementwise_kernel
from loom.codegen.llvm.vecmath import EXP_SHORT, ULP_BOUNDS
from loom.ir.op import math_call

UNARY = ["exp", "exp2", "log", "log2", "log10", "tanh", "erf"]
CHUNK = 1 << 16

# where each function is neither constant nor over/underflowing: sampled densely
DOMAIN = {
    "exp": (-104.0, 89.0),
    "exp2": (-151.0, 129.0),
    "log": (0.0, 16.0),
    "log2": (0.0, 16.0),
    "log10": (0.0, 16.0),
    "tanh": (-10.0, 10.0),
    "erf": (-4.5, 4.5),
}

F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)
F32_DENORMAL = float(np.finfo(np.float32).smallest_subnormal)
SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0]
SPECIALS += [F32_DENORMAL, -F32_DENORMAL, F32_TINY, -F32_TINY, F32_MAX, -F32_MAX]
SPECIALS += [F32_TINY - F32_DENORMAL, -(F32_TINY - F32_DENORMAL)]  # the largest denormals
# exp's and exp2's overflow and underflow thresholds, and where denormal results begin
SPECIALS += [88.72283, 88.72284, 88.7229, -87.33654, -87.3366, -103.972, -103.9721, -104.0]
SPECIALS += [128.0, 127.99999, 128.00002, -126.0, -149.0, -149.5, -150.0, -150.00002, -151.0]
SPECIALS += [0.625, -0.625, 0.921875, -0.921875, 3.9, 9.0, 44.0]  # tanh's and erf's splits

TARGETS = ["llvm"]
if platform.machine() in ("x86_64", "AMD64"):
    TARGETS.append("llvm -mcpu=x86-64")  # SSE2 only: no fused multiply-add


def _f32(values) -> np.ndarray:
    return np.asarray(values, np.float64).astype(np.float32)


def every_bit_pattern(step: int) -> np.ndarray:
    return np.arange(0, 1 << 32, step, dtype=np.uint64).astype(np.uint32).view(np.float32)


def pad(*arrays: np.ndarray) -> list[np.ndarray]:
    """The arrays padded (with their first value) to whole chunks of the TE kernel."""
    n = len(arrays[0])
    size = -(-n // CHUNK) * CHUNK
    return [np.concatenate([a, np.full(size - n, a[0], np.float32)]) for a in arrays]


def unary_inputs(op: str) -> np.ndarray:
    lo, hi = DOMAIN[op]
    dense = np.random.default_rng(0).uniform(lo, hi, 1 << 18)
    return np.concatenate([every_bit_pattern(1 << 12), _f32(dense), _f32(SPECIALS)])


def pow_inputs() -> tuple[np.ndarray, np.ndarray]:
    """Every 2^21-th base with integer and half-integer powers and special ones; a grid of bit
    patterns of both; random bases and powers where the result is finite."""
    bases = np.concatenate([every_bit_pattern(1 << 21), _f32(SPECIALS)])
    powers = np.arange(-8.0, 8.5, 0.5)
    powers = _f32([*powers, *SPECIALS, 2.0**24, 2.0**24 + 2, 2.0**23 + 1, 1e30, -1e30, 0.1, -0.3])
    x1, y1 = np.meshgrid(bases, powers)
    x2, y2 = np.meshgrid(every_bit_pattern(1 << 23), every_bit_pattern(1 << 22))
    rng = np.random.default_rng(1)
    x3, y3 = _f32(rng.uniform(0.0, 4.0, 1 << 18)), _f32(rng.uniform(-60.0, 60.0, 1 << 18))
    return (
        np.concatenate([x1.ravel(), x2.ravel(), x3]),
        np.concatenate([y1.ravel(), y2.ravel(), y3]),
    )


@functools.cache
def inputs(op: str) -> tuple[np.ndarray, ...]:
    return pow_inputs() if op == "pow" else (unary_inputs(op),)


@functools.cache
def reference(op: str) -> np.ndarray:
    with np.errstate(all="ignore"):  # signaling NaNs among the bit patterns
        wide = [a.astype(np.float64) for a in inputs(op)]
        if op == "erf":
            return np.vectorize(math.erf, otypes=[np.float64])(wide[0]).astype(np.float32)
        numpy_fn = {"pow": np.power}.get(op) or getattr(np, op)
        return numpy_fn(*wide).astype(np.float32)


def ordered(values: np.ndarray) -> np.ndarray:
    """float32 values as integers in the order of the floats (+0 and -0 both 0)."""
    bits = values.view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


def errors(op: str, got: np.ndarray, args: tuple[np.ndarray, ...]) -> tuple[int, list[str]]:
    """(the largest distance in float32 ulps, the inputs whose NaN/infinity/zero is wrong)."""
    want = reference(op)
    nan_got, nan_want = np.isnan(got), np.isnan(want)
    both = ~nan_got & ~nan_want
    wrong = nan_got != nan_want
    wrong |= both & (np.isinf(got) | np.isinf(want)) & (got != want)
    wrong |= both & (got == 0) & (want == 0) & (np.signbit(got) != np.signbit(want))
    distance = np.abs(ordered(np.where(both, got, 0)) - ordered(np.where(both, want, 0)))
    shown = [
        f"{op}{tuple(float(a[k]) for a in args)} = {got[k]!r}, want {want[k]!r}"
        for k in np.flatnonzero(wrong)[:10]
    ]
    worst = int(distance.max())
    if worst > ULP_BOUNDS[op]:
        k = int(np.argmax(distance))
        shown.append(
            f"{op}{tuple(float(a[k]) for a in args)} = {got[k]!r}, want {want[k]!r}: {worst} ulps"
        )
    return worst, shown


def kernels(op: str, n: int, target: str, lanes: int = 16):
    """(vector, scalar) modules computing `op` over n float32 values (vectors of `lanes`)."""
    arity = 2 if op == "pow" else 1
    fn = lambda *xs: math_call(op, *xs)  # noqa: E731
    s, args = elementwise_kernel(fn, (n,), arity, chunk=CHUNK, vector=lanes, parallel=False)
    vector = loom.build(s, args, target=target)
    inputs = [te.placeholder((n,), "float32", name=f"X{k}") for k in range(arity)]
    out = te.compute((n,), lambda i: fn(*(x[i] for x in inputs)), name="Y")
    scalar = loom.build(te.create_schedule(out.op), [*inputs, out], target=target)
    return vector, scalar


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", [*UNARY, "pow"])
def test_error_within_the_documented_bound(op, target):
    args = inputs(op)
    n = len(args[0])
    padded = pad(*args)
    problems = []
    for code, module in zip(("vector", "scalar"), kernels(op, len(padded[0]), target)):
        out = loom.nd.empty(padded[0].shape, "float32")
        module(*(loom.nd.array(a) for a in padded), out)
        worst, shown = errors(op, np.asarray(out)[:n], args)
        problems += [f"{code} code on {target}: {line}" for line in shown]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("lanes", [16, 32, 64])
@pytest.mark.parametrize("target", TARGETS)
def test_exp_gives_the_same_on_its_short_and_its_full_path(target, lanes):
    """A vector whose lanes are all within +-EXP_SHORT takes exp's short path (most vectors of
    the whole-range test above take the full one): its results are the full path's, bit for
    bit, and within the bound; scalar code, one lane, agrees. One lane beyond (or NaN) sends
    its whole vector the full way, wherever it is in a vector of several registers (the check
    folds their halves first: vecmath's `within`)."""
    rng = np.random.default_rng(2)
    inside = _f32(rng.uniform(-EXP_SHORT, EXP_SHORT, 4 * CHUNK))
    inside[:6] = [EXP_SHORT, -EXP_SHORT, 0.0, -0.0, 1e-30, -1e-30]
    mixed = inside.copy()
    vectors = np.arange(len(inside) // lanes)
    beyond = vectors * lanes + (vectors * 7) % lanes  # one lane of every vector, all positions
    outside = _f32(
        [100.0, -100.0, math.nan, math.inf, -math.inf, np.nextafter(_f32(EXP_SHORT), 99)]
    )
    mixed[beyond] = outside[vectors % len(outside)]
    vector, scalar = kernels("exp", len(inside), target, lanes)
    got = {}
    for name, module, x in [("short", vector, inside), ("full", vector, mixed)]:
        out = loom.nd.empty(x.shape, "float32")
        module(loom.nd.array(x), out)
        got[name] = np.asarray(out)
    out = loom.nd.empty(inside.shape, "float32")
    scalar(loom.nd.array(inside), out)
    kept = np.ones(len(inside), bool)
    kept[beyond] = False
    np.testing.assert_array_equal(got["short"][kept], got["full"][kept])
    np.testing.assert_array_equal(got["short"], np.asarray(out))
    want = np.exp(inside.astype(np.float64)).astype(np.float32)
    assert np.abs(ordered(got["short"]) - ordered(want)).max() <= ULP_BOUNDS["exp"]
    with np.errstate(over="ignore"):
        want_beyond = np.exp(mixed[beyond].astype(np.float64)).astype(np.float32)
    finite = np.isfinite(want_beyond)
    np.testing.assert_array_equal(got["full"][beyond][~finite], want_beyond[~finite])
    distance = np.abs(ordered(got["full"][beyond][finite]) - ordered(want_beyond[finite]))
    assert distance.max() <= ULP_BOUNDS["exp"]


def test_float16_goes_through_float32():
    x = np.linspace(-10, 10, 4096).astype(np.float16)
    X = te.placeholder((4096,), "float16", name="X")
    Y = te.compute((4096,), lambda i: te.exp(X[i]), name="Y")
    s = te.create_schedule(Y.op)
    _, inner = s[Y].split(Y.op.axis[0], factor=16)
    s[Y].vectorize(inner)
    f = loom.build(s, [X, Y], target="llvm")
    out = loom.nd.empty((4096,), "float16")
    f(loom.nd.array(x), out)
    want = np.exp(x.astype(np.float64)).astype(np.float16)
    assert np.all(np.abs(ordered16(np.asarray(out)) - ordered16(want)) <= 1)


def ordered16(values: np.ndarray) -> np.ndarray:
    bits = values.view(np.int16).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFF), bits)


LIBM_NAMES = r"\b(expf|exp2f|logf|log2f|log10f|tanhf|erff|powf)\b"


@pytest.mark.parametrize(
    "target, lanes",
    [
        ("llvm", 16),
        ("llvm -mtriple=aarch64-linux-gnu -mattr=+neon", 4),
        (loom.target.hexagon("v66"), 4),  # no float vectors in HVX v66: 4 scalar lanes
    ],
    ids=["host", "aarch64", "hexagon"],
)
def test_vector_code_calls_no_libm(target, lanes):
    """Every target gets the functions as inline vector arithmetic (code for another triple
    compiles without running): no call of a C math function is left."""
    for op in [*UNARY, "pow"]:
        arity = 2 if op == "pow" else 1
        fn = lambda *xs, op=op: math_call(op, *xs)  # noqa: E731
        s, args = elementwise_kernel(fn, (1024,), arity, chunk=256, vector=lanes, parallel=False)
        asm = loom.build(s, args, target=target).get_source("asm")
        assert not re.search(LIBM_NAMES, asm), f"{op} on {target} calls libm"


def test_erf_is_exactly_one_where_it_rounds_to_one():
    """From 3.919206 (the least float32 whose erf rounds to 1) erf is +-1 exactly, so that
    Gelu's 1 + erf(x / sqrt 2) is 0 for a large negative x, and NaN times inf at -inf."""
    x = _f32([3.919206, 4.0, 10.0, np.inf])
    x = np.concatenate([x, -x])
    padded = pad(x)[0]
    vector, scalar = kernels("erf", len(padded), TARGETS[0])
    for module in (vector, scalar):
        out = loom.nd.empty(padded.shape, "float32")
        module(loom.nd.array(padded), out)
        np.testing.assert_array_equal(np.asarray(out)[: len(x)], np.sign(x))
