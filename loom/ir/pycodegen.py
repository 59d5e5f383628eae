"""Translate a PrimFunc into the source of one Python function: the engine of `loom.ir.interpret`.

The generated function takes one argument per parameter (a `Storage` for a buffer, a Python value
for a scalar) and a mapping of extern callbacks. IR variables become Python locals, loops become
`for v in range(...)`, and each storage is a Python list of element values. Every value is kept in
the value set of its dtype (integers wrapped, floats rounded) by the functions of
`loom.ir.semantics`; the Python operators inlined here (`+`, `//`, `<`, ...) are only used where
they give exactly what `semantics` would, each with a comment saying why (a precondition, if
any, proven by the interval analysis below). `loom.ir.evaluate` is the plain evaluator of the
same IR that the generated code is tested against (tests/ir/test_evaluate.py).

Vectors are compiled lane by lane: `gen(e)` returns one Python expression per lane. Outside the
branches of an `if_then_else` every subexpression is evaluated unconditionally, so a value needed by
several lanes is computed once into a temporary line before the statement ("hoisted"); inside such
a branch ("lazy" code) nothing is hoisted and each lane carries its own code, so only the taken
side of each lane runs.

An interval analysis (`_Intervals`) of integer expressions removes the wrap-around of index
arithmetic that provably stays in range and the bounds checks of accesses that provably hit the
buffer; every other access is checked inline.

The generated code calls these helpers, which the caller (`loom.ir.interpret`) provides as globals:
`_rf _bin _cast _fdiv _wrap` (semantics), `_IE` (InterpreterError), `_Storage _Pointer`,
`_oob _oob_ramp` (raise for an out-of-bounds access), `_view` (unpack a pointer into storage,
list, offset, size), `_addr` (address_of), `_alloc` (fresh junk-filled storage), `_check_loop`,
`_extern` (look up a callback), `_xres` (convert a callback's result), `_INF _NAN`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re

from loom.abi.dtype import DataType
from loom.errors import InterpreterError, LoomError
from loom.ir import semantics
from loom.ir.buffer import Buffer
from loom.ir.expr import (
    BinaryOp,
    Broadcast,
    BufferLoad,
    Call,
    CallKind,
    CompareOp,
    FloatImm,
    IntImm,
    Let,
    LogicalOp,
    PrimExpr,
    Ramp,
    Var,
)
from loom.ir.function import PrimFunc
from loom.ir.stmt import For, LetStmt, Stmt
from loom.ir.storage import junk_value, unbound_storage
from loom.ir.visitor import Visitor, children, post_order_visit

Range = tuple[int, int]

_SIMPLE = re.compile(r"^(?:[A-Za-z_]\w*|\d+(?:\.\d*)?(?:e[+-]?\d+)?)$")
_COMPARE = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}
_INLINE_INT = {"Add": "+", "Sub": "-", "Mul": "*"}
_INLINE_BITS = {"BitAnd": "&", "BitOr": "|", "BitXor": "^"}


@dataclasses.dataclass(frozen=True)
class GeneratedFunction:
    """The Python source of one PrimFunc and what is needed to run it."""

    name: str  # the Python function's name in `source`
    source: str
    constants: dict  # extra globals the source refers to (dtypes, math functions)
    write_back: tuple[bool, ...]  # per parameter: may the function modify this buffer?


@dataclasses.dataclass(frozen=True)
class _StorageRef:
    """How generated code reaches the storage of one data variable."""

    obj: str  # local holding the Storage object
    data: str  # local holding its list
    base: str | None  # local holding the element offset of a pointer view (None: 0)
    size: str  # code of the number of elements in the list
    size_const: int | None
    dtype: DataType
    name: str


def generate(func: PrimFunc) -> GeneratedFunction:
    """Translate `func`; raises LoomError/InterpreterError for what the interpreter cannot run."""
    return _Codegen(func).run()


def check_params(func: PrimFunc) -> None:
    """Raise LoomError for a parameter the interpreter cannot take (in either mode)."""
    for p in func.params:
        if isinstance(p, Var) and p.dtype.is_vector:
            raise LoomError(f"parameter {p.name}: the interpreter takes scalar parameters only")


def _sanitize(name: str) -> str:
    return re.sub(r"\W", "_", name) or "v"


def _full(dt: DataType) -> Range:
    return (int(dt.min_value()), int(dt.max_value()))


def _fits(r: Range | None, dt: DataType) -> bool:
    return r is not None and dt.min_value() <= r[0] and r[1] <= dt.max_value()


def _hull(a: Range | None, b: Range | None) -> Range | None:
    if a is None or b is None:
        return None
    return (min(a[0], b[0]), max(a[1], b[1]))


def _const_int(e: PrimExpr) -> int | None:
    if isinstance(e, Broadcast):
        e = e.value
    return e.value if isinstance(e, IntImm) and e.dtype.is_integer else None


def _const_float(e: PrimExpr) -> float | None:
    if isinstance(e, Broadcast):
        e = e.value
    return e.value if isinstance(e, FloatImm) else None


class _Intervals:
    """Sound value intervals of integer expressions (a vector's covers all its lanes).

    `raw(e)` is the exact interval of an operation before wrapping to the dtype (None: unknown);
    `of(e)` is the interval of the value (the whole dtype when the operation may wrap).
    """

    def __init__(self) -> None:
        self.vars: dict[Var, Range] = {}
        self.memo: dict[PrimExpr, Range | None] | None = None

    def bind(self, var: Var, r: Range | None) -> None:
        """Record the values `var` takes at one binding (the union over all bindings is kept)."""
        if not var.dtype.is_integer:
            return
        r = r if _fits(r, var.dtype) else _full(var.dtype)
        old = self.vars.get(var)
        self.vars[var] = r if old is None else _hull(old, r)

    def freeze(self) -> None:
        """Variable ranges are final from now on: results can be memoized."""
        self.memo = {}

    def of(self, e: PrimExpr) -> Range | None:
        if not e.dtype.is_integer:
            return (0, 1) if e.dtype.is_bool else None
        if self.memo is not None and e in self.memo:
            return self.memo[e]
        r = self.raw(e)
        if not _fits(r, e.dtype):
            r = _full(e.dtype)
        if self.memo is not None:
            self.memo[e] = r
        return r

    def fits(self, e: PrimExpr) -> bool:
        """True if the operation `e` provably needs no wrap-around."""
        return _fits(self.raw(e), e.dtype.element)

    def raw(self, e: PrimExpr) -> Range | None:
        if isinstance(e, IntImm):
            return (e.value, e.value)
        if isinstance(e, Var):
            return self.vars.get(e)
        if isinstance(e, BinaryOp):
            return self._binary(type(e).__name__, e)
        if isinstance(e, Broadcast | Let):
            return self.of(e.body if isinstance(e, Let) else e.value)
        if isinstance(e, Ramp):
            return self._ramp(e)
        kind = type(e).__name__
        if kind == "Cast":
            return self.of(e.value) if not e.value.dtype.is_float else None
        if kind == "Select":
            return _hull(self.of(e.true_value), self.of(e.false_value))
        if isinstance(e, Call) and e.op == "if_then_else" and e.kind == CallKind.INTRINSIC:
            return _hull(self.of(e.args[1]), self.of(e.args[2]))
        return None

    def _ramp(self, e: Ramp) -> Range | None:
        base, stride = self.of(e.base), self.of(e.stride)
        if base is None or stride is None:
            return None
        last = e.lanes - 1
        return (base[0] + min(0, last * stride[0]), base[1] + max(0, last * stride[1]))

    def _binary(self, op: str, e: BinaryOp) -> Range | None:
        a, b = self.of(e.a), self.of(e.b)
        c = _const_int(e.b)
        if a is None or b is None:
            return None
        if op == "Add":
            return (a[0] + b[0], a[1] + b[1])
        if op == "Sub":
            return (a[0] - b[1], a[1] - b[0])
        if op == "Mul":
            products = [x * y for x in a for y in b]
            return (min(products), max(products))
        if op == "Min":
            return (min(a[0], b[0]), min(a[1], b[1]))
        if op == "Max":
            return (max(a[0], b[0]), max(a[1], b[1]))
        if c is not None and c > 0:
            return self._by_positive_const(op, a, c)
        if op == "BitAnd" and (a[0] >= 0 or b[0] >= 0):
            return (0, min(r[1] for r in (a, b) if r[0] >= 0))
        return None

    @staticmethod
    def _by_positive_const(op: str, a: Range, c: int) -> Range | None:
        if op in ("FloorDiv", "Div"):
            div = (lambda x: x // c) if op == "FloorDiv" else (lambda x: semantics.truncdiv(x, c))
            return (div(a[0]), div(a[1]))
        if op in ("FloorMod", "Mod") and 0 <= a[0] and a[1] < c:
            return a
        if op == "FloorMod":
            return (0, c - 1)
        if op == "Mod":
            return (0 if a[0] >= 0 else -(c - 1), c - 1 if a[1] > 0 else 0)
        if op == "ShiftRight":
            return (a[0] >> c, a[1] >> c) if c < 64 else None
        if op == "ShiftLeft":
            return (a[0] << c, a[1] << c) if c < 64 else None
        return None


class _Scan(Visitor):
    """One pass over the function before generating code: variable ranges, which storages are
    written or escape as pointers, which extern symbols are called, which buffers view which
    storage."""

    def __init__(self, intervals: _Intervals) -> None:
        self.iv = intervals
        self.views: dict[Var, list[Buffer]] = {}
        self.stored: set[Var] = set()
        self.pointer_vars: set[Var] = set()  # handle variables used as values
        self.takes_address = False
        self.externs: list[str] = []

    def _buffer(self, b: Buffer) -> None:
        seen = self.views.setdefault(b.data, [])
        if b not in seen:
            seen.append(b)

    def visit_For(self, s: For) -> None:
        self.visit(s.min)
        self.visit(s.extent)
        self.iv.bind(s.loop_var, _loop_range(self.iv.of(s.min), self.iv.of(s.extent)))
        self.visit(s.body)

    def visit_LetStmt(self, s: LetStmt) -> None:
        self.visit(s.value)
        self.iv.bind(s.var, self.iv.of(s.value))
        self.visit(s.body)

    visit_Let = visit_LetStmt

    def visit_Allocate(self, s) -> None:
        self._buffer(s.buffer)
        self.visit(s.body)

    def visit_BufferLoad(self, e) -> None:
        self._buffer(e.buffer)
        self.generic_visit(e)

    def visit_BufferStore(self, s) -> None:
        self._buffer(s.buffer)
        self.stored.add(s.buffer.data)
        self.generic_visit(s)

    def visit_Var(self, v: Var) -> None:
        if v.dtype.is_handle:
            self.pointer_vars.add(v)

    def visit_Call(self, e: Call) -> None:
        if e.kind == CallKind.EXTERN and e.op not in self.externs:
            self.externs.append(e.op)
        if e.op == "address_of" and e.kind == CallKind.INTRINSIC:
            self.takes_address = True
        self.generic_visit(e)


def _loop_range(lo: Range | None, extent: Range | None) -> Range | None:
    if lo is None or extent is None:
        return None
    if extent[1] <= 0:
        return (lo[0], lo[0])  # the body never runs
    return (lo[0], lo[1] + extent[1] - 1)


class _Codegen:
    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.iv = _Intervals()
        self.scan = _Scan(self.iv)
        self.lines: list[str] = []
        self.depth = 1
        self.lazy = 0  # > 0 inside a branch of if_then_else: nothing may be hoisted
        self.taken: set[str] = set()
        self.ntemp = 0
        self.names: dict[Var, str] = {}  # variable -> local holding its value
        self.storage: dict[Var, _StorageRef] = {}  # data variable -> its storage
        self.constants: dict[str, object] = {}
        self.lazy_vars: set[Var] = set()  # bound by a Let inside an if_then_else branch
        self.safe: dict[PrimExpr, bool] = {}
        self.hoisted: dict[str, str] = {}  # code -> temporary holding it, in this statement

    # -- driver ------------------------------------------------------------------------------
    def run(self) -> GeneratedFunction:
        check_params(self.func)
        self.scan.visit(self.func.body)
        self.iv.freeze()
        fn_name = "_loom_" + _sanitize(self.func.name)
        params = [self.param(p) for p in self.func.params]
        for name in self.scan.externs:
            self.emit(f"_x_{name} = _extern(_externs, {name!r}, {self.func.name!r})")
        self.stmt_block(self.func.body)
        header = f"def {fn_name}({', '.join([*params, '_externs'])}):"
        source = "\n".join([header, *self.lines]) + "\n"
        escapes = self.takes_address_or_pointer()
        write_back = tuple(
            isinstance(p, Buffer) and (escapes or p.data in self.scan.stored)
            for p in self.func.params
        )
        return GeneratedFunction(fn_name, source, self.constants, write_back)

    def takes_address_or_pointer(self) -> bool:
        return self.scan.takes_address or bool(self.scan.pointer_vars)

    def param(self, p: Buffer | Var) -> str:
        if isinstance(p, Var):
            name = self.fresh("v_" + p.name)
            self.names[p] = name
            if p.dtype.is_handle:
                self.bind_view(p, name)
            return name
        obj = self.fresh("st_" + p.name)
        if all(isinstance(d, IntImm) for d in p.shape):
            size = math.prod(p.const_shape())
            self.bind_storage(p, obj, str(size), size)
        else:  # a symbolic shape: the argument's size (interpret checked it)
            size_name = self.fresh("n_" + p.name)
            self.emit(f"{size_name} = len({obj}.data)")
            self.bind_storage(p, obj, size_name, None)
        return obj

    # -- output ------------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        if line.endswith(":"):
            self.hoisted.clear()  # a temporary set inside a block may not have been set after it
        self.lines.append("    " * self.depth + line)

    def fresh(self, hint: str) -> str:
        base = _sanitize(hint)
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def temp(self) -> str:
        self.ntemp += 1
        return f"_t{self.ntemp}"

    def const(self, value: object, hint: str) -> str:
        """A global name for a Python object the code needs (a dtype, a math function)."""
        name = "_c_" + _sanitize(hint)
        self.constants[name] = value
        return name

    def dt(self, dt: DataType) -> str:
        return self.const(dt, str(dt))

    def share(self, code: str, expr: PrimExpr | None = None) -> str:
        """Code to use `code`'s value several times: a temporary when hoisting is allowed (always
        outside if_then_else branches; inside them for an `expr` that cannot fail)."""
        safe = expr is not None and self.is_safe(expr)
        if _SIMPLE.match(code) or (self.lazy and not safe):
            return code
        if safe and code in self.hoisted:
            return self.hoisted[code]
        t = self.temp()
        self.emit(f"{t} = {code}")
        if safe:
            self.hoisted[code] = t
        return t

    def shared(self, e: PrimExpr) -> str:
        """Code of scalar `e` for use in several lanes."""
        return self.share(self.scalar(e), e)

    def is_safe(self, e: PrimExpr) -> bool:
        """True if evaluating `e` cannot fail nor touch memory, and it only reads variables bound
        before the current statement: it may then be evaluated even if not needed."""
        found = self.safe.get(e)
        if found is None:
            found = _safe_node(e, self.lazy_vars) and all(self.is_safe(c) for c in children(e))
            self.safe[e] = found
        return found

    @contextlib.contextmanager
    def bound(self, table: dict, key, value):
        missing = object()
        old = table.get(key, missing)
        table[key] = value
        try:
            yield
        finally:
            if old is missing:
                del table[key]
            else:
                table[key] = old

    @contextlib.contextmanager
    def lazy_code(self):
        self.lazy += 1
        try:
            yield
        finally:
            self.lazy -= 1

    # -- storage -----------------------------------------------------------------------------
    def bind_storage(self, b: Buffer, obj: str, size: str, size_const: int | None) -> None:
        data = self.fresh("s_" + b.name)
        self.emit(f"{data} = {obj}.data")
        self.storage[b.data] = _StorageRef(obj, data, None, size, size_const, b.dtype, b.name)
        if b.data in self.scan.pointer_vars:
            pointer = self.fresh("p_" + b.name)
            self.emit(f"{pointer} = _Pointer({obj}, 0)")
            self.names[b.data] = pointer

    def bind_view(self, var: Var, value: str) -> None:
        """After a handle variable is bound to a pointer: unpack it if buffers view it."""
        buffers = self.scan.views.get(var)
        if not buffers:
            return
        dtypes = {b.dtype for b in buffers}
        if len(dtypes) > 1:
            raise InterpreterError(
                f"buffers {[b.name for b in buffers]} view the storage {var.name} as "
                f"{sorted(map(str, dtypes))}; the interpreter cannot reinterpret memory"
            )
        (dt,) = dtypes
        obj, data, base, size = (self.fresh(p + var.name) for p in ("st_", "s_", "o_", "n_"))
        self.emit(f"{obj}, {data}, {base}, {size} = _view({value}, {self.dt(dt)}, {var.name!r})")
        self.storage[var] = _StorageRef(obj, data, base, size, None, dt, var.name)

    def storage_of(self, b: Buffer) -> _StorageRef:
        ref = self.storage.get(b.data)
        if ref is None:
            raise unbound_storage(b)
        if ref.dtype != b.dtype:
            raise InterpreterError(
                f"buffer {b.name} ({b.dtype}) views the storage of {ref.name} ({ref.dtype}); "
                "the interpreter cannot reinterpret memory"
            )
        return ref

    # -- statements --------------------------------------------------------------------------
    def stmt_block(self, s: Stmt) -> None:
        """Emit `s` at the current depth (`pass` if it emits nothing)."""
        before = len(self.lines)
        self.stmt(s)
        if len(self.lines) == before:
            self.emit("pass")

    def stmt(self, s: Stmt) -> None:
        self.hoisted.clear()
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise InterpreterError(f"the interpreter cannot run a {type(s).__name__} statement")
        method(s)

    def s_SeqStmt(self, s) -> None:
        for child in s.seq:
            self.stmt(child)

    def s_AttrStmt(self, s) -> None:
        self.stmt(s.body)

    def s_For(self, s: For) -> None:
        lo = self.share(self.scalar(s.min))
        extent = self.share(self.scalar(s.extent))
        var = s.loop_var
        hull = _loop_range(self.iv.of(s.min), self.iv.of(s.extent))
        if not _fits(hull, var.dtype):
            self.emit(f"_check_loop({lo}, {extent}, {self.dt(var.dtype)}, {var.name!r})")
        name = self.fresh("v_" + var.name)
        bounds = extent if lo == "0" else f"{lo}, {lo} + {extent}"
        self.emit(f"for {name} in range({bounds}):")
        self.depth += 1
        with self.bound(self.names, var, name):
            self.stmt_block(s.body)
        self.depth -= 1

    def s_LetStmt(self, s) -> None:
        name = self.bind_value(s.var, s.value)
        with self.bound(self.names, s.var, name):
            self.stmt(s.body)

    def bind_value(self, var: Var, value: PrimExpr) -> str:
        """Emit `name = value` (a tuple for a vector) for a new binding of `var`."""
        lanes = self.gen(value)
        name = self.fresh("v_" + var.name)
        self.emit(f"{name} = {_sequence(lanes) if var.dtype.is_vector else lanes[0]}")
        if var.dtype.is_handle:
            self.bind_view(var, name)
        return name

    def s_AssertStmt(self, s) -> None:
        cond = self.scalar(s.condition)
        message = s.message if s.message is not None else "a runtime call failed"
        self.emit(f"if not {cond}:")
        self.emit(f"    raise _IE({message!r})")
        self.stmt(s.body)

    def s_DeferStmt(self, s) -> None:
        self.emit("try:")
        self.depth += 1
        self.stmt_block(s.body)
        self.depth -= 1
        self.emit("finally:")
        self.depth += 1
        self.stmt_block(s.cleanup)
        self.depth -= 1

    def s_IfThenElse(self, s) -> None:
        self.emit(f"if {self.scalar(s.condition)}:")
        self.depth += 1
        self.stmt_block(s.then_case)
        self.depth -= 1
        if s.else_case is not None:
            self.emit("else:")
            self.depth += 1
            self.stmt_block(s.else_case)
            self.depth -= 1

    def s_Evaluate(self, s) -> None:
        if isinstance(s.value, IntImm | FloatImm):
            return
        lanes = self.gen(s.value)
        self.emit(lanes[0] if len(lanes) == 1 else _tuple(lanes))

    def s_Allocate(self, s) -> None:
        b = s.buffer
        count = b.storage_elements()
        obj = self.fresh("st_" + b.name)
        junk = _literal(junk_value(b.dtype))
        if isinstance(count, IntImm) and count.value >= 0:
            size, size_const = str(count.value), count.value
            self.emit(f"{obj} = _Storage({b.name!r}, {self.dt(b.dtype)}, [{junk}] * {size})")
        else:
            size, size_const = self.fresh("n_" + b.name), None
            self.emit(f"{obj} = _alloc({b.name!r}, {self.dt(b.dtype)}, {self.scalar(count)})")
            self.emit(f"{size} = len({obj}.data)")
        with self.bound(self.storage, b.data, None), self.bound(self.names, b.data, None):
            self.bind_storage(b, obj, size, size_const)
            self.stmt(s.body)

    def s_BufferStore(self, s) -> None:
        b, n = s.buffer, s.value.dtype.lanes
        ref = self.storage_of(b)
        lanes = self.gen(s.value)
        if n > 1 and s.predicate is None and self.store_contiguous(s, ref, lanes):
            return
        if n > 1:  # all lanes are read before any is written
            values = self.share(_sequence(lanes))
            lanes = [f"{values}[{k}]" for k in range(n)]
        indices = [self.index_lanes(i, n, pin=n > 1) for i in s.indices]
        pred = self.gen(s.predicate) if s.predicate is not None else None
        for k in range(n):
            checks, offset, error = self.lane_access(
                b, ref, [d[k] for d in indices], s.indices, "write", k if n > 1 else None
            )
            if pred is not None:
                self.emit(f"if {pred[k]}:")
                self.depth += 1
            self.emit_checked_store(ref, checks, offset, lanes[k], error)
            if pred is not None:
                self.depth -= 1

    def emit_checked_store(self, ref, checks, offset, value, error) -> None:
        if not checks:
            self.emit(f"{ref.data}[{offset}] = {value}")
            return
        self.emit(f"if {' and '.join(checks)}:")
        self.emit(f"    {ref.data}[{offset}] = {value}")
        self.emit("else:")
        self.emit(f"    {error}")

    # -- expressions -------------------------------------------------------------------------
    def gen(self, e: PrimExpr) -> list[str]:
        """One Python expression per lane of `e` (each fully parenthesized)."""
        method = getattr(self, "g_" + type(e).__name__, None)
        if method is not None:
            return method(e)
        if isinstance(e, CompareOp):
            return self.g_compare(e)
        if isinstance(e, LogicalOp):
            return self.g_logical(e)
        if isinstance(e, BinaryOp):
            return self.g_binary(e)
        raise InterpreterError(f"the interpreter cannot evaluate {type(e).__name__}: {e}")

    def scalar(self, e: PrimExpr) -> str:
        if e.dtype.is_vector:
            raise InterpreterError(f"expected a scalar, got the {e.dtype} expression {e}")
        return self.gen(e)[0]

    def g_Var(self, e: Var) -> list[str]:
        name = self.names.get(e)
        if name is None:
            raise InterpreterError(
                f"variable {e.name} is used but not bound (not a parameter, loop variable, "
                "let, or the data of a bound buffer)"
            )
        if isinstance(name, list):  # a vector bound lane by lane (see g_Let)
            return list(name)
        if e.dtype.is_vector:
            return [f"{name}[{k}]" for k in range(e.dtype.lanes)]
        return [name]

    def g_IntImm(self, e: IntImm) -> list[str]:
        if e.dtype.is_bool:
            return [str(bool(e.value))]
        if e.dtype.is_handle:
            if e.value != 0:
                raise InterpreterError(f"the interpreter has no pointer for address {e.value}")
            return ["None"]
        return [_literal(e.value)]

    def g_FloatImm(self, e: FloatImm) -> list[str]:
        return [_literal(semantics.round_float(e.value, e.dtype))]

    def g_StringImm(self, e) -> list[str]:
        return [repr(e.value)]

    # Every value the generated code holds is in the value set of its dtype (ints wrapped, floats
    # rounded, bools Python bools); the inline operators below rely on that and nothing else,
    # unless their comment names a precondition.
    def g_binary(self, e: BinaryOp) -> list[str]:
        op, dt = type(e).__name__, e.dtype.element
        a, b = self.gen(e.a), self.gen(e.b)
        if dt.is_float:
            return [self.float_binary(op, dt, x, y, e) for x, y in zip(a, b)]
        if dt.is_bool:
            if op in _INLINE_BITS:  # semantics gives (a & b) as 0/1; on Python bools, a bool
                return [f"({x} {_INLINE_BITS[op]} {y})" for x, y in zip(a, b)]
            return [f"(_bin({op!r}, {x}, {y}, {self.dt(dt)}) != 0)" for x, y in zip(a, b)]
        return [self.int_binary(op, dt, x, y, e) for x, y in zip(a, b)]

    def float_binary(self, op: str, dt: DataType, x: str, y: str, e: BinaryOp) -> str:
        divisor = _const_float(e.b)
        if op in _INLINE_INT:  # semantics.binary: round_float(a op b, dt), the same expression
            code = f"({x} {_INLINE_INT[op]} {y})"
        elif op == "Div" and divisor is not None and semantics.round_float(divisor, dt) != 0:
            code = f"({x} / {y})"  # semantics.float_div(a, b) is a / b for a nonzero constant b
        elif op == "Div":
            code = f"_fdiv({x}, {y})"
        else:
            return f"_bin({op!r}, {x}, {y}, {self.dt(dt)})"
        return code if dt.bits == 64 else f"_rf({code}, {self.dt(dt)})"  # round_float: no-op on f64

    def int_binary(self, op: str, dt: DataType, x: str, y: str, e: BinaryOp) -> str:
        c = _const_int(e.b)
        if op in _INLINE_BITS:
            # semantics: wrap_int(a & b) etc.; two in-range operands give an in-range result
            return f"({x} {_INLINE_BITS[op]} {y})"
        if op in ("Min", "Max"):
            return self.min_max(op, x, y)  # semantics: min(a, b) / max(a, b), always in range
        if op in _INLINE_INT:
            code = f"({x} {_INLINE_INT[op]} {y})"  # semantics.binary: wrap_int(a op b)
        elif op in ("FloorDiv", "FloorMod") and c is not None and c > 0:
            # semantics.floordiv/floormod(a, c) is a // c, a % c for an integer c != 0; for c > 0
            # the interval analysis proves the result fits (a negative c goes through _bin)
            code = f"({x} {'//' if op == 'FloorDiv' else '%'} {y})"
        elif op in ("Div", "Mod") and c is not None and c > 0 and self.iv.of(e.a)[0] >= 0:
            # truncation equals flooring when the interval analysis proves a >= 0 (and c > 0)
            code = f"({x} {'//' if op == 'Div' else '%'} {y})"
        elif op in ("ShiftLeft", "ShiftRight") and c is not None and 0 <= c < dt.bits:
            # semantics: a << c, a >> c for a valid amount c (a uint value is >= 0 already)
            code = f"({x} {'<<' if op == 'ShiftLeft' else '>>'} {y})"
        else:
            return f"_bin({op!r}, {x}, {y}, {self.dt(dt)})"
        # the wrap is dropped only where the interval analysis proves it is the identity
        return code if self.iv.fits(e) else f"_wrap({code}, {self.dt(dt)})"

    def min_max(self, op: str, x: str, y: str) -> str:
        cmp = "<=" if op == "Min" else ">="
        x_first, x_again = self.once(x)
        y_first, y_again = self.once(y)
        return f"({x_again} if {x_first} {cmp} {y_first} else {y_again})"

    def once(self, code: str) -> tuple[str, str]:
        """Code to evaluate `code` once, then code to reuse its value in the same expression."""
        if _SIMPLE.match(code):
            return code, code
        t = self.temp()
        return f"({t} := {code})", t

    def g_compare(self, e) -> list[str]:
        symbol = _COMPARE[type(e).__name__]  # semantics.compare uses the same Python operators
        return [f"({x} {symbol} {y})" for x, y in zip(self.gen(e.a), self.gen(e.b))]

    def g_logical(self, e) -> list[str]:
        # `&`/`|` on Python bools evaluate both operands, as the IR's And/Or do
        symbol = "&" if type(e).__name__ == "And" else "|"
        return [f"({x} {symbol} {y})" for x, y in zip(self.gen(e.a), self.gen(e.b))]

    def g_Not(self, e) -> list[str]:
        return [f"(not {x})" for x in self.gen(e.a)]

    def g_Select(self, e) -> list[str]:
        n = e.dtype.lanes
        cond = self.condition_lanes(e.condition, n)
        t, f = self.gen(e.true_value), self.gen(e.false_value)
        # indexing a pair evaluates both sides, as Select requires
        return [f"({f[k]}, {t[k]})[{cond[k]}]" for k in range(n)]

    def condition_lanes(self, cond: PrimExpr, n: int) -> list[str]:
        if n > 1 and not cond.dtype.is_vector:
            return [self.shared(cond)] * n
        return self.gen(cond)

    def g_Cast(self, e) -> list[str]:
        src, dst = e.value.dtype.element, e.dtype.element
        return [self.cast(x, src, dst, e) for x in self.gen(e.value)]

    def cast(self, x: str, src: DataType, dst: DataType, e) -> str:
        if src == dst:
            return x  # semantics.cast to the same type keeps a value of that type
        if dst.is_bool and not src.is_handle:
            return f"({x} != 0)"  # semantics.cast: bool(value != 0)
        if src.is_integer and dst.is_integer and _fits(self.iv.of(e.value), dst):
            return x  # wrap_int is the identity on a value the interval analysis proves fits
        if src.is_float and dst.is_float and src.bits <= dst.bits:
            return x  # widening is exact: round_float is the identity
        return f"_cast({x}, {self.dt(src)}, {self.dt(dst)})"

    def g_Ramp(self, e: Ramp) -> list[str]:
        """Lane 0 is base, lane k is base + k * stride in the dtype (see loom.ir.evaluate)."""
        dt = e.dtype.element
        base = self.shared(e.base)
        if dt.is_float:
            stride, t = self.shared(e.stride), self.dt(dt)
            steps = [f"_bin('Mul', {stride}, {_literal(float(k))}, {t})" for k in range(1, e.lanes)]
            return [base] + [f"_bin('Add', {base}, {step}, {t})" for step in steps]
        c = _const_int(e.stride)
        stride = None if c is not None else self.shared(e.stride)
        lanes = [base]
        for k in range(1, e.lanes):
            # wrap(base + wrap(k * stride)) is wrap(base + k * stride)
            step = f"{k * c}" if c is not None else f"{stride} * {k}"
            lanes.append(f"({base} + {step})")
        if not self.iv.fits(e):  # dropped where the interval analysis proves no lane wraps
            lanes = [f"_wrap({x}, {self.dt(dt)})" for x in lanes]
        return lanes

    def g_Broadcast(self, e: Broadcast) -> list[str]:
        return [self.shared(e.value)] * e.lanes

    def g_Let(self, e: Let) -> list[str]:
        if not self.lazy:
            name = self.bind_value(e.var, e.value)
            with self.bound(self.names, e.var, name):
                return self.gen(e.body)
        if e.var.dtype.is_handle and self.scan.views.get(e.var):
            raise InterpreterError(
                f"pointer {e.var.name} is bound by a Let inside an if_then_else branch and viewed "
                "as a buffer; the interpreter supports that only outside such branches"
            )
        value = self.gen(e.value)
        self.lazy_vars.add(e.var)
        if e.var.dtype.is_vector and not _calls_extern(e.body):
            # lane k of the body needs lane k of the value only: bind each lane on its own, so
            # that only the lanes taken are evaluated (an extern call takes whole vectors)
            names = [self.fresh(f"v_{e.var.name}_{k}") for k in range(len(value))]
            with self.bound(self.names, e.var, names):
                body = self.gen(e.body)
            return [f"(({n} := {v}), {lane})[1]" for n, v, lane in zip(names, value, body)]
        value_code = _tuple(value) if e.var.dtype.is_vector else value[0]
        name = self.fresh("v_" + e.var.name)
        with self.bound(self.names, e.var, name):
            body = self.gen(e.body)
        return [f"(({name} := {value_code}), {lane})[1]" for lane in body]

    # -- calls -------------------------------------------------------------------------------
    def g_Call(self, e: Call) -> list[str]:
        if e.kind == CallKind.EXTERN:
            return self.extern_call(e)
        if e.kind != CallKind.INTRINSIC:
            raise InterpreterError(f"the interpreter cannot call the function {e.op}: {e}")
        method = getattr(self, "i_" + e.op, None)
        if method is not None:
            return method(e)
        if e.op in semantics.MATH:
            return self.math_call(e)
        raise InterpreterError(f"the interpreter does not implement the intrinsic {e.op}")

    def extern_call(self, e: Call) -> list[str]:
        args = []
        for a in e.args:
            lanes = self.gen(a)
            args.append(lanes[0] if len(lanes) == 1 else _tuple(lanes))
        code = f"_xres(_x_{e.op}({', '.join(args)}), {self.dt(e.dtype)}, {e.op!r})"
        if not e.dtype.is_vector:
            return [code]
        result = self.share(code)
        return [f"{result}[{k}]" for k in range(e.dtype.lanes)]

    def math_call(self, e: Call) -> list[str]:
        dt = e.dtype.element
        fn = self.const(semantics.MATH[e.op], "math_" + e.op)
        args = [self.gen(a) for a in e.args]
        lanes = [f"{fn}({', '.join(a[k] for a in args)})" for k in range(e.dtype.lanes)]
        return lanes if dt.bits == 64 else [f"_rf({x}, {self.dt(dt)})" for x in lanes]

    def i_fabs(self, e: Call) -> list[str]:
        # semantics.MATH has no fabs: the absolute value of a float is exact in every float type
        return [f"abs({x})" for x in self.gen(e.args[0])]

    def i_require(self, e: Call) -> list[str]:
        n = e.dtype.lanes
        cond = self.condition_lanes(e.args[0], n)
        fail = f"_fail({self.const(e.args[2].value, 'message')})"
        return [f"({v} if {c} else {fail})" for v, c in zip(self.gen(e.args[1]), cond)]

    def i_reinterpret(self, e: Call) -> list[str]:
        src, dst = e.args[0].dtype, e.dtype
        if src.lanes != dst.lanes:
            raise InterpreterError(f"reinterpret across lane counts is not supported: {e}")
        fn = self.const(semantics.reinterpret, "reinterpret")
        a, b = self.dt(src.element), self.dt(dst.element)
        return [f"{fn}({x}, {a}, {b})" for x in self.gen(e.args[0])]

    def i_likely(self, e: Call) -> list[str]:
        return self.gen(e.args[0])

    i_arithmetic_fence = i_likely

    def i_isnullptr(self, e: Call) -> list[str]:
        return [f"({self.scalar(e.args[0])} is None)"]

    def i_if_then_else(self, e: Call) -> list[str]:
        n = e.dtype.lanes
        cond = self.condition_lanes(e.args[0], n)
        with self.lazy_code():
            t, f = self.gen(e.args[1]), self.gen(e.args[2])
        return [f"({t[k]} if {cond[k]} else {f[k]})" for k in range(n)]

    def i_prefetch(self, e: Call) -> list[str]:
        # a hint: no effect but the check of its address
        return [f"({self.scalar(e.args[0])}, 0)[1]"]

    i_prefetch_write = i_prefetch

    def i_address_of(self, e: Call) -> list[str]:
        load = e.args[0]
        if load.dtype.is_vector:
            raise InterpreterError(f"address_of a vector access is not supported: {e}")
        ref = self.storage_of(load.buffer)
        offset = self.flat_offset(load.buffer, ref, [self.scalar(i) for i in load.indices])
        return [f"_addr({ref.obj}, {offset}, {ref.size}, {load.buffer.name!r})"]

    # -- memory access -----------------------------------------------------------------------
    def index_lanes(self, index: PrimExpr, n: int, pin: bool = False) -> list[str]:
        """The lanes of one index of an n-lane access; `pin`: evaluate them before any write."""
        if not index.dtype.is_vector:
            return [self.shared(index) if n > 1 else self.scalar(index)] * n
        lanes = self.gen(index)
        if pin and _reads_memory(index):
            t = self.share(_sequence(lanes))
            return [f"{t}[{k}]" for k in range(n)]
        return lanes

    def g_BufferLoad(self, e: BufferLoad) -> list[str]:
        b, n = e.buffer, e.dtype.lanes
        ref = self.storage_of(b)
        if n > 1 and e.predicate is None and not self.lazy:
            fast = self.load_contiguous(e, ref)
            if fast is not None:
                return fast
        indices = [self.index_lanes(i, n) for i in e.indices]
        pred = self.gen(e.predicate) if e.predicate is not None else None
        zero = _literal(semantics.fit(0, b.dtype))
        out = []
        for k in range(n):
            checks, offset, error = self.lane_access(
                b, ref, [d[k] for d in indices], e.indices, "read", k if n > 1 else None
            )
            code = f"{ref.data}[{offset}]"
            if checks:
                code = f"({code} if {' and '.join(checks)} else {error})"
            out.append(f"({code} if {pred[k]} else {zero})" if pred is not None else code)
        return out

    def lane_access(self, b: Buffer, ref: _StorageRef, idx: list[str], exprs, what, lane):
        """Checks (code list), element offset and error call of one lane of an access."""
        strides = b.element_strides()
        checks, used, offset_range = [], [], (0, 0)
        for d, (code, expr) in enumerate(zip(idx, exprs)):
            r = self.iv.of(expr)
            if b.ndim >= 2:
                dim = _const_int(b.shape[d])
                if dim is None or not (0 <= r[0] and r[1] < dim):
                    t = self.temp()
                    checks.append(f"0 <= ({t} := {code}) < {self.scalar(b.shape[d])}")
                    code = t
                    r = (0, dim - 1) if dim is not None else None
            used.append(code)
            offset_range = _add_scaled(offset_range, r, _const_int(strides[d]))
        offset = self.offset_code(used, strides, ref)
        inside = (
            ref.base is None
            and ref.size_const is not None
            and offset_range is not None
            and 0 <= offset_range[0]
            and offset_range[1] < ref.size_const
        )
        if not inside:
            t = self.temp()
            checks.append(f"0 <= ({t} := {offset}) < {ref.size}")
            offset = t
        error = self.error_call(b, ref, idx, what, lane) if checks else ""
        return checks, offset, error

    def offset_code(self, idx: list[str], strides, ref: _StorageRef) -> str:
        terms = [] if ref.base is None else [ref.base]
        for code, stride in zip(idx, strides):
            c = _const_int(stride)
            if c == 0:
                continue
            terms.append(code if c == 1 else f"{code} * {self.scalar(stride)}")
        return " + ".join(terms) or "0"

    def flat_offset(self, b: Buffer, ref: _StorageRef, idx: list[str]) -> str:
        return self.offset_code(idx, b.element_strides(), ref)

    def error_call(self, b: Buffer, ref: _StorageRef, idx: list[str], what: str, lane) -> str:
        # the error path re-evaluates the indices: the checks above may have stopped early
        with self.lazy_code():
            shape = _tuple([self.scalar(s) for s in b.shape])
            strides = _tuple([self.scalar(s) for s in b.element_strides()])
        return (
            f"_oob({b.name!r}, {what!r}, {_tuple(idx)}, {shape}, {strides}, "
            f"{ref.base or 0}, {ref.size}, {lane})"
        )

    def contiguous_start(self, b: Buffer, ref: _StorageRef, index: PrimExpr):
        """For a 1-d access by a ramp with a positive constant step: (start code, step, inside);
        None otherwise. `inside`: the whole access provably hits the storage."""
        if b.ndim != 1 or not isinstance(index, Ramp) or not self.iv.fits(index):
            return None
        stride, elem_stride = _const_int(index.stride), _const_int(b.element_strides()[0])
        if stride is None or elem_stride is None or stride * elem_stride <= 0:
            return None
        step = stride * elem_stride
        start = self.shared(index.base)
        if elem_stride != 1:
            start = f"({start} * {elem_stride})"
        if ref.base is not None:
            start = f"({ref.base} + {start})"
        r = _add_scaled((0, 0), self.iv.of(index), elem_stride)
        inside = ref.base is None and ref.size_const is not None and 0 <= r[0]
        inside = inside and r[1] < ref.size_const
        return self.share(start), step, inside

    def contiguous_check(self, b, ref, start: str, step: int, n: int, what: str) -> None:
        last = f"{start} + {(n - 1) * step}"
        self.emit(f"if not (0 <= {start} and {last} < {ref.size}):")
        self.emit(f"    _oob_ramp({b.name!r}, {what!r}, {start}, {step}, {n}, {ref.size})")

    def load_contiguous(self, e: BufferLoad, ref: _StorageRef) -> list[str] | None:
        found = self.contiguous_start(e.buffer, ref, e.indices[0])
        if found is None:
            return None
        start, step, inside = found
        n = e.dtype.lanes
        if not inside:
            self.contiguous_check(e.buffer, ref, start, step, n, "read")
        t = self.temp()
        self.emit(f"{t} = {ref.data}[{_slice(start, step, n)}]")
        return [f"{t}[{k}]" for k in range(n)]

    def store_contiguous(self, s, ref: _StorageRef, lanes: list[str]) -> bool:
        found = self.contiguous_start(s.buffer, ref, s.indices[0])
        if found is None:
            return False
        start, step, inside = found
        n = len(lanes)
        values = self.share(_sequence(lanes))
        if not inside:
            self.contiguous_check(s.buffer, ref, start, step, n, "write")
        self.emit(f"{ref.data}[{_slice(start, step, n)}] = {values}")
        return True


def _add_scaled(acc: Range | None, r: Range | None, scale: int | None) -> Range | None:
    if acc is None or r is None or scale is None:
        return None
    a, b = r[0] * scale, r[1] * scale
    return (acc[0] + min(a, b), acc[1] + max(a, b))


def _slice(start: str, step: int, n: int) -> str:
    end = f"{start} + {n * step}"
    return f"{start}:{end}" if step == 1 else f"{start}:{end}:{step}"


def _sequence(codes: list[str]) -> str:
    """Code of a sequence of the lanes: `t` itself if the lanes are `t[0]`, `t[1]`, ..."""
    first = re.fullmatch(r"(_t\d+)\[0\]", codes[0])
    if first and codes == [f"{first.group(1)}[{k}]" for k in range(len(codes))]:
        return first.group(1)
    return _tuple(codes)


def _tuple(codes: list[str]) -> str:
    if not codes:
        return "()"
    return f"({codes[0]},)" if len(codes) == 1 else f"({', '.join(codes)})"


def _literal(value) -> str:
    """Python source of a number or bool, always a single primary expression."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "_NAN"
        if math.isinf(value):
            return "_INF" if value > 0 else "(-_INF)"
    text = repr(value)
    return f"({text})" if text.startswith("-") else text


_SAFE_INT = frozenset({"Add", "Sub", "Mul", "Min", "Max", "BitAnd", "BitOr", "BitXor"})
_SAFE_FLOAT = frozenset({"Add", "Sub", "Mul"})


def _safe_node(e: PrimExpr, lazy_vars: set[Var]) -> bool:
    """The node itself cannot fail (its children are checked separately)."""
    if isinstance(e, Var):
        return e not in lazy_vars
    if isinstance(e, IntImm | FloatImm | Ramp | Broadcast | CompareOp | LogicalOp):
        return True
    kind = type(e).__name__
    if isinstance(e, BinaryOp):
        if e.dtype.is_float:
            return kind in _SAFE_FLOAT
        c = _const_int(e.b)
        divides = kind in ("Div", "Mod", "FloorDiv", "FloorMod")
        return kind in _SAFE_INT or (divides and c is not None and c not in (0, -1))
    if kind == "Cast":
        return not (e.value.dtype.is_float and not e.dtype.is_float) and not e.dtype.is_handle
    return kind in ("Not", "Select")


def _calls_extern(e: PrimExpr) -> bool:
    found = []
    post_order_visit(e, lambda n: found.append(n) if _is_extern(n) else None)
    return bool(found)


def _is_extern(e) -> bool:
    return isinstance(e, Call) and e.kind == CallKind.EXTERN


def _reads_memory(e: PrimExpr) -> bool:
    found = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, BufferLoad | Call) else None)
    return bool(found)
