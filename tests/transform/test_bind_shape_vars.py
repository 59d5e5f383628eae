"""bind_shape_vars: hand-built IR before the pass and the IR expected after it. Each shape
variable of an argument buffer that is not a parameter becomes one, after the others, in the
order the buffers name them first; the attribute `shape_params` counts them. A variable only a
compound dimension uses must be a parameter already."""

import pytest

from loom import LoweringError
from loom.ir import IRModule, PrimFunc, Var, assert_structural_equal, decl_buffer
from loom.ir.stmt import Evaluate
from loom.transform.bind_shape_vars import bind_shape_vars


def module(params, attrs=()):
    return IRModule((PrimFunc("main", tuple(params), Evaluate(0), attrs),))


def test_shape_variables_become_parameters_in_the_order_the_buffers_name_them():
    n, m = Var("n"), Var("m")
    A, B = decl_buffer((n, m), "float32", "A"), decl_buffer((m, 4), "float32", "B")
    after = bind_shape_vars(module([A, B]))
    assert_structural_equal(after, module([A, B, n, m], {"shape_params": 2}))


def test_a_variable_that_is_a_parameter_is_not_added_again():
    n = Var("n")
    A = decl_buffer((n * 4,), "float32", "A")
    before = module([n, A])
    assert bind_shape_vars(before) is before


def test_constant_shapes_leave_the_function_unchanged():
    before = module([decl_buffer((4,), "float32", "A")])
    assert bind_shape_vars(before) is before


def test_running_twice_binds_once():
    n = Var("n")
    once = bind_shape_vars(module([decl_buffer((n,), "float32", "A")]))
    assert bind_shape_vars(once) is once


def test_a_variable_only_in_a_compound_dimension_is_an_error():
    n = Var("n")
    with pytest.raises(LoweringError, match=r"argument A has the dimension \(n \+ 1\).*defines n"):
        bind_shape_vars(module([decl_buffer((n + 1,), "float32", "A")]))
