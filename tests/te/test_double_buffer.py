"""The double_buffer schedule primitive: what it marks, in whatever order the primitives come,
and what it refuses (the transform is tested in tests/transform/test_inject_double_buffer.py)."""

import numpy as np
import pytest

import loom
from loom import ScheduleError, te
from loom.ir import StringImm


def staged():
    A = te.placeholder((64,), "float32", name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    A_l = s.cache_read(A, "local", [B])
    xo, _ = s[B].split(B.op.axis[0], factor=16)
    return s, A, B, A_l, xo


@pytest.mark.parametrize("first", ["double_buffer", "compute_at"])
def test_the_attach_loop_carries_the_mark_whatever_the_order(first):
    s, A, B, A_l, xo = staged()
    steps = {
        "double_buffer": s[A_l].double_buffer,
        "compute_at": lambda: s[A_l].compute_at(s[B], xo),
    }
    steps[first]()
    steps["compute_at" if first == "double_buffer" else "double_buffer"]()
    assert s[B].pragmas[xo] == [("double_buffer", StringImm("A.local"))]
    text = str(loom.lower(s, [A, B], name="f"))
    assert "A.local: Pointer(local float32), float32, [32]" in text


def test_at_the_root_a_double_buffered_stage_keeps_one_copy():
    s, A, B, A_l, _ = staged()
    s[A_l].double_buffer()
    assert all(not p for p in (s[B].pragmas, s[A_l].pragmas))
    mod = loom.lower(s, [A, B], name="f")
    assert "float32, [64]" in str(mod) and "floormod" not in str(mod)
    a, b = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    loom.ir.interpret(mod, a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_the_other_pragmas_of_the_loop_are_kept():
    s, A, B, A_l, xo = staged()
    s[B].pragma(xo, "hint", 3)
    s[A_l].compute_at(s[B], xo)
    s[A_l].double_buffer()
    assert [key for key, _ in s[B].pragmas[xo]] == ["hint", "double_buffer"]
    assert 'attr [i.outer] "pragma_hint" = 3' in str(loom.lower(s, [A, B], name="f"))


def test_double_buffer_refuses_inputs_outputs_and_its_own_pragma():
    s, A, B, A_l, xo = staged()
    with pytest.raises(ScheduleError, match=r"stage A: double_buffer applies to computed stages"):
        s[A].double_buffer()
    with pytest.raises(ScheduleError, match=r"stage B: double_buffer: an output stage"):
        s[B].double_buffer()
    with pytest.raises(ScheduleError, match=r"pragma 'double_buffer' is set by the double_buffer"):
        s[B].pragma(xo, "double_buffer")
