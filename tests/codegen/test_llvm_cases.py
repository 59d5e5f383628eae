"""Every case of tests/cases.py compiled with loom.build for the host matches numpy, and the
random programs of the property test give the interpreter's results natively.

Tolerances: integers exactly; floats within each case's stated rtol/atol (the same as the
interpreter's: libm's exp/log/tanh/erf may differ from the interpreter's double-precision
evaluation by an ulp, and reductions may be summed in another order by LLVM)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loom
from tests.cases import CASES
from tests.random_programs import draw_program


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_native_matches_numpy(case):
    sch, args = case.make()
    mod = loom.build(sch, args, target="llvm", name="kernel")
    arrays = case.inputs(np.random.default_rng(7))
    expected = case.reference(*[a.copy() for a in arrays])
    mod["kernel"](*arrays)
    for got, want in zip(arrays, expected):
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_program_native_matches_interpreter(data):
    prog = draw_program(data.draw)
    lowered = loom.lower(prog.schedule, prog.args, name="random")
    native_inputs = [a.copy() for a in prog.inputs]
    loom.ir.interpret(lowered, *prog.inputs)
    loom.build(lowered, target="llvm")["random"](*native_inputs)
    got, want = native_inputs[-1], prog.inputs[-1]
    message = "\n".join(prog.description)
    if prog.dtype == "float32":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=message)
    else:
        np.testing.assert_array_equal(got, want, err_msg=message)
