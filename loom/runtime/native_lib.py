"""Building loom's C libraries with the system compiler, once, into a cache.

A library is identified by the hash of its sources, flags and compiler, so an edited source is
rebuilt and concurrent builds (pytest -n) never see a half-written file.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence

from loom.errors import LoomError

NATIVE_DIR = pathlib.Path(__file__).parent / "native"


def cache_dir() -> pathlib.Path:
    """Where built libraries live: $LOOM_CACHE_DIR, else ~/.cache/loom."""
    root = os.environ.get("LOOM_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "loom"
    )
    path = pathlib.Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def find_tool(name: str, package: str | None = None) -> str:
    """The path of a command, or a LoomError saying how to install it."""
    path = shutil.which(name)
    if path is None:
        hint = f" (Debian package {package}; `make setup` installs it)" if package else ""
        raise LoomError(f"the command {name!r} is needed but not found{hint}")
    return path


def run(cmd: Sequence[str], what: str) -> None:
    """Run a build command; a failure is a LoomError with the command's output."""
    proc = subprocess.run(list(cmd), capture_output=True, text=True)
    if proc.returncode != 0:
        raise LoomError(
            f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
        )


def _headers(sources: Sequence[pathlib.Path]) -> list[pathlib.Path]:
    """The headers next to the sources and in native/common, which they may include."""
    folders = {pathlib.Path(src).parent for src in sources} | {NATIVE_DIR / "common"}
    return sorted(h for folder in folders for h in folder.glob("*.h"))


def build_library(
    name: str,
    sources: Sequence[pathlib.Path],
    flags: Sequence[str] = (),
    compiler: str = "cc",
    suffix: str = ".so",
    output_flags: Sequence[str] = ("-shared", "-fPIC"),
) -> pathlib.Path:
    """Compile `sources` into a cached library `<name>-<hash><suffix>` and return its path."""
    cc = find_tool(compiler)
    digest = hashlib.sha256()
    for src in sources:
        digest.update(pathlib.Path(src).read_bytes())
    for header in _headers(sources):  # an edited header must rebuild too
        digest.update(header.read_bytes())
    digest.update(" ".join([cc, *flags, *output_flags]).encode())
    target = cache_dir() / f"{name}-{digest.hexdigest()[:16]}{suffix}"
    if target.exists():
        return target
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        out = pathlib.Path(tmp) / target.name
        run([cc, *output_flags, *flags, "-o", str(out), *map(str, sources)], f"building {name}")
        os.replace(out, target)
    return target
