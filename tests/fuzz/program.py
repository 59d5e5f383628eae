"""A case as a loom.te program (the code that runs is the code that is printed), and running
it on one back end."""

from __future__ import annotations

import numpy as np

from tests.fuzz import oracle
from tests.fuzz.generate import BIT_REDUCERS, Rng, draw, var_name

BACKENDS = ("interp", "llvm", "c", "hexagon")
HEXAGON_EVERY = 20
FUNC = "fuzz"

_SIMPLE = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "floormod": "%"}
_SIMPLE.update({"and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>"})
_CALLS = {
    "truncmod": "op.truncmod", "min": "op.min_", "max": "op.max_", "lt": "te.less",
    "le": "te.less_equal", "gt": "te.greater", "ge": "te.greater_equal", "eq": "te.equal",
    "ne": "te.not_equal", "land": "op.logical_and", "lor": "op.logical_or",
    "lnot": "op.logical_not", "select": "te.select", "ite": "te.if_then_else", "abs": "te.abs",
    "exp": "te.exp", "log": "te.log", "sqrt": "te.sqrt", "tanh": "te.tanh",
    "sigmoid": "te.sigmoid", "erf": "te.erf", "pow": "te.pow", "floor": "te.floor",
    "ceil": "te.ceil", "round": "te.round",
}  # fmt: skip


_REDUCER_CODE = {
    "bit_or": 'te.comm_reducer(lambda a, b: a | b, lambda dt: te.const(0, dt), name="bit_or")',
    "bit_and": 'te.comm_reducer(lambda a, b: a & b, lambda dt: ~te.const(0, dt), name="bit_and")',
    "bit_xor": 'te.comm_reducer(lambda a, b: a ^ b, lambda dt: te.const(0, dt), name="bit_xor")',
}


def make_case(seed: int, hexagon_every: int = HEXAGON_EVERY, max_attempts: int = 200):
    """The case of `seed` and its `oracle.Expected`. Cases whose result the semantics leave
    undefined, or that rounding could decide, are drawn again from the same random stream."""
    rng = Rng(seed)
    last = None
    for _ in range(max_attempts):
        case = draw(rng, seed, hexagon_every)
        try:
            return case, oracle.evaluate(case)
        except oracle.Reject as e:
            last = e
    raise RuntimeError(f"seed {seed}: no valid case in {max_attempts} draws (last: {last})")


def expr_code(node, axes: dict) -> str:
    op = node[0]
    if op == "const":
        return f'te.const({node[1]!r}, "{node[2]}")'
    if op == "axis":
        return axes[node[1]]
    if op == "load":
        return f"{var_name(node[1])}[{', '.join(expr_code(i, axes) for i in node[2])}]"
    if op == "cast":
        return f'te.cast({expr_code(node[2], axes)}, "{node[1]}")'
    args = [expr_code(x, axes) for x in node[1:]]
    if op in _SIMPLE:
        return f"({args[0]} {_SIMPLE[op]} {args[1]})"
    if op == "neg":
        return f"(-{args[0]})"
    if op == "bitnot":
        return f"(~{args[0]})"
    if op == "trunc":
        return f'op.math_call("trunc", {args[0]})'
    return f"{_CALLS[op]}({', '.join(args)})"


def _stage_code(t: dict) -> list[str]:
    v = var_name(t["name"])
    shape = ", ".join(map(str, t["shape"])) + ("," if len(t["shape"]) == 1 else "")
    params = ", ".join(f"i{n}" for n in range(len(t["shape"])))
    axes = {f"i{n}": f"i{n}" for n in range(len(t["shape"]))}
    lines = []
    red = t["reduce"]
    if red:
        for n, e in enumerate(red["axes"]):
            axes[f"k{n}"] = f"{v}_k{n}"
            lines.append(f'{v}_k{n} = te.reduce_axis({e}, name="k{n}")')
        body = expr_code(t["body"], axes)
        extra = "".join(
            f", {key}={expr_code(red[key], axes)}" for key in ("where", "init") if red[key]
        )
        ks = ", ".join(f"{v}_k{n}" for n in range(len(red["axes"])))
        reducer = red["op"] if red["op"] in BIT_REDUCERS else f"te.{red['op']}"
        body = f"{reducer}({body}, axis=[{ks}]{extra})"
    else:
        body = expr_code(t["body"], axes)
    lines.append(f'{v} = te.compute(({shape}), lambda {params}: {body}, name="{t["name"]}")')
    return lines


def to_code(case: dict) -> str:
    """The case as a Python program that defines `s` (the schedule) and `args`."""
    lines = ["import loom", "from loom import te", "from loom.ir import op", ""]
    used = {t["reduce"]["op"] for t in case["tensors"] if t.get("reduce")}
    for name in BIT_REDUCERS:
        if name in used:
            lines.append(f"{name} = {_REDUCER_CODE[name]}")
    dims = {}  # stage -> (data axes, reduction axes)
    for t in case["tensors"]:
        v = var_name(t["name"])
        if t["kind"] == "input":
            shape = ", ".join(map(str, t["shape"])) + ("," if len(t["shape"]) == 1 else "")
            lines.append(f'{v} = te.placeholder(({shape}), dtype="{t["dtype"]}", name="{v}")')
        else:
            lines += _stage_code(t)
            dims[t["name"]] = (len(t["shape"]), len(t["reduce"]["axes"]) if t["reduce"] else 0)
        dims.setdefault(t["name"], (len(t["shape"]), 0))
    out = var_name(case["tensors"][-1]["name"])
    lines += ["", f"s = te.create_schedule({out}.op)"]
    bound = set()

    def leaves(stage: str) -> str:
        sv = var_name(stage)
        if stage not in bound:
            bound.add(stage)
            nd, nr = dims[stage]
            lines.append(f"[{', '.join(f'{sv}_i{n}' for n in range(nd))}] = s[{sv}].op.axis")
            if nr:
                ks = ", ".join(f"{sv}_k{n}" for n in range(nr))
                lines.append(f"[{ks}] = s[{sv}].op.reduce_axis")
        return sv

    for step in case["schedule"]:
        kind, stage = step[0], step[1]
        sv = var_name(stage)
        if kind == "cache_write":
            new = f"{stage}.{step[2]}"
            dims[new], dims[stage] = dims[stage], (dims[stage][0], 0)
            lines.append(f'{var_name(new)} = s.cache_write({sv}, "{step[2]}")')
        elif kind == "cache_read":
            new = f"{stage}.{step[2]}"
            dims[new] = (dims[stage][0], 0)
            readers = ", ".join(var_name(r) for r in step[3])
            lines.append(f'{var_name(new)} = s.cache_read({sv}, "{step[2]}", [{readers}])')
        elif kind == "split":
            leaves(stage)
            _, _, leaf, how, amount, o, i = step
            lines.append(f"{sv}_{o}, {sv}_{i} = s[{sv}].split({sv}_{leaf}, {how}={amount})")
        elif kind == "fuse":
            leaves(stage)
            lines.append(f"{sv}_{step[4]} = s[{sv}].fuse({sv}_{step[2]}, {sv}_{step[3]})")
        elif kind == "reorder":
            leaves(stage)
            lines.append(f"s[{sv}].reorder({', '.join(f'{sv}_{x}' for x in step[2])})")
        elif kind == "tile":
            leaves(stage)
            _, _, x, y, fx, fy, *names = step
            outs = ", ".join(f"{sv}_{n}" for n in names)
            lines.append(f"{outs} = s[{sv}].tile({sv}_{x}, {sv}_{y}, {fx}, {fy})")
        elif kind in ("vectorize", "unroll", "parallel"):
            leaves(stage)
            lines.append(f"s[{sv}].{kind}({sv}_{step[2]})")
        elif kind == "compute_at":
            cv = leaves(step[2])
            lines.append(f"s[{sv}].compute_at(s[{cv}], {cv}_{step[3]})")
        elif kind in ("compute_inline", "compute_root"):
            lines.append(f"s[{sv}].{kind}()")
        elif kind == "set_scope":
            lines.append(f's[{sv}].set_scope("{step[2]}")')
        elif kind == "storage_align":
            lines.append(f"s[{sv}].storage_align(s[{sv}].op.axis[{step[2]}], {step[3]}, {step[4]})")
        else:
            raise ValueError(f"unknown schedule step {step}")
    args = [var_name(t["name"]) for t in case["tensors"] if t["kind"] == "input"] + [out]
    lines += [f"args = [{', '.join(args)}]"]
    return "\n".join(lines) + "\n"


def build_schedule(case: dict):
    """Run the case's code: (schedule, args)."""
    scope: dict = {}
    exec(compile(to_code(case), f"<fuzz case {case['seed']}>", "exec"), scope)
    return scope["s"], scope["args"]


def backends(case: dict) -> list[str]:
    return ["interp", "llvm", "c"] + (["hexagon"] if case["hexagon"] else [])


def hexagon_target(case: dict):
    import loom

    return loom.target.hexagon("v66", hvx=case["hexagon"]["hvx"])


def compile_for(backend: str, s, args, case: dict, session=None):
    """Lower or build the schedule for `backend`: a function to call on the arrays."""
    import loom

    if backend == "interp":
        mod = loom.lower(s, args, name=FUNC)
        return lambda *arrays: loom.ir.interpret(mod, *arrays)
    if backend in ("llvm", "c"):
        return loom.build(s, args, target=backend, name=FUNC)[FUNC]
    if backend == "hexagon":  # (the caller unloads fn.loaded: a session holds 32 modules)
        mod = loom.build(s, args, target=hexagon_target(case), name=FUNC)
        return mod.to_device(session)[FUNC]
    raise ValueError(f"unknown back end {backend!r}; expected one of {BACKENDS}")


def arrays_for(exp: oracle.Expected, case: dict) -> list[np.ndarray]:
    """Fresh copies of the inputs and an output array filled with junk."""
    out = oracle.junk(exp.value.shape, exp.dtype, case["data_seed"] + 1)
    return [a.copy() for a in exp.inputs] + [out]


def reproduction(case: dict, backend: str | None = None, hexagon_every: int = HEXAGON_EVERY) -> str:
    """A script a developer can paste: the program, its schedule, and a run on `backend`
    compared with the oracle."""
    seed = case["seed"]
    backend = backend or "llvm"
    every = "" if hexagon_every == HEXAGON_EVERY else f", hexagon_every={hexagon_every}"
    flag = f" --hexagon-every {hexagon_every}" if every else ""
    head = (
        f"# fuzz case {seed} (python -m tests.fuzz --show {seed}{flag})\n"
        f"# inputs: numpy's default_rng({case['data_seed']}), see tests/fuzz/oracle.py\n"
    )
    if backend == "interp":
        call = f'loom.ir.interpret(loom.lower(s, args, name="{FUNC}"), *arrays)'
    elif backend == "hexagon":
        call = (
            f'mod = loom.build(s, args, target=loom.target.hexagon("v66", '
            f'hvx={case["hexagon"]["hvx"]}), name="{FUNC}")\n'
            f'with loom.device("hexagon-sim") as dev:\n    mod.to_device(dev)["{FUNC}"](*arrays)'
        )
    else:
        call = f'loom.build(s, args, target="{backend}", name="{FUNC}")["{FUNC}"](*arrays)'
    tail = (
        "\n# run on one back end and compare with the fuzzer's numpy oracle\n"
        "from tests.fuzz import oracle, program\n\n"
        f"case, expected = program.make_case({seed}{every})\n"
        "arrays = program.arrays_for(expected, case)\n"
        f"{call}\n"
        'print(oracle.compare(arrays[-1], expected) or "ok")\n'
    )
    return head + to_code(case) + tail
