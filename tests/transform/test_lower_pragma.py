"""lower_pragmas: hand-built IR before the pass and the IR expected after it (TVM's
before/expected style). A pragma'd copy nest with a registered rule becomes one checked call of
the rule's symbol (contiguous dimensions merged, guards shortening loops); pragmas without a rule
stay; copies the rule cannot describe are errors.

Uses the example scratchpad of tests/conftest.py (`spad`: scope "spad", rules mvin/mvout, symbols
`int32 mvin(handle src, uint64 dst, int32 rows, int32 row_bytes, int32 src_stride, int32
dst_stride)` and mvout with handle and uint64 swapped, both setting the last error)."""

import pytest

from loom import LoomError, memory
from loom.ir import (
    EQ,
    LT,
    NOP,
    Allocate,
    AssertStmt,
    AttrStmt,
    Call,
    Cast,
    FloatImm,
    For,
    IfThenElse,
    IntImm,
    IRModule,
    PrimFunc,
    Var,
    assert_structural_equal,
    decl_buffer,
    op,
)
from loom.target import Target
from loom.transform.lower_pragma import lower_pragmas


@pytest.fixture
def rules(spad):
    """The spad scope and rules, and "spad_copy": mvin with its own argument list (make_args)."""

    def make_args(nest):
        (n, _, _), *_ = nest.dims
        return [nest.src_address(), nest.dst_address(), 1, n * nest.elem_bytes, 0, 0]

    memory.register_pragma_rule(memory.PragmaRule("spad_copy", "mvin", make_args=make_args))
    yield spad
    memory.pragma.unregister_pragma_rule("spad_copy")


def loop(i, extent, body):
    return For(i, IntImm(0), IntImm(extent), "serial", body)


def pragma(name, body, about=None):
    return AttrStmt(f"pragma_{name}", IntImm(1), body, about)


def func(build, target="llvm"):
    """main(A: float32[64], B: float32[64]) with a 32-float scratchpad buffer S allocated."""
    A, B = decl_buffer((64,), "float32", "A"), decl_buffer((64,), "float32", "B")
    S = decl_buffer((32,), "float32", "S", scope="spad")
    mod = IRModule((PrimFunc("main", (A, B), Allocate(S, build(A, B, S))),))
    return mod if target is None else mod.with_attr("target", Target(target))


def check(before, expected):
    assert_structural_equal(lower_pragmas(func(before)), func(expected))


def address(buf, offset=0):
    return op.call_intrin("handle", "address_of", buf.load([op.convert(offset)]))


def mvin(src, dst, rows, row_bytes, src_stride, dst_stride, symbol="mvin"):
    """The checked call the pass makes: src is a host address, dst a device address."""
    args = (src, Cast("uint64", dst), *(op.convert(v) for v in (rows, row_bytes)))
    args += tuple(op.convert(v) for v in (src_stride, dst_stride))
    return AssertStmt(EQ(Call("int32", symbol, args, "extern"), IntImm(0)), None, NOP)


def mvout(src, dst, rows, row_bytes, src_stride, dst_stride):
    args = (Cast("uint64", src), dst, *(op.convert(v) for v in (rows, row_bytes)))
    args += tuple(op.convert(v) for v in (src_stride, dst_stride))
    return AssertStmt(EQ(Call("int32", "mvout", args, "extern"), IntImm(0)), None, NOP)


def test_1d_copy_becomes_one_row(rules):
    def before(A, B, S):
        i = Var("i")
        return pragma("mvin", loop(i, 16, S.store(A[i], (i,))), about=i)

    def expected(A, B, S):
        return mvin(address(A), address(S), 1, 64, 64, 64)

    check(before, expected)


def test_2d_copy_with_different_strides_becomes_rows(rules):
    def before(A, B, S):
        r, c = Var("r"), Var("c")
        copy = S.store(A[r * 16 + c], (r * 8 + c,))  # 4 rows of 8 floats, A rows 16 apart
        return pragma("mvin", loop(r, 4, loop(c, 8, copy)), about=r)

    def expected(A, B, S):
        return mvin(address(A), address(S), 4, 32, 64, 32)

    check(before, expected)


def test_contiguous_dimensions_merge(rules):
    def before(A, B, S):
        r, c = Var("r"), Var("c")
        return pragma("mvin", loop(r, 4, loop(c, 8, S.store(A[r * 8 + c], (r * 8 + c,)))))

    def expected(A, B, S):
        return mvin(address(A), address(S), 1, 128, 128, 128)

    check(before, expected)


def test_copy_out_at_an_outer_loop_offset(rules):
    def before(A, B, S):
        o, i = Var("o"), Var("i")
        copy = pragma("mvout", loop(i, 16, B.store(S[i + 16], (o * 16 + i,))), about=i)
        return loop(o, 4, copy)

    def expected(A, B, S):
        o = Var("o")
        return loop(o, 4, mvout(address(S, 16), address(B, o * 16), 1, 64, 64, 64))

    check(before, expected)


def test_guard_shortens_the_copy(rules):
    def before(A, B, S):
        o, i = Var("o"), Var("i")
        guarded = IfThenElse(LT(o * 16 + i, IntImm(40)), B.store(S[i], (o * 16 + i,)))
        return loop(o, 3, pragma("mvout", loop(i, 16, guarded)))

    def expected(A, B, S):
        o = Var("o")
        n = op.min_(IntImm(16), IntImm(40) - o * 16)  # the last tile has 8 elements
        return loop(o, 3, mvout(address(S), address(B, o * 16), 1, n * 4, n * 4, n * 4))

    check(before, expected)


def test_rule_with_its_own_arguments(rules):
    def before(A, B, S):
        i = Var("i")
        return pragma("spad_copy", loop(i, 8, S.store(A[i + 8], (i,))))

    def expected(A, B, S):
        return mvin(address(A, 8), address(S), 1, 32, 0, 0)

    check(before, expected)


def test_pragmas_without_rule_and_other_attributes_stay(rules):
    def build(A, B, S):
        i = Var("i")
        copy = loop(i, 16, S.store(A[i], (i,)))
        return AttrStmt("hint", IntImm(2), pragma("prefetch", copy, about=i))

    check(build, build)


def error(build, match):
    with pytest.raises(LoomError, match=match):
        lower_pragmas(func(build))


def test_nest_that_is_not_a_copy_is_an_error(rules):
    def build(A, B, S):
        i = Var("i")
        return pragma("mvin", loop(i, 16, S.store(FloatImm(0.0), (i,))))

    error(build, r"function main, pragma 'mvin': .*must be a copy between two buffers")


def test_copy_in_the_wrong_direction_is_an_error(rules):
    def build(A, B, S):
        i = Var("i")
        return pragma("mvin", loop(i, 16, B.store(S[i], (i,))))

    error(build, r"the copy reads S in scope spad \(address space scratchpad\), but the rule")


def test_too_many_dimensions_is_an_error(rules):
    def build(A, B, S):
        a, b, c = Var("a"), Var("b"), Var("c")
        copy = S.store(A[a * 36 + b * 8 + c], (a * 16 + b * 4 + c,))
        return pragma("mvin", loop(a, 2, loop(b, 4, loop(c, 4, copy))))

    error(build, r"the copy has 3 dimensions after merging contiguous ones .* handles 2")


def test_unflattened_buffers_are_an_error(rules):
    def build(A, B, S):
        M = decl_buffer((4, 8), "float32", "M", scope="spad")
        r, c = Var("r"), Var("c")
        copy = pragma("mvin", loop(r, 4, loop(c, 8, M.store(A[r * 8 + c], (r, c)))))
        return Allocate(M, copy)

    error(build, r"buffers must be flattened before pragma lowering")


def test_module_without_target_is_an_error(rules):
    with pytest.raises(LoomError, match=r"this pass needs the module's target"):
        lower_pragmas(func(lambda A, B, S: NOP, target=None))
