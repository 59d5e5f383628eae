"""The host runtime library (errors, workspace memory, thread pool, the emulated VTCM), built at
first use, and its declaration as the runtime library `loom_host_runtime`."""

from __future__ import annotations

import ctypes
import functools
import pathlib

from loom import abi
from loom.errors import LoomError
from loom.runtime.native_lib import NATIVE_DIR, build_library

SOURCES = [
    NATIVE_DIR / "host" / "loom_runtime.c",
    NATIVE_DIR / "host" / "loom_vtcm.c",
    NATIVE_DIR / "common" / "loom_arena.c",
]
# The statistics of loom_arena_stats, in its order (loom/runtime/native/common/loom_arena.h):
# the host's VTCM allocator and the device runtime's (over the wire) report the same ones.
ARENA_STATS = (
    "capacity",
    "in_use",
    "peak",
    "allocations",
    "frees",
    "failures",
    "live_blocks",
    "largest_free",
)

SYMBOLS = {
    "loom_set_last_error": "void loom_set_last_error(const char *message)",
    "loom_get_last_error": "const char *loom_get_last_error(void)",
    "loom_alloc": "void *loom_alloc(int64_t nbytes, int64_t alignment)",
    "loom_free": "void loom_free(void *p)",
    "loom_parallel_launch": (
        "int32_t loom_parallel_launch(int32_t (*fn)(int32_t, int32_t, "
        "void *), void *closure, int32_t num_tasks)"
    ),
    "loom_get_num_threads": "int32_t loom_get_num_threads(void)",
    "loom_set_num_threads": "int32_t loom_set_num_threads(int32_t n)",
}
"""Symbols the library provides, with their C signatures."""


ENVIRONMENT = {
    "LOOM_NUM_THREADS": "it sets the threads of parallel loops (unset or empty: the CPUs this "
    "process may use)",
    "LOOM_VTCM_SIZE": "it sets the bytes of the host's emulated VTCM (unset or empty: 262144)",
}
"""The environment variables the runtime reads. The library checks them (the C functions of
ENVIRONMENT_CHECKS, with the parser the runtime uses) when it is loaded: a value it cannot use
is a LoomError naming the variable and the values it takes."""
ENVIRONMENT_CHECKS = {
    "LOOM_NUM_THREADS": "loom_check_environment",
    "LOOM_VTCM_SIZE": "loom_vtcm_check_environment",
}


@functools.cache
def library_path() -> pathlib.Path:
    return build_library("libloom_runtime", SOURCES, ["-O2", "-pthread"])


@functools.cache
def library() -> ctypes.CDLL:
    """The loaded runtime; RTLD_GLOBAL so kernels loaded later resolve its symbols. A
    $LOOM_NUM_THREADS or $LOOM_VTCM_SIZE the runtime cannot use is a LoomError here."""
    lib = ctypes.CDLL(str(library_path()), mode=ctypes.RTLD_GLOBAL)
    lib.loom_get_last_error.restype = ctypes.c_char_p
    lib.loom_set_last_error.argtypes = [ctypes.c_char_p]
    lib.loom_set_num_threads.argtypes = [ctypes.c_int32]
    lib.loom_vtcm_stats.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.c_int32]
    lib.loom_vtcm_configure.argtypes = [ctypes.c_int64]
    message = ctypes.create_string_buffer(512)
    for name, check in ENVIRONMENT_CHECKS.items():
        getattr(lib, check).argtypes = [ctypes.c_char_p, ctypes.c_int32]
        if getattr(lib, check)(message, len(message)) != 0:
            raise LoomError(f"{message.value.decode(errors='replace')}; {ENVIRONMENT[name]}")
    return lib


def last_error() -> str:
    return library().loom_get_last_error().decode(errors="replace")


def num_threads() -> int:
    """Threads a parallel loop uses ($LOOM_NUM_THREADS or the machine's CPUs at start-up)."""
    return library().loom_get_num_threads()


def set_num_threads(n: int) -> int:
    """Use at most `n` threads in parallel loops from now on (at most the pool's size);
    returns the number actually used."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads takes a positive int, got {n!r}")
    return library().loom_set_num_threads(n)


def vtcm_stats() -> dict[str, int]:
    """Statistics of the host's VTCM arena: capacity, in_use, peak, allocations, frees,
    failures, live_blocks, largest_free (bytes or counts)."""
    out = (ctypes.c_int64 * len(ARENA_STATS))()
    library().loom_vtcm_stats(out, len(ARENA_STATS))
    return dict(zip(ARENA_STATS, out))


def configure_vtcm(capacity: int) -> None:
    """Replace the host's VTCM arena by an empty one of `capacity` bytes (statistics reset)."""
    if library().loom_vtcm_configure(int(capacity)) != 0:
        raise LoomError(last_error())


def host_link_flags() -> list[str]:
    """Link against the host runtime (found again through the rpath) and libm."""
    lib = library_path()
    return [f"-L{lib.parent}", f"-l:{lib.name}", f"-Wl,-rpath,{lib.parent}", "-lm"]


HOST_RUNTIME = abi.register_library(
    abi.RuntimeLibrary(
        "loom_host_runtime",
        ("cpu",),
        symbols=(
            *abi.RUNTIME_SYMBOLS,
            abi.parse_declaration("int32 loom_set_num_threads(int32 n)"),
        ),
        doc="loom's host runtime (loom/runtime/native/host): errors, workspace, threads, VTCM",
        link_flags=host_link_flags,
        load=library,
    )
)
