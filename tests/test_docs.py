"""The documentation's code runs: every ```python block of README.md and docs/*.md, in order,
one namespace per file. Fragments that need context the page does not give are fenced as
```py instead and are not run."""

import pathlib
import re

import pytest

from .hexagon.conftest import missing_tools

REPO = pathlib.Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
NEEDS_HEXAGON = {"hexagon.md"}


def python_blocks(page: pathlib.Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M)


def test_the_pages_have_runnable_examples():
    assert sum(len(python_blocks(p)) for p in PAGES) >= 5  # the pattern still finds them


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=lambda p: p.name)
def test_python_blocks_run(page, capsys):
    if page.name in NEEDS_HEXAGON and missing_tools():
        pytest.skip(f"needs {missing_tools()}: run `make setup` (clang, lld, qemu-user)")
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for number, block in enumerate(python_blocks(page), 1):
        try:
            exec(compile(block, f"{page.name} block {number}", "exec"), namespace)
        except Exception as e:
            pytest.fail(f"{page.name}, python block {number}: {type(e).__name__}: {e}")
