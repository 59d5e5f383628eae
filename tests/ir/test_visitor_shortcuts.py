"""The shortcuts that keep walking large (unrolled) trees cheap give the results a full walk
gives (loom/ir/visitor.py): a visitor skips subtrees holding no node it has a method for,
substitution rebuilds only the paths to a replaced variable, and collectors visit a shared
subtree once. Also `Node.replace` and `IntImm`'s checks, which take their fast paths."""

import dataclasses

import pytest

from loom.ir import op
from loom.ir.buffer import decl_buffer
from loom.ir.expr import Add, BufferLoad, IntImm, Mul, Var
from loom.ir.stmt import AttrStmt, BufferStore, For, seq
from loom.ir.visitor import (
    Mutator,
    Visitor,
    child_vars,
    node_kinds,
    post_order_visit,
    rename_vars,
    substitute,
    visit_each_once,
    visit_kinds_once,
)


def _body():
    a, b = decl_buffer((64,), "float32", "a"), decl_buffer((64,), "float32", "b")
    i, j = Var("i"), Var("j")
    shared = a[i * 4 + 1] * op.const(2.0, "float32")  # one object in two statements
    inner = For(j, op.const(0), op.const(4), "serial", b.store(shared + a[j], (i * 4 + j,)))
    return (
        i,
        j,
        shared,
        For(i, op.const(0), op.const(16), "serial", seq(inner, b.store(shared, (i,)))),
    )


def test_a_mutator_skips_only_subtrees_without_a_node_it_rewrites():
    i, j, _, loop = _body()

    class Doubler(Mutator):  # rewrites multiplications only
        def visit_Mul(self, e):
            return Mul(self.generic_mutate(e), op.const(2, e.dtype)) if e.dtype.is_int else e

    class Counter(Visitor):
        def __init__(self):
            self.fors = 0

        def visit_For(self, s):
            self.fors += 1
            self.generic_visit(s)

    out = Doubler().visit(loop)
    assert "((i*4)*2)" in str(out).replace(" ", "")
    counter = Counter()
    counter.visit(out)
    assert counter.fors == 2

    # a mutator with nothing to rewrite in the tree returns the very same object
    class Unrolled(Mutator):
        def visit_AttrStmt(self, s):
            raise AssertionError("no AttrStmt in this tree")

    assert Unrolled().visit(loop) is loop
    # ... but visits one that is there
    attr = AttrStmt(loop, "pragma", op.const(1), loop)
    with pytest.raises(AssertionError, match="no AttrStmt"):
        Unrolled().visit(seq(loop, attr))


def test_node_kinds_and_child_vars_describe_the_subtree():
    i, j, shared, loop = _body()
    kinds = node_kinds(loop)
    assert For in kinds and Add in kinds and Mul in kinds
    assert child_vars(shared) == {i}
    assert child_vars(loop) == {i, j}  # loop variables appear where they are used


def test_substitute_rebuilds_only_the_paths_to_the_variable():
    i, j, shared, loop = _body()
    inner_body = loop.body.seq[0].body
    out = substitute(inner_body, {j: op.const(3)})
    assert "a[3]" in str(out).replace(" ", "")
    assert out.value.a is shared  # the subtree without j is the same object
    # a variable bound in the tree is renamed everywhere, binding included
    k = Var("k")
    renamed = rename_vars(loop.body.seq[0], {j: k})
    assert renamed.loop_var is k and j not in child_vars(renamed) and k in child_vars(renamed)
    # a binding the body never uses is renamed too
    unused = For(j, op.const(0), op.const(2), "serial", loop.body.seq[1])
    assert rename_vars(unused, {j: k}).loop_var is k


def test_visit_each_once_visits_each_distinct_node_once_in_post_order():
    _, _, shared, loop = _body()
    every, once = [], []
    post_order_visit(loop, every.append)
    visit_each_once(loop, once.append)
    assert len(every) > len(once)
    assert sum(n is shared for n in every) == 2 and sum(n is shared for n in once) == 1
    first = []
    for n in every:
        if not any(n is m for m in first):
            first.append(n)
    assert [id(n) for n in first] == [id(n) for n in once]  # order of first occurrence


@pytest.mark.parametrize(
    "kinds", [{For}, {BufferStore}, {BufferLoad}, {Mul, For}, {AttrStmt}, {BufferLoad, Var}]
)
def test_visit_kinds_once_gives_the_nodes_of_those_kinds_visit_each_once_gives(kinds):
    *_, loop = _body()
    once, some = [], []
    visit_each_once(loop, once.append)
    visit_kinds_once(loop, frozenset(kinds), some.append)
    assert [id(n) for n in some] == [id(n) for n in once if type(n) in kinds]
    assert some or kinds == {AttrStmt}


def test_node_replace_keeps_the_dataclass_rules():
    v = Var("v")
    e = Add(v, op.const(1))
    assert e.replace(b=op.const(2)) == Add(v, op.const(2))
    with pytest.raises(ValueError, match="init=False"):
        e.replace(dtype="int64")  # derived, as with dataclasses.replace
    with pytest.raises(TypeError):
        e.replace(c=v)
    assert dataclasses.replace(v, name="w").id == v.replace(name="w").id


def test_int_constants_are_checked_against_their_dtype():
    assert IntImm(True, "bool").value == 1 and type(IntImm(True, "bool").value) is int
    assert IntImm(255, "uint8").value == 255
    with pytest.raises(ValueError, match="does not fit in uint8"):
        IntImm(256, "uint8")
    with pytest.raises(ValueError, match="does not fit in int8"):
        IntImm(-129, "int8")
    with pytest.raises(ValueError, match="scalar integer or bool dtype"):
        IntImm(1, "float32")
    with pytest.raises(ValueError, match="scalar integer or bool dtype"):
        IntImm(1, "int32x4")
