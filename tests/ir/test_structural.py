"""structural_equal / assert_structural_equal: alpha-equivalence of bound variables, free variables
identical or mapped one to one, and a message naming the first differing sub-node."""

import re

import pytest

from loom.ir import (
    Allocate,
    AttrStmt,
    Cast,
    FloatImm,
    For,
    IntImm,
    IRModule,
    Let,
    LetStmt,
    PrimFunc,
    Var,
    assert_structural_equal,
    decl_buffer,
    seq,
    structural_equal,
)


def program(
    *,
    const=1.0,
    swap=False,
    cast_dtype="float32",
    scope="local",
    extent=8,
):
    """A(8) params, T a local temporary: for i: T[i] = A[i] + const; A[i] = cast(T[i] * x)."""
    A = decl_buffer((8,), "float32", "A")
    T = decl_buffer((8,), "float32", "T", scope=scope)
    x = Var("x", "float32")
    i, j = Var("i"), Var("j")
    inner = For(j, IntImm(0), IntImm(2), "serial", T.store(T[i] * x, (j if swap else i,)))
    body = For(
        i,
        IntImm(0),
        IntImm(extent),
        "serial",
        seq(
            T.store(A[i] + FloatImm(const), (i,)),
            inner,
            A.store(Cast("float32", Cast(cast_dtype, T[i])), (i,)),
        ),
    )
    return PrimFunc("f", (A, x), Allocate(T, body))


def message(a, b, **kwargs) -> str:
    with pytest.raises(AssertionError) as info:
        assert_structural_equal(a, b, **kwargs)
    return str(info.value)


def test_independently_built_programs_are_equal():
    a, b = program(), program()
    assert a != b  # distinct variables: plain == says no
    assert structural_equal(a, b)
    assert_structural_equal(a, b)
    assert_structural_equal(IRModule((a,)), IRModule((b,)))


def test_bound_variable_names_do_not_matter():
    i, k = Var("i"), Var("k")
    A = decl_buffer((4,), "int32", "A")
    a = For(i, IntImm(0), IntImm(4), "serial", A.store(i, (i,)))
    b = For(k, IntImm(0), IntImm(4), "serial", A.store(k, (k,)))
    assert_structural_equal(a, b)


def test_changed_constant_names_the_path():
    text = message(program(), program(const=2.0))
    assert "body.body.body.seq[0].value.b" in text.splitlines()[0]
    assert "FloatImm.value: 1.0 != 2.0" in text
    assert "--- lhs ---" in text and "@f = primfn" in text  # both sides printed


def test_swapped_variable_names_the_path():
    text = message(program(), program(swap=True))
    assert "at body.body.body.seq[1].body.indices[0]:" in text
    assert "corresponds to" in text


def test_changed_dtype_names_the_path():
    text = message(program(), program(cast_dtype="float64"))
    assert "at body.body.body.seq[2].value.value:" in text
    assert "Cast.dtype: float32 != float64" in text


def test_changed_buffer_scope_names_the_path():
    text = message(program(), program(scope="shared"))
    assert "at body.buffer:" in text
    assert "Buffer.scope: 'local' != 'shared'" in text


def test_changed_loop_extent_and_statement_count():
    text = message(program(), program(extent=4))
    assert "at body.body.extent:" in text
    A = decl_buffer((4,), "int32", "A")
    text = message(A.store(1, (0,)), seq(A.store(1, (0,)), A.store(2, (1,))))
    assert "node types differ: BufferStore != SeqStmt" in text


def test_bound_variable_dtype_must_match():
    i, k = Var("i"), Var("k", "int64")
    A = decl_buffer((4,), "int32", "A")
    a = For(i, IntImm(0), IntImm(4), "serial", A.store(1, (i,)))
    b = For(k, IntImm(0, "int64"), IntImm(4, "int64"), "serial", A.store(1, (k,)))
    assert not structural_equal(a, b)


def test_free_variables_must_be_identical_unless_mapped():
    x, y, z = Var("x"), Var("y"), Var("z")
    assert structural_equal(x + y, x + y)
    assert not structural_equal(x + y, x + z)
    assert "map_free_vars=True" in message(x + y, x + z)
    assert structural_equal(x + y, z + x, map_free_vars=True)
    assert structural_equal(x * 2, Var("w") * 2, map_free_vars=True)


def test_free_variable_mapping_is_a_bijection():
    x, y = Var("x"), Var("y")
    assert not structural_equal(x + y, x + x, map_free_vars=True)
    assert not structural_equal(x + x, x + y, map_free_vars=True)
    assert not structural_equal(x + y, y + y, map_free_vars=True)
    assert not structural_equal(Var("a", "int64"), Var("b"), map_free_vars=True)


def test_free_variable_against_bound_variable():
    A = decl_buffer((4,), "int32", "A")
    x, i, k = Var("x"), Var("i"), Var("k")
    a = For(i, IntImm(0), IntImm(4), "serial", A.store(x, (i,)))
    b = For(k, IntImm(0), IntImm(4), "serial", A.store(k, (k,)))
    assert not structural_equal(a, b)
    assert not structural_equal(a, b, map_free_vars=True)  # x would need to be k, bound to i


def test_let_and_letstmt_bind_their_variable():
    v, w = Var("v"), Var("w")
    x = Var("x")
    assert structural_equal(Let(v, x + 1, v * v), Let(w, x + 1, w * w))
    assert not structural_equal(Let(v, x + 1, v * v), Let(w, x + 1, w * x))
    A = decl_buffer((4,), "int32", "A")
    assert structural_equal(LetStmt(v, x, A.store(v, (0,))), LetStmt(w, x, A.store(w, (0,))))


def test_allocated_buffers_are_matched_by_definition():
    def alloc(name):
        T = decl_buffer((4,), "int32", name, scope="local")
        return Allocate(T, T.store(1, (0,)))

    assert structural_equal(alloc("T"), alloc("T"))
    assert "Buffer.name: 'T' != 'U'" in message(alloc("T"), alloc("U"))
    # a buffer that is not allocated inside is free: its data variable must be the same
    T = decl_buffer((4,), "int32", "T")
    T2 = decl_buffer((4,), "int32", "T")
    assert not structural_equal(T.store(1, (0,)), T2.store(1, (0,)))
    assert structural_equal(T.store(1, (0,)), T2.store(1, (0,)), map_free_vars=True)


def test_function_parameters_are_bound_including_symbolic_shapes():
    def func(n_first):
        n = Var("n")
        A = decl_buffer((n,), "float32", "A")
        i = Var("i")
        body = For(i, IntImm(0), n, "serial", A.store(FloatImm(0.0), (i,)))
        return PrimFunc("f", (n, A) if n_first else (A, n), body)

    assert_structural_equal(func(True), func(True))
    assert_structural_equal(func(False), func(False))
    assert not structural_equal(func(True), func(False))
    assert "at params[0]:" in message(func(True), func(False))


def test_function_name_and_attrs_are_compared():
    a = program()
    assert "PrimFunc.name: 'f' != 'g'" in message(a, a.replace(name="g"))
    assert "PrimFunc.attrs: lengths differ" in message(a, a.with_attr("k", 1))
    assert_structural_equal(a.with_attr("k", (1, "x")), program().with_attr("k", (1, "x")))


def test_message_shows_both_sub_nodes():
    text = message(program(), program(const=2.0))
    first = text.splitlines()[0]
    assert re.match(r"IR differs structurally at \S+: ", first)
    assert "lhs sub-node: 1.0f" in text and "rhs sub-node: 2.0f" in text


def test_annotation_about_the_loop_below_it():
    A = decl_buffer((4,), "int32", "A")
    k = Var("k")

    def pragma_loop(about_loop=True):
        i = Var("i")
        loop = For(i, IntImm(0), IntImm(4), "serial", A.store(1, (i,)))
        return AttrStmt("pragma_x", IntImm(1), loop, i if about_loop else k)

    assert_structural_equal(pragma_loop(), pragma_loop())
    assert_structural_equal(pragma_loop(False), pragma_loop(False))
    assert not structural_equal(pragma_loop(), pragma_loop(False))  # k is free, not the loop
