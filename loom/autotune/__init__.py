"""Tuning: strategies declare knobs (`tunable`, `Knob`), `tune` measures candidates on this
machine and records the best per strategy, arguments and target in a JSON file that the
strategy reads when called (docs/tuning.md). `loom.autotune.cpu.matmul` is the CPU matmul
strategy with its tile as knobs."""

from loom.autotune.knobs import Knob, Tunable, tunable
from loom.autotune.records import path as records_path
from loom.autotune.search import Trial, TuneResult, tune

__all__ = ["Knob", "Trial", "Tunable", "TuneResult", "records_path", "tunable", "tune"]
