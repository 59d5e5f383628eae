"""The canonical linear form of integer index arithmetic: `sum(coeff * atom) + const`.

An atom is any expression that is not an addition, subtraction, negation or multiplication by a
constant: a variable, a `floordiv`, a load, a product of two non-constants, ... Rewriting an
expression into this form and back is a ring identity, so it preserves the value under the IR's
wraparound for every integer width. In modular mode (the default) coefficients are kept as the
signed representative modulo 2**bits, which is the same element of the ring.

`to_expr` prints the canonical order: positive terms first, then the negative ones as
subtractions, each group by descending absolute coefficient (ties by first appearance), the
constant last: `((i*64) - j) + 3`.
"""

from __future__ import annotations

from collections.abc import Callable

from loom.abi.dtype import DataType
from loom.ir.expr import Add, IntImm, Mul, PrimExpr, Sub
from loom.ir.semantics import wrap_int

Range = tuple[int, int]


def signed_repr(value: int, bits: int) -> int:
    """The representative of `value` modulo 2**bits in [-2**(bits-1), 2**(bits-1))."""
    half = 1 << (bits - 1)
    if -half <= value < half:  # already its own representative: nearly every value
        return value
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


class Linear:
    """A mutable linear combination of atoms, used while rewriting (never stored in the IR)."""

    __slots__ = ("_half", "const", "dtype", "modular", "terms")

    def __init__(
        self,
        dt: DataType,
        terms: dict[PrimExpr, int] | None = None,
        const: int = 0,
        modular: bool = True,
    ) -> None:
        self.dtype = dt
        self.modular = modular
        # values in [-half, half) are their own representative (None: not modular)
        self._half = 1 << (dt.bits - 1) if modular else None
        self.terms: dict[PrimExpr, int] = {}
        self.const = self._norm(const)
        if terms:
            for atom, coeff in terms.items():
                self.add_term(atom, coeff)

    def _norm(self, value: int) -> int:
        half = self._half
        if half is None or -half <= value < half:
            return value
        return signed_repr(value, self.dtype.bits)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def add_term(self, atom: PrimExpr, coeff: int) -> None:
        terms = self.terms
        c = terms.get(atom, 0) + coeff
        half = self._half
        if half is not None and not -half <= c < half:  # _norm, inlined: the hottest call here
            c = signed_repr(c, self.dtype.bits)
        if c:
            terms[atom] = c
        else:
            terms.pop(atom, None)

    def add_const(self, value: int) -> None:
        self.const = self._norm(self.const + value)

    def add(self, other: Linear, scale: int = 1) -> None:
        """self += scale * other."""
        for atom, coeff in other.terms.items():
            self.add_term(atom, coeff * scale)
        self.add_const(other.const * scale)

    def copy(self, modular: bool | None = None) -> Linear:
        keep = self.modular if modular is None else modular
        if keep and not self.modular:  # coefficients become their representatives (to_expr)
            return Linear(self.dtype, self.terms, self.const, modular=True)
        out = Linear(self.dtype, modular=keep)
        out.terms = dict(self.terms)
        out.const = self.const
        return out

    def scaled(self, k: int) -> Linear:
        out = Linear(self.dtype, modular=self.modular)
        out.add(self, k)
        return out

    def __repr__(self) -> str:
        parts = [f"{c}*{a}" for a, c in self.terms.items()]
        return " + ".join([*parts, str(self.const)])


def linearize(e: PrimExpr, modular: bool = True) -> Linear:
    """Decompose a scalar integer expression structurally (atoms are not simplified)."""
    out = Linear(e.dtype, modular=modular)
    stack: list[tuple[PrimExpr, int]] = [(e, 1)]
    while stack:
        x, k = stack.pop()
        t = type(x)
        if t is Add:
            stack.append((x.b, k))
            stack.append((x.a, k))
        elif t is Sub:
            stack.append((x.b, -k))
            stack.append((x.a, k))
        elif t is Mul and type(x.b) is IntImm:
            stack.append((x.a, k * x.b.value))
        elif t is Mul and type(x.a) is IntImm:
            stack.append((x.b, k * x.a.value))
        elif t is IntImm:
            out.add_const(k * x.value)
        else:
            out.add_term(x, k)
    return out


def _scaled_atom(atom: PrimExpr, coeff: int, dt: DataType) -> PrimExpr:
    return atom if coeff == 1 else Mul(atom, IntImm(wrap_int(coeff, dt), dt))


def _by_magnitude(item: tuple[PrimExpr, int]) -> int:
    return -abs(item[1])


def to_expr(lin: Linear) -> PrimExpr:
    """The canonical expression of a linear form (see the module docstring for the order)."""
    dt = lin.dtype
    bits = dt.bits
    if lin.modular:  # coefficients are kept as their signed representatives, never 0
        items = list(lin.terms.items())
    else:
        items = [(a, signed_repr(c, bits)) for a, c in lin.terms.items()]
        items = [(a, c) for a, c in items if c]
    if len(items) > 1:
        items.sort(key=_by_magnitude)
    const = signed_repr(lin.const, bits)
    acc: PrimExpr | None = None
    for atom, c in items:
        if c > 0:
            term = _scaled_atom(atom, c, dt)
            acc = term if acc is None else Add(acc, term)
    for atom, c in items:
        if c < 0:
            if acc is None:
                acc = IntImm(wrap_int(const, dt), dt)
                const = 0
            acc = Sub(acc, _scaled_atom(atom, -c, dt))
    if acc is None:
        return IntImm(wrap_int(const, dt), dt)
    if const > 0:
        acc = Add(acc, IntImm(wrap_int(const, dt), dt))
    elif const < 0:
        acc = Sub(acc, IntImm(wrap_int(-const, dt), dt))
    return acc


def linear_range(lin: Linear, atom_range: Callable[[PrimExpr], Range]) -> Range:
    """The mathematical (unwrapped) range of the combination, given sound ranges of its atoms."""
    lo = hi = lin.const
    for atom, c in lin.terms.items():
        a0, a1 = atom_range(atom)
        if c > 0:
            lo += c * a0
            hi += c * a1
        else:
            lo += c * a1
            hi += c * a0
    return lo, hi
