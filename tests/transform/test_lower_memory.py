"""lower_memory_scopes: hand-built IR before the pass and the IR expected after it (TVM's
before/expected style). Stack scopes stay allocations (with the scope's alignment), runtime
allocator scopes become alloc / NULL check / deferred free (fixed-address scopes are placed by
plan_memory, tests/transform/test_plan_memory.py); capacities are checked; the function records
its scopes."""

import pytest

from loom import LoomError
from loom.ir import (
    NOP,
    Allocate,
    AssertStmt,
    Call,
    DeferStmt,
    Evaluate,
    FloatImm,
    IntImm,
    IRModule,
    LetStmt,
    Not,
    PrimFunc,
    assert_structural_equal,
    decl_buffer,
)
from loom.transform.lower_memory import lower_memory_scopes
from tests.transform.memory_cases import copy_through, func


def check(before, expected, scopes, target="llvm"):
    after = lower_memory_scopes(func(before, target))
    assert_structural_equal(after, func(expected, target, {"memories": scopes}))


def test_stack_scope_stays_an_allocation_with_the_scope_alignment():
    def before(A):
        T = decl_buffer((8,), "float32", "T", scope="local")
        return Allocate(T, copy_through(T, A))

    def expected(A):
        T = decl_buffer((8,), "float32", "T", scope="local")
        # Only the Allocate's buffer gets the alignment: the accesses in the body keep the
        # buffer as it was (same data, alignment 0).
        return Allocate(T.replace(alignment=64), copy_through(T, A))

    check(before, expected, ("local",))


def test_runtime_allocator_scope_becomes_alloc_check_and_deferred_free():
    def before(A):
        T = decl_buffer((8,), "float32", "T", scope="global")
        return Allocate(T, copy_through(T, A))

    def expected(A):
        T = decl_buffer((8,), "float32", "T", scope="global")
        alloc = Call("handle", "loom_alloc", (IntImm(32, "int64"), IntImm(64, "int64")), "extern")
        free = Evaluate(Call("int32", "loom_free", (T.data,), "extern"))
        not_null = Not(Call("bool", "isnullptr", (T.data,)))
        # loom_alloc sets the last error: the assertion carries no message of its own
        return LetStmt(
            T.data, alloc, AssertStmt(not_null, None, DeferStmt(free, copy_through(T, A)))
        )

    check(before, expected, ("global",))


def test_vtcm_uses_the_vtcm_allocator_and_its_alignment():
    def before(A):
        T = decl_buffer((8,), "float32", "T", scope="local.vtcm")
        return Allocate(T, copy_through(T, A))

    def expected(A):
        T = decl_buffer((8,), "float32", "T", scope="local.vtcm")
        size_align = (IntImm(32, "uint32"), IntImm(128, "uint32"))
        alloc = Call("handle", "HexagonBackendAllocateVTCM", size_align, "extern")
        free = Evaluate(Call("int32", "HexagonBackendFreeVTCM", (T.data,), "extern"))
        not_null = Not(Call("bool", "isnullptr", (T.data,)))
        return LetStmt(
            T.data, alloc, AssertStmt(not_null, None, DeferStmt(free, copy_through(T, A)))
        )

    check(before, expected, ("local.vtcm",))


def test_a_fixed_address_buffer_left_unplanned_is_an_error(scopes):
    def before(A):
        T = decl_buffer((8,), "float32", "T", scope="test.scratch")
        return Allocate(T, copy_through(T, A))

    with pytest.raises(LoomError, match=r"buffer T .* plan_memory must run before"):
        lower_memory_scopes(func(before))


def test_scopes_are_recorded_in_order_after_known_ones():
    def before(A):
        T = decl_buffer((8,), "float32", "T", scope="local")
        return Allocate(T, copy_through(T, A))

    mod = func(before).map_functions(lambda f: f.with_attr("memories", ("global",)))
    assert lower_memory_scopes(mod)["main"].attr("memories") == ("global", "local")


def test_function_without_allocations_is_left_alone():
    def build(A):
        return A.store(FloatImm(0.0), (0,))

    assert_structural_equal(lower_memory_scopes(func(build)), func(build))
    assert lower_memory_scopes(func(lambda A: NOP))["main"].attr("memories") is None


def test_allocation_larger_than_the_target_vtcm_is_an_error():
    def before(A):
        T = decl_buffer((1024,), "float32", "T", scope="local.vtcm")
        return Allocate(T, T.store(FloatImm(0.0), (0,)))

    with pytest.raises(
        LoomError, match=r"buffer T needs 4096 bytes but memory scope local.vtcm has 2048 bytes"
    ):
        lower_memory_scopes(func(before, target="hexagon -vtcm=2048"))


def test_module_without_target_is_an_error():
    mod = IRModule((PrimFunc("main", (), NOP),))
    with pytest.raises(LoomError, match=r"this pass needs the module's target"):
        lower_memory_scopes(mod)
