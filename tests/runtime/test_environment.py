"""$LOOM_NUM_THREADS and $LOOM_VTCM_SIZE: a value the host runtime cannot use is a LoomError
naming the variable and the values it takes when the runtime is loaded, never silently ignored;
the C runtime itself parses them strictly (a program that loads it without Python is told on
standard error and gets the default)."""

import ctypes
import os
import subprocess
import sys

import pytest

from loom.runtime import host_runtime

_PROBE = """
import loom.runtime
from loom.runtime import host_runtime
try:
    print("threads", host_runtime.num_threads(), "vtcm", host_runtime.vtcm_stats()["capacity"])
except loom.LoomError as e:
    print("LoomError", e)
"""


def _run(variable: str, value: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in host_runtime.ENVIRONMENT}
    env[variable] = value
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    "variable, value, expected",
    [
        ("LOOM_NUM_THREADS", "3", "threads 3 vtcm 262144"),
        ("LOOM_NUM_THREADS", "256", "threads 256 vtcm 262144"),
        ("LOOM_VTCM_SIZE", "4096", "vtcm 4096"),
        ("LOOM_VTCM_SIZE", "1073741824", "vtcm 1073741824"),
        ("LOOM_VTCM_SIZE", "", "vtcm 262144"),  # empty is unset
    ],
)
def test_valid_values_are_used(variable, value, expected):
    assert _run(variable, value).endswith(expected)


@pytest.mark.parametrize(
    "variable, value, accepted",
    [
        ("LOOM_NUM_THREADS", "abc", "1 to 256"),
        ("LOOM_NUM_THREADS", "4x", "1 to 256"),
        ("LOOM_NUM_THREADS", "0", "1 to 256"),
        ("LOOM_NUM_THREADS", "-2", "1 to 256"),
        ("LOOM_NUM_THREADS", "257", "1 to 256"),
        ("LOOM_NUM_THREADS", " 4", "1 to 256"),
        ("LOOM_VTCM_SIZE", "256K", "1 to 1073741824"),
        ("LOOM_VTCM_SIZE", "0", "1 to 1073741824"),
        ("LOOM_VTCM_SIZE", "99999999999999999999999", "1 to 1073741824"),
        ("LOOM_VTCM_SIZE", "1.5e6", "1 to 1073741824"),
    ],
)
def test_bad_values_are_a_loom_error_naming_the_variable(variable, value, accepted):
    out = _run(variable, value)
    assert out.startswith(
        f"LoomError ${variable} is '{value}': it must be a whole number from {accepted};"
    ), out
    assert "unset or empty" in out


def test_the_c_runtime_reports_a_bad_value_and_uses_the_default():
    """Loaded without loom's Python check, the library does not misparse "8x" as 8: it says so
    on standard error and uses the default."""
    path = host_runtime.library_path()
    script = f"""
import ctypes
lib = ctypes.CDLL({str(path)!r})
stats = (ctypes.c_int64 * 8)()
lib.loom_vtcm_stats(stats, 8)
print(lib.loom_get_num_threads(), stats[0])
"""
    env = dict(os.environ, LOOM_NUM_THREADS="8x", LOOM_VTCM_SIZE="12q")
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    threads, vtcm = map(int, done.stdout.split())
    assert threads == len(os.sched_getaffinity(0)) and vtcm == 256 * 1024
    assert "$LOOM_NUM_THREADS is '8x': it must be a whole number from 1 to 256" in done.stderr
    assert "$LOOM_VTCM_SIZE is '12q'" in done.stderr


def test_the_loaded_runtime_checks_its_environment():
    """In this process (variables unset or valid) the check passes."""
    message = ctypes.create_string_buffer(256)
    for check in host_runtime.ENVIRONMENT_CHECKS.values():
        assert getattr(host_runtime.library(), check)(message, len(message)) == 0
