"""A plain tree-walking evaluator of the loop IR: the specification `loom.ir.interpret` runs in
`mode="tree"`, and that its default compiled mode (`loom.ir.pycodegen`) is tested against.

It walks statements and expressions directly. Every scalar operation is computed by
`loom.ir.semantics`; memory is what `loom.ir.interpret` models (`Storage`, `Pointer` and its checked
helpers), so both modes raise the same `InterpreterError` for an illegal access.

A value is a tuple of lanes (one lane for a scalar). Evaluating an expression takes `need`, the
lanes that are wanted: a lane not wanted is not computed (it is None). That is how a vector
`if_then_else` evaluates only the taken side of each lane, and how a predicated load or store
touches only its true lanes. Everything else is evaluated in full: every operand of an operation,
both sides of `Select`, `And` and `Or`. Loops of every kind run serially, in order.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping

from loom.errors import InterpreterError
from loom.ir import semantics
from loom.ir.buffer import Buffer
from loom.ir.expr import BinaryOp, BufferLoad, Call, CallKind, CompareOp, LogicalOp, PrimExpr, Var
from loom.ir.function import PrimFunc
from loom.ir.pycodegen import check_params
from loom.ir.stmt import BufferStore, Stmt
from loom.ir.storage import (
    Pointer,
    address_of,
    allocate,
    check_loop,
    extern_result,
    lookup_extern,
    out_of_bounds,
    unbound_storage,
    view,
)
from loom.ir.visitor import post_order_visit

__all__ = ["evaluate", "evaluator"]

Lanes = tuple  # the lanes of one value
_MISSING = object()


def evaluator(func: PrimFunc) -> tuple[Callable, tuple[bool, ...]]:
    """What `interpret` runs in tree mode: a function taking the prepared arguments (a `Storage`
    per buffer parameter, a value per scalar one) and the externs mapping, and per parameter
    whether the run may write it (so that only those arrays are copied back)."""
    check_params(func)

    def run(*args) -> None:
        *params, externs = args
        # like native code, look up every extern symbol before running
        found = {name: lookup_extern(externs, name, func.name) for name in _extern_symbols(func)}
        _Evaluator(found, func.name).call(func, params)

    return run, _may_write(func)


def evaluate(e: PrimExpr, values: Mapping[Var, object] | None = None, externs=None):
    """The value of the expression `e` (a tuple for a vector) with its variables bound to
    `values` (a vector's value a tuple; a buffer's data variable a `Pointer`, which the buffer
    then views); `externs` as for `interpret`."""
    walker = _Evaluator(externs or {}, "evaluate")
    for var, value in (values or {}).items():
        walker.env[var] = value if var.dtype.is_vector else (value,)
    lanes = walker.eval(e)
    return lanes if e.dtype.is_vector else lanes[0]


def _may_write(func: PrimFunc) -> tuple[bool, ...]:
    """Per parameter: is it a buffer that is stored to, or may a pointer into memory escape?"""
    stored: set[Var] = set()
    escapes = False

    def note(n) -> None:
        nonlocal escapes
        if isinstance(n, BufferStore):
            stored.add(n.buffer.data)
        elif isinstance(n, Var) and n.dtype.is_handle:
            escapes = True
        elif isinstance(n, Call) and n.op == "address_of" and n.kind == CallKind.INTRINSIC:
            escapes = True

    post_order_visit(func.body, note)
    return tuple(isinstance(p, Buffer) and (escapes or p.data in stored) for p in func.params)


def _lanewise(fn: Callable, need: Lanes, *operands: Lanes) -> Lanes:
    """`fn` applied lane by lane to the wanted lanes of the operands."""
    return tuple(fn(*lane) if wanted else None for wanted, *lane in zip(need, *operands))


def _binary(op: str, x, y, dt):
    value = semantics.binary(op, x, y, dt)
    return semantics.fit(value, dt) if dt.is_bool else value  # bool: 0/1 becomes False/True


class _Evaluator:
    def __init__(self, externs: Mapping[str, Callable], name: str) -> None:
        self.externs = externs
        self.name = name  # of the function run, for messages
        self.env: dict[Var, Lanes] = {}  # the value of each bound variable

    def call(self, func: PrimFunc, args: list) -> None:
        for param, arg in zip(func.params, args):
            if isinstance(param, Buffer):  # its data variable points at the argument's storage
                self.env[param.data] = (Pointer(arg, 0),)
            else:
                self.env[param] = (arg,)
        self.run(func.body)

    @contextlib.contextmanager
    def bound(self, var: Var, value: Lanes):
        old = self.env.get(var, _MISSING)
        self.env[var] = value
        try:
            yield
        finally:
            if old is _MISSING:
                del self.env[var]
            else:
                self.env[var] = old

    # -- statements --------------------------------------------------------------------------
    def run(self, s: Stmt) -> None:
        method = _RUN.get(type(s)) or _run_method(s)
        method(self, s)

    def run_SeqStmt(self, s) -> None:
        for child in s.seq:
            self.run(child)

    def run_AttrStmt(self, s) -> None:
        self.run(s.body)

    def run_For(self, s) -> None:
        var = s.loop_var
        lo, extent = self.scalar(s.min), self.scalar(s.extent)
        check_loop(lo, extent, var.dtype, var.name)
        with self.bound(var, (lo,)):
            for value in range(lo, lo + extent):
                self.env[var] = (value,)
                self.run(s.body)

    def run_LetStmt(self, s) -> None:
        with self.bound(s.var, self.eval(s.value)):
            self.run(s.body)

    def run_AssertStmt(self, s) -> None:
        if not self.scalar(s.condition):
            raise InterpreterError(s.message if s.message is not None else "a runtime call failed")
        self.run(s.body)

    def run_DeferStmt(self, s) -> None:
        try:
            self.run(s.body)
        finally:
            self.run(s.cleanup)

    def run_IfThenElse(self, s) -> None:
        if self.scalar(s.condition):
            self.run(s.then_case)
        elif s.else_case is not None:
            self.run(s.else_case)

    def run_Evaluate(self, s) -> None:
        self.eval(s.value)

    def run_Allocate(self, s) -> None:
        b = s.buffer
        storage = allocate(b.name, b.dtype, self.scalar(b.storage_elements()))
        with self.bound(b.data, (Pointer(storage, 0),)):
            self.run(s.body)

    def run_BufferStore(self, s) -> None:
        b, n = s.buffer, s.value.dtype.lanes
        memory = self.memory(b)
        values = self.eval(s.value)  # all lanes are read before any is written
        indices = [self.lanes(i, (True,) * n) for i in s.indices]
        predicate = self.eval(s.predicate) if s.predicate is not None else (True,) * n
        for k in range(n):
            if predicate[k]:
                lane = k if n > 1 else None
                offset = self.element(b, memory, [i[k] for i in indices], "write", lane)
                memory[1][offset] = values[k]

    # -- memory --------------------------------------------------------------------------------
    def memory(self, b: Buffer) -> tuple:
        """Storage, its list, the element offset of the buffer's start, and the list's length."""
        pointer = self.env.get(b.data)
        if pointer is None:
            raise unbound_storage(b)
        return view(pointer[0], b.dtype, b.data.name)

    def offset(self, b: Buffer, base: int, indices: list[int]) -> tuple[int, list[int]]:
        """The element offset of `b[indices]`, and the buffer's strides."""
        strides = [self.scalar(s) for s in _element_strides(b)]
        return base + sum(i * s for i, s in zip(indices, strides)), strides

    def element(self, b: Buffer, memory: tuple, indices: list[int], what: str, lane) -> int:
        """The checked offset of the element `b[indices]` in its storage's list."""
        _, data, base, size = memory
        offset, strides = self.offset(b, base, indices)
        inside = 0 <= offset < size
        if b.ndim >= 2:  # each index within its dimension, too
            shape = [self.scalar(extent) for extent in b.shape]
            inside = inside and all(0 <= i < extent for i, extent in zip(indices, shape))
        if not inside:
            shape = [self.scalar(extent) for extent in b.shape]
            out_of_bounds(b.name, what, indices, shape, strides, base, size, lane)
        return offset

    # -- expressions -------------------------------------------------------------------------
    def eval(self, e: PrimExpr, need: Lanes | None = None) -> Lanes:
        """The lanes of `e`; a lane whose `need` is false is not computed (it is None)."""
        if need is None:
            need = (True,) * e.dtype.lanes
        elif not any(need):
            return (None,) * e.dtype.lanes
        method = _EVAL.get(type(e)) or _eval_method(e)
        return method(self, e, need)

    def scalar(self, e: PrimExpr):
        if e.dtype.is_vector:
            raise InterpreterError(f"expected a scalar, got the {e.dtype} expression {e}")
        return self.eval(e)[0]

    def part(self, e: PrimExpr, need: Lanes) -> Lanes:
        """An operand of an expression whose wanted lanes are `need`: a scalar operand of a
        vector expression is needed whole."""
        return self.eval(e, need if e.dtype.lanes == len(need) else None)

    def lanes(self, e: PrimExpr, need: Lanes) -> Lanes:
        """`part`, with a scalar repeated to every lane."""
        value = self.part(e, need)
        return value * len(need) if len(value) < len(need) else value

    def eval_Var(self, e: Var, need: Lanes) -> Lanes:
        value = self.env.get(e)
        if value is None:
            raise InterpreterError(
                f"variable {e.name} is used but not bound (not a parameter, loop variable, "
                "let, or the data of a bound buffer)"
            )
        return value

    def eval_IntImm(self, e, need: Lanes) -> Lanes:
        if e.dtype.is_handle:
            if e.value != 0:
                raise InterpreterError(f"the interpreter has no pointer for address {e.value}")
            return (None,)  # the null pointer
        return (semantics.fit(e.value, e.dtype),)

    def eval_FloatImm(self, e, need: Lanes) -> Lanes:
        return (semantics.fit(e.value, e.dtype),)

    def eval_StringImm(self, e, need: Lanes) -> Lanes:
        return (e.value,)

    def eval_binary(self, e: BinaryOp, need: Lanes) -> Lanes:
        op, dt = type(e).__name__, e.dtype.element
        a, b = self.eval(e.a, need), self.eval(e.b, need)
        return _lanewise(lambda x, y: _binary(op, x, y, dt), need, a, b)

    def eval_compare(self, e: CompareOp, need: Lanes) -> Lanes:
        op = type(e).__name__
        a, b = self.eval(e.a, need), self.eval(e.b, need)
        return _lanewise(lambda x, y: semantics.compare(op, x, y), need, a, b)

    def eval_logical(self, e: LogicalOp, need: Lanes) -> Lanes:
        a, b = self.eval(e.a, need), self.eval(e.b, need)  # both sides, always
        if type(e).__name__ == "And":
            return _lanewise(lambda x, y: x and y, need, a, b)
        return _lanewise(lambda x, y: x or y, need, a, b)

    def eval_Not(self, e, need: Lanes) -> Lanes:
        return _lanewise(lambda x: not x, need, self.eval(e.a, need))

    def eval_Select(self, e, need: Lanes) -> Lanes:
        cond = self.lanes(e.condition, need)
        t, f = self.eval(e.true_value, need), self.eval(e.false_value, need)  # both sides
        return _lanewise(lambda c, x, y: x if c else y, need, cond, t, f)

    def eval_Cast(self, e, need: Lanes) -> Lanes:
        src, dst = e.value.dtype.element, e.dtype.element
        return _lanewise(lambda x: semantics.cast(x, src, dst), need, self.eval(e.value, need))

    def eval_Ramp(self, e, need: Lanes) -> Lanes:
        dt = e.dtype.element
        base, stride = self.scalar(e.base), self.scalar(e.stride)

        def lane(k: int):  # base, then base + k * stride computed in the dtype
            if k == 0:
                return base
            step = semantics.binary("Mul", stride, semantics.fit(k, dt), dt)
            return semantics.binary("Add", base, step, dt)

        return tuple(lane(k) if wanted else None for k, wanted in enumerate(need))

    def eval_Broadcast(self, e, need: Lanes) -> Lanes:
        return (self.scalar(e.value),) * e.lanes

    def eval_Let(self, e, need: Lanes) -> Lanes:
        # lane k of the body needs lane k of the value, unless an extern call takes it whole
        value = self.eval(e.value) if _calls_extern(e.body) else self.part(e.value, need)
        with self.bound(e.var, value):
            return self.eval(e.body, need)

    def eval_BufferLoad(self, e: BufferLoad, need: Lanes) -> Lanes:
        b, n = e.buffer, e.dtype.lanes
        memory = self.memory(b)
        indices = [self.lanes(i, need) for i in e.indices]
        predicate = self.eval(e.predicate, need) if e.predicate is not None else need
        zero = semantics.fit(0, b.dtype)  # the value of a lane the predicate masks
        out = []
        for k in range(n):
            if not need[k]:
                out.append(None)
            elif predicate[k]:
                lane = k if n > 1 else None
                offset = self.element(b, memory, [i[k] for i in indices], "read", lane)
                out.append(memory[1][offset])
            else:
                out.append(zero)
        return tuple(out)

    # -- calls -------------------------------------------------------------------------------
    def eval_Call(self, e: Call, need: Lanes) -> Lanes:
        if e.kind == CallKind.EXTERN:
            return self.call_extern(e)
        if e.kind != CallKind.INTRINSIC:
            raise InterpreterError(f"the interpreter cannot call the function {e.op}: {e}")
        method = getattr(self, "intrinsic_" + e.op, None)
        if method is not None:
            return method(e, need)
        if e.op in semantics.MATH:
            fn, dt = semantics.MATH[e.op], e.dtype.element
            args = [self.eval(a, need) for a in e.args]
            return _lanewise(lambda *xs: semantics.fit(fn(*xs), dt), need, *args)
        raise InterpreterError(f"the interpreter does not implement the intrinsic {e.op}")

    def call_extern(self, e: Call) -> Lanes:
        """One call with every lane of every argument (a vector as a tuple)."""
        args = [self.eval(a) for a in e.args]
        fn = lookup_extern(self.externs, e.op, self.name)
        result = fn(*(a if len(a) > 1 else a[0] for a in args))
        value = extern_result(result, e.dtype, e.op)
        return value if e.dtype.is_vector else (value,)

    def intrinsic_if_then_else(self, e: Call, need: Lanes) -> Lanes:
        cond = self.lanes(e.args[0], need)
        t = self.eval(e.args[1], tuple(w and bool(c) for w, c in zip(need, cond)))
        f = self.eval(e.args[2], tuple(w and not c for w, c in zip(need, cond)))
        return _lanewise(lambda c, x, y: x if c else y, need, cond, t, f)

    def intrinsic_require(self, e: Call, need: Lanes) -> Lanes:
        cond = self.lanes(e.args[0], need)
        if not all(c for w, c in zip(need, cond) if w):
            raise InterpreterError(e.args[2].value)
        return self.eval(e.args[1], need)

    def intrinsic_reinterpret(self, e: Call, need: Lanes) -> Lanes:
        src, dst = e.args[0].dtype, e.dtype
        if src.lanes != dst.lanes:
            raise InterpreterError(f"reinterpret across lane counts is not supported: {e}")
        value = self.eval(e.args[0], need)
        return _lanewise(lambda x: semantics.reinterpret(x, src.element, dst.element), need, value)

    def intrinsic_likely(self, e: Call, need: Lanes) -> Lanes:
        return self.eval(e.args[0], need)

    intrinsic_arithmetic_fence = intrinsic_likely

    def intrinsic_fabs(self, e: Call, need: Lanes) -> Lanes:
        # semantics.MATH has no fabs: the absolute value of a float is exact in every float type
        return _lanewise(abs, need, self.eval(e.args[0], need))

    def intrinsic_isnullptr(self, e: Call, need: Lanes) -> Lanes:
        return (self.scalar(e.args[0]) is None,)

    def intrinsic_prefetch(self, e: Call, need: Lanes) -> Lanes:
        self.scalar(e.args[0])  # a hint: no effect but the check of its address
        return (0,)

    intrinsic_prefetch_write = intrinsic_prefetch

    def intrinsic_address_of(self, e: Call, need: Lanes) -> Lanes:
        load = e.args[0]
        if load.dtype.is_vector:
            raise InterpreterError(f"address_of a vector access is not supported: {e}")
        storage, _, base, size = self.memory(load.buffer)
        offset, _ = self.offset(load.buffer, base, [self.scalar(i) for i in load.indices])
        return (address_of(storage, offset, size, load.buffer.name),)


@functools.lru_cache(maxsize=256)
def _element_strides(b: Buffer) -> tuple[PrimExpr, ...]:
    return b.element_strides()


# -- dispatch on the node's class: the method named after it (cached per class) ----------------
_RUN: dict[type, Callable] = {}
_EVAL: dict[type, Callable] = {}


def _run_method(s: Stmt) -> Callable:
    method = getattr(_Evaluator, "run_" + type(s).__name__, None)
    if method is None:
        raise InterpreterError(f"the interpreter cannot run a {type(s).__name__} statement")
    _RUN[type(s)] = method
    return method


def _eval_method(e: PrimExpr) -> Callable:
    method = getattr(_Evaluator, "eval_" + type(e).__name__, None)
    if method is None:
        if isinstance(e, BinaryOp):
            method = _Evaluator.eval_binary
        elif isinstance(e, CompareOp):
            method = _Evaluator.eval_compare
        elif isinstance(e, LogicalOp):
            method = _Evaluator.eval_logical
        else:
            raise InterpreterError(f"the interpreter cannot evaluate {type(e).__name__}: {e}")
    _EVAL[type(e)] = method
    return method


@functools.lru_cache(maxsize=1024)
def _calls_extern(e: PrimExpr) -> bool:
    return bool(_extern_symbols(e))


def _extern_symbols(func: PrimFunc | PrimExpr) -> list[str]:
    found: list[str] = []

    def note(n) -> None:
        if isinstance(n, Call) and n.kind == CallKind.EXTERN and n.op not in found:
            found.append(n.op)

    post_order_visit(func.body if isinstance(func, PrimFunc) else func, note)
    return found
