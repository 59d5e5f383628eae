"""Property test: random programs under random schedules, interpreter vs numpy (200 per run)."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loom
from tests.random_programs import draw_program


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_program_interpreter_matches_numpy(data):
    prog = draw_program(data.draw)
    mod = loom.lower(prog.schedule, prog.args, name="random")
    loom.ir.interpret(mod, *prog.inputs)
    got = prog.inputs[-1]
    if prog.dtype == "float32":
        np.testing.assert_allclose(
            got, prog.expected, rtol=1e-4, atol=1e-4, err_msg="\n".join(prog.description)
        )
    else:
        np.testing.assert_array_equal(got, prog.expected, err_msg="\n".join(prog.description))
