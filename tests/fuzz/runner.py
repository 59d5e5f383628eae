"""Runs fuzz cases in a pool of worker subprocesses (`tests.fuzz.worker`) and counts the
results. A worker that dies (a signal, an exit) is a crash of the case it was running, one that
sends nothing within the time limit of a step is a hang; either way it is restarted and the
run goes on. Failures are appended, with a reproduction script, to a file under loom's cache
directory."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import pathlib
import selectors
import signal
import subprocess
import sys
import time

from loom.runtime.native_lib import cache_dir
from tests.fuzz import program

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLASSES = ["ok", "mismatch", "crash", "refused-valid", "hang", "fuzzer-error"]
FAILURE_CLASSES = CLASSES[1:]
_RANK = {"ok": 0, "refused-valid": 1, "mismatch": 2, "fuzzer-error": 3, "crash": 4, "hang": 5}


@dataclasses.dataclass
class Failure:
    seed: int
    kind: str
    backend: str
    message: str

    def line(self) -> str:
        first = self.message.splitlines()[0] if self.message else ""
        return f"seed {self.seed}: {self.kind} on {self.backend}: {first[:300]}"


@dataclasses.dataclass
class Summary:
    seeds: list[int]
    per_class: collections.Counter
    per_backend: dict[str, collections.Counter]
    failures: list[Failure]
    seconds: float
    failures_file: pathlib.Path | None
    hexagon_every: int

    @property
    def cases(self) -> int:
        return sum(self.per_class.values())

    @property
    def cases_per_minute(self) -> float:
        return self.cases / max(self.seconds, 1e-9) * 60

    def failures_of(self, kind: str) -> list[Failure]:
        return [f for f in self.failures if f.kind == kind]

    def table(self) -> str:
        lines = ["class            cases"]
        lines += [f"{c:<15} {self.per_class.get(c, 0):>6}" for c in CLASSES]
        backends = [b for b in program.BACKENDS if b in self.per_backend]
        head = "back end  " + "".join(f"{c:>15}" for c in CLASSES[:-1])
        lines += ["", head]
        for b in backends:
            counts = self.per_backend[b]
            lines.append(f"{b:<10}" + "".join(f"{counts.get(c, 0):>15}" for c in CLASSES[:-1]))
        minutes, secs = divmod(int(self.seconds), 60)
        lines += [
            "",
            f"{self.cases} cases in {minutes}m{secs:02d}s: "
            f"{self.cases_per_minute:.1f} cases per minute",
        ]
        if self.failures:
            lines.append(
                f"{len(self.failures)} failures (reproduce: python -m tests.fuzz --show SEED):"
            )
            lines += ["  " + f.line() for f in self.failures]
            if self.failures_file:
                lines.append(f"full cases and reproduction scripts: {self.failures_file}")
        return "\n".join(lines)


def fuzz_dir() -> pathlib.Path:
    path = cache_dir() / "fuzz"
    path.mkdir(parents=True, exist_ok=True)
    return path


class _Proc:
    """One worker subprocess and the case it is running."""

    def __init__(self, index: int, env: dict):
        self.log_path = fuzz_dir() / f"worker-{os.getpid()}-{index}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.worker"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            start_new_session=True,  # killing the group also kills its qemu
            env=env,
        )
        self.buf = b""
        self.seed: int | None = None
        self.backend: str | None = None
        self.deadline = 0.0
        self.log_offset = 0

    def send(self, seed: int, hexagon_every: int, timeout: float) -> None:
        self.seed, self.backend = seed, None
        self.deadline = time.monotonic() + timeout
        self.log.flush()
        self.log_offset = self.log_path.stat().st_size
        line = json.dumps({"seed": seed, "hexagon_every": hexagon_every}) + "\n"
        self.proc.stdin.write(line.encode())
        self.proc.stdin.flush()

    def stderr_tail(self, limit: int = 1500) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                text = f.read().decode(errors="replace").strip()
        except OSError:
            return ""
        errors = [x for x in text.splitlines() if "error" in x.lower()][:3]
        return "\n".join([*errors, "...", text[-limit:]] if errors else [text[-limit:]])

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.log):
            try:
                f.close()
            except OSError:
                pass

    def finish(self) -> None:
        """Close stdin so the worker ends by itself (closing its device session)."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.stop()
        self.log_path.unlink(missing_ok=True)


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def run(
    seeds,
    workers: int = 2,
    hexagon_every: int = program.HEXAGON_EVERY,
    step_timeout: float = 120.0,
    hexagon_timeout: float = 300.0,
    progress=None,
    failures_path: pathlib.Path | None = None,
) -> Summary:
    """Run the cases of `seeds`; `progress(text)` is called with a status line now and then."""
    seeds = list(seeds)
    pending = collections.deque(seeds)
    per_class: collections.Counter = collections.Counter()
    per_backend: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures: list[Failure] = []
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("LOOM_NUM_THREADS", "2")
    start = time.monotonic()
    every = max(1, min(500, len(seeds) // 20))
    last_report = [start]

    def report(force: bool = False) -> None:
        done = sum(per_class.values())
        now = time.monotonic()
        if progress and (force or done % every == 0 or now - last_report[0] > 60):
            last_report[0] = now
            rate = done / max(now - start, 1e-9) * 60
            counts = " ".join(f"{c} {per_class.get(c, 0)}" for c in CLASSES)
            progress(f"[{done}/{len(seeds)}] {counts} ({rate:.1f} cases/min)")

    def record(seed: int, results: dict) -> None:
        worst = "ok"
        for backend, (kind, message) in results.items():
            if backend in program.BACKENDS:
                per_backend[backend][kind] += 1
            if kind != "ok":
                failure = Failure(seed, kind, backend, message)
                failures.append(failure)
                _append_failure(failures_path, failure, hexagon_every)
            if _RANK[kind] > _RANK[worst]:
                worst = kind
        per_class[worst] += 1
        report()

    procs: list[_Proc] = []
    sel = selectors.DefaultSelector()

    def launch(index: int) -> _Proc:
        p = _Proc(index, env)
        sel.register(p.proc.stdout, selectors.EVENT_READ, (index, p))
        return p

    def next_case(p: _Proc) -> None:
        if pending:
            p.send(pending.popleft(), hexagon_every, step_timeout)
        else:
            p.seed = None

    def replace(index: int, p: _Proc) -> _Proc:
        sel.unregister(p.proc.stdout)
        p.stop()
        p.log_path.unlink(missing_ok=True)  # (its tail is in the failure's message)
        new = launch(index)
        procs[index] = new
        next_case(new)
        return new

    try:
        for index in range(max(1, min(workers, len(seeds)))):
            procs.append(launch(index))
            next_case(procs[index])
        while any(p.seed is not None for p in procs):
            now = time.monotonic()
            wait = min(p.deadline - now for p in procs if p.seed is not None)
            for key, _ in sel.select(max(0.0, wait)):
                index, p = key.data
                if procs[index] is not p:
                    continue
                data = os.read(p.proc.stdout.fileno(), 1 << 16)
                if not data:
                    code = p.proc.wait()
                    if p.seed is not None:
                        where = p.backend or "generation/scheduling"
                        message = f"worker {_exit_reason(code)} while running {where}"
                        tail = p.stderr_tail()
                        if tail:  # the first line is what the summary shows
                            message += f" ({tail.splitlines()[0][:200]})\n{tail}"
                        record(p.seed, {where: ["crash", message]})
                    replace(index, p)
                    continue
                p.buf += data
                while b"\n" in p.buf and procs[index] is p:
                    line, p.buf = p.buf.split(b"\n", 1)
                    event = json.loads(line)
                    if event["event"] == "start":
                        p.deadline = time.monotonic() + step_timeout
                    elif event["event"] == "backend":
                        p.backend = event["backend"]
                        limit = hexagon_timeout if p.backend == "hexagon" else step_timeout
                        p.deadline = time.monotonic() + limit
                    elif event["event"] == "done":
                        record(event["seed"], event["results"])
                        next_case(p)
            now = time.monotonic()
            for index, p in enumerate(list(procs)):
                if p.seed is not None and now > p.deadline:
                    where = p.backend or "generation/scheduling"
                    record(p.seed, {where: ["hang", f"no answer within the time limit in {where}"]})
                    replace(index, p)
    finally:
        for p in procs:
            p.finish()
        sel.close()
    seconds = time.monotonic() - start
    report(force=True)
    return Summary(
        seeds, per_class, dict(per_backend), failures, seconds, failures_path, hexagon_every
    )


def _append_failure(path: pathlib.Path | None, failure: Failure, hexagon_every: int) -> None:
    if path is None:
        return
    try:
        case, _ = program.make_case(failure.seed, hexagon_every)
        backend = failure.backend if failure.backend in program.BACKENDS else None
        script = program.reproduction(case, backend, hexagon_every)
        record = json.dumps(case)
    except Exception as e:  # a fuzzer error: the seed alone is the reproduction
        script, record = f"# no case: {type(e).__name__}: {e}\n", "{}"
    with open(path, "a") as f:
        f.write(f"==== seed {failure.seed}: {failure.kind} on {failure.backend}\n")
        f.write(failure.message.rstrip() + "\n")
        f.write(f"---- case\n{record}\n---- reproduction\n{script}\n")
