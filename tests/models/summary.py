"""The table of tests/models: one row per model, printed at the end of the run (a plugin of
tests/conftest.py).

Each model test records its row as a user property (`ROW`): pytest-xdist carries it from the
worker that ran the test to the process that prints the summary."""

from __future__ import annotations

ROW = "loom_model_row"
COLUMNS = (
    # (title, width, format of a value)
    ("model", 24, "<"),
    ("onnx nodes", 10, ">"),
    ("kernels", 7, ">"),
    ("compile s", 9, ">.1f"),
    ("loom run s", 10, ">.3f"),
    ("ort run s", 9, ">.3f"),
    ("max abs", 9, ">.2e"),
    ("max rel", 9, ">.2e"),
    ("top-1", 6, ">"),
    # the caller's workspace pool: the sum of its tensors' sizes, the planned size, lower bound
    ("tensors MB", 10, ">.2f"),
    ("workspace MB", 12, ">.2f"),
    ("LB MB", 6, ">.2f"),
    ("result", 7, "<"),
)


def _line(cells) -> str:
    out = []
    for (_, width, spec), value in zip(COLUMNS, cells):
        align = spec[0]
        if value is None:
            text = "-"
        elif isinstance(value, str):
            text = value
        else:
            text = format(value, spec[1:])
        out.append(format(text, f"{align}{width}"))
    return "  ".join(out).rstrip()


def pytest_terminal_summary(terminalreporter):
    rows = [
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for key, value in getattr(report, "user_properties", ())
        if key == ROW
    ]
    if not rows:
        return
    terminalreporter.section("loom vs onnxruntime on real models (llvm)")
    terminalreporter.write_line(_line([title for title, _, _ in COLUMNS]))
    for row in sorted(rows, key=lambda r: r["model"]):
        terminalreporter.write_line(_line([row.get(title) for title, _, _ in COLUMNS]))
