"""The fuzzer (docs/testing.md): 300 fixed cases on the interpreter, llvm, c and a Hexagon sample
with no failure of any class; and the fuzzer's own parts: the oracle's semantics, the
generator's coverage and determinism, reproduction scripts, and the runner's handling of a
worker that crashes or hangs."""

import collections
import contextlib
import io
import json
import math

import numpy as np
import pytest

from tests.fuzz import generate, oracle, program, runner
from tests.hexagon.conftest import missing_tools

pytestmark = pytest.mark.slow

SEEDS = range(300)


def test_fixed_cases_have_no_failure_of_any_class():
    # one test, not one per class: pytest-xdist would run a shared fixture once per worker
    if missing_tools():
        pytest.skip(f"needs {missing_tools()} for the Hexagon sample: run `make setup`")
    summary = runner.run(SEEDS, workers=2)
    assert summary.cases == len(SEEDS)
    lines = []
    for kind in runner.FAILURE_CLASSES:
        failures = summary.failures_of(kind)
        if failures:
            lines.append(f"{len(failures)} {kind} (reproduce: python -m tests.fuzz --show SEED):")
            lines += ["  " + f.line() for f in failures]
    assert not lines, "\n".join([*lines, "", summary.table()])


# Hexagon cases that aborted LLVM, crashed the device or computed wrong lanes before loom kept
# such vector code from LLVM's Hexagon back end (docs/hexagon.md, "Vector code"), as
# (hexagon_every of the run that found them, seeds)
HEXAGON_REGRESSIONS = [(20, [2851, 4827, 5742, 8428]), (1, [20321, 21139, 30661, 31454])]


@pytest.mark.parametrize("every, seeds", HEXAGON_REGRESSIONS)
def test_cases_that_once_failed_on_hexagon_pass(every, seeds):
    if missing_tools():
        pytest.skip(f"needs {missing_tools()}: run `make setup`")
    summary = runner.run(seeds, workers=1, hexagon_every=every)
    assert summary.cases == len(seeds)
    assert not summary.failures, "\n".join(f.line() for f in summary.failures)
    assert all(program.make_case(seed, every)[0]["hexagon"] for seed in seeds)


# -- the oracle ---------------------------------------------------------------------------------


def test_oracle_integer_division_and_shifts():
    a = np.array([-128, -7, 7, -128, 5], "int8")
    b = np.array([-1, 2, -2, 3, -1], "int8")
    assert oracle._binary("div", a, b, "int8").tolist() == [-128, -3, -3, -42, -5]
    assert oracle._binary("truncmod", a, b, "int8").tolist() == [0, -1, 1, -2, 0]
    assert oracle._binary("floordiv", a, b, "int8").tolist() == [-128, -4, -4, -43, -5]
    assert oracle._binary("floormod", a, b, "int8").tolist() == [0, 1, -1, 1, 0]
    x = np.array([-128, 64, -1], "int8")
    s = np.array([1, 1, 7], "int8")
    assert oracle._binary("shr", x, s, "int8").tolist() == [-64, 32, -1]
    assert oracle._binary("shl", x, s, "int8").tolist() == [0, -128, -128]
    u = np.array([128, 255], "uint8")
    assert oracle._binary("shr", u, np.array([1, 7], "uint8"), "uint8").tolist() == [64, 1]


def test_oracle_float_floor_division_follows_docs_ir():
    a = np.array([-20.0, 3.0, -3.0, 0.0, 7.0, -0.5], "float16")
    b = np.array([np.inf, np.inf, np.inf, -np.inf, 2.0, 1.0], "float16")
    # finite a, infinite b: a if a is 0 or has b's sign, else b
    with np.errstate(all="ignore"):  # (inf * 0 on the way, as in evaluate())
        got = oracle._binary("floormod", a, b, "float16")
    assert got.tolist() == [np.inf, 3.0, np.inf, 0.0, 1.0, 0.5]
    q = oracle._binary(
        "floordiv", np.array([0.5], "float32"), np.array([-2.0], "float32"), "float32"
    )
    assert q.tolist() == [-1.0]
    zero = oracle._binary(
        "floordiv", np.array([-0.0], "float32"), np.array([3.0], "float32"), "float32"
    )
    assert not np.signbit(zero[0])  # a zero result is +0.0


def test_oracle_int_to_float_rounds_once():
    # 2**60 + 2**36 + 1 is just above the midpoint between two float32s: it rounds up; through
    # a double first it would become the midpoint and round to even (down)
    n = (1 << 60) + (1 << 36) + 1
    got = oracle._int_to_float(np.array([n], "int64"), "float32")
    assert int(got[0]) == (1 << 60) + (1 << 37)
    assert int(np.float64(n).astype("float32")) == 1 << 60


def test_oracle_rejects_undefined_casts():
    case = {
        "seed": 0,
        "hexagon": None,
        "data_seed": 0,
        "tensors": [
            {"name": "X0", "kind": "input", "shape": [4], "dtype": "float32"},
            {
                "name": "T0",
                "kind": "compute",
                "shape": [4],
                "dtype": "int8",
                "body": [
                    "cast",
                    "int8",
                    ["mul", ["load", "X0", [["axis", "i0"]]], ["const", 1000.0, "float32"]],
                ],
                "reduce": None,
            },
        ],
        "schedule": [],
    }
    inputs = [np.array([0.0, 1.0, 0.0, 0.0], "float32")]  # 1000 does not fit in int8
    with pytest.raises(oracle.Reject):
        oracle.evaluate(case, inputs)
    inputs = [np.array([0.0, 0.1, 0.0, 0.0], "float32")]
    assert oracle.evaluate(case, inputs).value.tolist() == [0, 100, 0, 0]
    # 2**64 - 1 is 2**64 as a float: a float64 of 2**64 does not fit in uint64
    ev = oracle.StageEval({}, {})
    ones = np.ones(2, bool)
    with pytest.raises(oracle.Reject):
        ev.cast("uint64", np.array([1.0, 2.0**64], "float64"), 0.0, ones)
    top = ev.cast("uint64", np.array([1.0, 2.0**64 - 2048], "float64"), 0.0, ones)[0]
    assert top.tolist() == [1, 2**64 - 2048]
    with pytest.raises(oracle.Reject):
        ev.cast("int8", np.array([127.9, 128.0], "float32"), 0.0, ones)


def test_compare_finds_wrong_elements_and_allows_the_bound():
    exp = oracle.Expected([], np.array([1.0, 2.0], "float32"), np.array([0.0, 0.5]), "float32")
    assert oracle.compare(np.array([1.0, 2.4], "float32"), exp) is None
    wrong = oracle.compare(np.array([1.0, 2.6], "float32"), exp)
    assert wrong and wrong.startswith("1 of 2 elements differ: [1]: got")
    assert oracle.compare(np.array([1.0000001, 2.0], "float32"), exp)  # exact where err is 0
    ints = oracle.Expected([], np.array([3, 4], "int8"), np.zeros(2), "int8")
    assert oracle.compare(np.array([3, 5], "int8"), ints).startswith("1 of 2")


# -- the generator ------------------------------------------------------------------------------


def test_cases_are_a_function_of_the_seed():
    a, exp_a = program.make_case(123)
    b, exp_b = program.make_case(123)
    assert json.dumps(a) == json.dumps(b)
    assert np.array_equal(exp_a.value, exp_b.value, equal_nan=True)
    assert json.dumps(program.make_case(124)[0]) != json.dumps(a)


def _ops(tree, out):
    if isinstance(tree, list) and tree and isinstance(tree[0], str):
        out[tree[0]] += 1
        for x in tree[1:]:
            _ops(x, out)
    elif isinstance(tree, list):
        for x in tree:
            _ops(x, out)


def test_the_fixed_seeds_cover_every_dtype_operation_and_primitive():
    dtypes, ops, steps, reducers, hexagon = (collections.Counter() for _ in range(5))
    for seed in SEEDS:
        case, _ = program.make_case(seed)
        for t in case["tensors"]:
            dtypes[t["dtype"]] += 1
            if t["kind"] == "compute":
                _ops([t["body"], (t["reduce"] or {}).get("where")], ops)
                if t["reduce"]:
                    reducers[t["reduce"]["op"]] += 1
        steps.update(step[0] for step in case["schedule"])
        hexagon[case["hexagon"]["hvx"] if case["hexagon"] else None] += 1
    assert set(dtypes) == set(generate.DTYPES)
    every_op = [*generate.BINARY, *generate.UNARY, *generate.COMPARE, *generate.LOGICAL]
    missing = set(every_op + generate.MATH + ["cast", "select", "ite"]) - set(ops)
    assert not missing
    assert set(reducers) == set(generate.REDUCERS + generate.BIT_REDUCERS)
    primitives = {
        "split", "fuse", "reorder", "tile", "vectorize", "unroll", "parallel", "compute_at",
        "compute_inline", "compute_root", "cache_read", "cache_write", "set_scope",
        "storage_align",
    }  # fmt: skip
    assert primitives <= set(steps), primitives - set(steps)
    assert hexagon[128] and hexagon[0] and 5 <= hexagon[128] + hexagon[0] <= 40


def test_reproduction_script_runs_the_case():
    case, exp = program.make_case(7)
    script = program.reproduction(case, "interp")
    assert script.startswith("# fuzz case 7 (python -m tests.fuzz --show 7)")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(script, "<reproduction>", "exec"), {})
    assert out.getvalue().strip() == "ok"


def test_a_wrong_result_is_a_mismatch():
    case, exp = program.make_case(11)
    s, args = program.build_schedule(case)
    arrays = program.arrays_for(exp, case)
    program.compile_for("interp", s, args, case)(*arrays)
    assert oracle.compare(arrays[-1], exp) is None
    got = arrays[-1].reshape(-1)
    got[0] = ~got[0] if got.dtype.kind in "iub" else got[0] + max(1.0, abs(float(got[0])))
    assert oracle.compare(arrays[-1], exp)


# -- the runner ---------------------------------------------------------------------------------


def test_a_crashing_hanging_or_wrong_case_is_named(monkeypatch, tmp_path):
    seeds = [s for s in range(1000, 1100) if not program.make_case(s)[0]["hexagon"]][:4]
    crash, hang, wrong, fine = seeds
    monkeypatch.setenv("LOOM_FUZZ_INJECT", f"crash:{crash},hang:{hang},mismatch:{wrong}")
    path = tmp_path / "failures.txt"
    result = runner.run(seeds, workers=2, step_timeout=20, failures_path=path)
    assert result.cases == 4
    assert [result.per_class[k] for k in ("ok", "crash", "hang", "mismatch")] == [1, 1, 1, 1]
    (c,) = result.failures_of("crash")
    (h,) = result.failures_of("hang")
    (m,) = result.failures_of("mismatch")
    assert (c.seed, h.seed, m.seed, m.backend) == (crash, hang, wrong, "llvm")
    assert "SIGABRT" in c.message and "elements differ" in m.message
    assert result.per_backend["llvm"]["mismatch"] == 1 and result.per_backend["c"]["ok"] == 2
    assert math.isfinite(result.cases_per_minute)
    text = path.read_text()
    assert f"==== seed {wrong}: mismatch on llvm" in text
    assert f"# fuzz case {wrong} (python -m tests.fuzz --show {wrong})" in text
    table = result.table()
    assert "mismatch             1" in table and f"seed {crash}: crash on" in table
