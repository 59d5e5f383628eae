"""lane_slice (loom/ir/lanes.py): a run of a vector expression's lanes, checked lane by lane
against the whole expression's value."""

import pytest

from loom.ir import op
from loom.ir.evaluate import evaluate
from loom.ir.expr import Broadcast, Call, Cast, IntImm, Ramp, Var
from loom.ir.lanes import lane_slice

h = Var("h", "int32")
LANES = 16


def i32(v):
    return IntImm(v, "int32")


def cases():
    ramp = Ramp(op.mul(h, i32(16)), i32(1), LANES)
    row = Broadcast(op.greater_equal(h, i32(2)), LANES)
    yield "guarded row", op.logical_and(row, op.less(ramp, Broadcast(i32(38), LANES)))
    yield (
        "likely",
        Call("boolx16", "likely", (op.less(ramp, Broadcast(op.add(h, i32(40)), LANES)),)),
    )
    yield "strided", op.floormod(Ramp(h, i32(3), LANES), Broadcast(i32(7), LANES))
    yield "cast", Cast("float32x16", Ramp(i32(-5), i32(2), LANES))
    yield "select", op.select(row, Ramp(i32(0), h, LANES), Broadcast(i32(9), LANES))


@pytest.mark.parametrize("name, e", list(cases()), ids=[c[0] for c in cases()])
@pytest.mark.parametrize("first, count", [(0, 8), (8, 8), (5, 1), (3, 13), (0, 16)])
def test_a_slice_holds_the_lanes_it_names(name, e, first, count):
    for value in (0, 2, 5):
        whole = evaluate(e, {h: value})
        part = evaluate(lane_slice(e, first, count), {h: value})
        want = whole[first : first + count]
        assert (tuple(part) if count > 1 else (part,)) == tuple(want)


def test_a_vector_variable_cannot_be_sliced():
    v = Var("v", "int32x16")
    assert lane_slice(op.add(v, Ramp(i32(0), i32(1), LANES)), 0, 8) is None


def test_lanes_outside_the_vector_are_refused():
    with pytest.raises(ValueError, match=r"lanes 10\.\.17 of a 16-lane vector"):
        lane_slice(Ramp(i32(0), i32(1), LANES), 10, 8)
