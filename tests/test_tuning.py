"""The tuner: knobs declared by a tunable strategy, candidates measured, the best recorded per
(strategy, arguments, target) and read back when the strategy is called (docs/tuning.md)."""

import json

import numpy as np
import pytest

import loom
from loom import autotune
from loom.autotune import Knob, records, tunable, tune
from loom.autotune.cpu import matmul
from loom.backend.cpu import strategies


@pytest.fixture(autouse=True)
def tuning_file(tmp_path, monkeypatch):
    path = tmp_path / "tuning.json"
    monkeypatch.setenv("LOOM_TUNING_FILE", str(path))
    return path


def test_tune_records_the_fastest_of_the_measured_candidates(tuning_file):
    result = tune(matmul, 32, 48, 16, trials=3)
    assert len(result.trials) == 3
    assert result.trials[0].config == {}  # the strategy's own choice is always measured
    assert result.best == min(result.trials, key=lambda t: t.seconds)
    assert all(t.seconds > 0 for t in result.trials)
    saved = json.loads(tuning_file.read_text())
    assert saved[result.key]["config"] == result.best.config
    assert saved[result.key]["trials"] == 3
    assert matmul.recorded(32, 48, 16) == result.best.config
    assert matmul.recorded(32, 48, 17) is None  # another shape has no record


def test_the_same_call_measures_the_same_candidates():
    first = tune(matmul, 16, 32, 8, trials=3, number=1, repeat=1)
    second = tune(matmul, 16, 32, 8, trials=3, number=1, repeat=1)
    assert [t.config for t in first.trials] == [t.config for t in second.trials]
    assert len({json.dumps(t.config, sort_keys=True) for t in first.trials}) == 3


def test_a_tunable_strategy_builds_with_the_recorded_knobs(tuning_file):
    key = matmul.key((24, 40, 16), {}, "llvm")
    records.record(key, {"rows": 2, "cols": 16, "k_unroll": 1}, 1e-6, 2)
    seen = []

    def spy(*args, **kwargs):
        seen.append(kwargs)
        return strategies.matmul(*args, **kwargs)

    spied = tunable("cpu.matmul", spy, matmul.knobs)
    s, args = spied(24, 40, 16)
    assert {k: seen[0][k] for k in ("rows", "cols", "k_unroll")} == {
        "rows": 2,
        "cols": 16,
        "k_unroll": 1,
    }
    spied(24, 40, 16, rows=4)  # a knob the caller gives wins over the record
    assert seen[1]["rows"] == 4 and seen[1]["cols"] == 16
    mod = loom.build(s, args, name="mm")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((24, 16)).astype("float32")
    b = rng.standard_normal((16, 40)).astype("float32")
    c = np.zeros((24, 40), "float32")
    mod["mm"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_records_are_per_arguments_and_target():
    assert matmul.key((8, 8, 8), {}, "llvm") != matmul.key((8, 8, 8), {"dtype": "float64"}, "llvm")
    assert matmul.key((8, 8, 8), {}, "llvm") != matmul.key(
        (8, 8, 8), {}, "llvm -mcpu=skylake-avx512"
    )
    # a knob is not part of the key: the record is the same whatever the caller fixes
    assert matmul.key((8, 8, 8), {"rows": 2}, "llvm") == matmul.key((8, 8, 8), {}, "llvm")


def test_knob_values_may_depend_on_the_target():
    avx512 = "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512 -mattr=+avx512f"
    configs = matmul.configurations(avx512)
    assert {c["cols"] for c in configs} == {16, 32, 48, 64}  # 16 float lanes
    configs = matmul.configurations("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell -mattr=+avx2")
    assert {c["cols"] for c in configs} == {8, 16, 24, 32}
    assert len(configs) == 5 * 4 * 4  # rows x cols x k_unroll


def test_bad_uses_are_clear_errors(tuning_file):
    with pytest.raises(TypeError, match="tunable strategy"):
        tune(strategies.matmul, 8, 8, 8)
    with pytest.raises(ValueError, match="trials"):
        tune(matmul, 8, 8, 8, trials=0)
    with pytest.raises(ValueError, match="chooses the knobs"):
        tune(matmul, 8, 8, 8, rows=2)
    with pytest.raises(loom.LoomError, match="does not run here"):
        tune(matmul, 8, 8, 8, target="llvm -mtriple=aarch64-linux-gnu")
    with pytest.raises(ValueError, match="identifier"):
        Knob("not a name", (1,))
    with pytest.raises(ValueError, match="repeat"):
        tunable("x", strategies.matmul, [Knob("rows", (1,)), Knob("rows", (2,))])
    tuning_file.write_text("{not json")
    with pytest.raises(loom.LoomError, match="not JSON"):
        matmul.recorded(8, 8, 8)


def test_the_records_file_follows_the_environment(tuning_file):
    assert autotune.records_path() == tuning_file
