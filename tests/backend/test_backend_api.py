"""The plug-in API's registry: what register accepts, what it refuses, and that a refused
backend leaves every registry as it was."""

import pytest

import loom
from loom import LoomError, abi, memory
from loom.backend import npu
from loom.memory.pragma import PragmaRule


class Collides(npu.NPUBackend):
    """An NPU whose scratchpad reuses a name already taken, with another declaration."""

    def __init__(self, name, scope_name):
        super().__init__()
        self.name = name
        self.scope = memory.MemoryScope(
            scope_name, memory.FixedAddress(0, 64, 8, "elsewhere"), accessible_from=("npu",)
        )

    def memories(self):
        return [self.scope, *super().memories()]


@pytest.mark.parametrize(
    "scope_name, owner",
    [("global", "by loom or by hand"), ("npu.spad", "by backend npu with")],
)
def test_a_name_taken_by_loom_or_another_backend_is_refused_and_nothing_changes(scope_name, owner):
    before = (memory.list(), abi.list_libraries(), memory.list_pragma_rules())
    backends = [b.name for b in loom.backend.list()]
    with pytest.raises(
        LoomError, match=rf"memory scope '{scope_name}' is already registered {owner}"
    ):
        loom.backend.register(Collides("npu_collides", scope_name))
    assert (memory.list(), abi.list_libraries(), memory.list_pragma_rules()) == before
    assert [b.name for b in loom.backend.list()] == backends
    loom.build(*npu.BACKEND.strategy("matmul", 16, 16, 16), target="npu")


def test_sharing_another_backends_declaration_does_not_take_it_over():
    class Shares(npu.NPUBackend):
        name = "npu_shares"  # declares npu's scratchpad and accumulator, equal to npu's

    loom.backend.register(Shares())

    class Redeclares(npu.NPUBackend):
        name = "npu_shares"  # the same name again, now with another scratchpad

        def memories(self):
            other = memory.MemoryScope(
                "npu.spad", memory.FixedAddress(0, 64, 8, "elsewhere"), accessible_from=("npu",)
            )
            return [other, npu.arch.ACC_SCOPE]

    with pytest.raises(LoomError, match=r"'npu.spad' is already registered by backend npu with"):
        loom.backend.register(Redeclares())
    assert memory.get("npu.spad") == npu.arch.SPAD_SCOPE
    loom.backend.register(npu.NPUBackend())
    loom.backend.register(npu.BACKEND)


def test_a_refusal_midway_unregisters_what_was_registered_before_it():
    class BadRule(npu.NPUBackend):
        name = "npu_bad_rule"

        def memories(self):
            return [
                memory.MemoryScope(
                    "bad.spad", memory.FixedAddress(0, 64, 8, "badspace"), accessible_from=("npu",)
                )
            ]

        def pragma_rules(self):
            return [PragmaRule("bad-rule", "bad-rule", make_calls=lambda nest: [])]

    with pytest.raises(ValueError, match="pragma names are identifiers, got 'bad-rule'"):
        loom.backend.register(BadRule())
    assert "bad.spad" not in [s.name for s in memory.list()]
    assert "npu_bad_rule" not in [b.name for b in loom.backend.list()]


def test_the_same_backend_may_register_again():
    again = npu.NPUBackend()
    assert loom.backend.register(again) is again
    assert loom.backend.get("npu") is again
    loom.backend.register(npu.BACKEND)  # put the original back


def test_passes_may_be_plain_functions_and_phases_are_checked_at_every_build():
    seen = []

    def record(mod):  # not decorated as a pass
        seen.append(mod.names())
        return mod

    class Plain(npu.NPUBackend):
        name = "npu_plain"
        phase = "final"

        def passes(self):
            return [(self.phase, record)]

    backend = loom.backend.register(Plain())
    loom.build(*npu.BACKEND.strategy("matmul", 16, 16, 16), target="npu_plain", name="mm")
    assert seen == [["mm", "mm_npu_plain"]]
    backend.phase = "finall"
    with pytest.raises(LoomError, match=r"unknown phase 'finall'.*phases are \['schedule'"):
        loom.build(*npu.BACKEND.strategy("matmul", 16, 16, 16), target="npu_plain")


def test_intrinsics_must_be_tensor_intrinsics():
    class Bad(npu.NPUBackend):
        name = "npu_bad_intrinsic"

        def intrinsics(self):
            return {"gemm": "preload then compute"}

    with pytest.raises(TypeError, match=r"intrinsic 'gemm' must be a TensorIntrin"):
        loom.backend.register(Bad())
    assert "npu_bad_intrinsic" not in [b.name for b in loom.backend.list()]
