"""The compile cache: what compiling and linking made, by a key of everything that determined
it, in this process and on disk (docs/native.md, "Compile cache").

Entries are bytes under a kind ("llvm-object", "shared-library", ...) and a hex key (a sha256
the caller computes from what determines the result, including `code_version()`). On disk an
entry is one file, `<dir>/<kind>/<key[:2]>/<key>`, written to a temporary name and renamed, so
concurrent processes never read half an entry; it starts with a header holding the sha256 of
its payload, checked on every read (a damaged entry is a miss, and is removed).

The directory is `$LOOM_KERNEL_CACHE_DIR`, else `kernels/` in loom's cache directory
(`$LOOM_CACHE_DIR`, else `~/.cache/loom`). `LOOM_CACHE=0` turns the cache off (nothing is read
or written, in memory or on disk); both are read at each use, so a test can change them.

The disk holds at most `$LOOM_CACHE_MAX_MB` megabytes (default 1024): a read touches its
entry's modification time, and `prune` removes the least recently used entries until a quarter
of that room is free again. `put` prunes after every sixteenth of the room this process wrote,
and on a process's first write when no process pruned in the last hour (a stamp file), so that
scanning the directory costs nothing per build.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import os
import pathlib
import tempfile
import threading
import time

from loom.runtime.native_lib import cache_dir
from loom.version import __version__

_MAGIC = b"loomcache1\n"
_MEMORY_ENTRIES = 512  # per kind; a model's kernels are each an entry
_LOCK = threading.Lock()
_MEMORY: dict[str, collections.OrderedDict[str, bytes]] = {}
_DEFAULT_MAX_MB = 1024
_PRUNE_STAMP = ".last-prune"
_PRUNE_EVERY_SECONDS = 3600
_written_since_prune: int | None = None  # None: this process has not written yet


def enabled() -> bool:
    """False when the environment says `LOOM_CACHE=0`."""
    return os.environ.get("LOOM_CACHE", "1") != "0"


def directory() -> pathlib.Path:
    """Where entries are kept on disk (not created until something is written)."""
    override = os.environ.get("LOOM_KERNEL_CACHE_DIR")
    return pathlib.Path(override) if override else cache_dir() / "kernels"


def max_bytes() -> int:
    """The disk's limit, from `$LOOM_CACHE_MAX_MB` (a positive number of megabytes)."""
    text = os.environ.get("LOOM_CACHE_MAX_MB", str(_DEFAULT_MAX_MB))
    try:
        megabytes = float(text)
    except ValueError:
        megabytes = -1.0
    if not megabytes > 0:
        raise ValueError(f"LOOM_CACHE_MAX_MB must be a positive number of megabytes, got {text!r}")
    return int(megabytes * 1024 * 1024)


@functools.cache
def code_version() -> str:
    """loom's version and a digest of its Python sources (path, size, modification time), so
    that an edited checkout never reuses code compiled by the code before the edit."""
    h = hashlib.sha256(__version__.encode())
    for path, size, mtime in sorted(_sources(str(pathlib.Path(__file__).parent.parent))):
        h.update(f"{path}:{size}:{mtime}\n".encode())
    return h.hexdigest()


def _sources(folder: str) -> list[tuple[str, int, int]]:
    """Every .py file under `folder` (os.scandir: a tenth of pathlib.rglob's time)."""
    found = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    found += _sources(entry.path)
            elif entry.name.endswith(".py"):
                st = entry.stat()
                found.append((entry.path, st.st_size, st.st_mtime_ns))
    return found


def key_of(*parts: str) -> str:
    """A cache key: the sha256 of the parts (each a str) and of `code_version()`."""
    h = hashlib.sha256(code_version().encode())
    for part in parts:
        h.update(b"\x00" + part.encode())
    return h.hexdigest()


def _path(kind: str, key: str) -> pathlib.Path:
    return directory() / kind / key[:2] / key


def get(kind: str, key: str) -> bytes | None:
    """The entry, from memory or disk, or None."""
    if not enabled():
        return None
    with _LOCK:
        memory = _MEMORY.get(kind)
        if memory is not None and key in memory:
            memory.move_to_end(key)
            return memory[key]
    data = _read(_path(kind, key))
    if data is not None:
        _remember(kind, key, data)
    return data


def put(kind: str, key: str, data: bytes) -> None:
    """Keep `data` in memory and on disk (a disk that cannot be written only loses the disk
    copy: the cache is never why a build fails)."""
    if not enabled():
        return
    _remember(kind, key, data)
    path = _path(kind, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + hashlib.sha256(data).digest() + data)
        os.replace(tmp, path)
    except OSError:
        return
    _count_written(len(data))


def prune(limit: int | None = None) -> int:
    """Remove the least recently used entries on disk while they hold more than `limit` bytes
    (default `max_bytes()`), down to three quarters of it; return the bytes removed. Entries
    another process removes meanwhile are skipped."""
    limit = max_bytes() if limit is None else limit
    if limit <= 0:
        raise ValueError(f"prune: limit must be a positive number of bytes, got {limit}")
    root = directory()
    entries = _entries(str(root))
    total = sum(size for _, size, _ in entries)
    removed = 0
    if total > limit:
        entries.sort(key=lambda e: e[2])  # oldest use first
        for path, size, _ in entries:
            if total - removed <= limit * 3 // 4:
                break
            try:
                os.unlink(path)
                removed += size
            except OSError:
                pass
    try:
        (root / _PRUNE_STAMP).touch()
    except OSError:
        pass
    return removed


def _count_written(size: int) -> None:
    """Prune when this process wrote a sixteenth of the room since it last did, or on its first
    write when nobody pruned for an hour."""
    global _written_since_prune
    with _LOCK:
        first = _written_since_prune is None
        _written_since_prune = (_written_since_prune or 0) + size
        due = _written_since_prune >= max_bytes() // 16 or (first and _stamp_is_old())
        if due:
            _written_since_prune = 0
    if due:
        prune()


def _stamp_is_old() -> bool:
    try:
        return time.time() - (directory() / _PRUNE_STAMP).stat().st_mtime > _PRUNE_EVERY_SECONDS
    except OSError:
        return True


def _entries(folder: str) -> list[tuple[str, int, float]]:
    """Every entry file under `folder`: path, size, modification time (temporary files being
    written and the stamp are not entries)."""
    found = []
    try:
        scan = os.scandir(folder)
    except OSError:
        return found
    with scan:
        for entry in scan:
            try:
                if entry.is_dir(follow_symlinks=False):
                    found += _entries(entry.path)
                elif not entry.name.startswith("."):
                    st = entry.stat(follow_symlinks=False)
                    found.append((entry.path, st.st_size, st.st_mtime))
            except OSError:
                pass
    return found


def clear_memory() -> None:
    """Forget the entries kept in this process (the disk keeps its own)."""
    with _LOCK:
        _MEMORY.clear()


def _remember(kind: str, key: str, data: bytes) -> None:
    with _LOCK:
        memory = _MEMORY.setdefault(kind, collections.OrderedDict())
        memory[key] = data
        memory.move_to_end(key)
        while len(memory) > _MEMORY_ENTRIES:
            memory.popitem(last=False)


def _read(path: pathlib.Path) -> bytes | None:
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head = len(_MAGIC) + 32
    data = blob[head:]
    if blob[: len(_MAGIC)] != _MAGIC or blob[len(_MAGIC) : head] != hashlib.sha256(data).digest():
        try:
            path.unlink()
        except OSError:
            pass
        return None
    try:
        os.utime(path)  # recently used: the last entries prune removes
    except OSError:
        pass
    return data


__all__ = [
    "clear_memory",
    "code_version",
    "directory",
    "enabled",
    "get",
    "key_of",
    "max_bytes",
    "prune",
    "put",
]
