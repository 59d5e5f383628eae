"""PassContext: user passes at phases see the whole module, instruments, config validation."""

import io

import numpy as np
import pytest

import loom
from loom import LoomError, te
from loom.ir import For, ForKind, IRModule, PrimFunc, Ramp, post_order_visit
from loom.transform import PassContext, PrintAfterAll, module_pass, prim_func_pass


def simple():
    A = te.placeholder((4, 8), name="A")
    B = te.compute((4, 8), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(B.op.axis[1])
    return s, [A, B]


def test_user_pass_at_each_phase_receives_whole_module():
    seen = []

    def recorder(phase):
        @module_pass(name=f"record_{phase}")
        def record(mod: IRModule) -> IRModule:
            seen.append((phase, mod.names(), _has_ramp(mod), _has_vector_loop(mod)))
            return mod

        return record

    passes = [(phase, recorder(phase)) for phase in ("schedule", "flatten", "vectorize", "final")]
    with PassContext(config={"tir.add_lower_pass": passes}):
        loom.lower(*simple(), name="add_one")
    assert [p for p, *_ in seen] == ["schedule", "flatten", "vectorize", "final"]
    assert all(names == ["add_one"] for _, names, *_ in seen)
    # before vectorization the loop is still a vectorized For; after it, a ramp
    assert seen[0][2:] == (False, True) and seen[1][2:] == (False, True)
    assert seen[2][2:] == (True, False) and seen[3][2:] == (True, False)


def test_integer_phases_like_tvm_and_plain_functions():
    calls = []

    def plain(mod):
        calls.append(len(mod))
        return mod

    with PassContext(config={"tir.add_lower_pass": [(1, plain), (3, plain)]}):
        loom.lower(*simple())
    assert calls == [1, 1]


def test_user_pass_changes_the_program():
    @prim_func_pass
    def double_loops(func: PrimFunc) -> PrimFunc:
        return func.with_attr("seen_by_user_pass", True)

    with PassContext(config={"tir.add_lower_pass": [("final", double_loops)]}):
        mod = loom.lower(*simple(), name="f")
    assert mod["f"].attr("seen_by_user_pass") is True


def test_bad_user_pass_result_is_an_error():
    with PassContext(config={"tir.add_lower_pass": [(0, lambda mod: None)]}):
        with pytest.raises(LoomError, match=r"returned NoneType, expected an IRModule"):
            loom.lower(*simple())


def test_unknown_config_and_phase():
    with pytest.raises(LoomError, match=r"unknown PassContext config 'tir.nope'"):
        PassContext(config={"tir.nope": 1})
    with pytest.raises(LoomError, match=r"unknown lowering phase 'later'"):
        PassContext(config={"tir.add_lower_pass": [("later", lambda m: m)]})
    with pytest.raises(LoomError, match=r"opt_level must be an int in 0..3"):
        PassContext(opt_level=7)


def test_print_after_all_instrument():
    out = io.StringIO()
    with PassContext(instruments=[PrintAfterAll(out)]):
        loom.lower(*simple(), name="f")
    text = out.getvalue()
    names = (
        "bind_shape_vars",
        "simplify",
        "check_bounds",
        "flatten_buffer",
        "inject_double_buffer",
    )
    for name in (*names, "vectorize_loop", "unroll_loop"):
        assert f"# IR after {name}" in text
    assert text.count("@f = primfn") == 8


def test_disable_vectorize_gives_serial_loops_with_same_result():
    with PassContext(config={"tir.disable_vectorize": True}):
        mod = loom.lower(*simple())
    assert not _has_ramp(mod)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.zeros_like(a)
    loom.ir.interpret(mod, a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_disabled_pass_is_skipped():
    with PassContext(disabled_pass=["vectorize_loop"]):
        mod = loom.lower(*simple())
    assert _has_vector_loop(mod)


def test_current_context_nests():
    outer = PassContext(opt_level=1)
    with outer:
        assert PassContext.current() is outer
        with PassContext(opt_level=3) as inner:
            assert PassContext.current() is inner
        assert PassContext.current() is outer
    assert PassContext.current() is not outer


def _has_ramp(mod):
    found = []
    for f in mod:
        post_order_visit(f.body, lambda n: found.append(n) if isinstance(n, Ramp) else None)
    return bool(found)


def _has_vector_loop(mod):
    found = []
    for f in mod:
        post_order_visit(
            f.body,
            lambda n: (
                found.append(n) if isinstance(n, For) and n.kind == ForKind.VECTORIZED else None
            ),
        )
    return bool(found)
