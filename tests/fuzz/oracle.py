"""The fuzzer's oracle: numpy evaluating a case's expression trees directly (not loom's
interpreter), with loom's documented semantics (docs/ir.md, "Semantics").

Every tree node evaluates to (value, err): value a numpy array of the node's dtype over the
stage's index grid (data axes, then reduction axes), err a float64 bound on how far a correct
implementation may be from it. err is 0 for integers and bools, and for floats wherever the
computation is exact: numpy's float16/32/64 `+ - * /` round each operation to the dtype exactly
as loom does. It grows where the semantics allow a difference: libm functions (a few ulps),
and float reductions, whose summation order a schedule may change. A decision on an inexact
value (a comparison, floor, a float-to-integer cast) that the error could flip makes the case
rejected (`Reject`), as does an undefined result (a cast of NaN or out of range); the generator
then draws another case.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tests.fuzz.generate import bits, int_range, is_float, is_int, is_signed

TRANSCENDENTAL_ULPS = 4


class Reject(Exception):
    """The case has no defined result, or one that rounding could decide."""


@dataclasses.dataclass
class Expected:
    inputs: list[np.ndarray]
    value: np.ndarray
    err: np.ndarray
    dtype: str


def _eps(dt: str) -> float:
    return float(np.finfo(dt).eps) if is_float(dt) else 0.0


def _tiny(dt: str) -> float:
    return float(np.finfo(dt).smallest_subnormal) if is_float(dt) else 0.0


def _const(value, dt: str) -> np.ndarray:
    return np.asarray(value, dtype=dt)


def _any(mask, cond) -> bool:
    return bool(np.any(np.logical_and(mask, cond)))


# -- inputs -------------------------------------------------------------------------------------


def random_array(rng: np.random.Generator, shape, dt: str) -> np.ndarray:
    if dt == "bool":
        return rng.random(shape) < 0.5
    pick = rng.random(shape)
    if is_float(dt):
        small = rng.integers(-32, 33, shape) / 8
        wide = np.round(rng.standard_normal(shape) * 8, 3)
        special = rng.choice([0.0, -0.0, 1.0, -1.0, 0.5, 3.5, 100.0], shape)
        out = np.where(pick < 0.7, small, np.where(pick < 0.9, wide, special))
        return out.astype(dt)
    lo, hi = int_range(dt)
    small = np.clip(rng.integers(-20, 21, shape) + (20 if lo == 0 else 0), lo, hi).astype(dt)
    full = rng.integers(lo, hi, shape, dtype=dt, endpoint=True)
    specials = [v for v in (lo, hi, lo + 1, hi - 1, -1, 0, 1) if lo <= v <= hi]
    special = np.asarray(specials, dtype=dt)[rng.integers(0, len(specials), shape)]
    return np.where(pick < 0.7, small, np.where(pick < 0.85, full, special)).astype(dt)


def make_inputs(case: dict) -> list[np.ndarray]:
    rng = np.random.default_rng(case["data_seed"])
    return [
        random_array(rng, tuple(t["shape"]), t["dtype"])
        for t in case["tensors"]
        if t["kind"] == "input"
    ]


def junk(shape, dt: str, seed: int) -> np.ndarray:
    """What an output array holds before a call: values a kernel that skips an element
    would leave visible."""
    rng = np.random.default_rng(seed)
    if is_float(dt):
        return np.full(shape, -1234.0 if dt == "float16" else -12345.678, dt)
    return random_array(rng, shape, dt)


# -- scalar semantics on arrays -----------------------------------------------------------------


def _int_to_float(v: np.ndarray, dt: str) -> np.ndarray:
    """Round integers to the nearest float of dt (ties to even), in one rounding."""
    mant = {"float16": 11, "float32": 24, "float64": 53}[dt]
    v = np.asarray(v)
    if v.dtype.itemsize < 8 or dt == "float64":
        return v.astype("float64").astype(dt) if dt != "float64" else v.astype(dt)

    def one(n: int) -> float:
        m = abs(n)
        shift = m.bit_length() - mant
        if shift > 0:
            q, r = divmod(m, 1 << shift)
            half = 1 << (shift - 1)
            if r > half or (r == half and q & 1):
                q += 1
            m = q << shift
        return float(-m if n < 0 else m)

    flat = [one(int(n)) for n in v.reshape(-1)]
    return np.asarray(flat, dtype="float64").reshape(v.shape).astype(dt)


def _int_divmod(op: str, a, b, dt: str):
    if np.any(b == 0):
        raise RuntimeError("generator bug: integer division by zero")
    if is_signed(dt):
        m1 = b == _const(-1, dt)
        bs = np.where(m1, _const(1, dt), b)
    else:
        m1, bs = None, b
    if op == "floordiv":
        r = np.floor_divide(a, bs)
    elif op == "floormod":
        r = np.remainder(a, bs)
    elif op == "truncmod":
        r = np.fmod(a, bs)
    else:  # div: toward zero
        q = np.floor_divide(a, bs)
        rem = np.remainder(a, bs)
        fix = (rem != 0) & ((a < 0) != (bs < 0)) if is_signed(dt) else False
        r = np.where(fix, q + _const(1, dt), q)
    if m1 is not None:
        minus = np.negative(a) if op in ("div", "floordiv") else np.zeros_like(a)
        r = np.where(m1, minus, r)
    return np.asarray(r, dtype=dt)


def _binary(op: str, a, b, dt: str):
    if dt == "bool":
        table = {
            "add": np.logical_or, "sub": np.logical_xor, "mul": np.logical_and,
            "min": np.logical_and, "max": np.logical_or, "and": np.logical_and,
            "or": np.logical_or, "xor": np.logical_xor,
        }  # fmt: skip
        return np.asarray(table[op](a, b), dtype="bool")
    if op == "add":
        r = a + b
    elif op == "sub":
        r = a - b
    elif op == "mul":
        r = a * b
    elif op == "min":
        r = np.where((b < a) | np.isnan(b), b, a) if is_float(dt) else np.minimum(a, b)
    elif op == "max":
        r = np.where((b > a) | np.isnan(b), b, a) if is_float(dt) else np.maximum(a, b)
    elif op in ("div", "truncmod", "floordiv", "floormod") and is_int(dt):
        r = _int_divmod(op, a, b, dt)
    elif op == "div":
        r = a / b
    elif op == "truncmod":
        r = np.fmod(a, b)
    elif op == "floordiv":
        r = np.floor(a.astype("float64") / b.astype("float64")) + 0.0  # a zero is +0.0
    elif op == "floormod":
        a64, b64 = a.astype("float64"), b.astype("float64")
        r = a64 - np.floor(a64 / b64) * b64
        # finite a, infinite b: a if a is 0 or has b's sign, else b (docs/ir.md)
        keep = (a64 == 0) | (np.signbit(a64) == np.signbit(b64))
        r = np.where(np.isfinite(a64) & np.isinf(b64), np.where(keep, a64, b64), r)
    elif op == "and":
        r = a & b
    elif op == "or":
        r = a | b
    elif op == "xor":
        r = a ^ b
    elif op in ("shl", "shr"):
        if np.any((b < 0) | (b >= bits(dt))):
            raise RuntimeError("generator bug: shift amount out of range")
        if op == "shr":
            r = np.right_shift(a, b)
        else:
            u = "u" + dt if is_signed(dt) else dt
            r = np.left_shift(np.asarray(a).astype(u), np.asarray(b).astype(u)).astype(dt)
    else:
        raise ValueError(op)
    return np.asarray(r, dtype=dt)


COMPARE_FN = {
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
}  # fmt: skip


def _math(f: str, x64: np.ndarray, y64=None) -> np.ndarray:
    if f == "exp":
        return np.exp(x64)
    if f == "log":
        return np.log(x64)
    if f == "sqrt":
        return np.sqrt(x64)
    if f == "tanh":
        return np.tanh(x64)
    if f == "sigmoid":
        pos = 1.0 / (1.0 + np.exp(-np.abs(x64)))
        neg = np.exp(-np.abs(x64)) / (1.0 + np.exp(-np.abs(x64)))
        return np.where(x64 >= 0, pos, neg)
    if f == "erf":
        return np.vectorize(math.erf, otypes=["float64"])(x64)
    if f == "pow":
        return np.power(x64, y64)
    return {"floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc}[f](x64)


# -- the evaluator ------------------------------------------------------------------------------


class StageEval:
    def __init__(self, env: dict, axes: dict):
        self.env = env  # tensor name -> (value, err) arrays of the tensor's shape
        self.axes = axes  # axis name -> int32 index array broadcastable to the grid

    def round_err(self, v, e, dt):
        """The error after an operation on inexact operands rounds its result to dt."""
        e = np.asarray(e, dtype="float64")
        if not np.any(e):
            return e
        return e + np.where(e > 0, _eps(dt) * (np.abs(v.astype("float64")) + e) + _tiny(dt), 0.0)

    def transcendental_err(self, v, e, dt):
        k = TRANSCENDENTAL_ULPS
        return np.asarray(e, "float64") + k * (_eps(dt) * np.abs(v.astype("float64")) + _tiny(dt))

    def stable_or_reject(self, mask, unstable, what):
        if _any(mask, unstable):
            raise Reject(f"{what} of an inexact value could go either way")

    def eval(self, node, mask):
        op = node[0]
        if op == "const":
            return _const(node[1], node[2]), 0.0
        if op == "axis":
            return self.axes[node[1]], 0.0
        if op == "load":
            return self.load(node, mask)
        if op == "cast":
            return self.cast(node[1], *self.eval(node[2], mask), mask)
        if op == "select":
            c, _ = self.eval(node[1], mask)
            (a, ea), (b, eb) = self.eval(node[2], mask), self.eval(node[3], mask)
            return np.asarray(np.where(c, a, b), dtype=a.dtype), np.where(c, ea, eb)
        if op == "ite":
            c, _ = self.eval(node[1], mask)
            a, ea = self.eval(node[2], np.logical_and(mask, c))
            b, eb = self.eval(node[3], np.logical_and(mask, np.logical_not(c)))
            return np.asarray(np.where(c, a, b), dtype=a.dtype), np.where(c, ea, eb)
        if op in COMPARE_FN:
            (a, ea), (b, eb) = self.eval(node[1], mask), self.eval(node[2], mask)
            if np.any(ea) or np.any(eb):
                gap = np.abs(a.astype("float64") - b.astype("float64"))
                self.stable_or_reject(mask, ~(gap > np.asarray(ea) + np.asarray(eb)), op)
            return np.asarray(COMPARE_FN[op](a, b)), 0.0
        if op in ("land", "lor"):
            (a, _), (b, _) = self.eval(node[1], mask), self.eval(node[2], mask)
            fn = np.logical_and if op == "land" else np.logical_or
            return np.asarray(fn(a, b)), 0.0
        if op == "lnot":
            a, _ = self.eval(node[1], mask)
            return np.asarray(np.logical_not(a)), 0.0
        if op in ("neg", "abs", "bitnot"):
            a, ea = self.eval(node[1], mask)
            dt = a.dtype.name
            if op == "bitnot":
                return np.asarray(np.invert(a), dtype=dt), 0.0
            if op == "neg":
                return np.asarray(np.negative(a), dtype=dt), ea
            if is_float(dt):
                return np.asarray(np.abs(a), dtype=dt), ea
            if is_signed(dt):
                return np.asarray(np.where(a < 0, np.negative(a), a), dtype=dt), 0.0
            return a, 0.0
        if op in ("exp", "log", "sqrt", "tanh", "sigmoid", "erf", "pow"):
            return self.math(node, mask)
        if op in ("floor", "ceil", "round", "trunc"):
            a, ea = self.eval(node[1], mask)
            dt = a.dtype.name
            if np.any(ea):
                x = a.astype("float64")
                if op == "round":
                    dist = np.abs(x - np.floor(x) - 0.5)
                else:
                    dist = np.minimum(x - np.floor(x), np.ceil(x) - x)
                self.stable_or_reject(mask, ~(dist > ea), op)
            return np.asarray(_math(op, a.astype("float64")).astype(dt)), 0.0
        return self.binary(node, mask)

    def load(self, node, mask):
        value, err = self.env[node[1]]
        idx = []
        inside = True
        for d, t in enumerate(node[2]):
            i, _ = self.eval(t, mask)
            ok = (i >= 0) & (i < value.shape[d])
            inside = np.logical_and(inside, ok)
            idx.append(np.where(ok, i, 0))
        if _any(mask, np.logical_not(inside)):
            raise RuntimeError(f"generator bug: out-of-bounds read of {node[1]}")
        idx = tuple(np.broadcast_arrays(*idx)) if idx else ()
        return np.asarray(value[idx]), np.asarray(err)[idx] if np.ndim(err) else 0.0

    def cast(self, dst: str, v, e, mask):
        src = v.dtype.name
        if dst == "bool":
            if np.any(e):
                self.stable_or_reject(mask, ~(np.abs(v.astype("float64")) > e), "cast to bool")
            return np.asarray(v != 0), 0.0
        if is_float(src) and not is_float(dst):
            x = v.astype("float64")
            b = bits(dst)
            t = np.trunc(x)
            # in range: [-2**(b-1), 2**(b-1)) or [0, 2**b), bounds exact as floats
            lo, end = (-(2.0 ** (b - 1)), 2.0 ** (b - 1)) if is_signed(dst) else (0.0, 2.0**b)
            bad = ~np.isfinite(x) | (t < lo) | (t >= end)
            if _any(mask, bad):
                raise Reject(f"float-to-{dst} cast of NaN, inf or a value out of range")
            if np.any(e):
                dist = np.minimum(np.abs(x - np.floor(x)), np.abs(np.ceil(x) - x))
                near_int = np.where(np.floor(x) == x, 0.0, dist)
                self.stable_or_reject(mask, ~(near_int > e), "float-to-integer cast")
            t = np.where(bad, 0, t)
            if dst == "uint64":  # float64 -> uint64 for values >= 2**63
                return np.asarray(t.astype("uint64")), 0.0
            return np.asarray(t.astype("int64").astype(dst)), 0.0
        if is_float(dst):
            if is_float(src):
                out = np.asarray(v.astype(dst))
                return out, self.round_err(out, e, dst)
            return np.asarray(_int_to_float(v, dst)), 0.0
        return np.asarray(v.astype(dst)), 0.0

    def math(self, node, mask):
        f = node[0]
        a, ea = self.eval(node[1], mask)
        dt = a.dtype.name
        x = a.astype("float64")
        ea = np.asarray(ea, "float64")
        if f == "pow":
            y, _ = self.eval(node[2], mask)
            y64 = y.astype("float64")
            out = np.asarray(_math(f, x, y64).astype(dt))
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = np.where(x > ea, ea / (x - ea), np.inf)
                prop = np.abs(out.astype("float64")) * ((1 + rel) ** np.abs(y64) - 1)
            prop = np.where(ea > 0, prop, 0.0)
            return out, self.transcendental_err(out, prop, dt)
        out = np.asarray(_math(f, x).astype(dt))
        v = np.abs(out.astype("float64"))
        if f == "exp":
            prop = v * np.expm1(ea)
        elif f == "log":
            prop = np.where(x > ea, ea / np.maximum(x - ea, 1e-300), np.inf)
        elif f == "sqrt":
            with np.errstate(divide="ignore", invalid="ignore"):
                prop = np.minimum(np.sqrt(ea), np.where(x > 0, ea / (2 * np.sqrt(x)), np.inf))
            prop = np.where(ea > 0, prop, 0.0)
            return out, self.round_err(out, prop, dt)  # correctly rounded
        elif f == "sigmoid":
            prop = ea / 4
        elif f == "erf":
            prop = ea * 1.13
        else:  # tanh
            prop = ea
        return out, self.transcendental_err(out, np.where(ea > 0, prop, 0.0), dt)

    @staticmethod
    def contraction_slack(node, value):
        """The rounding of a float product `node` whose rounded value is `value` (0 for any
        other node): at most half an ulp, which contraction (-fp-contract, on by default:
        docs/native.md) may skip by fusing the product into the add or subtract that uses it
        (a core with native float16 arithmetic, AVX512-FP16, fuses half products too)."""
        if node[0] != "mul":
            return 0.0
        with np.errstate(all="ignore"):
            slack = np.abs(np.spacing(value).astype("float64")) / 2
        return np.where(np.isfinite(slack), slack, 0.0)

    def binary(self, node, mask):
        op = node[0]
        (a, ea), (b, eb) = self.eval(node[1], mask), self.eval(node[2], mask)
        dt = a.dtype.name
        assert b.dtype.name == dt, (node, a.dtype, b.dtype)
        out = _binary(op, a, b, dt)
        if is_float(dt) and op in ("add", "sub"):
            ea = ea + self.contraction_slack(node[1], a)
            eb = eb + self.contraction_slack(node[2], b)
        if not is_float(dt) or not (np.any(ea) or np.any(eb)):
            return out, 0.0
        ea, eb = np.asarray(ea, "float64"), np.asarray(eb, "float64")
        a64, b64 = np.abs(a.astype("float64")), np.abs(b.astype("float64"))
        if op in ("add", "sub"):
            return out, self.round_err(out, ea + eb, dt)
        if op == "mul":
            return out, self.round_err(out, a64 * eb + b64 * ea + ea * eb, dt)
        if op in ("min", "max"):
            return out, np.maximum(ea, eb)
        # a quotient: div, or a floor/trunc of one
        with np.errstate(divide="ignore", invalid="ignore"):
            q = a64 / b64
            eq = np.where(b64 > eb, (ea + q * eb) / (b64 - eb), np.inf)
        if op == "div":
            return out, self.round_err(out, eq, dt)
        slack = eq + 4 * np.finfo("float64").eps * q + 4 * _eps(dt) * q
        qs = a.astype("float64") / b.astype("float64")
        dist = np.minimum(qs - np.floor(qs), np.ceil(qs) - qs)
        self.stable_or_reject(mask, ~(dist > slack), op)
        if op == "floordiv":
            return out, 0.0
        whole = np.abs(np.floor(qs)) if op == "floormod" else np.abs(np.trunc(qs))
        return out, self.round_err(out, ea + whole * eb, dt)


def _grid(shape) -> dict:
    return np.indices(shape, dtype="int32", sparse=True) if shape else ()


def _identity(op: str, dt: str):
    if op in ("bit_or", "bit_xor"):
        return 0
    if op == "bit_and":
        return True if dt == "bool" else np.asarray(-1).astype(dt)  # all ones
    if dt == "bool":
        return op in ("prod", "min")
    if op == "sum":
        return 0
    if op == "prod":
        return 1
    if is_float(dt):
        return -math.inf if op == "max" else math.inf
    lo, hi = int_range(dt)
    return lo if op == "max" else hi


def eval_stage(t: dict, env: dict):
    shape = list(t["shape"])
    red = t["reduce"]
    dt = t["dtype"]
    full = shape + (red["axes"] if red else [])
    grid = _grid(full)
    axes = {f"i{n}": grid[n] for n in range(len(shape))}
    if red:
        axes.update({f"k{n}": grid[len(shape) + n] for n in range(len(red["axes"]))})
    ev = StageEval(env, axes)
    ones = np.ones(full, dtype=bool)
    if not red:
        v, e = ev.eval(t["body"], ones)
        v = np.broadcast_to(np.asarray(v, dtype=dt), shape).copy()
        return v, np.broadcast_to(np.asarray(e, "float64"), shape).copy()
    where = ones
    if red["where"] is not None:
        w, _ = ev.eval(red["where"], ones)
        where = np.broadcast_to(w, full)
    v, e = ev.eval(t["body"], where)
    n = math.prod(red["axes"])
    v = np.broadcast_to(np.asarray(v, dtype=dt), full).reshape([*shape, n])
    e = np.broadcast_to(np.asarray(e, "float64"), full).reshape([*shape, n])
    m = np.asarray(where).reshape([*shape, n])
    start = red["init"][1] if red["init"] is not None else _identity(red["op"], dt)
    acc = np.full(shape, start, dtype=dt)
    combine = {"sum": "add", "prod": "mul", "max": "max", "min": "min", "bit_or": "or"}
    combine.update({"bit_and": "and", "bit_xor": "xor"})
    combine = combine[red["op"]]
    for r in range(n):
        acc = np.where(m[..., r], _binary(combine, acc, v[..., r], dt), acc).astype(dt)
    if not is_float(dt):
        return acc, np.zeros(shape)
    terms = np.abs(v.astype("float64"))
    em = np.where(m, e, 0.0)
    if red["op"] in ("max", "min"):
        err = em.max(axis=-1)
    elif red["op"] == "sum":
        total = np.where(m, terms, 0.0).sum(axis=-1) + abs(float(start))
        err = em.sum(axis=-1) + 2 * (n + 1) * _eps(dt) * total
    else:
        big = np.where(m, np.maximum(terms, 1.0), 1.0).prod(axis=-1) * max(abs(float(start)), 1.0)
        err = em.sum(axis=-1) * big + 2 * (n + 1) * _eps(dt) * np.abs(acc.astype("float64"))
    if np.any(err):
        err = err + (n + 1) * _tiny(dt)
    return acc, err


def evaluate(case: dict, inputs: list[np.ndarray] | None = None) -> Expected:
    """The expected output of `case` on `inputs` (its own inputs by default)."""
    inputs = make_inputs(case) if inputs is None else inputs
    env = {}
    it = iter(inputs)
    with np.errstate(all="ignore"):
        for t in case["tensors"]:
            if t["kind"] == "input":
                env[t["name"]] = (next(it), 0.0)
            else:
                env[t["name"]] = eval_stage(t, env)
    out = case["tensors"][-1]
    value, err = env[out["name"]]
    return Expected(inputs, value, np.asarray(err, "float64"), out["dtype"])


def compare(got: np.ndarray, exp: Expected, limit: int = 3) -> str | None:
    """None if `got` is right, else a description of the first wrong elements."""
    want, err, dt = exp.value, exp.err, exp.dtype
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"got {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
    if not is_float(dt):
        bad = got != want
    else:
        g, w = got.astype("float64"), want.astype("float64")
        with np.errstate(all="ignore"):
            skip = (err > 0) & (~np.isfinite(err) | (np.abs(w) + err > float(np.finfo(dt).max) / 2))
            close = np.abs(g - w) <= err * 1.0001 + _tiny(dt)
            ok = (g == w) | (np.isnan(g) & np.isnan(w)) | skip | ((err > 0) & close)
        bad = ~ok
    if not np.any(bad):
        return None
    where = np.argwhere(bad)
    parts = []
    for idx in where[:limit]:
        i = tuple(int(x) for x in idx)
        tol = f" (tolerance {float(err[i]):.3g})" if is_float(dt) and err[i] else ""
        parts.append(f"[{', '.join(map(str, i))}]: got {got[i]!r}, expected {want[i]!r}{tol}")
    return f"{len(where)} of {want.size} elements differ: " + "; ".join(parts)
