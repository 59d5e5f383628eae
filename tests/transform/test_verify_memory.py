"""verify_memory and check_extern_calls: valid IR passes unchanged (before == expected, as in
TVM's before/expected tests); each violation is an error naming the function and the culprit.

Uses the example scratchpad of tests/conftest.py (`spad`: scope "spad", reachable only from the
device "scratchpad_emu"; symbols mvin/mvout declared for "cpu")."""

import pytest

from loom import LoomError
from loom.ir import (
    EQ,
    NOP,
    Allocate,
    AssertStmt,
    Call,
    Cast,
    Evaluate,
    FloatImm,
    For,
    IntImm,
    IRModule,
    LetStmt,
    PrimFunc,
    Var,
    assert_structural_equal,
    decl_buffer,
    op,
    seq,
)
from loom.target import Target
from loom.transform.verify_memory import check_extern_calls, verify_memory


def func(build, name="main"):
    A = decl_buffer((16,), "float32", "A")
    return PrimFunc(name, (A,), build(A))


def module(*funcs, target="llvm"):
    mod = IRModule(funcs)
    return mod if target is None else mod.with_attr("target", Target(target))


def passes_unchanged(p, build, *others):
    """`p` returns the module as it is; it is structurally the module built again."""
    mod = module(func(build), *others)
    after = p(mod)
    assert after is mod
    assert_structural_equal(after, module(func(build), *others))


def spad_to_host(A):
    """S in the scratchpad, filled by mvin through its address (lowered memory: a constant
    pointer), then A computed on the host: the shape of a lowered accelerator program."""
    S = decl_buffer((16,), "float32", "S", scope="spad")
    src = op.call_intrin("handle", "address_of", A.load([IntImm(0)]))
    dst = Cast("uint64", op.call_intrin("handle", "address_of", S.load([IntImm(0)])))
    rows = tuple(IntImm(v) for v in (1, 64, 64, 64))
    call = Call("int32", "mvin", (src, dst, *rows), "extern")
    pointer = Cast("handle", IntImm(0x4000_0000, "uint64"))
    return LetStmt(S.data, pointer, AssertStmt(EQ(call, IntImm(0)), None, NOP))


def host_loop(A):
    """A local (stack) temporary and loads/stores of host buffers."""
    T = decl_buffer((16,), "float32", "T", scope="local")
    i = Var("i")
    body = seq(T.store(A[i] + FloatImm(1.0), (i,)), A.store(T[i], (i,)))
    return Allocate(T, For(i, IntImm(0), IntImm(16), "serial", body))


# -- verify_memory -------------------------------------------------------------------------------


def test_verify_memory_accepts_stack_allocations_and_host_accesses():
    passes_unchanged(verify_memory, host_loop)


def test_verify_memory_accepts_taking_an_address_in_an_inaccessible_scope(spad):
    passes_unchanged(verify_memory, spad_to_host)


def test_verify_memory_rejects_allocations_left_for_lower_memory_scopes():
    def build(A):
        T = decl_buffer((16,), "float32", "T", scope="global")
        return Allocate(T, T.store(FloatImm(0.0), (0,)))

    with pytest.raises(
        LoomError,
        match=r"function main: buffer T in scope global is still an Allocate; "
        r"lower_memory_scopes must run",
    ):
        verify_memory(module(func(build)))


def test_verify_memory_rejects_loads_and_stores_of_an_inaccessible_scope(spad):
    S = decl_buffer((16,), "float32", "S", scope="spad")

    def reads(A):
        return A.store(S[0], (0,))

    def writes(A):
        return S.store(A[0], (0,))

    for build, verb in ((reads, "reads"), (writes, "writes")):
        with pytest.raises(
            LoomError,
            match=rf"function main runs on cpu but {verb} buffer S in memory scope spad, which "
            r"only \['scratchpad_emu'\] can access",
        ):
            verify_memory(module(func(build)))


def test_verify_memory_rejects_index_loads_inside_address_of(spad):
    """Taking an address is not an access, but computing its index may be one."""
    S = decl_buffer((16,), "float32", "S", scope="spad")
    K = decl_buffer((1,), "int32", "K", scope="spad")

    def build(A):
        return Evaluate(op.call_intrin("handle", "address_of", S.load([K[0]])))

    with pytest.raises(LoomError, match=r"reads buffer K in memory scope spad"):
        verify_memory(module(func(build)))


# -- check_extern_calls --------------------------------------------------------------------------


def test_check_extern_calls_accepts_declared_calls_and_module_functions(spad):
    def calls(A):
        expf = Call("float32", "expf", (A[0],), "extern")
        return seq(A.store(expf, (0,)), Evaluate(op.call_func("helper", A.data)))

    passes_unchanged(check_extern_calls, calls, func(host_loop, "helper"))
    passes_unchanged(check_extern_calls, spad_to_host)


def test_check_extern_calls_rejects_undeclared_symbols():
    def build(A):
        return A.store(Call("float32", "expff", (A[0],), "extern"), (0,))

    with pytest.raises(
        LoomError,
        match=r"function main calls extern symbol 'expff', which no runtime library declares "
        r"for device 'cpu'.*similar declared symbols: expf",
    ):
        check_extern_calls(module(func(build)))


def test_check_extern_calls_rejects_wrong_argument_types():
    def build(A):
        return A.store(Call("float32", "expf", (FloatImm(1.0, "float64"),), "extern"), (0,))

    with pytest.raises(
        LoomError,
        match=r"function main calls float expf\(float x\) \(from libm\) with argument types "
        r"\['float64'\], expected \['float32'\]",
    ):
        check_extern_calls(module(func(build)))


def test_check_extern_calls_rejects_calls_of_functions_not_in_the_module():
    def build(A):
        return Evaluate(op.call_func("missing", A.data))

    with pytest.raises(
        LoomError, match=r"function main calls function 'missing', which is not in the module"
    ):
        check_extern_calls(module(func(build)))


def test_both_need_the_target():
    for p in (verify_memory, check_extern_calls):
        with pytest.raises(LoomError, match=r"this pass needs the module's target"):
            p(module(func(host_loop), target=None))
