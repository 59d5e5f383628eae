"""The plug-in API's registry: what register accepts, what it refuses, and that a refused
backend leaves every registry as it was."""

import pytest

import loom
from loom import LoomError, memory
from loom.backend import npu
from loom.runtime import abi


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
    [("global", "by loom or by hand"), ("npu.spad", "by backend npu")],
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
