"""loom.memory.Pool and pin: what a pool says, its defaults, and clear errors for bad input."""

import pytest

import loom
from loom import LoomError
from loom.memory import Pool, pin
from loom.memory.pool import PINS_ATTR, Pin, check_pools


def test_a_pools_placement_follows_from_its_kind_and_scope():
    assert Pool("ws").placement == "caller"
    assert Pool("w", kind="constant").placement == "static"
    assert Pool("sp", accessible_from=("npu",), scope="npu.spad").placement == "fixed"
    assert Pool("ws", placement="static").placement == "static"
    assert Pool("ws", accessible_from="npu").accessible_from == ("npu",)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"name": "a b"}, r"name must be a C identifier"),
        ({"name": "p", "kind": "scratch"}, r"kind must be one of \('workspace', 'constant'\)"),
        ({"name": "p", "size": 0}, r"size must be a positive int"),
        ({"name": "p", "size": True}, r"size must be a positive int"),
        ({"name": "p", "alignment": 48}, r"alignment must be a power of two"),
        ({"name": "p", "accessible_from": ()}, r"accessible_from must name at least one device"),
        ({"name": "p", "placement": "heap"}, r"placement must be one of"),
        ({"name": "p", "placement": "fixed"}, r"a fixed pool names its fixed-address memory"),
        ({"name": "p", "kind": "constant", "placement": "caller"}, r"embedded in the library"),
    ],
)
def test_bad_pools_are_refused_naming_what_is_expected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Pool(**kwargs)


def test_a_pool_list_needs_pools_with_distinct_names():
    assert check_pools(Pool("a")) == (Pool("a"),)
    with pytest.raises(ValueError, match=r"two pools are named 'a'"):
        check_pools([Pool("a"), Pool("a", kind="constant")])
    with pytest.raises(TypeError, match=r"pools\[1\] must be a loom.memory.Pool, got str"):
        check_pools([Pool("a"), "b"])
    with pytest.raises(TypeError, match=r"pools must be a sequence"):
        check_pools(3)


def test_a_fixed_pool_needs_a_fixed_scope_at_least_as_large():
    with pytest.raises(LoomError, match=r"scope global is not a fixed-address memory scope"):
        Pool("p", scope="global").check_scope(loom.memory.get("global"))
    spad = loom.memory.get("npu.spad")
    with pytest.raises(LoomError, match=r"pool p has \d+ bytes but its scope npu.spad only"):
        Pool("p", size=spad.strategy.size + 1, scope="npu.spad").check_scope(spad)


def test_pins_accumulate_on_the_module():
    mod = loom.ir.IRModule(())
    mod = pin(pin(mod, "main", "a", "dram"), "k", "T", "spad", offset=64)
    assert mod.attr(PINS_ATTR) == (Pin("main", "a", "dram"), Pin("k", "T", "spad", 64))
    with pytest.raises(ValueError, match=r"Pin offset must be an int >= 0"):
        Pin("main", "a", "dram", -1)
    with pytest.raises(TypeError, match=r"Pin pool must be a str"):
        Pin("main", "a", None)
