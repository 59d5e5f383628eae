"""Running a bad input and checking that loom refused it cleanly.

`refused(fn, error, match)`: in this process, for inputs that cannot crash it (Python-level
checks): the call raises `error` with a message matching `match`, and the process state that
matters (every registry, the host VTCM arena, the thread count) is what it was, and a small
kernel still builds and runs.

`isolated(body)`: in a fresh interpreter, for inputs that could crash the process (native code,
LLVM, the dynamic loader): the body runs inside a try block; the result says whether the
process survived, which exception it raised and with what message, and whether a kernel still
builds and runs afterwards in that process.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom
from loom import registry, te

_SCRIPT = """
import json, sys, traceback
import numpy as np
import loom
from loom import te
from tests.robustness.harness import kernel_still_works

outcome = {{"error": None, "message": "", "clear": False}}
try:
{body}
except Exception as e:
    outcome["error"] = type(e).__name__
    outcome["message"] = str(e)
    outcome["clear"] = isinstance(e, (loom.LoomError, TypeError, ValueError))
    outcome["traceback"] = traceback.format_exc()
try:
    outcome["still_works"] = kernel_still_works()
except Exception as e:
    outcome["still_works"] = False
    outcome["after"] = f"{{type(e).__name__}}: {{e}}"
print("OUTCOME " + json.dumps(outcome))
"""


def kernel_still_works() -> bool:
    """A small kernel builds, runs and is right: the process was not left broken."""
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    mod = loom.build(te.create_schedule(B.op), [A, B], name="still_works")
    a = np.arange(8, dtype=np.float32)
    b = np.zeros(8, np.float32)
    mod(a, b)
    return bool(np.array_equal(b, a + 1))


def process_state() -> dict:
    return {
        "registries": {r.what: r.names() for r in registry.registries()},
        "vtcm": loom.runtime.vtcm_stats()["in_use"],
        "threads": loom.runtime.num_threads(),
    }


def refused(fn, error: type[BaseException], match: str) -> BaseException:
    """`fn()` raises `error` matching `match`; the process state is unchanged."""
    before = process_state()
    with pytest.raises(error, match=match) as info:
        fn()
    assert process_state() == before, "a refused input changed the process state"
    assert kernel_still_works()
    return info.value


@dataclasses.dataclass
class Outcome:
    returncode: int
    error: str | None
    message: str
    clear: bool
    still_works: bool
    stderr: str

    def refused(self, error: str, match: str) -> None:
        """The process survived, raised `error` (a class name) with a message matching `match`,
        and still builds and runs a kernel."""
        assert self.returncode == 0, f"the process died ({self.returncode}):\n{self.stderr}"
        assert self.error == error, f"expected {error}, got {self.error}: {self.message}"
        assert self.clear, f"{self.error} is not a loom.LoomError, TypeError or ValueError"
        assert re.search(match, self.message), f"message {self.message!r} !~ {match!r}"
        assert self.still_works, "after the error, a kernel no longer builds and runs"


def isolated(body: str, env: dict | None = None, timeout: float = 300) -> Outcome:
    """Run `body` (Python, may use np, loom, te) in a fresh interpreter."""
    script = _SCRIPT.format(body=textwrap.indent(textwrap.dedent(body).strip(), "    "))
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("OUTCOME ")]
    if not lines:
        return Outcome(proc.returncode, None, "", False, False, proc.stderr[-4000:])
    data = json.loads(lines[-1][len("OUTCOME ") :])
    return Outcome(
        proc.returncode,
        data["error"],
        data["message"],
        data["clear"],
        data["still_works"],
        proc.stderr[-4000:],
    )
