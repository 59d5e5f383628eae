"""Rewrites of optimized LLVM IR that LLVM 22's Hexagon back end cannot compile.

LLVM's optimizer makes `select`s between vectors of predicates (`<128 x i1>`) out of logic and
arithmetic on booleans, even from a module that has none (a boolean minus a comparison with a
constant vector folds to a select between two constant predicate vectors), and the Hexagon
back end then aborts the process ("Cannot select: v128i1 = vselect"). The same select written
as `(c & a) | (~c & b)` compiles. These run after the optimization pipeline, so nothing folds
the logic back into a select before instruction selection.
"""

from __future__ import annotations

import re

_OPERAND = (  # a value, a constant vector or a splat: what an i1-vector operand can be
    r"(?:%[-\w.$]+|%\"[^\"]*\"|<[^<>]*>|splat \(i1 (?:true|false)\)|zeroinitializer|poison|undef)"
)
_VECTOR_SELECT = re.compile(
    rf"^(?P<indent>\s*)(?P<name>%[-\w.$]+) = select (?P<cond_type>i1|<(?P<n>\d+) x i1>) "
    rf"(?P<cond>{_OPERAND}), <(?P<lanes>\d+) x i1> (?P<a>{_OPERAND}), "
    rf"<(?P=lanes) x i1> (?P<b>{_OPERAND})(?P<rest>(?:, ![^\n]*)?)$",
    re.MULTILINE,
)


def _as_logic(m: re.Match, k: int) -> str:
    """The select of match `m` as logic; its temporaries are named `%loom.sel<k>.*` (the
    select's own name may be a number, which cannot take a suffix)."""
    indent, name, lanes = m["indent"], m["name"], m["lanes"]
    t = f"<{lanes} x i1>"
    tmp = f"%loom.sel{k}"
    lines = []
    cond = m["cond"]
    if m["cond_type"] == "i1":  # a scalar condition: splat it first
        lines += [
            f"{tmp}.c0 = insertelement {t} poison, i1 {cond}, i64 0",
            f"{tmp}.c = shufflevector {t} {tmp}.c0, {t} poison, <{lanes} x i32> zeroinitializer",
        ]
        cond = f"{tmp}.c"
    lines += [
        f"{tmp}.a = and {t} {cond}, {m['a']}",
        f"{tmp}.n = xor {t} {cond}, splat (i1 true)",
        f"{tmp}.b = and {t} {tmp}.n, {m['b']}",
        f"{name} = or {t} {tmp}.a, {tmp}.b",
    ]
    return "\n".join(indent + line for line in lines)


def split_predicate_selects(ir_text: str) -> str:
    """Every `select` whose values are predicate vectors, as and/or/xor."""
    count = iter(range(1 << 62))
    return _VECTOR_SELECT.sub(lambda m: _as_logic(m, next(count)), ir_text)


FIXUPS = (split_predicate_selects,)
