"""Expressions of the loop IR as C expressions, with the IR's semantics and no undefined
behaviour.

Expressions arrive as primitive IR (loom/transform/legalize.py): integer `/ %` have a divisor
that is neither 0 nor -1 with a minimum dividend, shift amounts are within the width, there is
no floor division, no float min/max and no arithmetic on bool, so each operation is rendered as
the C operator or libm function it names.

Each expression becomes a side-effect-free C expression string (`CExpr`). What cannot live in
one is emitted as statements before it: an extern call (its result goes into a temporary, so
calls happen once, in the IR's left-to-right order), a `require` check, a `Let`, an
`if_then_else` whose branches need statements (it is lazy: only the taken branch runs). When
an operand emits statements, the operands evaluated before it are saved in temporaries first,
so every memory read and call happens in the order the IR says.

Integer `+ - * <<` wrap: when the bound analysis cannot show that the result fits its dtype,
they are computed in the unsigned type of (at least) 32 bits and converted back. float16 is
computed in float and rounded back after every operation.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence

from loom.abi.dtype import DataType
from loom.codegen.c.types import (
    c_type,
    declaration,
    float_literal,
    int_literal,
    memory_type,
    string_literal,
    wide_unsigned,
)
from loom.errors import LoomError
from loom.ir import expr as E
from loom.ir.bound import ConstIntBoundAnalyzer, dtype_range
from loom.ir.expr import PrimExpr, Var
from loom.ir.printer import to_text
from loom.transform.legalize import needs_legalize, not_legalized

_MATH = {
    "exp": "exp",
    "exp2": "exp2",
    "log": "log",
    "log2": "log2",
    "log10": "log10",
    "sqrt": "sqrt",
    "tanh": "tanh",
    "erf": "erf",
    "sin": "sin",
    "cos": "cos",
    "fabs": "fabs",
    "floor": "floor",
    "ceil": "ceil",
    "trunc": "trunc",
    "round": "nearbyint",  # half to even in the default rounding mode
    "pow": "pow",
}


@dataclasses.dataclass(frozen=True)
class CExpr:
    """A C expression without side effects. `simple`: a name or a literal, which may be
    evaluated at any time (nothing is gained by saving it in a temporary)."""

    text: str
    simple: bool = False


class ExprCodegen(abc.ABC):
    """Emits C for expressions into `lines` (statements at `indent`). The statement generator
    (function.py) derives from it and provides `error_if`."""

    def __init__(self, module, func_name: str, namer) -> None:
        self.module = module
        self.func_name = func_name
        self.namer = namer
        self.lines: list[str] = []
        self.indent = 1
        self.names: dict[Var, str] = {}
        self.pointee: dict[Var, str | None] = {}  # handle var -> C element type (None: void)
        self.bounds = ConstIntBoundAnalyzer()
        self._top: PrimExpr | None = None

    # -- emission ------------------------------------------------------------------------------
    def emit(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def bind(self, var: Var, hint: str | None = None) -> str:
        """A fresh C name for a new binding of `var`."""
        name = self.namer.fresh(hint or var.name)
        self.names[var] = name
        return name

    def value_of(self, var: Var) -> str:
        try:
            return self.names[var]
        except KeyError:
            raise LoomError(
                f"function {self.func_name}: variable {var.name} is used but not defined "
                "(a lowering bug or a missing parameter)"
            ) from None

    def temporary(
        self, value: CExpr, dt: DataType, at: int | None = None, hint: str = "tmp"
    ) -> CExpr:
        """Save `value` in a new const variable (declared at line `at`, default: now)."""
        if value.simple:
            return value
        name = self.namer.fresh(hint)
        line = "    " * self.indent + f"{declaration(c_type(dt), name, const=True)} = {value.text};"
        self.lines.insert(len(self.lines) if at is None else at, line)
        return CExpr(name, True)

    def operands(self, exprs: Sequence[PrimExpr]) -> list[CExpr]:
        """Evaluate `exprs` in order; an operand evaluated before one that emits statements is
        saved in a temporary at the point it was evaluated."""
        values, ends = [], []
        for e in exprs:
            values.append(self.expr(e))
            ends.append(len(self.lines))
        for k in reversed(range(len(values) - 1)):
            if len(self.lines) > ends[k] and not values[k].simple:
                values[k] = self.temporary(values[k], exprs[k].dtype, at=ends[k])
        return values

    def statement_value(self, e: PrimExpr) -> CExpr:
        """`e` as the whole value of a statement: an extern call there needs no temporary."""
        saved, self._top = self._top, e
        try:
            return self.expr(e)
        finally:
            self._top = saved

    @abc.abstractmethod
    def error_if(self, condition: str, message: str | None) -> None:
        """Emit: if `condition` holds, fail the call with `message` (None: the error is set)."""

    # -- dispatch ------------------------------------------------------------------------------
    def expr(self, e: PrimExpr) -> CExpr:
        if e.dtype.lanes != 1:
            raise LoomError(
                f"C code needs scalar IR, but function {self.func_name} has the vector "
                f"expression {to_text(e)} ({e.dtype}); for target c the vectorize pass leaves "
                "vectorized loops serial, so a pass after it made vector code"
            )
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is None:
            raise LoomError(f"C code generator: unsupported expression {type(e).__name__}")
        return method(e)

    def e_Var(self, e: Var) -> CExpr:
        return CExpr(self.value_of(e), True)

    def e_IntImm(self, e: E.IntImm) -> CExpr:
        return CExpr(int_literal(e.value, e.dtype), True)

    def e_FloatImm(self, e: E.FloatImm) -> CExpr:
        return CExpr(float_literal(e.value, e.dtype), True)

    def e_StringImm(self, e: E.StringImm) -> CExpr:
        return CExpr(string_literal(e.value), True)

    # -- arithmetic ----------------------------------------------------------------------------
    def _fits(self, e: E.BinaryOp, combine) -> bool:
        """True if the bound analysis shows that `a op b` never leaves the dtype's range."""
        a, b = self.bounds.range(e.a), self.bounds.range(e.b)
        if a is None or b is None:
            return False
        values = [combine(x, y) for x in a for y in b]
        lo, hi = dtype_range(e.dtype)
        return lo <= min(values) and max(values) <= hi

    def _float(self, dt: DataType, a: CExpr, op: str, b: CExpr) -> CExpr:
        if dt.bits == 16:
            return CExpr(f"(_Float16)((float){a.text} {op} (float){b.text})")
        return CExpr(f"({a.text} {op} {b.text})")

    def _wrapping(self, e: E.BinaryOp, op: str, combine) -> CExpr:
        if needs_legalize(e):
            raise not_legalized(e, "C")
        a, b = self.operands([e.a, e.b])
        dt = e.dtype
        if dt.is_float:
            return self._float(dt, a, op, b)
        t, u = c_type(dt), wide_unsigned(dt)
        if t == u or self._fits(e, combine):
            return CExpr(f"({a.text} {op} {b.text})")
        return CExpr(f"({t})(({u}){a.text} {op} ({u}){b.text})")

    def e_Add(self, e: E.Add) -> CExpr:
        return self._wrapping(e, "+", lambda x, y: x + y)

    def e_Sub(self, e: E.Sub) -> CExpr:
        return self._wrapping(e, "-", lambda x, y: x - y)

    def e_Mul(self, e: E.Mul) -> CExpr:
        return self._wrapping(e, "*", lambda x, y: x * y)

    def _bitwise(self, e: E.BinaryOp, op: str) -> CExpr:
        a, b = self.operands([e.a, e.b])
        text = f"({a.text} {op} {b.text})"
        return CExpr(
            text if e.dtype.bits >= 32 or e.dtype.is_bool else f"({c_type(e.dtype)}){text}"
        )

    def e_BitAnd(self, e: E.BitAnd) -> CExpr:
        return self._bitwise(e, "&")

    def e_BitOr(self, e: E.BitOr) -> CExpr:
        return self._bitwise(e, "|")

    def e_BitXor(self, e: E.BitXor) -> CExpr:
        return self._bitwise(e, "^")

    def _shift(self, e: E.BinaryOp, op: str) -> CExpr:
        """Shifts by 0..bits-1 (legalize masked any other amount), which C defines: computed
        in the wide unsigned type for `<<` of a signed value."""
        if needs_legalize(e):
            raise not_legalized(e, "C")
        a, b = self.operands([e.a, e.b])
        dt = e.dtype
        t, u = c_type(dt), wide_unsigned(dt)
        if op == "<<" and t != u:
            return CExpr(f"({t})(({u}){a.text} << {b.text})")
        text = f"({a.text} {op} {b.text})"
        return CExpr(text if dt.bits >= 32 else f"({t}){text}")

    def e_ShiftLeft(self, e: E.ShiftLeft) -> CExpr:
        return self._shift(e, "<<")

    def e_ShiftRight(self, e: E.ShiftRight) -> CExpr:  # arithmetic for signed (GCC, Clang)
        return self._shift(e, ">>")

    def _division(self, e: E.BinaryOp, op: str) -> CExpr:
        """Div and Mod: C's `/ %` (an integer divisor is neither 0 nor -1 with a minimum
        dividend, legalize made sure), IEEE division and fmod for floats."""
        if needs_legalize(e):
            raise not_legalized(e, "C")
        a, b = self.operands([e.a, e.b])
        dt = e.dtype
        if dt.is_float:
            if op == "/":
                return self._float(dt, a, "/", b)
            return math_call("fmod", dt, [a.text, b.text])
        text = f"({a.text} {op} {b.text})"
        return CExpr(text if dt.bits >= 32 else f"({c_type(dt)}){text}")

    def e_Div(self, e: E.Div) -> CExpr:
        return self._division(e, "/")

    def e_Mod(self, e: E.Mod) -> CExpr:
        return self._division(e, "%")

    def e_FloorDiv(self, e: E.FloorDiv) -> CExpr:
        raise not_legalized(e, "C")

    e_FloorMod = e_FloorDiv

    def _minmax(self, e: E.BinaryOp, symbol: str) -> CExpr:
        """Integer min/max (legalize made float min/max selects with the IR's NaN rule)."""
        if needs_legalize(e):
            raise not_legalized(e, "C")
        a, b = (self.temporary(v, e.dtype) for v in self.operands([e.a, e.b]))
        return CExpr(f"({b.text} {symbol} {a.text} ? {b.text} : {a.text})")

    def e_Min(self, e: E.Min) -> CExpr:
        return self._minmax(e, "<")

    def e_Max(self, e: E.Max) -> CExpr:
        return self._minmax(e, ">")

    # -- comparisons and logic -----------------------------------------------------------------
    def _compare(self, e: E.CompareOp) -> CExpr:
        """C's float comparisons are IEEE's: ordered, except `!=` (true when NaN is involved)."""
        a, b = self.operands([e.a, e.b])
        if e.a.dtype.is_handle:
            return CExpr(f"((uintptr_t){a.text} {e.symbol} (uintptr_t){b.text})")
        return CExpr(f"({a.text} {e.symbol} {b.text})")

    e_EQ = e_NE = e_LT = e_LE = e_GT = e_GE = _compare

    def e_And(self, e: E.And) -> CExpr:
        a, b = self.operands([e.a, e.b])
        return CExpr(f"({a.text} && {b.text})")

    def e_Or(self, e: E.Or) -> CExpr:
        a, b = self.operands([e.a, e.b])
        return CExpr(f"({a.text} || {b.text})")

    def e_Not(self, e: E.Not) -> CExpr:
        return CExpr(f"(!{self.expr(e.a).text})")

    def e_Select(self, e: E.Select) -> CExpr:
        """Both values are evaluated (their statements, if any, run); C's ?: then picks one."""
        c, t, f = self.operands([e.condition, e.true_value, e.false_value])
        return CExpr(f"({c.text} ? {t.text} : {f.text})")

    def e_Cast(self, e: E.Cast) -> CExpr:
        return CExpr(convert(self.expr(e.value).text, e.value.dtype, e.dtype))

    def e_Let(self, e: E.Let) -> CExpr:
        value = self.expr(e.value)
        self.emit(f"{declaration(c_type(e.var.dtype), self.bind(e.var), True)} = {value.text};")
        bound = self.bounds.range(e.value)  # None for a float or a handle
        if bound is None:
            return self.expr(e.body)
        old = self.bounds.push(e.var, bound)
        try:
            return self.expr(e.body)
        finally:
            self.bounds.pop(e.var, old)

    # -- memory --------------------------------------------------------------------------------
    def access(self, buffer, indices: Sequence[PrimExpr], index: CExpr) -> str:
        """The C lvalue of `buffer[index]` (through a cast if the pointer has another type)."""
        if len(indices) != 1:
            raise LoomError(
                f"buffer {buffer.name} is accessed with {len(indices)} indices; the code "
                "generator needs flattened buffers (run flatten_buffer)"
            )
        base = self.value_of(buffer.data)
        element = memory_type(buffer.dtype)
        if self.pointee.get(buffer.data) != element:
            base = f"(({element} *){base})"
        return f"{base}[{index.text}]"

    def e_BufferLoad(self, e: E.BufferLoad) -> CExpr:
        parts = [*e.indices, *([e.predicate] if e.predicate is not None else [])]
        values = self.operands(parts)
        text = self.access(e.buffer, e.indices, values[0])
        if e.dtype.is_bool:
            text = f"({text} != 0)"
        if e.predicate is not None:  # a lane whose predicate is false is not read
            zero = float_literal(0.0, e.dtype) if e.dtype.is_float else int_literal(0, e.dtype)
            text = f"({values[1].text} ? {text} : {zero})"
        return CExpr(text)

    # -- calls ---------------------------------------------------------------------------------
    def e_Call(self, e: E.Call) -> CExpr:
        if e.kind == E.CallKind.EXTERN:
            return self.extern_call(e)
        if e.kind == E.CallKind.FUNCTION:
            return self.function_call(e)
        method = getattr(self, "call_" + e.op, None)
        if method is not None:
            return method(e)
        if needs_legalize(e):
            raise not_legalized(e, "C")
        if e.op in _MATH:
            args = self.operands(e.args)
            return math_call(_MATH[e.op], e.dtype, [a.text for a in args])
        raise LoomError(f"C code generator: intrinsic {e.op} is not supported")

    def extern_call(self, e: E.Call) -> CExpr:
        """A call of a declared C symbol. Not the value of a statement: its result is saved in
        a temporary now, so the call happens exactly once, in order."""
        returns_void = self.module.declare_extern(e.op, self.func_name)
        args = self.operands(e.args)
        call = CExpr(f"{e.op}({', '.join(a.text for a in args)})")
        if e is self._top:
            return call
        if returns_void:
            self.emit(f"{call.text};")
            return CExpr(int_literal(0, e.dtype), True)
        return self.temporary(call, e.dtype, hint=f"{e.op}_ret")

    def function_call(self, e: E.Call) -> CExpr:
        """A call of another function's entry point: an argument vector pointing at the
        buffers and at temporaries holding the scalars; the status goes into a temporary."""
        self.module.declare_entry(e.op, self.func_name)
        pointers = []
        for arg, value in zip(e.args, self.operands(e.args)):
            if arg.dtype.is_handle:
                pointers.append(f"(void *){value.text}")
            else:  # the callee reads the scalar through a pointer: give it a variable
                slot = self.namer.fresh("arg")
                self.emit(f"{c_type(arg.dtype)} {slot} = {value.text};")
                pointers.append(f"(void *)&{slot}")
        vector = self.namer.fresh(f"{e.op}_args")
        self.emit(f"void *{vector}[] = {{{', '.join(pointers) or '0'}}};")
        return self.temporary(CExpr(f"{e.op}({vector})"), e.dtype, hint=f"{e.op}_status")

    def call_require(self, e: E.Call) -> CExpr:
        """The value, once the condition holds (else fail with the message)."""
        cond, value, message = e.args
        self.error_if(f"!{self.expr(cond).text}", message.value)
        return self.expr(value)

    def call_likely(self, e: E.Call) -> CExpr:
        return CExpr(f"LOOM_LIKELY({self.expr(e.args[0]).text})")

    def call_arithmetic_fence(self, e: E.Call) -> CExpr:
        return self.expr(e.args[0])  # C code is compiled with -ffp-contract=off (compile.py)

    def call_global_address(self, e: E.Call) -> CExpr:
        return CExpr(f"((void *){self.module.global_array(e.args[0].value)})", True)

    def call_function_address(self, e: E.Call) -> CExpr:
        return CExpr(self.module.function_address(e.args[0].value, self.func_name), True)

    def call_reinterpret(self, e: E.Call) -> CExpr:
        """The bits of a value as another type of the same width, through a union."""
        (x,) = self.operands(e.args)
        src, dst = c_type(e.args[0].dtype), c_type(e.dtype)
        return CExpr(f"((union {{ {src} from; {dst} to; }}){{.from = {x.text}}}).to")

    def call_isnullptr(self, e: E.Call) -> CExpr:
        return CExpr(f"({self.expr(e.args[0]).text} == NULL)")

    def call_prefetch(self, e: E.Call) -> CExpr:
        """`__builtin_prefetch(p, 0, 3)` (read, every cache level), a statement where written;
        prefetch_write's second argument is 1 (write)."""
        (address,) = self.operands(e.args)
        write = int(e.op == "prefetch_write")
        self.emit(f"__builtin_prefetch({address.text}, {write}, 3);")
        return CExpr(int_literal(0, e.dtype), True)

    call_prefetch_write = call_prefetch

    def call_address_of(self, e: E.Call) -> CExpr:
        load = e.args[0]
        (index,) = self.operands(load.indices)
        return CExpr(f"(&{self.access(load.buffer, load.indices, index)})")

    def call_if_then_else(self, e: E.Call) -> CExpr:
        """Lazy: only the taken side is evaluated (C's ?:, or an if when a side needs
        statements)."""
        cond, t, f = e.args
        c = self.expr(cond)
        t_lines, tv = self._branch(t)
        f_lines, fv = self._branch(f)
        if not t_lines and not f_lines:
            return CExpr(f"({c.text} ? {tv.text} : {fv.text})")
        name = self.namer.fresh("tmp")
        self.emit(f"{c_type(e.dtype)} {name};")
        self.emit(f"if ({c.text}) {{")
        self.lines += t_lines
        self.emit(f"    {name} = {tv.text};")
        self.emit("} else {")
        self.lines += f_lines
        self.emit(f"    {name} = {fv.text};")
        self.emit("}")
        return CExpr(name, True)

    def _branch(self, e: PrimExpr) -> tuple[list[str], CExpr]:
        """The statements and value of `e`, emitted one level deeper, apart."""
        saved = self.lines
        self.lines = []
        self.indent += 1
        try:
            value = self.expr(e)
            return self.lines, value
        finally:
            self.lines = saved
            self.indent -= 1


def math_call(name: str, dt: DataType, args: list[str]) -> CExpr:
    """libm's `name` for double, `name`f for float, and for float16 through float."""
    if dt.bits == 64:
        return CExpr(f"{name}({', '.join(args)})")
    if dt.bits == 32:
        return CExpr(f"{name}f({', '.join(args)})")
    return CExpr(f"(_Float16){name}f({', '.join('(float)' + a for a in args)})")


def convert(value: str, src: DataType, dst: DataType) -> str:
    """C for the IR's cast of `value` from `src` to `dst`."""
    if src == dst:
        return value
    if dst.is_bool:
        return f"({value} != {'NULL' if src.is_handle else '0'})"
    if dst.is_handle:
        return f"((void *)(uintptr_t){value})"
    if src.is_handle:
        return f"(({c_type(dst)})(uintptr_t){value})"
    return f"({c_type(dst)}){value}"
