"""docs/models.md's operator table is the registry's (regenerate it with
`python -m loom.graph.ops.catalog --write`)."""

import pathlib

from loom.graph.ops.catalog import replace_table

PAGE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "models.md"


def test_the_documented_operators_are_the_registered_ones():
    page = PAGE.read_text()
    assert replace_table(page) == page, (
        "docs/models.md lists other operators than the registry: run "
        "`python -m loom.graph.ops.catalog --write`"
    )
