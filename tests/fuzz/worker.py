"""A fuzz worker: reads cases to run (one JSON object a line on stdin: {"seed": n,
"hexagon_every": k}) and writes events (JSON lines on its stdout): "start" when a case
begins, "backend" before each back end, "done" with every back end's result. The parent
(`tests.fuzz.runner`) learns from the last event which case and back end were running when
the worker died or stopped answering.

Whatever loom or a compiler prints goes to stderr: stdout carries only events.

Result classes per back end: ok, mismatch, crash (an unexpected exception in loom, or a call
that failed), refused-valid (a LoomError while scheduling, lowering or building the valid
schedule). `LOOM_FUZZ_INJECT="crash:5,hang:7,mismatch:9"` makes this worker abort, hang, or
spoil llvm's result on those seeds, to test the runner.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

import loom
from tests.fuzz import oracle, program


def _message(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _internal(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)[-3:]
    where = "; ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in tb)
    return f"{_message(e)} (at {where})"


class Worker:
    def __init__(self, out):
        self.out = out
        self.session = None
        inject = os.environ.get("LOOM_FUZZ_INJECT", "")
        pairs = (x.partition(":") for x in inject.split(",") if x)
        self.inject = {int(seed): kind for kind, _, seed in pairs}

    def emit(self, **event) -> None:
        self.out.write(json.dumps(event) + "\n")
        self.out.flush()

    def device(self):
        if self.session is None:
            self.session = loom.device("hexagon-sim", timeout=120)
        elif self.session.closed:
            self.session.restart()
        return self.session

    def run_case(self, seed: int, hexagon_every: int) -> None:
        start = time.perf_counter()
        try:
            case, exp = program.make_case(seed, hexagon_every)
        except Exception as e:  # a bug of the fuzzer itself
            self.emit(event="done", seed=seed, results={"fuzzer": ["fuzzer-error", _internal(e)]})
            return
        backends = program.backends(case)
        self.emit(event="start", seed=seed, backends=backends)
        if self.inject.get(seed) == "crash":
            os.abort()
        if self.inject.get(seed) == "hang":
            time.sleep(3600)
        results, seconds = {}, {}
        try:
            s, args = program.build_schedule(case)
        except loom.LoomError as e:
            s = None
            failure = ["refused-valid", f"schedule: {_message(e)}"]
        except Exception as e:
            s = None
            failure = ["crash", f"schedule: {_internal(e)}"]
        for backend in backends:
            if s is None:
                results[backend] = failure
                continue
            self.emit(event="backend", seed=seed, backend=backend)
            t0 = time.perf_counter()
            results[backend] = self.run_backend(backend, s, args, case, exp)
            seconds[backend] = round(time.perf_counter() - t0, 3)
        seconds["total"] = round(time.perf_counter() - start, 3)
        self.emit(event="done", seed=seed, results=results, seconds=seconds)

    def run_backend(self, backend, s, args, case, exp) -> list[str]:
        try:
            session = self.device() if backend == "hexagon" else None
            fn = program.compile_for(backend, s, args, case, session)
        except loom.DeviceError as e:
            if self.session is not None and self.session.closed:
                return ["crash", f"load: {_message(e)}"]
            return ["refused-valid", f"load: {_message(e)}"]
        except loom.LoomError as e:
            return ["refused-valid", f"build: {_message(e)}"]
        except Exception as e:
            return ["crash", f"build: {_internal(e)}"]
        arrays = program.arrays_for(exp, case)
        try:
            fn(*arrays)
        except Exception as e:
            return ["crash", f"run: {_internal(e)}"]
        finally:
            if backend == "hexagon" and not self.session.closed:
                try:
                    fn.loaded.unload()
                except loom.LoomError:  # start the next case with a new runtime
                    self.session.close(kill=True)
        if self.inject.get(case["seed"]) == "mismatch" and backend == "llvm":
            want = exp.value.reshape(-1)[:1]  # a wrong result: the right one changed
            wrong = ~want if exp.dtype == "bool" else want + (want - want + 1) + abs(want) // 2
            arrays[-1].reshape(-1)[:1] = wrong
        wrong = oracle.compare(arrays[-1], exp)
        return ["mismatch", wrong] if wrong else ["ok", ""]


def main() -> None:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # stray prints of loom, compilers or qemu go to stderr
    sys.stdout = sys.stderr
    worker = Worker(out)
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        worker.run_case(job["seed"], job.get("hexagon_every", program.HEXAGON_EVERY))
    if worker.session is not None:
        worker.session.close()


if __name__ == "__main__":
    main()
