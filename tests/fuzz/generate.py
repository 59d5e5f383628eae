"""Random tensor programs and random valid schedules, as small JSON-able dicts.

`make_case(seed)` is a pure function of the seed. A case:

    {"seed": 7, "hexagon": None or {"hvx": 128 or 0}, "data_seed": ...,
     "tensors": [{"name": "X0", "kind": "input", "shape": [4, 5], "dtype": "int8"},
                 {"name": "T0", "kind": "compute", "shape": [4], "dtype": "int32",
                  "body": TREE, "reduce": None or {"op": "sum", "axes": [5],
                                                   "where": TREE or None, "init": TREE or None}},
                 ...],                       # the last tensor is the output
     "schedule": [STEP, ...]}

A TREE is a nested list: ["const", value, dtype], ["axis", "i0"] (an int32 loop index; data
axes are i0.., reduction axes k0..), ["load", tensor, [index TREEs]], [op, operand TREEs...]
with op one of BINARY, UNARY, COMPARE, LOGICAL, MATH, or ["cast", dtype, TREE],
["select", cond, a, b], ["ite", cond, a, b] (if_then_else: only the taken side is evaluated).

Only programs with defined results are drawn (docs/ir.md, "Semantics"): divisors are never
zero, shift amounts are masked into 0..bits-1, float-to-integer casts are clamped. The oracle
rejects the rest (a cast of NaN, a float decision that rounding could flip) and the generator
draws again from the same random stream.

Schedules follow TVM's rules: cache_write before other primitives on a stage; a stage is placed
(root, inline, compute_at) after all its consumers, at a loop of a stage that every one of its
readers is computed inside (`_attach_candidates`); never inside a vectorized loop; outputs and
reductions are not inlined; vectorize only the innermost loop, parallel only the outermost
data-parallel one.
"""

from __future__ import annotations

import math
import random

INT_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
DTYPES = ["bool", *INT_DTYPES, *FLOAT_DTYPES]
SCOPES = ["global", "local", "shared", "local.vtcm", "global.vtcm"]

BINARY = [
    "add", "sub", "mul", "div", "truncmod", "floordiv", "floormod", "min", "max",
    "and", "or", "xor", "shl", "shr",
]  # fmt: skip
UNARY = ["neg", "abs", "bitnot"]
COMPARE = ["lt", "le", "gt", "ge", "eq", "ne"]
LOGICAL = ["land", "lor", "lnot"]
MATH = ["exp", "log", "sqrt", "tanh", "sigmoid", "erf", "pow", "floor", "ceil", "round", "trunc"]
REDUCERS = ["sum", "prod", "max", "min"]
BIT_REDUCERS = ["bit_or", "bit_and", "bit_xor"]  # te.comm_reducer, for integers and bool


def bits(dt: str) -> int:
    return 1 if dt == "bool" else int("".join(c for c in dt if c.isdigit()))


def is_float(dt: str) -> bool:
    return dt.startswith("float")


def is_int(dt: str) -> bool:
    return dt in INT_DTYPES


def is_signed(dt: str) -> bool:
    return dt.startswith("int")


def int_range(dt: str) -> tuple[int, int]:
    if dt == "bool":
        return 0, 1
    b = bits(dt)
    return (-(1 << (b - 1)), (1 << (b - 1)) - 1) if is_signed(dt) else (0, (1 << b) - 1)


def float_max(dt: str) -> float:
    return {
        "float16": 65504.0,
        "float32": 3.4028234663852886e38,
        "float64": 1.7976931348623157e308,
    }[dt]


def float_int_bounds(src: str, dst: str) -> tuple[float, float]:
    """Float constants of dtype `src` that bound a value whose truncation fits in `dst`."""
    lo, hi = int_range(dst)
    mant = {"float16": 11, "float32": 24, "float64": 53}[src]

    def down(v: int) -> float:  # the largest float of src <= v (v >= 0)
        if v == 0:
            return 0.0
        shift = max(v.bit_length() - mant, 0)
        return float((v >> shift) << shift)

    top = min(down(hi), float_max(src))
    bottom = -min(down(-lo), float_max(src)) if lo < 0 else 0.0
    return bottom, top


def C(value, dt):
    return ["const", value, dt]


class Rng:
    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def p(self, prob: float) -> bool:
        return self.r.random() < prob

    def int(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)

    def choice(self, seq):
        return seq[self.r.randrange(len(seq))]

    def weighted(self, pairs):
        items, weights = zip(*pairs)
        return self.r.choices(items, weights)[0]

    def shuffle(self, seq) -> list:
        seq = list(seq)
        self.r.shuffle(seq)
        return seq


# -- expressions --------------------------------------------------------------------------------


def const_value(rng: Rng, dt: str):
    if dt == "bool":
        return rng.p(0.5)
    if is_float(dt):
        kind = rng.weighted([("small", 8), ("big", 1), ("special", 1)])
        if kind == "small":
            return rng.int(-64, 64) / 8
        if kind == "big":
            return float(rng.choice([100, 1000, 250.5, -3000, 40000])) if dt != "float16" else 512.0
        return rng.choice([0.0, -0.0, 1.0, -1.0, 0.5, 2.0])
    lo, hi = int_range(dt)
    kind = rng.weighted([("small", 8), ("edge", 1), ("any", 1)])
    if kind == "small":
        return max(lo, min(hi, rng.int(-9, 9)))
    if kind == "edge":
        return rng.choice([v for v in (lo, hi, lo + 1, hi - 1, -1, 0, 1) if lo <= v <= hi])
    return rng.int(lo, hi)


def nonzero_const(rng: Rng, dt: str):
    if is_float(dt):
        return rng.choice([0.25, 0.5, -0.5, 1.5, 2.0, -3.0, 3.0, 7.0, -0.75, 10.0])
    lo, hi = int_range(dt)
    cands = [1, 2, 3, 4, 5, 7, -1, -2, -3, -5]
    if rng.p(0.2):
        cands = [8, 16, 64, 100, -8, -128, hi, lo, hi // 3]
    return rng.choice([v for v in cands if lo <= v <= hi and v != 0] or [1])


class ExprGen:
    """Draws typed expression trees over the loop indices `axes` [(name, extent)] of a stage,
    reading the tensors `tensors` (dicts with name, shape, dtype)."""

    def __init__(self, rng: Rng, axes, tensors, floats: bool, budget: int = 24):
        self.rng, self.axes, self.tensors, self.floats = rng, axes, tensors, floats
        self.budget = budget

    # index expressions: (tree, lo, hi) with lo..hi the range of values it takes
    def index(self, extent: int, guarded: bool):
        rng, D = self.rng, extent
        forms = []
        for name, E in self.axes:
            a = ["axis", name]
            if E <= D:
                forms += [(4, (a, 0, E - 1))]
                if E < D:
                    c = rng.int(1, D - E)
                    forms += [(1, (["add", a, C(c, "int32")], c, E - 1 + c))]
                forms += [(1, (["sub", C(D - 1, "int32"), a], D - E, D - 1))]
            else:
                forms += [(2, (["floormod", a, C(D, "int32")], 0, D - 1))]
                forms += [(1, (["min", a, C(D - 1, "int32")], 0, D - 1))]
                q = -(-E // D)  # (E - 1) // q <= D - 1
                forms += [(1, (["floordiv", a, C(q, "int32")], 0, (E - 1) // q))]
            c = rng.int(1, 2)
            forms += [
                (1, (["min", ["add", a, C(c, "int32")], C(D - 1, "int32")], min(c, D - 1), D - 1))
            ]
            forms += [
                (1, (["max", ["sub", a, C(c, "int32")], C(0, "int32")], 0, max(E - 1 - c, 0)))
            ]
            if E - 1 - c <= D - 1:  # stays in range or needs a guard
                forms += [(1 if guarded else 0, (["sub", a, C(c, "int32")], -c, E - 1 - c))]
            if guarded:
                forms += [(1, (["add", a, C(c, "int32")], c, E - 1 + c))]
        for (n1, E1), (n2, E2) in zip(self.axes, self.axes[1:]):
            if E1 + E2 - 2 <= D - 1:
                forms += [(2, (["add", ["axis", n1], ["axis", n2]], 0, E1 + E2 - 2))]
            if 2 * (E1 - 1) + E2 - 1 <= D - 1:
                t = ["add", ["mul", ["axis", n1], C(2, "int32")], ["axis", n2]]
                forms += [(1, (t, 0, 2 * (E1 - 1) + E2 - 1))]
        c = rng.int(0, D - 1)
        forms += [(1, (C(c, "int32"), c, c))]
        forms = [(w, f) for w, f in forms if w > 0 and (guarded or (f[1] >= 0 and f[2] <= D - 1))]
        return rng.weighted([(f, w) for w, f in forms])

    def load(self, dt: str, tensor=None, natural=None):
        """A read of `tensor` (random if None), cast to dt; sometimes guarded."""
        rng = self.rng
        t = tensor or rng.choice(self.tensors)
        guarded = rng.p(0.15)
        idx, conds = [], []
        for d, D in enumerate(t["shape"]):
            if natural is not None and natural[d] is not None:
                tree, lo, hi = natural[d]
            else:
                tree, lo, hi = self.index(D, guarded)
            idx.append(tree)
            if lo < 0:
                conds.append(["ge", tree, C(0, "int32")])
            if hi > D - 1:
                conds.append(["lt", tree, C(D, "int32")])
        node = self.cast(["load", t["name"], idx], t["dtype"], dt)
        if conds:
            cond = conds[0]
            for c in conds[1:]:
                cond = ["land", cond, c]
            other = C(const_value(rng, dt), dt) if rng.p(0.7) else self.leaf(dt, loads=False)
            node = ["ite", cond, node, other]
        return node

    def cast(self, node, src: str, dst: str):
        rng = self.rng
        if src == dst:
            return node
        if dst == "bool" and src != "bool" and rng.p(0.6):
            middle = 0 if src.startswith(("int", "float")) else 20
            return [rng.choice(["lt", "ge", "ne"]), node, C(middle, src)]
        if is_float(src) and is_int(dst) and rng.p(0.9):
            lo, hi = float_int_bounds(src, dst)
            node = ["min", ["max", node, C(lo, src)], C(hi, src)]
        return ["cast", dst, node]

    def leaf(self, dt: str, loads: bool = True):
        rng = self.rng
        kind = rng.weighted([("load", 6 if loads else 0), ("const", 3), ("axis", 2)])
        if kind == "load":
            return self.load(dt)
        if kind == "const":
            return C(const_value(rng, dt), dt)
        name, E = rng.choice(self.axes)
        a = ["axis", name]
        if dt == "bool":
            return [rng.choice(["lt", "ge", "eq"]), a, C(rng.int(0, E), "int32")]
        return ["cast", dt, a] if dt != "int32" else a

    def other_dtype(self, dt: str) -> str:
        pool = DTYPES if self.floats else ["bool", *INT_DTYPES]
        return self.rng.choice(pool)

    def divisor(self, dt: str, depth: int):
        rng = self.rng
        if rng.p(0.5):
            return C(nonzero_const(rng, dt), dt)
        b = self.gen(dt, depth)
        if is_float(dt):
            return ["add", ["abs", b], C(1.0, dt)]
        return ["select", ["eq", b, C(0, dt)], C(nonzero_const(rng, dt), dt), b]

    def gen(self, dt: str, depth: int):
        node = self._gen(dt, depth)
        # loom folds constants as it builds: a constant condition of a select, or a constant
        # operand of && or ||, would drop the other operand (and maybe a stage's only read)
        if node[0] in ("select", "ite") and constant(node[1]):
            node[1] = self.varying_bool()
        elif node[0] in ("land", "lor") or (dt == "bool" and node[0] in ("and", "or")):
            node[1:] = [self.varying_bool() if constant(x) else x for x in node[1:]]
        elif len(node) == 3 and node[0] in BINARY and constant(node[1]) and constant(node[2]):
            node[1] = self.load(dt)
        elif node[0] in ("add", "sub", "mul", "and", "or", "xor") and dt != "bool":
            # x * 0 is 0, x + 0 is x: a zero constant makes the other operand pointless
            node[1:] = [self.load(dt) if x[0] == "const" and x[1] == 0 else x for x in node[1:]]
        elif node[0] in (*UNARY, *MATH) and node[0] != "pow" and constant(node[1]):
            node[1] = self.load(dt)
        elif node[0] in ("min", "max") and (constant(node[1]) or constant(node[2])):
            if self.rng.p(0.8):  # a constant bound often decides every element
                node[1 if constant(node[1]) else 2] = self.load(dt)
        return node

    def varying_bool(self):
        if self.rng.p(0.5):
            name, E = self.rng.choice(self.axes)
            return [self.rng.choice(["lt", "ge"]), ["axis", name], C(self.rng.int(1, E), "int32")]
        t = self.rng.choice(self.tensors)
        return ["ne", self.load(t["dtype"], t), C(const_value(self.rng, t["dtype"]), t["dtype"])]

    def _gen(self, dt: str, depth: int):
        rng = self.rng
        self.budget -= 1
        if depth <= 0 or self.budget <= 0 or rng.p(0.2):
            return self.leaf(dt)
        d = depth - 1
        if dt == "bool":
            kind = rng.weighted(
                [("cmp", 5), ("logic", 3), ("arith", 2), ("select", 1), ("cast", 1)]
            )
            if kind == "cmp":
                src = dt if rng.p(0.2) else self.other_dtype(dt)
                if src == "bool":
                    src = "int32"
                return [rng.choice(COMPARE), self.gen(src, d), self.gen(src, d)]
            if kind == "logic":
                op = rng.choice(LOGICAL)
                if op == "lnot":
                    return ["lnot", self.gen(dt, d)]
                return [op, self.gen(dt, d), self.gen(dt, d)]
            if kind == "arith":
                op = rng.choice(["add", "sub", "mul", "min", "max", "and", "or", "xor"])
                return [op, self.gen(dt, d), self.gen(dt, d)]
            if kind == "select":
                return self.select(dt, d)
            src = self.other_dtype(dt)
            return ["cast", "bool", self.gen(src, d)] if src != "bool" else self.gen(dt, d)
        if is_int(dt):
            kind = rng.weighted(
                [
                    ("arith", 6),
                    ("div", 3),
                    ("bit", 3),
                    ("shift", 3),
                    ("unary", 2),
                    ("select", 2),
                    ("cast", 2),
                ]
            )
            if kind == "arith":
                op = rng.choice(["add", "sub", "mul", "add", "sub", "mul", "min", "max"])
                return [op, self.gen(dt, d), self.gen(dt, d)]
            if kind == "div":
                op = rng.choice(["div", "truncmod", "floordiv", "floormod"])
                return [op, self.gen(dt, d), self.divisor(dt, d)]
            if kind == "bit":
                return [rng.choice(["and", "or", "xor"]), self.gen(dt, d), self.gen(dt, d)]
            if kind == "shift":
                b = bits(dt)
                if rng.p(0.5):
                    amount = C(rng.int(0, 3) if rng.p(0.6) else rng.int(0, b - 1), dt)
                else:
                    amount = ["and", self.gen(dt, d), C(b - 1, dt)]
                return [rng.choice(["shl", "shr"]), self.gen(dt, d), amount]
            if kind == "unary":
                return [rng.choice(UNARY), self.gen(dt, d)]
            if kind == "select":
                return self.select(dt, d)
            src = self.other_dtype(dt)
            return self.cast(self.gen(src, d), src, dt)
        # floats
        kind = rng.weighted(
            [("arith", 6), ("div", 2), ("math", 5), ("unary", 1), ("select", 2), ("cast", 2)]
        )
        if kind == "arith":
            op = rng.choice(["add", "sub", "mul", "add", "sub", "mul", "min", "max"])
            return [op, self.gen(dt, d), self.gen(dt, d)]
        if kind == "div":
            op = rng.choice(["div", "div", "truncmod", "floordiv", "floormod"])
            return [op, self.gen(dt, d), self.divisor(dt, d)]
        if kind == "unary":
            return [rng.choice(["neg", "abs"]), self.gen(dt, d)]
        if kind == "select":
            return self.select(dt, d)
        if kind == "cast":
            src = self.other_dtype(dt)
            return self.cast(self.gen(src, d), src, dt)
        f = rng.choice(MATH)
        a = self.gen(dt, d)
        if f == "exp":
            a = ["min", ["max", a, C(-10.0, dt)], C(10.0, dt)]
        elif f in ("log", "sqrt"):
            a = ["add", ["abs", a], C(1.0, dt)] if f == "log" else ["abs", a]
        elif f == "pow":
            base = ["add", ["abs", a], C(0.5, dt)]
            return ["pow", base, C(rng.choice([0.5, 1.5, 2.0, 3.0, -1.0, -2.0, -0.5]), dt)]
        return [f, a]

    def select(self, dt: str, depth: int):
        kind = "ite" if self.rng.p(0.4) else "select"
        return [kind, self.gen("bool", depth), self.gen(dt, depth), self.gen(dt, depth)]


def constant(tree) -> bool:
    """Does the tree read no tensor and no loop index?"""
    if tree[0] in ("load", "axis"):
        return False
    return all(constant(x) for x in tree[1:] if isinstance(x, list))  # (a node, not a list)


def tensors_read(tree, out: set | None = None) -> set:
    """The tensors a tree (or a list of trees) reads."""
    out = set() if out is None else out
    if isinstance(tree, list) and tree:
        if tree[0] == "load":
            out.add(tree[1])
        for x in tree[1:] if isinstance(tree[0], str) else tree:
            if isinstance(x, list):
                tensors_read(x, out)
    return out


# -- programs -----------------------------------------------------------------------------------


def _shape(rng: Rng, big: bool) -> list[int]:
    rank = rng.weighted([(1, 3), (2, 5), (3, 2)])
    shape = [
        rng.weighted([(1, 1), (2, 2), (3, 3), (4, 3), (5, 2), (6, 2), (7, 2), (8, 3)])
        for _ in range(rank)
    ]
    if big:
        shape[-1] = rng.choice([16, 33, 64, 128, 130])
    while math.prod(shape) > (1024 if big else 256):
        shape[rng.int(0, rank - 1)] //= 2
        shape = [max(1, s) for s in shape]
    return shape


def make_program(rng: Rng, hexagon) -> list[dict]:
    floats = hexagon is None
    pool = DTYPES if floats else ["bool", *INT_DTYPES]
    main = rng.choice([d for d in pool if d != "bool"] + ["bool"] * (1 if rng.p(0.3) else 0))
    big = rng.p(0.5) if hexagon is not None and hexagon["hvx"] else rng.p(0.1)
    tensors = []
    for k in range(rng.weighted([(1, 3), (2, 4), (3, 2)])):
        dt = main if rng.p(0.7) else rng.choice(pool)
        tensors.append({"name": f"X{k}", "kind": "input", "shape": _shape(rng, big), "dtype": dt})
    n_stages = rng.weighted([(1, 3), (2, 4), (3, 3), (4, 2)])
    for j in range(n_stages):
        last = j == n_stages - 1
        readable = list(tensors)
        prev = tensors[-1]
        dt = main if rng.p(0.5) else (prev["dtype"] if rng.p(0.5) else rng.choice(pool))
        must = [prev] + ([t for t in tensors if not _is_read(t, tensors)] if last else [])
        src = rng.choice(readable) if rng.p(0.3) else prev
        reduce = None
        natural = {}
        if rng.p(0.35) and (len(src["shape"]) > 1 or rng.p(0.3)):
            dims = list(range(len(src["shape"])))
            count = min(rng.weighted([(1, 4), (2, 1)]), max(len(dims) - 1, 1))
            red = sorted(rng.shuffle(dims)[:count])
            keep = [d for d in dims if d not in red]
            shape = [src["shape"][d] for d in keep] or [1]
            raxes = [src["shape"][d] for d in red]
            axes = [(f"i{n}", e) for n, e in enumerate(shape)] + [
                (f"k{n}", e) for n, e in enumerate(raxes)
            ]
            nat = []
            for d in dims:
                if d in red:
                    n = red.index(d)
                    nat.append((["axis", f"k{n}"], 0, raxes[n] - 1))
                else:
                    n = keep.index(d)
                    nat.append((["axis", f"i{n}"], 0, shape[n] - 1))
            natural[src["name"]] = nat
            ops = REDUCERS + ([] if is_float(dt) else BIT_REDUCERS)
            reduce = {"op": rng.choice(ops), "axes": raxes, "where": None, "init": None}
            if src is not prev:
                must.insert(0, src)
        else:
            shape = list(src["shape"]) if rng.p(0.6) else _shape(rng, big)
            if rng.p(0.15) and len(shape) < 3:
                shape = [*shape, rng.int(1, 4)]
            axes = [(f"i{n}", e) for n, e in enumerate(shape)]
            if len(shape) == len(src["shape"]):
                natural[src["name"]] = [
                    (["axis", f"i{n}"], 0, e - 1) if e <= D else None
                    for n, (e, D) in enumerate(zip(shape, src["shape"]))
                ]
        gen = ExprGen(rng, axes, readable, floats, budget=rng.int(4, 24))
        body = gen.gen(dt, rng.weighted([(1, 2), (2, 4), (3, 4), (4, 2)]))
        for t in must:
            if constant(body):  # (`c || x` would be folded to c)
                body = gen.load(dt, t, natural.get(t["name"]))
            elif t["name"] not in tensors_read(body):
                op = rng.choice(
                    ["add", "sub", "max", "min", "mul"] if dt != "bool" else ["lor", "land"]
                )
                body = [op, body, gen.load(dt, t, natural.get(t["name"]))]
        if reduce is not None:
            if rng.p(0.2):
                reduce["where"] = gen.gen("bool", 1)
            if rng.p(0.2):
                init = const_value(rng, dt)
                reduce["init"] = C(init if init or reduce["op"] != "prod" else 1, dt)
        tensors.append(
            {
                "name": f"T{j}",
                "kind": "compute",
                "shape": shape,
                "dtype": dt,
                "body": body,
                "reduce": reduce,
            }
        )
    return tensors


def _is_read(t: dict, tensors: list[dict]) -> bool:
    for u in tensors:
        if u["kind"] == "compute":
            r = u["reduce"] or {}
            if t["name"] in tensors_read([u["body"], r.get("where"), r.get("init")]):
                return True
    return False


def stage_reads(t: dict) -> set:
    r = t.get("reduce") or {}
    return tensors_read([t["body"], r.get("where") or [], r.get("init") or []])


# -- schedules ----------------------------------------------------------------------------------


def var_name(name: str) -> str:
    return name.replace(".", "_")


class SStage:
    """The generator's own model of a stage: enough to draw only valid schedules."""

    def __init__(self, name, shape, reduce, reads, kind, is_output=False):
        self.name, self.shape, self.reduce, self.kind = name, list(shape), list(reduce), kind
        self.reads, self.is_output = list(reads), is_output
        self.leaves = [[f"i{n}", e, "d"] for n, e in enumerate(shape)]
        self.leaves += [[f"k{n}", e, "r"] for n, e in enumerate(reduce)]
        self.attach = "root"
        self.ann: dict[str, str] = {}
        self.counter = 0

    def leaf(self, name):
        return next(x for x in self.leaves if x[0] == name)

    def pos(self, name) -> int:
        return [x[0] for x in self.leaves].index(name)


class ScheduleGen:
    def __init__(self, rng: Rng, tensors: list[dict], hexagon):
        self.rng, self.hexagon, self.steps = rng, hexagon, []
        self.stages: list[SStage] = []
        for t in tensors:
            if t["kind"] == "input":
                self.stages.append(SStage(t["name"], t["shape"], [], [], "input"))
            else:
                red = t["reduce"]["axes"] if t["reduce"] else []
                self.stages.append(
                    SStage(t["name"], t["shape"], red, sorted(stage_reads(t)), "compute")
                )
        self.stages[-1].is_output = True

    def get(self, name) -> SStage:
        return next(s for s in self.stages if s.name == name)

    def readers(self, s: SStage) -> list[SStage]:
        return [r for r in self.stages if s.name in r.reads]

    def reaches(self, p: SStage, c: SStage) -> bool:
        frontier, seen = [p], set()
        while frontier:
            for r in self.readers(frontier.pop()):
                if r is c:
                    return True
                if r.name not in seen:
                    seen.add(r.name)
                    frontier.append(r)
        return False

    # -- cache stages ---------------------------------------------------------------------------
    def cache_write(self, s: SStage, scope: str) -> None:
        name = f"{s.name}.{scope}"
        if any(x.name == name for x in self.stages):
            return
        local = SStage(name, s.shape, s.reduce, s.reads, "compute")
        self.stages.insert(self.stages.index(s), local)
        s.reduce, s.reads = [], [name]
        s.leaves = [x for x in s.leaves if x[2] == "d"]
        self.steps.append(["cache_write", s.name, scope])

    def cache_read(self, t: SStage, scope: str, readers: list[SStage]) -> None:
        name = f"{t.name}.{scope}"
        if any(x.name == name for x in self.stages):
            return
        cache = SStage(name, t.shape, [], [t.name], "compute")
        self.stages.insert(self.stages.index(t) + 1, cache)
        for r in readers:
            r.reads = [name if x == t.name else x for x in r.reads]
        self.steps.append(["cache_read", t.name, scope, [r.name for r in readers]])

    # -- placement ------------------------------------------------------------------------------
    def effective_readers(self, s: SStage) -> list[SStage]:
        out = []
        for r in self.readers(s):
            out += self.effective_readers(r) if r.attach == "inline" else [r]
        return out

    def inside(self, r: SStage, c: SStage, pos: int) -> bool:
        """Is `r` computed inside loop number `pos` of stage `c` (or is it `c`)?"""
        x = r
        while True:
            if x is c:
                return True
            if not isinstance(x.attach, tuple):
                return False
            cn, ln = x.attach
            parent = self.get(cn)
            if parent is c:
                return parent.pos(ln) >= pos
            x = parent

    def _attach_candidates(self, s: SStage):
        eff = self.effective_readers(s)
        out = []
        for c in self.stages:
            if c is s or c.kind != "compute" or c.attach == "inline" or not self.reaches(s, c):
                continue
            for pos, (ln, _, _) in enumerate(c.leaves):
                if c.ann.get(ln) == "vectorize":
                    continue
                if all(self.inside(r, c, pos) for r in eff):
                    out.append((c, ln))
        return out

    def in_parallel(self, s: SStage) -> bool:
        x = s
        while isinstance(x.attach, tuple):
            cn, ln = x.attach
            parent = self.get(cn)
            if any(
                parent.ann.get(n) == "parallel" for n, _, _ in parent.leaves[: parent.pos(ln) + 1]
            ):
                return True
            x = parent
        return False

    def place(self, s: SStage) -> None:
        rng = self.rng
        if s.is_output:
            return
        choices = [("root", 3)]
        if not s.reduce:
            choices.append(("inline", 3))
        cands = self._attach_candidates(s)
        if cands:
            choices.append(("at", 9))
        kind = rng.weighted(choices)
        if kind == "inline":
            s.attach = "inline"
            self.steps.append(["compute_inline", s.name])
        elif kind == "at":
            c, ln = rng.choice(cands)
            s.attach = (c.name, ln)
            self.steps.append(["compute_at", s.name, c.name, ln])
        elif rng.p(0.1):
            self.steps.append(["compute_root", s.name])

    # -- loops ----------------------------------------------------------------------------------
    def new_leaf(self, s: SStage, base: str) -> str:
        s.counter += 1
        return f"{base}{s.counter}"

    def split(self, s: SStage) -> None:
        rng = self.rng
        ln, E, kind = rng.choice(s.leaves)
        divisors = [d for d in range(1, E + 1) if E % d == 0]
        amount = rng.choice(divisors) if rng.p(0.5) else rng.int(1, E + 1)
        how = "factor" if rng.p(0.7) else "nparts"
        if how == "factor":
            inner, outer = amount, -(-E // amount)
        else:
            outer, inner = amount, -(-E // amount)
        o, i = self.new_leaf(s, "o"), self.new_leaf(s, "n")
        k = s.pos(ln)
        s.leaves[k : k + 1] = [[o, outer, kind], [i, inner, kind]]
        self.steps.append(["split", s.name, ln, how, amount, o, i])

    def fuse(self, s: SStage) -> None:
        pairs = [k for k in range(len(s.leaves) - 1) if s.leaves[k][2] == s.leaves[k + 1][2]]
        if not pairs:
            return
        k = self.rng.choice(pairs)
        (a, ea, kind), (b, eb, _) = s.leaves[k], s.leaves[k + 1]
        f = self.new_leaf(s, "f")
        s.leaves[k : k + 2] = [[f, ea * eb, kind]]
        self.steps.append(["fuse", s.name, a, b, f])

    def reorder(self, s: SStage) -> None:
        if len(s.leaves) < 2:
            return
        n = self.rng.int(2, len(s.leaves))
        chosen = self.rng.shuffle(range(len(s.leaves)))[:n]
        order = self.rng.shuffle([s.leaves[k] for k in chosen])
        for pos, leaf in zip(sorted(chosen), order):
            s.leaves[pos] = leaf
        self.steps.append(["reorder", s.name, [x[0] for x in order]])

    def tile(self, s: SStage) -> None:
        data = [k for k, x in enumerate(s.leaves) if x[2] == "d"]
        if len(data) < 2:
            return
        a, b = sorted(self.rng.shuffle(data)[:2])
        (x, ex, _), (y, ey, _) = s.leaves[a], s.leaves[b]
        fx, fy = self.rng.int(1, ex + 1), self.rng.int(1, ey + 1)
        names = [self.new_leaf(s, p) for p in ("o", "o", "n", "n")]
        s.leaves[a : a + 1] = [[names[0], -(-ex // fx), "d"], [names[2], fx, "d"]]
        b += 1
        s.leaves[b : b + 1] = [[names[1], -(-ey // fy), "d"], [names[3], fy, "d"]]
        positions = sorted(s.pos(n) for n in names)
        new = {n: s.leaf(n) for n in names}
        for pos, n in zip(positions, [names[0], names[1], names[2], names[3]]):
            s.leaves[pos] = new[n]
        self.steps.append(["tile", s.name, x, y, fx, fy, *names])

    def transform(self, s: SStage) -> None:
        rng = self.rng
        for _ in range(rng.weighted([(0, 3), (1, 4), (2, 3), (3, 2)])):
            op = rng.weighted([("split", 5), ("fuse", 2), ("reorder", 2), ("tile", 1)])
            getattr(self, op)(s)

    def annotate(self, s: SStage) -> None:
        rng = self.rng
        hvx = self.hexagon is not None and self.hexagon["hvx"]
        first = s.leaves[0]
        if first[2] == "d" and rng.p(0.2) and (not self.in_parallel(s) or rng.p(0.3)):
            s.ann[first[0]] = "parallel"
            self.steps.append(["parallel", s.name, first[0]])
        last = s.leaves[-1]
        widest = 128 if hvx else rng.choice([16, 64])
        if last[0] not in s.ann and last[1] <= widest and rng.p(0.35):
            s.ann[last[0]] = "vectorize"
            self.steps.append(["vectorize", s.name, last[0]])
        small = [x for x in s.leaves if x[1] <= 8 and x[0] not in s.ann]
        if small and rng.p(0.25):
            ln = rng.choice(small)[0]
            s.ann[ln] = "unroll"
            self.steps.append(["unroll", s.name, ln])

    def run(self) -> list:
        rng = self.rng
        computes = [s for s in self.stages if s.kind == "compute"]
        for s in computes:
            if rng.p(0.15):
                self.cache_write(s, rng.choice(SCOPES))
        todo = list(self.stages)
        while todo:
            t = todo.pop(0)
            rs = self.readers(t)
            if rs and rng.p(0.3):
                chosen = [r for r in rs if rng.p(0.7)] or [rs[0]]
                n = len(self.stages)
                self.cache_read(t, rng.choice(SCOPES), chosen)
                if len(self.stages) > n and rng.p(0.4):  # a cache of the cache
                    todo.insert(0, self.get(f"{t.name}.{self.steps[-1][2]}"))
        for s in reversed(self.stages):
            if s.kind != "compute":
                continue
            self.place(s)
            if s.attach == "inline":
                continue
            self.transform(s)
            self.annotate(s)
            if not s.is_output:
                if rng.p(0.35):
                    self.steps.append(["set_scope", s.name, rng.choice(SCOPES)])
                if rng.p(0.08) and s.shape:
                    f = rng.int(2, 8)
                    axis = rng.int(0, len(s.shape) - 1)
                    self.steps.append(["storage_align", s.name, axis, f, rng.int(0, f - 1)])
        return self.steps


# -- cases --------------------------------------------------------------------------------------


def draw(rng: Rng, seed: int, hexagon_every: int) -> dict:
    hexagon = None
    if hexagon_every and rng.int(1, hexagon_every) == 1:
        hexagon = {"hvx": rng.choice([128, 0])}
    tensors = make_program(rng, hexagon)
    schedule = ScheduleGen(rng, tensors, hexagon).run()
    return {
        "seed": seed,
        "hexagon": hexagon,
        "data_seed": rng.int(0, 2**31),
        "tensors": tensors,
        "schedule": schedule,
    }
