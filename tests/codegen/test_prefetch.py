"""The `prefetch` intrinsic (loom/ir/intrinsics.py): a hint with no effect on results, type-checked,
a no-op in the interpreter, `llvm.prefetch` from the LLVM code generator (dcfetch on Hexagon),
`__builtin_prefetch` from the C code generator."""

import re

import numpy as np
import pytest

import loom
from loom.codegen.llvm.module import generate
from loom.codegen.signature import module_signatures
from loom.ir import op
from loom.ir.buffer import decl_buffer
from loom.ir.expr import Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.interpret import interpret
from loom.ir.stmt import Evaluate, For, ForKind, seq
from loom.ir.storage import InterpreterError
from loom.target import as_target

N = 64


def prefetch(address):
    return Evaluate(op.call_intrin("int32", "prefetch", address))


def doubling_with_prefetch() -> PrimFunc:
    """B[i] = A[i] * 2, prefetching A[i + 16] (clamped to the last element) at each step, and
    B[i] read again after it (a load the prefetch must not make the code generator forget)."""
    A, B = decl_buffer((N,), "float32", "A"), decl_buffer((N,), "float32", "B")
    i = Var("i")
    ahead = op.min_(i + 16, N - 1)
    body = seq(
        prefetch(op.call_intrin("handle", "address_of", A[ahead])),
        B.store(A[i] * 2.0, [i]),
    )
    return PrimFunc("doubling", (A, B), For(i, op.const(0), op.const(N), ForKind.SERIAL, body))


def test_prefetch_takes_one_address():
    A = decl_buffer((N,), "float32", "A")
    with pytest.raises(TypeError, match="prefetch takes one address"):
        op.call_intrin("int32", "prefetch", A[0])  # a value, not its address
    with pytest.raises(TypeError, match="prefetch takes one address"):
        op.call_intrin("handle", "prefetch", op.call_intrin("handle", "address_of", A[0]))
    with pytest.raises(TypeError, match="takes 1 arguments"):
        op.call_intrin("int32", "prefetch")


@pytest.mark.parametrize("mode", ["compiled", "tree"])
def test_the_interpreter_checks_the_prefetched_address(mode):
    A = decl_buffer((N,), "float32", "A")
    past = prefetch(op.call_intrin("handle", "address_of", A[N + 8]))
    with pytest.raises(InterpreterError, match="outside its storage"):
        interpret(PrimFunc("past", (A,), past), np.zeros(N, np.float32), mode=mode)


def test_llvm_emits_llvm_prefetch_read_locality_3():
    mod = loom.build(doubling_with_prefetch(), target="llvm", name="doubling")
    assert re.search(
        r"call void @\"?llvm\.prefetch\.p0\"?\(ptr .*, i32 0, i32 3, i32 1\)", mod.get_source("ll")
    )
    a = np.arange(N, dtype=np.float32)
    b = np.zeros(N, np.float32)
    mod["doubling"](a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_c_emits_builtin_prefetch():
    mod = loom.build(doubling_with_prefetch(), target="c", name="doubling")
    assert re.search(r"__builtin_prefetch\(.*, 0, 3\);", mod.get_source("c"))
    a = np.arange(N, dtype=np.float32)
    b = np.zeros(N, np.float32)
    mod["doubling"](a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_hexagon_lowers_prefetch_to_dcfetch():
    mod = loom.build(doubling_with_prefetch(), target=loom.target.hexagon("v66"), name="doubling")
    assert "dcfetch" in mod.get_source("asm")


def _unoptimized_llvm_ir(func: PrimFunc) -> str:
    """The LLVM IR of `func` as the code generator emits it, before LLVM optimizes it."""
    target = as_target("llvm")
    mod = loom.lower(IRModule((func,)), target=target)
    text = str(generate(mod, target, module_signatures(mod, target.alignment)))
    return text[text.index(f'@"{func.name}.impl"') :]


def test_a_prefetch_is_emitted_where_written_and_keeps_loads_reused():
    a, out = decl_buffer((4,), "float32", "a"), decl_buffer((4,), "float32", "out")
    address = op.call_intrin("handle", "address_of", a[3])
    body = seq(
        out.store(a[1] * op.const(2.0, "float32"), (0,)),
        prefetch(address),
        prefetch(address),  # the same call again: emitted again, not taken for the first
        out.store(a[1] * op.const(3.0, "float32"), (1,)),
    )
    func = PrimFunc("f", (a, out), body)
    text = _unoptimized_llvm_ir(func)
    assert text.count('call void @"llvm.prefetch.p0"(ptr') == 2
    assert text.count("load float") == 1  # a[1] loaded once: a prefetch writes no memory
    x, y = np.arange(4, dtype="float32"), np.zeros(4, "float32")
    loom.build(IRModule((func,)), target="llvm")(x, y)
    np.testing.assert_array_equal(y[:2], [2.0, 3.0])


def doubling_with_write_prefetch() -> PrimFunc:
    """B[i] = A[i] * 2, prefetching B[i + 16] (clamped) for writing at each step."""
    A, B = decl_buffer((N,), "float32", "A"), decl_buffer((N,), "float32", "B")
    i = Var("i")
    address = op.call_intrin("handle", "address_of", B[op.min_(i + 16, N - 1)])
    body = seq(
        Evaluate(op.call_intrin("int32", "prefetch_write", address)), B.store(A[i] * 2.0, [i])
    )
    return PrimFunc("doubling", (A, B), For(i, op.const(0), op.const(N), ForKind.SERIAL, body))


def test_prefetch_write_takes_one_address():
    A = decl_buffer((N,), "float32", "A")
    with pytest.raises(TypeError, match="prefetch_write takes one address"):
        op.call_intrin("int32", "prefetch_write", A[0])


@pytest.mark.parametrize("mode", ["compiled", "tree"])
@pytest.mark.parametrize("make", [doubling_with_prefetch, doubling_with_write_prefetch])
def test_prefetches_are_no_ops_in_the_interpreter(mode, make):
    a = np.arange(N, dtype=np.float32)
    b = np.zeros(N, np.float32)
    interpret(make(), a, b, mode=mode)
    np.testing.assert_array_equal(b, a * 2)


@pytest.mark.parametrize(
    "target, pattern",
    [
        ("llvm", r"call void @\"?llvm\.prefetch\.p0\"?\(ptr .*, i32 1, i32 3, i32 1\)"),
        ("c", r"__builtin_prefetch\(.*, 1, 3\);"),
    ],
)
def test_prefetch_write_is_a_write_prefetch(target, pattern):
    mod = loom.build(doubling_with_write_prefetch(), target=target, name="doubling")
    assert re.search(pattern, mod.get_source("ll" if target == "llvm" else "c"))
    a = np.arange(N, dtype=np.float32)
    b = np.zeros(N, np.float32)
    mod["doubling"](a, b)
    np.testing.assert_array_equal(b, a * 2)
