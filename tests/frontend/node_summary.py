"""The summary of onnx's node tests (test_onnx_node.py): passed / failed / unsupported per
operator and the pass rate, printed at the end of the run.

The hooks run in the process that reports (the controller under pytest-xdist), so they see the
results of every worker: each node test records its operator (and, when loom refuses it, that
it is unsupported) in its report's user_properties.
"""

from __future__ import annotations

import collections

NODE_TESTS = "test_onnx_node.py::"

_counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
_excluded: dict[str, int] = {}


def _outcome(report, properties: dict) -> str | None:
    if report.when == "call" and report.passed and "onnx_unsupported" in properties:
        return "unsupported"
    if report.when == "call" and report.passed:
        return "passed" if not hasattr(report, "wasxfail") else "failed"  # a strict xpass
    if report.failed:
        return "failed"
    if report.skipped and hasattr(report, "wasxfail"):
        return "failed"  # an expected failure
    return None


def pytest_runtest_logreport(report):
    if NODE_TESTS not in report.nodeid:
        return
    properties = dict(report.user_properties)
    if "onnx_excluded" in properties and report.when == "call":
        _excluded.update(properties["onnx_excluded"])
    operator = properties.get("onnx_operator")
    outcome = _outcome(report, properties)
    if operator is not None and outcome is not None:
        _counts[operator][outcome] += 1


def pytest_terminal_summary(terminalreporter):
    if not _counts:
        return
    write = terminalreporter.write_line
    terminalreporter.section("onnx node tests through loom")
    write(f"{'operator':<28}{'passed':>8}{'failed':>8}{'unsupported':>13}")
    total: collections.Counter = collections.Counter()
    for operator in sorted(_counts):
        c = _counts[operator]
        total.update(c)
        write(f"{operator:<28}{c['passed']:>8}{c['failed']:>8}{c['unsupported']:>13}")
    write(f"{'all':<28}{total['passed']:>8}{total['failed']:>8}{total['unsupported']:>13}")
    if _excluded:
        listing = ", ".join(f"{op} {n}" for op, n in sorted(_excluded.items()))
        write(
            f"not run (they use an operator loom does not have): {sum(_excluded.values())} "
            f"tests, by the operator they test: {listing}"
        )
    counted = total["passed"] + total["failed"]
    if counted:
        everything = counted + total["unsupported"]
        write(
            f"pass rate over the node tests of supported operators: {total['passed']}/{counted} "
            f"= {100 * total['passed'] / counted:.1f}% (refused as unsupported: "
            f"{total['unsupported']}; with them: {100 * total['passed'] / everything:.1f}%)"
        )
