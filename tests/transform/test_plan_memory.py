"""plan_memory: hand-built IR before the pass and the IR expected after it (TVM's
before/expected style), and the plans it makes. Fixed-address buffers become constant addresses
planned by lifetime on one clock across calls; a program's tensors become addresses in a
caller's pool (a parameter of its entry) and its constants an array of the library; pins are
respected; a function touching a pool its device cannot reach fails the build."""

import numpy as np
import pytest

import loom
from loom import LoomError
from loom.ir import (
    NOP,
    Allocate,
    AssertStmt,
    Cast,
    FloatImm,
    For,
    IntImm,
    IRModule,
    LetStmt,
    PrimFunc,
    StringImm,
    Var,
    assert_structural_equal,
    decl_buffer,
    op,
    seq,
)
from loom.memory import Pool, pin
from loom.memory.planner import check as check_plan
from loom.memory.pool import POOLS_ATTR
from loom.memory.program import CONSTANTS_ATTR, GLOBALS_ATTR, PLAN_ATTR, TENSORS_ATTR, ConstantData
from loom.target import Target
from loom.transform.lower_memory import DEVICE_ATTR
from loom.transform.plan_memory import plan_memory
from tests.transform.memory_cases import SCRATCH_BASE, WORDS_BASE, copy_through, func


def check(before, expected, scopes, target="llvm"):
    after = plan_memory(func(before, target))
    expected_mod = func(expected, target, {"memories": scopes})
    assert_structural_equal(after.replace(attrs=()), expected_mod.replace(attrs=()))
    for pool_plan in after.attr(PLAN_ATTR).pools:  # the independent checker accepts every plan
        check_plan(pool_plan.blocks, pool_plan.plan, pool_plan.pool.size)


def address(value):
    return Cast("handle", IntImm(value, "uint64"))


def test_fixed_address_buffers_are_packed_in_order(scopes):
    def before(A):
        T = decl_buffer((10,), "float32", "T", scope="test.scratch")  # 40 bytes
        U = decl_buffer((8,), "float32", "U", scope="test.scratch")
        return Allocate(T, Allocate(U, seq(copy_through(T, A), copy_through(U, A))))

    def expected(A):
        T = decl_buffer((10,), "float32", "T", scope="test.scratch")
        U = decl_buffer((8,), "float32", "U", scope="test.scratch")
        body = seq(copy_through(T, A), copy_through(U, A))
        # U starts at the next 16-byte boundary after T's 40 bytes
        return LetStmt(
            T.data, address(SCRATCH_BASE), LetStmt(U.data, address(SCRATCH_BASE + 48), body)
        )

    check(before, expected, ("test.scratch",))


def test_fixed_address_buffers_never_alive_together_share_space(scopes):
    # T is freed before U is allocated: the planner gives both the scope's first bytes
    def before(A):
        T = decl_buffer((10,), "float32", "T", scope="test.scratch")
        U = decl_buffer((8,), "float32", "U", scope="test.scratch")
        return seq(Allocate(T, copy_through(T, A)), Allocate(U, copy_through(U, A)))

    def expected(A):
        T = decl_buffer((10,), "float32", "T", scope="test.scratch")
        U = decl_buffer((8,), "float32", "U", scope="test.scratch")
        return seq(
            LetStmt(T.data, address(SCRATCH_BASE), copy_through(T, A)),
            LetStmt(U.data, address(SCRATCH_BASE), copy_through(U, A)),
        )

    check(before, expected, ("test.scratch",))


def test_word_addressed_memory_counts_in_words(scopes):
    def before(A):
        T = decl_buffer((3,), "int8", "T", scope="test.words")  # 3 bytes, rounded to a word
        U = decl_buffer((2,), "int32", "U", scope="test.words")
        return Allocate(
            T, Allocate(U, seq(T.store(IntImm(1, "int8"), (0,)), U.store(IntImm(2), (0,))))
        )

    def expected(A):
        T = decl_buffer((3,), "int8", "T", scope="test.words")
        U = decl_buffer((2,), "int32", "U", scope="test.words")
        body = seq(T.store(IntImm(1, "int8"), (0,)), U.store(IntImm(2), (0,)))
        # the planner places the larger U first: T starts after U's 8 bytes, at word 2
        return LetStmt(T.data, address(WORDS_BASE + 2), LetStmt(U.data, address(WORDS_BASE), body))

    check(before, expected, ("test.words",))


def test_fixed_address_overflow_is_an_error(scopes):
    def before(A):
        T = decl_buffer((40,), "float32", "T", scope="test.scratch")  # 160 bytes
        U = decl_buffer((30,), "float32", "U", scope="test.scratch")  # 120 more: 280 > 256
        return Allocate(T, Allocate(U, seq(copy_through(T, A), copy_through(U, A))))

    with pytest.raises(LoomError, match=r"pool test_scratch has 256 bytes, but its buffers need 2"):
        plan_memory(func(before))


def test_symbolic_size_in_fixed_address_memory_is_an_error(scopes):
    n = Var("n")

    def before(A):
        T = decl_buffer((n,), "float32", "T", scope="test.scratch")
        return Allocate(T, T.store(FloatImm(0.0), (0,)))

    with pytest.raises(
        LoomError, match=r"buffer T in memory scope test.scratch needs a constant size"
    ):
        plan_memory(func(before))


def calls(*names_args):
    return seq(*[AssertStmt(op.equal(op.call_func(n, *a), 0), None, NOP) for n, a in names_args])


def kernel(name, n_in, device=None):
    """A kernel of `n_in` inputs and one output of 8 floats: out[i] = sum of the inputs."""
    ins = [decl_buffer((8,), "float32", f"x{k}") for k in range(n_in)]
    out = decl_buffer((8,), "float32", "y")
    i = Var("i")
    total = ins[0][i]
    for b in ins[1:]:
        total = total + b[i]
    f = PrimFunc(name, (*ins, out), For(i, IntImm(0), IntImm(8), "serial", out.store(total, (i,))))
    return f.with_attr(DEVICE_ATTR, device) if device else f


def program(pools=(), devices=(None, None, None)):
    """main(x, y): a = k0(x); b = k1(a, w); y = k2(b, a) with constant w: three kernels, two
    tensors, one constant."""
    x, y = decl_buffer((8,), "float32", "x"), decl_buffer((8,), "float32", "y")
    a, b = decl_buffer((8,), "float32", "a"), decl_buffer((8,), "float32", "b")
    w = decl_buffer((8,), "float32", "w")
    value = ConstantData("w", np.arange(8, dtype="float32"))
    body = calls(
        ("k0", (x.data, a.data)), ("k1", (a.data, w.data, b.data)), ("k2", (b.data, a.data, y.data))
    )
    main = PrimFunc("main", (x, y), body).with_attr(TENSORS_ATTR, (a, b))
    main = main.with_attr(CONSTANTS_ATTR, ((w, value),))
    kernels = [
        kernel("k0", 1, devices[0]),
        kernel("k1", 2, devices[1]),
        kernel("k2", 2, devices[2]),
    ]
    mod = IRModule((main, *kernels)).with_attr("target", Target("llvm"))
    return (mod.with_attr(POOLS_ATTR, tuple(pools)) if pools else mod), (x, y, a, b, w)


def test_tensors_go_to_the_callers_pool_and_constants_into_the_library():
    mod, (x, y, a, b, w) = program()
    after = plan_memory(mod)
    plan = after.attr(PLAN_ATTR)
    # a lives from k0 to k2, b from k1 to k2: both alive in k1 and k2, so they do not overlap
    assert plan.where("a").offset != plan.where("b").offset
    assert plan["workspace"].size == 64 + 32
    pool = decl_buffer((96,), "uint8", "pool_workspace", alignment=64)
    consts = decl_buffer((32,), "uint8", "pool_constants", alignment=64)

    def at(buf, offset):
        return op.call_intrin("handle", "address_of", buf.load([op.const(offset)]))

    wa, wb = plan.where("a").offset, plan.where("b").offset
    body = calls(
        ("k0", (x.data, at(pool, wa))),
        ("k1", (at(pool, wa), at(consts, 0), at(pool, wb))),
        ("k2", (at(pool, wb), at(pool, wa), y.data)),
    )
    address = op.call_intrin("handle", "global_address", StringImm("loom_pool_constants"))
    expected = PrimFunc("main", (x, y, pool), LetStmt(consts.data, address, body))
    assert_structural_equal(after["main"], expected)
    (array,) = after.attr(GLOBALS_ATTR)
    assert array.symbol == "loom_pool_constants" and array.nbytes == 32
    assert array.data == np.arange(8, dtype="float32").tobytes()


def test_a_tensor_alive_in_turn_with_another_shares_its_space():
    # main: a = k0(x); b = k0(a); y = k0(b): a dies when b is made, b when y is
    x, y = decl_buffer((8,), "float32", "x"), decl_buffer((8,), "float32", "y")
    a, b, c = (decl_buffer((8,), "float32", n) for n in "abc")
    body = calls(
        ("k0", (x.data, a.data)),
        ("k0", (a.data, b.data)),
        ("k0", (b.data, c.data)),
        ("k0", (c.data, y.data)),
    )
    main = PrimFunc("main", (x, y), body).with_attr(TENSORS_ATTR, (a, b, c))
    mod = IRModule((main, kernel("k0", 1))).with_attr("target", Target("llvm"))
    plan = plan_memory(mod).attr(PLAN_ATTR)
    assert plan.where("a").offset == plan.where("c").offset
    assert plan["workspace"].size == 64 + 32


def test_a_pin_is_respected():
    pools = (
        Pool("dram", accessible_from=("cpu",)),
        Pool("other", accessible_from=("cpu",)),
        Pool("weights", kind="constant"),
    )
    mod, _ = program(pools)
    plan = plan_memory(pin(mod, "main", "b", "other", offset=128)).attr(PLAN_ATTR)
    assert plan.where("b").pool == "other" and plan.where("b").offset == 128
    assert plan.where("a").pool == "dram"
    assert plan.where("w").pool == "weights"


def test_a_pin_to_an_unknown_pool_or_buffer_is_an_error():
    mod, _ = program()
    with pytest.raises(
        LoomError, match=r"no pool 'sram'; the pools are \['workspace', 'constants'\]"
    ):
        plan_memory(pin(mod, "main", "a", "sram"))
    with pytest.raises(LoomError, match=r"function main has no planned buffer 'zz'"):
        plan_memory(pin(mod, "main", "zz", "workspace"))
    with pytest.raises(
        LoomError, match=r"buffer a of main .* is a workspace tensor, but the pool holds constant"
    ):
        plan_memory(pin(mod, "main", "a", "constants"))


def test_a_kernel_touching_a_pool_its_device_cannot_reach_fails_the_build():
    pools = (
        Pool("host_only", accessible_from=("cpu",)),
        Pool("weights", kind="constant", accessible_from=("cpu", "acc")),
    )
    mod, _ = program(pools, devices=(None, "acc", None))
    # k1 runs on "acc" and is given a and b: no workspace pool reaches both cpu and acc
    with pytest.raises(
        LoomError,
        match=r"no workspace pool can hold a of main: .*k0 on cpu, k1 on acc.*host_only \(cpu\)",
    ):
        plan_memory(mod)
    # pinned there anyway: the verifier names the function, its device, the buffer and the pool
    pools = (*pools, Pool("shared", accessible_from=("cpu", "acc")))
    mod, _ = program(pools, devices=(None, "acc", None))
    with pytest.raises(
        LoomError,
        match=r"function k1 runs on acc but touches buffer a \(of main\), which is in pool "
        r"host_only; only \['cpu'\]",
    ):
        plan_memory(pin(mod, "main", "a", "host_only"))
    plan = plan_memory(mod).attr(PLAN_ATTR)
    assert plan.where("a").pool == "shared" and plan.where("a").touched_by == ("k0", "k1", "k2")


def test_a_full_pool_is_an_error_naming_its_largest_buffers():
    mod, _ = program((Pool("tiny", size=64), Pool("weights", kind="constant")))
    with pytest.raises(
        LoomError, match=r"pool tiny has 64 bytes, but its buffers need 96 .*a of main: 32"
    ):
        plan_memory(mod)


def test_fixed_buffers_of_kernels_called_in_turn_share_the_scratchpad(scopes):
    def k(name):
        A = decl_buffer((8,), "float32", "A")
        T = decl_buffer((8,), "float32", "T", scope="test.scratch")
        f = PrimFunc(name, (A,), Allocate(T, copy_through(T, A)))
        return f.with_attr(DEVICE_ATTR, "test_dev")

    A = decl_buffer((8,), "float32", "A")
    main = PrimFunc("main", (A,), calls(("ka", (A.data,)), ("kb", (A.data,))))
    mod = IRModule((main, k("ka"), k("kb"))).with_attr("target", Target("llvm"))
    plan = plan_memory(mod).attr(PLAN_ATTR)
    ta, tb = plan.where("T", "ka"), plan.where("T", "kb")
    assert ta.end <= tb.start and ta.offset == tb.offset == 0
    assert plan["test_scratch"].size == 32


def staged_kernel(name, parallel=False):
    """k(x, y): T = x * 2 in a buffer of its own (scope global); y = T + 1."""
    x, y = decl_buffer((8,), "float32", "x"), decl_buffer((8,), "float32", "y")
    T = decl_buffer((8,), "float32", "T", scope="global")
    i, j = Var("i"), Var("j")
    body = seq(
        For(i, IntImm(0), IntImm(8), "serial", T.store(x[i] * FloatImm(2.0), (i,))),
        For(i, IntImm(0), IntImm(8), "serial", y.store(T[i] + FloatImm(1.0), (i,))),
    )
    body = Allocate(T, body)
    if parallel:  # a buffer of each iteration
        body = For(j, IntImm(0), IntImm(1), "parallel", body)
    return PrimFunc(name, (x, y), body), (x, y, T)


def staged_program(parallel=False):
    """main(x, y): a = k(x); y = k(a)."""
    x, y, a = (decl_buffer((8,), "float32", n) for n in "xya")
    main = PrimFunc("main", (x, y), calls(("k", (x.data, a.data)), ("k", (a.data, y.data))))
    main = main.with_attr(TENSORS_ATTR, (a,)).with_attr(CONSTANTS_ATTR, ())
    k, _ = staged_kernel("k", parallel)
    return IRModule((main, k)).with_attr("target", Target("llvm")), (x, y, a)


def test_a_kernels_own_buffer_goes_to_the_callers_pool_which_the_kernel_then_takes():
    mod, (x, y, a) = staged_program()
    after = plan_memory(mod)
    plan = after.attr(PLAN_ATTR)
    t = plan.where("T", "k")
    assert t.pool == "workspace" and t.touched_by == ("k",)
    # T is alive in both calls of k, a from the first call to the second: they do not overlap
    assert t.offset != plan.where("a").offset
    pool = decl_buffer((96,), "uint8", "pool_workspace", alignment=64)

    def at(offset):
        return op.call_intrin("handle", "address_of", pool.load([op.const(offset)]))

    k = mod["k"]
    kx, ky = k.params
    T = k.body.buffer
    expected_k = PrimFunc("k", (kx, ky, pool), LetStmt(T.data, at(t.offset), k.body.body))
    assert_structural_equal(after["k"], expected_k)
    wa = plan.where("a").offset
    body = calls(("k", (x.data, at(wa), pool.data)), ("k", (at(wa), y.data, pool.data)))
    assert_structural_equal(after["main"], PrimFunc("main", (x, y, pool), body))


def test_a_kernels_own_buffer_runs_from_the_pool_and_nothing_is_allocated():
    mod, _ = staged_program()
    built = loom.build(mod, target="llvm")
    x = np.arange(8, dtype="float32")
    y = np.empty(8, "float32")
    pool = loom.nd.empty((96,), "uint8", 64)
    built["main"](x, y, pool)
    np.testing.assert_array_equal(y, (x * 2 + 1) * 2 + 1)
    assert "loom_alloc" not in str(loom.lower(mod, target="llvm"))


def test_a_buffer_of_each_parallel_iteration_stays_a_run_time_allocation():
    mod, _ = staged_program(parallel=True)
    after = plan_memory(mod)
    with pytest.raises(KeyError):
        after.attr(PLAN_ATTR).where("T")
    assert_structural_equal(after["k"], mod["k"])


def test_outside_a_program_a_kernels_buffer_is_allocated_at_run_time():
    k, _ = staged_kernel("k")
    mod = IRModule((k,)).with_attr("target", Target("llvm"))
    after = plan_memory(mod)
    assert_structural_equal(after["k"], k)


def test_a_full_pool_spills_its_largest_movable_buffer_to_the_next_pool():
    # a and b are alive together (64 + 32 bytes): 64 bytes of "small" hold one of them
    pools = (Pool("small", size=64), Pool("big"), Pool("weights", kind="constant"))
    mod, _ = program(pools)
    plan = plan_memory(mod).attr(PLAN_ATTR)
    assert [b.buffer for b in plan["small"].placed] == ["b"]
    assert [b.buffer for b in plan["big"].placed] == ["a"]
    # a pinned buffer stays: the other one moves
    plan = plan_memory(pin(mod, "main", "a", "small")).attr(PLAN_ATTR)
    assert plan.where("a").pool == "small" and plan.where("b").pool == "big"
