"""Symbolic dimensions in signatures: the text of an integer expression in shape variables.

A signature is data (stored in artifacts, read by a runtime that may not load the compiler), so
a dimension such as `n * 4` is kept as text in a small grammar: integers, variable names,
`+ - * // %` (Python's floor division and modulo, the IR's floordiv/floormod), unary minus,
`min(a, b)`, `max(a, b)` and parentheses. `evaluate` computes it for the variables' values;
`variables` lists the names it uses.
"""

from __future__ import annotations

import ast
import functools
import operator
from collections.abc import Mapping

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_CALLS = {"min": min, "max": max}


@functools.lru_cache(maxsize=256)
def _parse(text: str) -> ast.expr:
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"shape dimension {text!r} is not an integer expression") from e
    for n in ast.walk(tree):
        ok = (
            isinstance(n, ast.Name | ast.Load | ast.BinOp | ast.UnaryOp | ast.USub | ast.Call)
            or type(n) in _BINARY
            or (isinstance(n, ast.Constant) and type(n.value) is int)
        )
        if isinstance(n, ast.Call):
            ok = isinstance(n.func, ast.Name) and n.func.id in _CALLS and not n.keywords
        if not ok:
            raise ValueError(f"shape dimension {text!r}: {ast.dump(n)} is not allowed in one")
    return tree


def variables(text: str) -> list[str]:
    """The shape variables `text` uses, in the order they first appear."""
    names: list[str] = []
    for n in ast.walk(_parse(text)):
        if isinstance(n, ast.Name) and n.id not in _CALLS and n.id not in names:
            names.append(n.id)
    return names


def evaluate(text: str, values: Mapping[str, int]) -> int:
    """The dimension's value; a KeyError names a variable missing from `values`."""

    def ev(n: ast.expr) -> int:
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            return values[n.id]
        if isinstance(n, ast.UnaryOp):
            return -ev(n.operand)
        if isinstance(n, ast.Call):
            return _CALLS[n.func.id](*(ev(a) for a in n.args))
        return _BINARY[type(n.op)](ev(n.left), ev(n.right))

    return ev(_parse(text))
