"""The IR core: dtypes, expression building and typing, structural equality, printing,
visitor and mutator."""

import pytest

from loom.ir import (
    EQ,
    Add,
    Buffer,
    Cast,
    FloatImm,
    For,
    IntImm,
    IRModule,
    Mutator,
    PrimFunc,
    Select,
    Var,
    decl_buffer,
    dtype,
    op,
    seq,
    substitute,
    to_text,
)
from loom.ir.visitor import free_vars, rename_vars


def test_dtype_parsing_and_properties():
    assert str(dtype("int8x128")) == "int8x128"
    assert dtype("int8x128").lanes == 128 and dtype("int8x128").element == dtype("int8")
    assert dtype("bool").itemsize == 1 and dtype("float16").itemsize == 2
    assert dtype("uint64").max_value() == 2**64 - 1
    for bad in ("int7", "float8", "intx4", "bool8", "vector"):
        with pytest.raises(ValueError, match="dtype"):
            dtype(bad)


def test_type_promotion_rules():
    i8, i32, f32 = Var("a", "int8"), Var("b", "int32"), Var("c", "float32")
    assert (i8 + 1).dtype == dtype("int8")  # a Python int takes the expression's type
    assert (i8 + i32).dtype == dtype("int32")  # the wider integer wins
    assert (i32 * f32).dtype == dtype("float32")  # float wins
    assert (i32 + 0.5).dtype == dtype("float32")
    assert (Var("u", "uint8") + i8).dtype == dtype("int8")  # signed wins
    with pytest.raises(ValueError, match="does not fit in int8"):
        i8 + 1000


def test_constant_folding_follows_the_ir_semantics():
    assert op.add(IntImm(127, "int8"), IntImm(1, "int8")) == IntImm(-128, "int8")  # wraps
    assert op.div(IntImm(-7), IntImm(2)) == IntImm(-3)  # truncates like C
    assert op.floordiv(IntImm(-7), IntImm(2)) == IntImm(-4)
    assert op.floormod(IntImm(-7), IntImm(2)) == IntImm(1)
    assert op.cast(FloatImm(2.7), "int32") == IntImm(2)


def test_structural_equality_and_hash():
    i = Var("i")
    a, b = i * 4 + 1, i * 4 + 1
    assert a == b and hash(a) == hash(b) and a is not b
    assert Var("i") != Var("i")  # distinct variables, even with one name
    assert {a: 1}[b] == 1


def test_python_truth_of_an_expression_is_refused():
    with pytest.raises(TypeError, match="no Python truth value"):
        bool(Var("i") < 3)
    with pytest.raises(TypeError, match=r"is a Python bool \(True\), not a condition"):
        op.select(True, 1, 2)
    sel = op.select(Var("i") == 3, 1, 2)  # == builds the comparison inside an expression
    assert isinstance(sel, Select) and isinstance(sel.condition, EQ)


def test_node_type_checks():
    with pytest.raises(TypeError, match="same dtype"):
        Add(Var("a", "int8"), Var("b", "int32"))
    with pytest.raises(ValueError, match="does not fit"):
        IntImm(300, "uint8")
    with pytest.raises(TypeError, match="changes the number of lanes"):
        Cast(dtype("int32x4"), Var("a"))
    buf = decl_buffer((4, 4), "float32", "A")
    with pytest.raises(ValueError, match="2 dimensions, accessed with 1"):
        buf[Var("i")]
    with pytest.raises(TypeError, match="needs a float32 value"):
        buf.store(IntImm(1), (0, 0))


def test_printer_names_distinct_variables_apart():
    i1, i2 = Var("i"), Var("i")
    text = to_text(i1 + i2)
    assert text == "(i + i_1)"


def test_printer_function_and_allocation():
    A = decl_buffer((8,), "int8", "A")
    T = decl_buffer((8,), "int8", "T", scope="local.vtcm")
    i = Var("i")
    from loom.ir import Allocate

    body = Allocate(
        T,
        seq(
            For(i, IntImm(0), IntImm(8), "serial", T.store(A[i], (i,))),
            For(i, IntImm(0), IntImm(8), "parallel", A.store(T[i], (i,))),
        ),
    )
    text = to_text(PrimFunc("copy", (A,), body))
    assert text.splitlines() == [
        "@copy = primfn(A: Buffer(int8, [8])) {",
        "  allocate(T: Pointer(local.vtcm int8), int8, [8]), storage_scope = local.vtcm;",
        "  for (i: int32, 0, 8) {",
        "    T[i] = A[i]",
        "  }",
        "  parallel (i: int32, 0, 8) {",
        "    A[i] = T[i]",
        "  }",
        "}",
    ]
    assert 'call_extern("mvin", T, 8, dtype=int32)' == to_text(
        op.call_extern("int32", "mvin", T.data, 8)
    )


def test_mutator_rebuilds_only_what_changes():
    i, j = Var("i"), Var("j")
    e = (i + 1) * (j + 2)

    class IncrementConstants(Mutator):
        def visit_IntImm(self, c):
            return IntImm(c.value + 10, c.dtype)

    new = IncrementConstants().visit(e)
    assert to_text(new) == "((i + 11) * (j + 12))"
    untouched = Mutator().visit(e)
    assert untouched is e


def test_substitute_free_vars_and_rename():
    i, j, n = Var("i"), Var("j"), Var("n")
    buf = decl_buffer((16,), "int32", "B")
    loop = For(i, IntImm(0), IntImm(4), "serial", buf.store(i + n, (i * 4 + j,)))
    assert free_vars(loop) == {j, n, buf.data}  # a buffer access uses the buffer's data
    replaced = substitute(loop, {j: IntImm(3)})
    assert free_vars(replaced) == {n, buf.data}
    k = Var("k")
    renamed = rename_vars(loop, {i: k})
    assert renamed.loop_var is k and i not in free_vars(renamed) | {renamed.loop_var}


def test_module_lookup_and_replace():
    f = PrimFunc("f", (), seq())
    g = f.replace(name="g")
    mod = IRModule((f,))
    assert mod.with_function(g).names() == ["f", "g"]
    with pytest.raises(KeyError, match="no function 'h'"):
        mod["h"]
    with pytest.raises(ValueError, match="more than one function named"):
        IRModule((f, f))
    assert isinstance(decl_buffer((2,), name="X"), Buffer)


def test_defer_runs_cleanup_after_the_body_and_on_failure():
    import numpy as np

    from loom.errors import InterpreterError
    from loom.ir import AssertStmt, DeferStmt, Evaluate, interpret

    calls = []
    externs = {"log_event": lambda code: calls.append(code) or 0}
    flag = decl_buffer((1,), "int32", "flag")
    body = AssertStmt(
        op.equal(flag[0], 0), "flag is set", Evaluate(op.call_extern("int32", "log_event", 1))
    )
    func = PrimFunc(
        "f", (flag,), DeferStmt(Evaluate(op.call_extern("int32", "log_event", 2)), body)
    )
    assert 'defer { call_extern("log_event", 2, dtype=int32) }' in to_text(func)
    interpret(func, np.zeros(1, np.int32), externs=externs)
    assert calls == [1, 2]
    calls.clear()
    with pytest.raises(InterpreterError, match="flag is set"):
        interpret(func, np.ones(1, np.int32), externs=externs)
    assert calls == [2]  # the cleanup ran although the body failed
