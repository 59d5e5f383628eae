"""HVX ragged tails on Hexagon v66 under qemu-hexagon: the int8 elementwise kernel
`y = x * w + x` (one 128-lane HVX vector per inner iteration) for a length that is a multiple
of 128 and for ragged lengths, timed inside the device by its own clock, the lengths
interleaved round by round. Prints the time per element of each length and its ratio to the
multiple-of-128 length's (the acceptance of issue 17: a ragged length within 1.5x). QEMU
emulates HVX, so the absolute times are the emulator's, not a real DSP's. The device's clock is
the host's monotonic clock (wall time: the machine's load shows as noise); beside it, the CPU
time of the qemu-hexagon process over the same calls (its on-CPU nanoseconds from
/proc/PID/schedstat). Medians of `--rounds` rounds.

    python bench/hexagon_tail.py [--lengths 1024,1000,1151,127] [--rounds 9] [--number 200]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import common

import loom
from loom.backend.hexagon import strategies as hx

LANES = 128  # int8 lanes of one 128-byte HVX vector


def fmadd(x, w):
    return x * w + x


def qemu_version() -> str:
    out = subprocess.run(["qemu-hexagon", "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0] if out else "qemu-hexagon (version unknown)"


def qemu_processes() -> list[int]:
    """The qemu-hexagon processes this process started (the session's device runtime)."""
    me = os.getpid()
    try:
        children = pathlib.Path(f"/proc/{me}/task/{me}/children").read_text().split()
    except OSError:
        return []
    found = []
    for pid in children:
        try:
            if "qemu" in pathlib.Path(f"/proc/{pid}/comm").read_text():
                found.append(int(pid))
        except OSError:
            continue
    return found


def cpu_seconds(pids: list[int]) -> float:
    """Seconds the processes `pids` have run on a CPU."""
    total = 0
    for pid in pids:
        total += int(pathlib.Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    return total / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="1024,1000,1151,127")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--number", type=int, default=200, help="calls per timed round")
    parser.add_argument("--cpu", default="v66")
    opts = parser.parse_args()
    lengths = [int(n) for n in opts.lengths.split(",")]
    reference = next((n for n in lengths if n % LANES == 0), None)
    if reference is None:
        parser.error("--lengths needs one multiple of 128 (the reference)")
    target = loom.target.hexagon(opts.cpu)
    rng = np.random.default_rng(0)
    print(
        f"int8 y = x * w + x on {target} under {qemu_version()}: in-device time per element, "
        f"median of {opts.rounds} interleaved rounds of {opts.number} calls\n"
    )
    samples: dict[int, list[float]] = {n: [] for n in lengths}
    cpu: dict[int, list[float]] = {n: [] for n in lengths}
    with loom.device("hexagon-sim", timeout=300) as dev:
        pids = qemu_processes()
        runs = {}
        for n in lengths:
            mod = loom.build(*hx.elementwise(fmadd, (n,), 2, "int8", target), target=target)
            loaded = mod.to_device(dev)
            x = rng.integers(-128, 128, n).astype(np.int8)
            w = rng.integers(-128, 128, n).astype(np.int8)
            args = [loom.nd.array(a, device=dev) for a in (x, w)]
            args.append(loom.nd.empty(n, "int8", device=dev))
            name = mod.function_names()[0]
            loaded[name](*args)
            with np.errstate(over="ignore"):
                np.testing.assert_array_equal(args[2].numpy(), fmadd(x, w))
            runs[n] = (loaded, name, args)
        for _ in range(opts.rounds):
            for n, (loaded, name, args) in runs.items():
                start = cpu_seconds(pids)
                t = loaded.time_evaluator(name, number=opts.number, repeat=1)(*args).median
                cpu[n].append((cpu_seconds(pids) - start) / opts.number)
                samples[n].append(t)
    wall = {n: statistics.median(samples[n]) / n for n in lengths}
    on_cpu = {n: statistics.median(cpu[n]) / n for n in lengths}
    rows = []
    for n in lengths:
        row = [str(n), f"{n // LANES} + {n % LANES}"]
        row += [f"{statistics.median(samples[n]) * 1e6:.1f}", f"{wall[n] * 1e9:.2f}"]
        row += [f"{wall[n] / wall[reference]:.2f}x"]
        if pids:
            row += [f"{on_cpu[n] * 1e9:.2f}", f"{on_cpu[n] / on_cpu[reference]:.2f}x"]
        rows.append(row)
    headers = ["length", "vectors + tail", "us/call", "ns/element", f"vs {reference}"]
    if pids:
        headers += ["CPU ns/element", f"CPU vs {reference}"]
    common.print_table(headers, rows)
    ragged = [n for n in lengths if n % LANES] or lengths
    worst = max(wall[n] / wall[reference] for n in ragged)
    print(f"\nworst ragged length per element vs {reference}: {worst:.2f}x (acceptance: <= 1.5x)")
    if pids:
        worst_cpu = max(on_cpu[n] / on_cpu[reference] for n in ragged)
        print(f"in qemu-hexagon's CPU time: {worst_cpu:.2f}x")
    else:
        print("(no qemu-hexagon child process found: CPU time not measured)")


if __name__ == "__main__":
    main()
