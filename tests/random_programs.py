"""Random small tensor programs with random valid schedules, and their numpy reference.

A program is: inputs X0..Xk of one shape and dtype; a first stage T applying a random
expression tree to the inputs; an output stage that either reduces T over its last axis or
combines T with a shifted read of itself. Schedules draw from every primitive: split by factor
or nparts (rarely dividing), fuse, reorder, vectorize, unroll, parallel, inline / compute_at /
root, cache_read, cache_write, set_scope.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from loom import te
from loom.ir import op as irop

DTYPES = ["int8", "int32", "float32"]
SCOPES = ["global", "local", "shared"]


@dataclasses.dataclass
class Program:
    schedule: object
    args: list
    inputs: list[np.ndarray]
    expected: np.ndarray
    dtype: str
    description: list[str]


def _leaf(draw, inputs, idx, dtype):
    if draw(st.integers(0, 4)) == 0:
        value = draw(st.integers(-4, 4))
        return irop.const(value if dtype != "float32" else value * 0.5, dtype), (
            lambda arrays, v=value: np.asarray(v if dtype != "float32" else v * 0.5, dtype)
        )
    k = draw(st.integers(0, len(inputs) - 1))
    return inputs[k](*idx), (lambda arrays, k=k: arrays[k])


def _tree(draw, inputs, idx, dtype, depth):
    """A random expression and the numpy function computing the same thing."""
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return _leaf(draw, inputs, idx, dtype)
    op = draw(st.sampled_from(["add", "sub", "mul", "min", "max", "select"]))
    a, fa = _tree(draw, inputs, idx, dtype, depth - 1)
    b, fb = _tree(draw, inputs, idx, dtype, depth - 1)
    if op == "add":
        return a + b, lambda x: (fa(x) + fb(x)).astype(dtype)
    if op == "sub":
        return a - b, lambda x: (fa(x) - fb(x)).astype(dtype)
    if op == "mul":
        return a * b, lambda x: (fa(x) * fb(x)).astype(dtype)
    if op == "min":
        return irop.min_(a, b), lambda x: np.minimum(fa(x), fb(x)).astype(dtype)
    if op == "max":
        return irop.max_(a, b), lambda x: np.maximum(fa(x), fb(x)).astype(dtype)
    return te.select(a < b, b, a), lambda x: np.where(fa(x) < fb(x), fb(x), fa(x)).astype(dtype)


def _transform_loops(draw, stage, what, log):
    """A few random loop transformations of one stage."""
    for _ in range(draw(st.integers(0, 3))):
        leaves = list(stage.leaf_iter_vars)
        kind = draw(st.sampled_from(["split", "nparts", "fuse", "reorder"]))
        if kind in ("split", "nparts"):
            iv = leaves[draw(st.integers(0, len(leaves) - 1))]
            amount = draw(st.integers(1, 5))
            if kind == "split":
                stage.split(iv, factor=amount)
            else:
                stage.split(iv, nparts=amount)
            log.append(f"{what}.split({iv.name}, {kind}={amount})")
        elif kind == "fuse" and len(leaves) >= 2:
            k = draw(st.integers(0, len(leaves) - 2))
            if leaves[k].kind == leaves[k + 1].kind:
                stage.fuse(leaves[k], leaves[k + 1])
                log.append(f"{what}.fuse({leaves[k].name}, {leaves[k + 1].name})")
        elif kind == "reorder" and len(leaves) >= 2:
            order = draw(st.permutations(leaves))
            stage.reorder(*order)
            log.append(f"{what}.reorder{tuple(v.name for v in order)}")


def _annotate(draw, stage, what, log):
    leaves = stage.leaf_iter_vars
    if not leaves or draw(st.booleans()):
        return
    iv = leaves[draw(st.integers(0, len(leaves) - 1))]
    kind = draw(st.sampled_from(["vectorize", "unroll", "parallel"]))
    if kind == "parallel" and iv.is_reduce:
        kind = "unroll"
    getattr(stage, kind)(iv)
    log.append(f"{what}.{kind}({iv.name})")


def _place(draw, s, stage, consumer, what, log, allow_inline=True):
    choice = draw(st.sampled_from(["root", "at", "inline"] if allow_inline else ["root", "at"]))
    if choice == "inline":
        stage.compute_inline()
    elif choice == "at":
        leaves = consumer.leaf_iter_vars
        iv = leaves[draw(st.integers(0, len(leaves) - 1))]
        stage.compute_at(consumer, iv)
        choice = f"at {consumer.name}.{iv.name}"
    log.append(f"{what}: {choice}")


def draw_program(draw) -> Program:
    dtype = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.integers(1, 7)) for _ in range(draw(st.integers(1, 2))))
    n_inputs = draw(st.integers(1, 3))
    inputs = [te.placeholder(shape, name=f"X{k}", dtype=dtype) for k in range(n_inputs)]
    log = [f"{dtype}{list(shape)} inputs={n_inputs}"]

    body_fn = {}

    def rule(*idx):
        expr, fn = _tree(draw, inputs, idx, dtype, 3)
        body_fn["f"] = fn
        return expr

    T = te.compute(shape, rule, name="T")
    last = shape[-1]
    if draw(st.booleans()):
        reducer = draw(st.sampled_from(["sum", "max", "min"]))
        k = te.reduce_axis(last, name="k")
        out_shape = shape[:-1] or (1,)

        def reduce_rule(*i):
            lead = i if len(shape) > 1 else ()
            return getattr(te, reducer)(T(*lead, k), axis=k)

        out = te.compute(out_shape, reduce_rule, name="Out")
        np_reduce = {"sum": np.sum, "max": np.max, "min": np.min}[reducer]

        def reference(t):
            r = np_reduce(
                t.astype(np.float64) if dtype == "float32" else t,
                axis=-1,
                **({"dtype": dtype} if reducer == "sum" and dtype != "float32" else {}),
            )
            return np.asarray(r).reshape(out_shape)

        log.append(f"Out = {reducer} over k")
    else:

        def shifted_rule(*i):
            nxt = irop.min_(i[-1] + 1, last - 1)
            return T(*i) + T(*i[:-1], nxt) * irop.const(2, dtype)

        out = te.compute(shape, shifted_rule, name="Out")

        def reference(t):
            shifted = np.concatenate([t[..., 1:], t[..., -1:]], axis=-1)
            return (t + shifted * np.asarray(2, dtype)).astype(dtype)

        log.append("Out = T[i] + 2 * T[min(i + 1, n - 1)]")

    s = te.create_schedule(out.op)
    if draw(st.integers(0, 3)) == 0 and inputs[0] in T.op.input_tensors:
        cache = s.cache_read(inputs[0], draw(st.sampled_from(SCOPES)), [T])
        log.append("cache_read X0")
    else:
        cache = None
    if draw(st.integers(0, 3)) == 0:
        out_local = s.cache_write(out, draw(st.sampled_from(SCOPES)))
        log.append("cache_write Out")
    else:
        out_local = None
    target = s[out_local] if out_local is not None else s[out]
    _transform_loops(draw, s[out], "Out", log)
    if out_local is not None:
        _transform_loops(draw, target, "Out.local", log)
        _place(draw, s, target, s[out], "Out.local", log, allow_inline=False)
    _transform_loops(draw, s[T], "T", log)
    _place(draw, s, s[T], target, "T", log)
    s[T].set_scope(draw(st.sampled_from(SCOPES)))
    if cache is not None:
        # a stage cannot be computed inside an inlined one: then the cache's reader is Out
        reader = s[T] if s[T].attach_type != "inline" else target
        _place(draw, s, s[cache], reader, "X0.cache", log, allow_inline=False)
    for stage, what in ((s[out], "Out"), (target, "Out.local"), (s[T], "T")):
        _annotate(draw, stage, what, log)

    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype == "float32":
        arrays = [rng.uniform(-2, 2, shape).astype(np.float32) for _ in inputs]
    else:
        arrays = [rng.integers(-20, 20, shape).astype(dtype) for _ in inputs]
    with np.errstate(over="ignore"):
        t = body_fn["f"](arrays)
        t = np.broadcast_to(t, shape).astype(dtype)
        expected = reference(t)
    out_array = np.zeros(out.shape, dtype)
    return Program(s, [*inputs, out], [*arrays, out_array], expected, dtype, log)
