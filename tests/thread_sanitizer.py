"""Build a C stress driver with ThreadSanitizer and run it: the native libraries that loom's
kernels call from several threads (thread pool, VTCM allocator, NPU ownership) are checked
for data races this way. `cc` is the system C compiler loom links with (gcc on Debian); its
TSan runtime, libtsan2, is a dependency of libgcc-12-dev, which gcc and clang both pull in."""

import os
import pathlib
import subprocess


def assert_race_free(exe: pathlib.Path, sources, envs=({},), flags=()) -> list[str]:
    """Compile `sources` (with extra compiler `flags`) into `exe` with -fsanitize=thread, run it
    once per environment in `envs`, and fail on any TSan report or non-zero exit. Returns each
    run's stdout."""
    tests_dir = pathlib.Path(__file__).parent  # for stress_threads.h
    command = ["cc", "-O1", "-g", "-pthread", "-fsanitize=thread", f"-I{tests_dir}", *flags]
    subprocess.run([*command, "-o", str(exe), *map(str, sources)], check=True)
    outputs = []
    for extra in envs:
        env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1", **extra)
        run = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=300)
        assert "ThreadSanitizer" not in run.stderr, run.stderr[:4000]
        assert run.returncode == 0, (run.returncode, run.stdout, run.stderr[:2000])
        outputs.append(run.stdout)
    return outputs
