"""C identifiers made from IR names: dots become underscores, and every name is unique in its
scope (two distinct variables both called `i` become `i` and `i_1`, as the printer shows them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

C_KEYWORDS = frozenset(
    """auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic
    _Imaginary _Noreturn _Static_assert _Thread_local _Float16 asm typeof""".split()
)

# Names the generated code or the headers it includes use: a variable must not shadow them.
C_BUILTINS = frozenset(
    """bool true false NULL INFINITY NAN isnan isinf isfinite signbit uintptr_t intptr_t size_t
    int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t INT64_C UINT64_C
    exp expf exp2 exp2f log logf log2 log2f log10 log10f sqrt sqrtf sin sinf cos cosf tanh
    tanhf erf erff fabs fabsf floor floorf ceil ceilf trunc truncf nearbyint nearbyintf pow powf
    fmod fmodf args""".split()
)

_INVALID = re.compile(r"[^A-Za-z0-9_]")
# Macros of the headers the generated code includes (math.h, stdint.h): a variable so named
# would be macro-expanded.
_MACRO = re.compile(
    r"(M_|FP_|HUGE_VAL|MATH_ERR|U?INT(8|16|32|64|MAX|PTR|_LEAST|_FAST)|PTRDIFF_|SIZE_MAX|"
    r"SIG_ATOMIC_|WCHAR_|WINT_)\w*"
    r"|math_errhandling|offsetof|fpclassify|is(normal|greater|greaterequal|less|lessequal|"
    r"lessgreater|unordered|signaling|subnormal|canonical|zero)"
)


def sanitize(name: str) -> str:
    """A C identifier from an IR name: invalid characters become `_`; a name C reserves
    (leading digit, `__`, `_X`), a header's macro (`M_PI`) or one of loom's helpers (`loom_`)
    gets a `v_` prefix."""
    text = _INVALID.sub("_", name) or "v"
    if text[0].isdigit() or text.startswith(("__", "loom_", "LOOM_")) or _MACRO.fullmatch(text):
        text = "v_" + text
    elif text[0] == "_" and len(text) > 1 and text[1].isupper():
        text = "v" + text
    return text


class Namer:
    """Hands out identifiers unique among themselves and distinct from `reserved`. A namer
    for a function's locals has the file's namer as `outer`: a local never takes a global's
    name, nor a global (made later) a local's, so no local ever hides a global it uses."""

    def __init__(self, reserved: Iterable[str] = (), outer: Namer | None = None):
        self.used: set[str] = set(C_KEYWORDS) | set(C_BUILTINS) | set(reserved)
        self.outer = outer
        self.inner: list[Namer] = []
        if outer is not None:
            outer.inner.append(self)

    def taken(self, name: str) -> bool:
        return (
            name in self.used
            or (self.outer is not None and name in self.outer.used)
            or any(name in n.used for n in self.inner)
        )

    def fresh(self, hint: str) -> str:
        base = sanitize(hint)
        name, k = base, 0
        while self.taken(name):
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name
