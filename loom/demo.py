"""`make demo`: lower each example of examples/, print its loop program, run it on the host and
compare with numpy; then run on the simulated devices: the examples marked HEXAGON on Hexagon
v66 under qemu-hexagon, and examples/npu_matmul.py and examples/int8_model.py (a quantized
ONNX model split between the NPU and the host) on the reference NPU's simulator.
Run as `python -m loom.demo [example.py ...]` (only the given examples, host only)."""

from __future__ import annotations

import importlib.util
import pathlib
import shutil
import sys
import time
from types import ModuleType

import numpy as np

import loom

EXAMPLES = ["vtcm_seed.py", "vector_add.py", "tiled_matmul.py", "conv2d.py"]


def examples_dir() -> pathlib.Path:
    return pathlib.Path(__file__).resolve().parent.parent / "examples"


def load_example(path: pathlib.Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_example(example: ModuleType) -> bool:
    """Lower, print, interpret, build natively and time one example; True if every result
    matches numpy."""
    if not hasattr(example, "make"):  # it runs itself on its device (examples/npu_matmul.py)
        return example.run()
    name = pathlib.Path(example.__file__).stem
    print(f"=== {example.TITLE}")
    sch, args = example.make()
    mod = loom.lower(sch, args, name=name)
    print(mod)
    arrays = example.inputs(np.random.default_rng(0))
    expected = example.reference(*[a.copy() for a in arrays])
    start = time.perf_counter()
    loom.ir.interpret(mod, *arrays)
    elapsed = time.perf_counter() - start
    ok = _matches(arrays, expected)
    print(f"--- interpreter: {_verdict(ok)} ({elapsed:.2f} s)")
    try:
        native = loom.build(mod, target="llvm")
    except loom.LoomError as e:
        print(f"--- native: cannot build: {e}\n")
        return False
    arrays = example.inputs(np.random.default_rng(0))
    native[name](*arrays)
    native_ok = _matches(arrays, expected)
    loom_s = native.time_evaluator(name, number=20, repeat=3)(*arrays).median
    numpy_s = _numpy_seconds(example, arrays)
    print(
        f"--- native ({loom.target.Target('llvm').cpu}): {_verdict(native_ok)}; "
        f"{loom_s * 1e6:.1f} us per call, numpy {numpy_s * 1e6:.1f} us\n"
    )
    return ok and native_ok


HEXAGON_TOOLS = ("clang", "ld.lld", "qemu-hexagon")


def run_on_hexagon(examples: list[ModuleType]) -> list[bool]:
    """Build each example for Hexagon v66 (HVX 128 B) and run it under qemu-hexagon in one
    device session; the time is measured on the device (emulated, so not the chip's)."""
    missing = [t for t in HEXAGON_TOOLS if shutil.which(t) is None]
    if missing:
        print(f"=== Hexagon: skipped, needs {missing}: run `make setup` (clang, lld, qemu-user)\n")
        return []
    target = loom.target.hexagon("v66")
    results = []
    with loom.device("hexagon-sim") as dev:
        for example in examples:
            name = pathlib.Path(example.__file__).stem
            print(f"=== on {target} under qemu-hexagon: {example.TITLE}")
            sch, args = example.make()
            mod = loom.build(sch, args, target=target, name=name)
            print(mod.build_report())
            arrays = example.inputs(np.random.default_rng(0))
            expected = example.reference(*[a.copy() for a in arrays])
            loaded = mod.to_device(dev)
            loaded[name](*arrays)  # numpy arguments are copied in and out
            ok = _matches(arrays, expected)
            vtcm = dev.stats()["vtcm"]
            device_s = loaded.time_evaluator(name, number=5, repeat=1)(*arrays).median
            print(
                f"--- device: {_verdict(ok)}; {device_s * 1e6:.0f} us per call (emulated); "
                f"VTCM so far: {vtcm['allocations']} allocations, {vtcm['frees']} frees, "
                f"peak {vtcm['peak']} bytes, {vtcm['in_use']} in use\n"
            )
            results.append(ok)
    return results


def _matches(arrays, expected) -> bool:
    return all(
        want is None or np.allclose(got, want, rtol=1e-4, atol=1e-4)
        for got, want in zip(arrays, expected)
    )


def _verdict(ok: bool) -> str:
    return "matches numpy" if ok else "DOES NOT MATCH numpy"


def _numpy_seconds(example: ModuleType, arrays) -> float:
    """Median time of the example's numpy reference (its `numpy_fast` if it has one)."""
    fn = getattr(example, "numpy_fast", example.reference)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        fn(*arrays)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def main(argv: list[str]) -> int:
    paths = [pathlib.Path(a) for a in argv] or [examples_dir() / name for name in EXAMPLES]
    examples = [load_example(p) for p in paths]
    results = [run_example(example) for example in examples]
    if not argv:
        results += run_on_hexagon([e for e in examples if getattr(e, "HEXAGON", False)])
        results.append(run_example(load_example(examples_dir() / "npu_matmul.py")))
        results.append(run_example(load_example(examples_dir() / "int8_model.py")))
    print(f"{sum(results)} of {len(results)} runs match their numpy reference")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
