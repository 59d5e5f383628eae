"""Compiling generated C into an object file with the system C compiler."""

from __future__ import annotations

import hashlib
import pathlib
import re
import subprocess
import tempfile
from collections.abc import Sequence

from loom.errors import LoomError
from loom.runtime.native_lib import cache_dir, find_tool

C_FLAGS = ("-O2", "-fPIC", "-std=gnu99", "-ffp-contract=off", "-fno-strict-aliasing")
"""How generated C is compiled: optimized, position independent, no FMA contraction (the IR
rounds after every operation), no type-based alias analysis, no -march=native."""


def compile_c_object(source: str, name: str, flags: Sequence[str] = C_FLAGS) -> bytes:
    """`cc -c` C source into the bytes of an object file. A compiler error is a LoomError with
    the compiler's output and the offending lines; the source is kept in the cache directory
    so the file:line the compiler names can be opened."""
    cc = find_tool("cc")
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        src = pathlib.Path(tmp) / f"{name}.c"
        obj = pathlib.Path(tmp) / f"{name}.o"
        src.write_text(source)
        proc = subprocess.run(
            [cc, "-c", *flags, "-o", str(obj), str(src)], capture_output=True, text=True
        )
        if proc.returncode == 0:
            return obj.read_bytes()
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    kept = cache_dir() / "failed-c" / f"{name}-{digest}.c"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(source)
    output = (proc.stdout + proc.stderr).replace(str(src), str(kept))
    lines = source.splitlines()
    quoted = []
    for match in re.finditer(rf"{re.escape(str(kept))}:(\d+):(?:\d+:)? error", output):
        number = int(match.group(1))
        if 0 < number <= len(lines) and len(quoted) < 5:
            quoted.append(f"  {kept.name}:{number}: {lines[number - 1].strip()}")
    where = "\n".join(quoted)
    raise LoomError(
        f"the C compiler rejected the generated code for {name} (a code generator bug), "
        f"kept in {kept}:\n{where}\n{' '.join([cc, '-c', *flags])} said:\n{output}"
    )
