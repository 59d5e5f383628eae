"""Linear forms (loom/ir/linear.py): modular coefficients are kept as their signed
representatives, which `to_expr` relies on, whichever way a form was made."""

from loom.abi.dtype import dtype
from loom.ir.expr import Var
from loom.ir.linear import Linear, to_expr

INT32 = dtype("int32")


def test_a_modular_copy_of_an_exact_form_wraps_its_coefficients():
    x = Var("x")
    exact = Linear(INT32, {x: 3 << 31}, const=1 << 32, modular=False)
    assert exact.terms[x] == 3 << 31  # over Z
    wrapped = exact.copy(modular=True)
    assert wrapped.terms == {x: -(1 << 31)}
    assert wrapped.const == 0
    assert to_expr(wrapped) == to_expr(Linear(INT32, {x: -(1 << 31)}))


def test_terms_that_cancel_modulo_the_width_disappear():
    x = Var("x")
    lin = Linear(INT32, {x: 1 << 31})
    lin.add_term(x, 1 << 31)
    assert lin.is_const
