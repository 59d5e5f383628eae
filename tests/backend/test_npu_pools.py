"""Memory pools for a model split between the host and the NPU (docs/memory-planning.md, the
worked example): `dram` (host and NPU), `spad` (the NPU's scratchpad, a fixed address range),
`weights` (constants, in the library), and `host_scratch`, which only the host reaches. A user's
pass at the phase "memory" sees `main` and every kernel and pins one of main's tensors; the
model runs on the NPU simulator bit-exact with its integer reference; a tensor an NPU kernel
touches cannot go to a pool the NPU cannot reach."""

import numpy as np
import pytest

import loom
from loom import LoomError
from loom.backend import npu
from loom.demo import examples_dir, load_example
from loom.memory import Pool, pin
from loom.memory.planner import check
from loom.memory.program import TENSORS_ATTR
from loom.transform.lower_memory import DEVICE_ATTR

pytest.importorskip("onnx")

EXAMPLE = load_example(examples_dir() / "int8_model.py")
POOLS = [
    Pool("host_scratch", accessible_from=("cpu",)),  # first: preferred where it can be
    Pool("dram", accessible_from=("cpu", "npu")),
    Pool("spad", accessible_from=("npu",), scope="npu.spad"),
    Pool("weights", kind="constant", accessible_from=("cpu", "npu")),
]


def compile_with(user_pass):
    with loom.PassContext(config={"tir.add_lower_pass": [("memory", user_pass)]}):
        return loom.compile(EXAMPLE.int8_model(), target="npu", pools=POOLS, name="int8")


def test_a_users_pass_sees_main_and_pins_a_tensor_to_dram():
    seen = {}

    def pin_pooled(mod):
        main = mod["int8"]
        seen["tensors"] = [b.name for b in main.attr(TENSORS_ATTR)]
        seen["devices"] = {f.name: f.attr(DEVICE_ATTR) for f in mod}
        # p1, the max-pool's output, is read and written on the host only
        return pin(mod, "int8", "p1", "dram")

    compiled = compile_with(pin_pooled)
    assert "p1" in seen["tensors"]
    assert sum(d == "npu" for d in seen["devices"].values()) == 3  # the three NPU kernels
    plan = compiled.memory_plan
    assert plan.where("p1").pool == "dram"
    # without the pin, p1 goes to the first pool every device touching it reaches
    unpinned = compile_with(lambda mod: mod).memory_plan
    assert unpinned.where("p1").pool == "host_scratch"
    for name in ("npu_0_qlinear_conv_relu_x_nhwc", "f"):  # the NPU reads them: never host_only
        assert plan.where(name).pool == "dram"
    # the NPU kernels' scratchpad buffers are planned in spad, the weights in the library
    spad = plan["spad"]
    assert spad.placed and all(b.function.endswith("_npu") for b in spad.placed)
    assert spad.size <= 256 * 1024 and plan["weights"].placed
    for pool_plan in plan.pools:
        check(pool_plan.blocks, pool_plan.plan, pool_plan.pool.size)
    for seed in range(2):
        x = EXAMPLE.input_x(seed)
        got, want = compiled(x=x), EXAMPLE.integer_reference(x)
        for name in ("r1", "c2", "y"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_an_npu_kernel_touching_a_host_only_pool_fails_the_build():
    with pytest.raises(
        LoomError,
        match=r"function int8_8_npu_4_qlinear_matmul_npu runs on npu but touches buffer f "
        r"\(of int8\), which is in pool host_scratch; only \['cpu'\] can access that pool",
    ):
        compile_with(lambda mod: pin(mod, "int8", "f", "host_scratch"))


def test_without_a_pool_the_npu_reaches_the_build_says_which_functions_disagree():
    pools = [Pool("host_only", accessible_from=("cpu",)), POOLS[3]]
    with pytest.raises(LoomError, match=r"no workspace pool can hold .* on npu.*host_only \(cpu\)"):
        loom.compile(EXAMPLE.int8_model(), target="npu", pools=pools)


def test_a_spad_pool_too_small_for_a_kernel_is_a_build_error():
    pools = [POOLS[1], Pool("spad", size=128, accessible_from=("npu",), scope="npu.spad"), POOLS[3]]
    with pytest.raises(LoomError, match=r"pool spad has 128 bytes, but its buffers need \d+"):
        loom.compile(EXAMPLE.int8_model(), target="npu", pools=pools)


def test_a_backends_pass_at_the_memory_phase_sees_main_and_may_pin():
    seen = []

    def pin_from_the_backend(mod):
        seen.append(sorted(f.name for f in mod if f.attr(TENSORS_ATTR) is not None))
        return pin(mod, "int8", "p1", "dram")

    npu.BACKEND.extra_passes.append(("memory", pin_from_the_backend))
    try:
        compiled = loom.compile(EXAMPLE.int8_model(), target="npu", pools=POOLS, name="int8")
    finally:
        npu.BACKEND.extra_passes.remove(("memory", pin_from_the_backend))
    assert seen == [["int8"]]
    assert compiled.memory_plan.where("p1").pool == "dram"
