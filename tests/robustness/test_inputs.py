"""Bad shapes, dtypes, schedules, targets and call arguments: each refused with a clear error
that names what was wrong, and nothing of the process changed."""

import numpy as np
import pytest

import loom
from loom import te
from loom.errors import LoomError, ScheduleError
from tests.robustness.harness import refused


@pytest.mark.parametrize(
    "shape, error, match",
    [
        ((0,), ValueError, r"placeholder A shape dimensions must be positive, got 0"),
        ((-3,), ValueError, r"must be positive, got -3"),
        ((2.5,), ValueError, r"placeholder A shape: expected a whole number, got 2\.5"),
        (("a",), TypeError, r"shape must be a tuple of ints or integer expressions .*, got 'a'"),
    ],
)
def test_bad_shapes(shape, error, match):
    refused(lambda: te.placeholder(shape, name="A"), error, match)


@pytest.mark.parametrize(
    "dtype, match",
    [
        ("int7", r"int dtype must have \(8, 16, 32, 64\) bits, got 7"),
        ("banana", r"unknown dtype 'banana': expected bool, int8..int64"),
        (object, r"unknown dtype 'object'"),
        ("float32x0", r"lanes"),
    ],
)
def test_bad_dtypes(dtype, match):
    refused(lambda: te.placeholder((4,), dtype=dtype, name="A"), ValueError, match)


def test_bad_compute_rules():
    A = te.placeholder((8,), name="A")
    refused(
        lambda: te.compute((8,), lambda i, j: A[i], name="C"),
        LoomError,
        r"the rule takes 2 index arguments, the shape has 1 dimensions",
    )
    refused(lambda: te.compute((8,), lambda i: "x"), TypeError, r"expected a PrimExpr")
    refused(
        lambda: te.compute((8,), lambda i: A[i, i]),
        LoomError,
        r"tensor A has 1 dimensions, indexed with 2 indices",
    )


def _program():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    return A, B, te.create_schedule(B.op)


@pytest.mark.parametrize("factor", [0, -2])
def test_bad_split_factors(factor):
    A, B, s = _program()
    refused(
        lambda: s[B].split(B.op.axis[0], factor=factor),
        ScheduleError,
        rf"stage B: split of axis i: factor/nparts must be a positive int, got {factor}",
    )


def test_unknown_memory_scope_is_a_build_error():
    A, B, s = _program()
    CL = s.cache_write(B, "local")
    s[CL].set_scope("local.vtcn")
    refused(
        lambda: loom.build(s, [A, B]),
        LoomError,
        r"unknown memory scope 'local.vtcn' \(did you mean local.vtcm",
    )


@pytest.mark.parametrize(
    "target, match",
    [
        (
            "cuda",
            r"unknown target kind 'cuda'; registered kinds: \['c', 'hexagon', 'llvm', 'npu'\]",
        ),
        ("llvm -opt-level=7", r"target -opt-level must be 0..3, got 7"),
        ("llvm -foo=1", r"unknown target options \['foo'\] for llvm"),
        ("llvm mcpu", r"target option 'mcpu' must look like -key=value"),
        ("hexagon -mcpu=v99", r"unknown Hexagon version 'v99'"),
        ("hexagon -hvx=96", r"-hvx must be 128, 64 or 0"),
        (3, r"target must be a string"),
    ],
)
def test_bad_targets(target, match):
    A, B, s = _program()
    refused(lambda: loom.build(s, [A, B], target=target), LoomError, match)


def test_bad_argument_lists():
    A, B, s = _program()
    refused(lambda: loom.build(s, None), TypeError, r"the argument list .* is required")
    refused(lambda: loom.build(s, [A, "B"]), TypeError, r"args must hold tensors .* got 'B'")


@pytest.fixture(scope="module")
def kernel():
    A, B, s = _program()
    return loom.build(s, [A, B], name="scale")


def _read_only(n: int) -> np.ndarray:
    out = np.zeros(n, np.float32)
    out.flags.writeable = False
    return out


@pytest.mark.parametrize(
    "make_args, error, match",
    [
        (lambda: (np.zeros(8, np.float64), np.zeros(8, np.float32)), TypeError, r"dtype float32"),
        (lambda: (np.zeros(7, np.float32), np.zeros(8, np.float32)), ValueError, r"shape \(8,\)"),
        (lambda: (np.zeros(8, np.float32),), TypeError, r"takes 2 arguments, got 1"),
        (lambda: ([0.0] * 8, np.zeros(8, np.float32)), TypeError, r"numpy array of float32\[8\]"),
        (
            lambda: (np.zeros(16, np.float32)[::2], np.zeros(8, np.float32)),
            ValueError,
            r"not C-contiguous",
        ),
        (lambda: (np.zeros(8, np.float32), _read_only(8)), ValueError, r"the array is read-only"),
    ],
)
def test_bad_call_arguments(kernel, make_args, error, match):
    args = make_args()
    refused(lambda: kernel(*args), error, match)


def test_aliased_arguments_on_the_host(kernel):
    a = np.zeros(8, np.float32)
    refused(lambda: kernel(a, a), ValueError, r"arguments A and B share memory, but one is written")


def test_bad_module_use(kernel):
    refused(lambda: kernel["nope"], LoomError, r"module has no function 'nope'; it has \['scale'\]")
    refused(
        lambda: kernel.time_evaluator("scale", number=0), ValueError, r"number must be an int >= 1"
    )
    refused(lambda: loom.nd.empty((4,), alignment=3), ValueError, r"alignment must be a power")
    refused(lambda: loom.runtime.set_num_threads(0), ValueError, r"positive int, got 0")
