"""Targets are checked before LLVM sees them, and schedules stay within documented limits:
nothing a user can type ends the process in an LLVM fatal error or assertion.

The inputs that used to end the process (an unknown or 32-bit CPU, a feature without its sign,
a vector of 65,536 lanes) run in a fresh interpreter (tests/robustness/harness.py), so a
regression fails the test instead of killing pytest.
"""

import numpy as np
import pytest

import loom
from loom import LoomError, te
from loom.ir import (
    Broadcast,
    BufferStore,
    FloatImm,
    For,
    ForKind,
    IntImm,
    IRModule,
    PrimFunc,
    Ramp,
    decl_buffer,
    post_order_visit,
)
from loom.target import Target
from loom.target.target import ARCHES, _llvm_probe
from loom.transform import PassContext
from loom.transform.unroll_loop import MAX_UNROLL
from loom.transform.vectorize_loop import MAX_LANES, vectorize_loop
from tests.robustness.harness import isolated


def _kernel(n: int = 16, dtype: str = "float32"):
    A = te.placeholder((n,), dtype, name="A")
    B = te.compute((n,), lambda i: A[i] + A[i], name="B")
    s = te.create_schedule(B.op)
    return s, [A, B]


def _build_body(target: str) -> str:
    return f"""
A = te.placeholder((64,), name="A")
B = te.compute((64,), lambda i: A[i] * 2.0 + te.exp(A[i]), name="B")
s = te.create_schedule(B.op)
s[B].vectorize(B.op.axis[0])
loom.build(s, [A, B], target={target!r})
"""


# Each of these ended the process before (exit 1 on "LLVM ERROR", SIGABRT on an assertion).
FORMER_ABORTS = [
    ("llvm -mcpu=haswel", r"unknown CPU -mcpu=haswel for x86_64.*closest: haswell"),
    ("llvm -mcpu=i386", r"cannot generate code .*-mcpu=i386.*64-bit code requested"),
    ("llvm -mattr=-64bit", r"cannot generate code .*64-bit code requested"),
    ("llvm -mattr=avx2", r"-mattr entries are \+feature or -feature.* got 'avx2'"),
    ("llvm -mattr=-sse,-sse2", r"cannot generate code .*SSE register return with SSE disabled"),
    (
        "llvm -mtriple=riscv64-unknown-linux-gnu -mcpu=sifive-e31",
        r"cannot generate code .*RV64 target requires an RV64 CPU",
    ),
    (
        "llvm -mtriple=riscv32-unknown-linux-gnu -mcpu=sifive-u74",
        r"cannot generate code .*RV32 target requires an RV32 CPU",
    ),
    (
        "llvm -mtriple=hexagon-unknown-linux-musl -mcpu=hexagonv99",
        r"unknown CPU -mcpu=hexagonv99 .*closest: hexagonv",
    ),
]


@pytest.mark.parametrize("target, match", FORMER_ABORTS)
def test_a_target_llvm_would_abort_on_is_a_loom_error(target, match):
    isolated(_build_body(target)).refused("LoomError", match)


def test_a_vector_of_65536_lanes_builds_in_chunks():
    outcome = isolated(
        """
n = 65536
A = te.placeholder((n,), name="A")
B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
s = te.create_schedule(B.op)
s[B].vectorize(B.op.axis[0])
mod = loom.build(s, [A, B])
a = np.arange(n, dtype=np.float32)
b = np.zeros(n, np.float32)
mod(a, b)
assert np.array_equal(b, a + 1)
raise ValueError("built and right")
"""
    )
    outcome.refused("ValueError", "built and right")


def test_unrolling_200000_iterations_is_refused_before_it_runs_long():
    outcome = isolated(
        """
A = te.placeholder((200000,), name="A")
B = te.compute((200000,), lambda i: A[i] + 1.0, name="B")
s = te.create_schedule(B.op)
s[B].unroll(B.op.axis[0])
loom.build(s, [A, B])
""",
        timeout=120,
    )
    outcome.refused(
        "LoomError",
        rf"unrolling loop i \(writing B\) of extent 200000 makes 200000 copies .* limit of "
        rf"{MAX_UNROLL}",
    )


@pytest.mark.parametrize(
    "target, match",
    [
        ("llvm -mattr=+avx2,+avx3", r"unknown feature '\+avx3' in -mattr .*closest: avx"),
        ("llvm -mattr=+help", r"unknown feature '\+help'"),
        ("llvm -mcpu=help", r"unknown CPU -mcpu=help"),
        ("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a27", r"closest: cortex-a"),
        ("llvm -mtriple=aarch64-linux-gnu -mattr=+neonn", r"unknown feature '\+neonn'.*neon"),
        (
            "llvm -mtriple=i686-linux-gnu",
            r"architectures x86_64, aarch64.*'i686-linux-gnu' is i386",
        ),
        ("llvm -mtriple=arm64-apple-darwin", r"ELF code .* is aarch64 \(MachO objects\)"),
        ("llvm -mtriple=foo-bar", r"ELF code for the architectures"),
        ("llvm -mtriple=x86_64;rm", r"-mtriple must be an LLVM triple"),
        ("llvm -mcpu=has;well", r"-mcpu must be a CPU name"),
        ("llvm -opt-level=x", r"-opt-level must be 0..3, got x"),
        ("llvm -align=3", r"-align must be a power of two 1..4096, got 3"),
        ("llvm -align=8192", r"-align must be a power of two 1..4096, got 8192"),
        ("llvm -stack-limit=-1", r"-stack-limit must be a number of bytes >= 0, got -1"),
    ],
)
def test_bad_targets_name_what_is_wrong(target, match):
    with pytest.raises(LoomError, match=match):
        Target(target)


def test_valid_targets_parse_for_every_supported_architecture():
    assert Target("llvm -mcpu=haswell -mattr=+avx2,+fma").features == "+avx2,+fma"
    assert Target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon").cpu == (
        "cortex-a72"
    )
    assert (
        Target("llvm -mtriple=riscv64-unknown-linux-gnu -mcpu=sifive-u74 -mattr=+m").is_host
        is False
    )
    assert (
        Target("llvm -mtriple=riscv32-unknown-linux-gnu -mcpu=generic-rv32").cpu == "generic-rv32"
    )
    assert Target("hexagon -mcpu=v68 -hvx=64").features == "+hvxv68,+hvx-length64b"
    assert Target("llvm -opt-level=0 -align=128 -stack-limit=0").alignment == 128


@pytest.mark.parametrize("arch", ARCHES)
def test_the_generic_cpu_needs_no_check_on_any_supported_architecture(arch):
    """Target skips the child process for -mcpu=generic without features: LLVM's generic CPU
    of every supported architecture compiles the probe module."""
    triple = {"hexagon": "hexagon-unknown-linux-musl"}.get(arch, f"{arch}-unknown-linux-gnu")
    cpus, features, said = _llvm_probe(triple, "generic", "")
    assert "generic" in cpus and features and said is None


@pytest.mark.parametrize(
    "spec, width",
    [
        ("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4", 64),  # AVX-512 without -mattr
        ("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512", 64),
        ("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3", 32),
        ("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell", 32),
        ("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64", 16),  # SSE2 only
        ("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4 -mattr=-avx512f", 32),
        ("llvm -mtriple=x86_64-linux-gnu -mcpu=generic -mattr=+avx2", 32),  # named features
        ("llvm -mtriple=x86_64-linux-gnu -mcpu=generic", 16),
    ],
)
def test_a_named_x86_cpu_gives_its_vector_width(spec, width):
    """An x86 CPU's vector width is LLVM's for that CPU and features (the probe compiles a
    16-float addition for it and reads the registers), not only what -mattr names: schedules
    tile for it (conv_schedules, group_schedules, the matmul strategies)."""
    assert Target(spec).vector_bytes == width


def _lanes(mod) -> list[int]:
    found = []
    for f in mod:
        post_order_visit(
            f.body,
            lambda n: found.append(n.value.dtype.lanes) if isinstance(n, BufferStore) else None,
        )
    return found


def test_17x16_int8_select_is_split_to_the_vector_width_and_matches_numpy():
    """The fused 17x16 int8 select vectorized whole (272 lanes) took LLVM about 40 s; now it
    runs as 4 AVX2 registers of int8 (128 lanes) at a time, then a 16-lane remainder."""
    target = "llvm -mcpu=haswell -mattr=+avx2"
    A = te.placeholder((17, 16), "int8", name="A")
    B = te.placeholder((17, 16), "int8", name="B")
    C = te.compute(
        (17, 16), lambda i, j: te.select(A[i, j] > B[i, j], A[i, j], B[i, j] - 1), name="C"
    )
    s = te.create_schedule(C.op)
    s[C].vectorize(s[C].fuse(*C.op.axis))
    assert sorted(_lanes(loom.lower(s, [A, B, C], target=target))) == [16, 128, 128]
    mod = loom.build(s, [A, B, C], target=target)
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (17, 16), dtype=np.int8)
    b = rng.integers(-128, 128, (17, 16), dtype=np.int8)
    c = np.zeros((17, 16), np.int8)
    mod(a, b, c)
    np.testing.assert_array_equal(c, np.where(a > b, a, b - np.int8(1)))


@pytest.mark.parametrize("n", [33, 64, 100, 1000])
def test_a_long_vector_loop_runs_in_chunks_of_the_target_width(n):
    # 32-byte vectors: 32 float32 lanes
    target = Target("llvm -mcpu=haswell -mattr=+avx2")
    width = 32
    s, args = _kernel(n)
    s[args[1]].vectorize(args[1].op.axis[0])
    mod = loom.lower(s, args, target=target)
    lanes = _lanes(mod)
    assert max(lanes) == min(n, width) and sum(lanes) <= n
    loops = []
    for f in mod:
        post_order_visit(f.body, lambda x: loops.append(x) if isinstance(x, For) else None)
    # up to 8 chunks are unrolled (loom.lower unrolls them: no loop left); more, a serial loop
    assert [loop.kind for loop in loops] == ([ForKind.SERIAL] if n // width > 8 else [])
    built = loom.build(s, args, target=target)
    a = np.arange(n, dtype=np.float32)
    b = np.zeros(n, np.float32)
    built(a, b)
    np.testing.assert_array_equal(b, a + a)


def test_a_hand_written_vector_wider_than_the_limit_is_refused():
    n = 2 * MAX_LANES
    A = decl_buffer((n,), "float32", "A")
    ramp = Ramp(IntImm(0), IntImm(1), n)
    body = BufferStore(A, Broadcast(FloatImm(1.0), n), (ramp,))
    mod = IRModule((PrimFunc("wide", (A,), body),)).with_attr("target", Target("llvm"))
    with pytest.raises(LoomError, match=rf"function wide: a vector of {n} lanes .* {MAX_LANES}"):
        vectorize_loop(mod)


def test_nested_unrolled_loops_multiply_against_the_limit():
    A = te.placeholder((64, 64), name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].unroll(B.op.axis[0])
    s[B].unroll(B.op.axis[1])
    with pytest.raises(
        LoomError,
        match=r"unrolling loop j \(writing B\) of extent 64, inside unrolled loops of 64 copies, "
        r"makes 4096 copies of its body, more than the limit of 1024 .*tir.max_unroll",
    ):
        loom.lower(s, [A, B])
    with PassContext(config={"tir.max_unroll": 4096}):
        assert not any(isinstance(n, For) for n in _all_nodes(loom.lower(s, [A, B])))
    for bad in (0, -1, 2.5, True):
        with pytest.raises(LoomError, match=r"'tir.max_unroll' takes a positive int"):
            PassContext(config={"tir.max_unroll": bad})


def _all_nodes(mod) -> list:
    found = []
    for f in mod:
        post_order_visit(f.body, found.append)
    return found


def test_unrolling_at_the_limit_builds_and_is_right():
    s, args = _kernel(MAX_UNROLL)
    s[args[1]].unroll(args[1].op.axis[0])
    mod = loom.build(s, args)
    a = np.arange(MAX_UNROLL, dtype=np.float32)
    b = np.zeros(MAX_UNROLL, np.float32)
    mod(a, b)
    np.testing.assert_array_equal(b, a + a)
