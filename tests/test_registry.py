"""The one Registry type: the same rules for every table loom can be extended with."""

import dataclasses

import pytest

import loom
from loom import abi, memory, registry
from loom.errors import LoomError
from loom.registry import Registry


@dataclasses.dataclass(frozen=True)
class Item:
    name: str
    value: int = 0


def test_register_get_and_list():
    r = Registry("widget")
    a = r.register(Item("a", 1))
    r.register(Item("b", 2))
    assert r.get("a") is a
    assert r.names() == ["a", "b"] and [i.name for i in r.items()] == ["a", "b"]
    assert "a" in r and "z" not in r and len(r) == 2
    assert r.find("z") is None


def test_equal_redeclaration_is_a_no_op_and_a_different_one_an_error():
    r = Registry("widget")
    first = r.register(Item("a", 1))
    r.register(Item("a", 1))  # equal: harmless
    with pytest.raises(LoomError, match=r"widget 'a' is already registered.*replace=True"):
        r.register(Item("a", 2))
    assert r.get("a") == first
    r.register(Item("a", 2), replace=True)
    assert r.get("a").value == 2


def test_unknown_name_lists_the_registered_ones_and_the_closest():
    r = Registry("widget")
    r.register(Item("alpha"))
    r.register(Item("beta"))
    with pytest.raises(LoomError, match=r"unknown widget 'alpah' \(did you mean alpha\?\); "):
        r.get("alpah")
    with pytest.raises(LoomError, match=r"registered: alpha, beta"):
        r.get("zzz")


def test_check_refuses_items_of_the_wrong_type():
    def check(item):
        if not isinstance(item, Item):
            raise TypeError(f"expected an Item, got {item!r}")

    r = Registry("widget", check=check)
    with pytest.raises(TypeError, match="expected an Item"):
        r.register("not an item")
    assert len(r) == 0


def test_snapshot_and_restore_all_put_every_registry_back():
    saved = registry.snapshot_all()
    scope = memory.MemoryScope("test.snapshot", memory.Stack())
    memory.register(scope)
    abi.register_library(abi.RuntimeLibrary("test_snapshot_lib", ("cpu",)))
    assert memory.get("test.snapshot") == scope
    registry.restore_all(saved)
    assert "test.snapshot" not in [s.name for s in memory.list()]
    assert "test_snapshot_lib" not in abi.LIBRARIES


def test_every_extensible_table_is_a_registry():
    loom.build  # noqa: B018  (imports the compiler, which creates the registries)
    kinds = {r.what for r in registry.registries()}
    expected = {
        "memory scope",
        "pragma rule",
        "runtime library",
        "module loader",
        "target kind",
        "pass",
        "PassContext config",
    }
    assert expected <= kinds, f"missing: {expected - kinds}"
