"""The LLVM code generator emits a repeated expression once where its value is still valid
(loom/codegen/llvm/function.py, `FunctionCodegen.expr`): pure arithmetic within the region that
computed it, a load until a store or a call may have changed the memory it read. Each test runs
the built function, so a value reused where it must not be gives a wrong result."""

import dataclasses

import numpy as np

import loom
from loom.codegen.llvm.module import generate
from loom.codegen.signature import module_signatures
from loom.ir import op
from loom.ir.buffer import decl_buffer
from loom.ir.expr import Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.stmt import Allocate, For, IfThenElse, LetStmt, seq
from loom.target import as_target


def _llvm_ir(func: PrimFunc) -> str:
    """The LLVM IR of `func` as the code generator emits it, before LLVM optimizes it."""
    target = as_target("llvm")
    mod = loom.lower(IRModule((func,)), target=target)
    return str(generate(mod, target, module_signatures(mod, target.alignment)))


def _run(func: PrimFunc, *arrays: np.ndarray) -> None:
    loom.build(IRModule((func,)), target="llvm")(*arrays)


def test_a_repeated_load_is_emitted_once_between_stores_to_other_buffers():
    a, out = decl_buffer((4,), "float32", "a"), decl_buffer((4,), "float32", "out")
    body = seq(
        out.store(a[1] * op.const(2.0, "float32"), (0,)),
        out.store(a[1] * op.const(3.0, "float32"), (1,)),  # `out` does not alias `a`
    )
    func = PrimFunc("f", (a, out), body)
    text = _llvm_ir(func)
    impl = text[text.index('@"f.impl"') :]
    assert impl.count("load float") == 1
    x, y = np.arange(4, dtype="float32"), np.zeros(4, "float32")
    _run(func, x, y)
    np.testing.assert_array_equal(y[:2], [2.0, 3.0])


def test_a_load_after_a_store_to_its_buffer_reads_the_stored_value():
    a, out = decl_buffer((4,), "float32", "a"), decl_buffer((4,), "float32", "out")
    body = seq(
        out.store(a[0], (0,)),
        a.store(a[0] + op.const(1.0, "float32"), (0,)),
        out.store(a[0], (1,)),
    )
    x, y = np.full(4, 5.0, "float32"), np.zeros(4, "float32")
    _run(PrimFunc("f", (a, out), body), x, y)
    np.testing.assert_array_equal(y[:2], [5.0, 6.0])


def test_a_load_in_a_loop_sees_the_stores_of_earlier_iterations():
    a, out = decl_buffer((4,), "float32", "a"), decl_buffer((4,), "float32", "out")
    i = Var("i", "int32")
    body = seq(
        out.store(a[0], (0,)),  # loaded before the loop: not reused inside it
        For(i, op.const(0), op.const(3), "serial", a.store(a[0] + op.const(1.0, "float32"), (0,))),
        out.store(a[0], (1,)),
    )
    x, y = np.full(4, 5.0, "float32"), np.zeros(4, "float32")
    _run(PrimFunc("f", (a, out), body), x, y)
    np.testing.assert_array_equal(y[:2], [5.0, 8.0])
    assert x[0] == 8.0


def test_a_store_through_another_pointer_to_the_same_memory_is_seen():
    a, out = decl_buffer((4,), "float32", "a"), decl_buffer((4,), "float32", "out")
    p = Var("p", "handle")
    alias = dataclasses.replace(a, name="alias", data=p)  # a view of a's memory through p
    body = seq(
        out.store(a[1], (0,)),
        LetStmt(
            p,
            a.data,
            seq(alias.store(op.const(9.0, "float32"), (1,)), out.store(a[1], (1,))),
        ),
    )
    x, y = np.full(4, 5.0, "float32"), np.zeros(4, "float32")
    _run(PrimFunc("f", (a, out), body), x, y)
    np.testing.assert_array_equal(y[:2], [5.0, 9.0])


def test_arithmetic_computed_in_a_branch_is_computed_again_after_it():
    # reused after the branch, the value would not dominate its use: LLVM refuses the module
    out = decl_buffer((2,), "int32", "out")
    n = Var("n", "int32")
    seven = op.const(7)
    body = seq(
        IfThenElse(op.greater(n, op.const(0)), out.store(n * seven + 1, (0,))),
        out.store(n * seven + 1, (1,)),
    )
    func = PrimFunc("f", (n, out), body)
    for value in (3, -2):
        y = np.zeros(2, "int32")
        loom.build(IRModule((func,)), target="llvm")(value, y)
        np.testing.assert_array_equal(y, [value * 7 + 1 if value > 0 else 0, value * 7 + 1])


def test_a_pointer_an_extern_call_returns_may_alias_a_buffer():
    # memcpy returns its destination: a store through `a` changes what `view` (= q) reads
    a, src, out = (decl_buffer((4,), "float32", n) for n in ("a", "src", "out"))
    q = Var("q", "handle")
    view = dataclasses.replace(a, name="view", data=q)
    copy = op.call_extern("handle", "memcpy", a.data, src.data, op.const(16, "uint64"))
    body = LetStmt(
        q,
        copy,
        seq(
            out.store(view[1], (0,)),
            a.store(op.const(9.0, "float32"), (1,)),
            out.store(view[1], (1,)),
        ),
    )
    x, y = np.zeros(4, "float32"), np.zeros(4, "float32")
    _run(PrimFunc("f", (a, src, out), body), x, np.full(4, 5.0, "float32"), y)
    np.testing.assert_array_equal(y[:2], [5.0, 9.0])


def test_negative_and_positive_zero_are_different_constants():
    a, out = decl_buffer((4,), "float32", "a"), decl_buffer((4,), "float32", "out")
    zero, negative = op.const(0.0, "float32"), op.const(-0.0, "float32")
    body = seq(
        out.store(a[0] / zero, (0,)),
        out.store(a[0] / negative, (1,)),
        out.store(a[0] * zero, (2,)),
        out.store(a[0] * negative, (3,)),
    )
    y = np.zeros(4, "float32")
    _run(PrimFunc("f", (a, out), body), np.ones(4, "float32"), y)
    np.testing.assert_array_equal(y, [np.inf, -np.inf, 0.0, -0.0])
    assert np.signbit(y[3]) and not np.signbit(y[2])


def test_a_buffer_allocated_again_is_not_read_through_the_first_allocation():
    # two unrolled copies of the same Allocate bind buf.data twice: an address computed from
    # the first copy's buffer must not stand for the second's
    out = decl_buffer((2,), "float32", "out")
    buf = decl_buffer((4,), "float32", "buf", scope="local")

    def copy(k: int, value: float):
        q = Var(f"q{k}", "handle")
        view = dataclasses.replace(buf, name=f"view{k}", data=q)
        address = op.cast(op.cast(buf.data, "uint64"), "handle")
        stored = buf.store(op.const(value, "float32"), (0,))
        return Allocate(buf, seq(stored, LetStmt(q, address, out.store(view[0], (k,)))))

    y = np.zeros(2, "float32")
    _run(PrimFunc("f", (out,), seq(copy(0, 1.0), copy(1, 2.0))), y)
    np.testing.assert_array_equal(y, [1.0, 2.0])
