"""`make demo`: lower each example of examples/, print its loop program, run it and compare with
numpy. Run as `python -m loom.demo [example.py ...]`."""

from __future__ import annotations

import importlib.util
import pathlib
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
    """Lower, print, interpret and check one example; True if the results match numpy."""
    print(f"=== {example.TITLE}")
    sch, args = example.make()
    mod = loom.lower(sch, args, name=pathlib.Path(example.__file__).stem)
    print(mod)
    arrays = example.inputs(np.random.default_rng(0))
    expected = example.reference(*[a.copy() for a in arrays])
    start = time.perf_counter()
    loom.ir.interpret(mod, *arrays)
    elapsed = time.perf_counter() - start
    ok = all(np.allclose(got, want, rtol=1e-4, atol=1e-4) for got, want in zip(arrays, expected))
    verdict = "matches numpy" if ok else "DOES NOT MATCH numpy"
    print(f"--- interpreter: {verdict} ({elapsed:.2f} s in the reference interpreter)\n")
    return ok


def main(argv: list[str]) -> int:
    paths = [pathlib.Path(a) for a in argv] or [examples_dir() / name for name in EXAMPLES]
    results = [run_example(load_example(p)) for p in paths]
    print(f"{sum(results)} of {len(results)} examples match numpy")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
