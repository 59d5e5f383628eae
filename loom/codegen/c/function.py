"""Statements of the loop IR as C statements, for the body of one C function.

Errors (a failed assertion, an integer division by zero, a failed parallel launch) set the
runtime's last error (unless the failing callee did), run the cleanups of the enclosing
`DeferStmt`s innermost first, and return -1, as the LLVM back end's `error_if` does.
"""

from __future__ import annotations

from loom.codegen.c.expr import CExpr, ExprCodegen
from loom.codegen.c.types import c_type, declaration, int_literal, memory_type, string_literal
from loom.codegen.common import stack_buffer_bytes
from loom.errors import LoomError
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.bound import dtype_range
from loom.ir.expr import IntImm


class FunctionCodegen(ExprCodegen):
    """The body of one C function: the static implementation of a PrimFunc, or a parallel
    task (lower_parallel), which starts with no cleanups: its caller runs them."""

    def __init__(self, module, func_name: str, namer) -> None:
        super().__init__(module, func_name, namer)
        self.cleanups: list[S.Stmt] = []
        self.stack_bytes = 0
        self.closure_handles: set[E.Var] = set()  # pointers a parallel task unpacks
        self.restrict = False  # whether they are declared restrict (closure_noalias)
        self.element_types: dict[E.Var, str] = {}  # handle -> the one element type read through it

    # -- errors --------------------------------------------------------------------------------
    def error_if(self, condition: str, message: str | None) -> None:
        """If `condition` holds at run time: set the last error (unless `message` is None: the
        callee set it), run the cleanups, return -1."""
        self.emit(f"if (LOOM_UNLIKELY({condition})) {{")
        self.indent += 1
        if message is not None:
            self.module.use_runtime("loom_set_last_error")
            self.emit(f"loom_set_last_error({string_literal(message)});")
        saved = self.cleanups
        for k in reversed(range(len(saved))):
            self.cleanups = saved[:k]  # an error inside a cleanup runs only the outer ones
            self.stmt(saved[k])
        self.cleanups = saved
        self.emit("return -1;")
        self.indent -= 1
        self.emit("}")

    # -- statements ----------------------------------------------------------------------------
    def stmt(self, s: S.Stmt) -> None:
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise LoomError(f"C code generator: unsupported statement {type(s).__name__}")
        method(s)

    def block(self, body: S.Stmt) -> None:
        """`body` one level deeper (the caller writes the braces)."""
        self.indent += 1
        self.stmt(body)
        self.indent -= 1

    def s_SeqStmt(self, s: S.SeqStmt) -> None:
        for child in s.seq:
            self.stmt(child)

    def s_Evaluate(self, s: S.Evaluate) -> None:
        if isinstance(s.value, IntImm):
            return
        value = self.statement_value(s.value)
        if isinstance(s.value, E.Call) and s.value.kind == E.CallKind.EXTERN:
            self.emit(f"{value.text};")
        elif not value.simple:
            self.emit(f"(void){value.text};")

    def s_LetStmt(self, s: S.LetStmt) -> None:
        var = s.var
        if var in self.closure_handles:
            self.closure_pointer(var, s.value)
            self.stmt(s.body)
            return
        value = self.statement_value(s.value)
        if var.dtype.is_handle:
            element = self.element_types.get(var)
            self.pointee[var] = element
            ctype = "void *" if element is None else f"{element} *"
            text = value.text if element is None else f"({ctype}){value.text}"
        else:
            ctype, text = c_type(var.dtype), value.text
        self.emit(f"{declaration(ctype, self.bind(var), const=True)} = {text};")
        bound = self.bounds.range(s.value)
        old = self.bounds.push(var, bound) if bound is not None else None
        self.stmt(s.body)
        if bound is not None:
            self.bounds.pop(var, old)

    def closure_pointer(self, var: E.Var, value: E.Cast) -> None:
        """A pointer a parallel task unpacks from its closure (`cast(handle, closure[k])`), read
        from the slot as a pointer (the slot holds its 64 bits; the platforms C code is built
        for have 64-bit pointers): the compiler keeps what it knows of where it points, and
        honours `restrict` (GCC ignores it on a pointer made from an integer)."""
        load = value.value
        (index,) = self.operands(load.indices)
        element = self.element_types.get(var)
        self.pointee[var] = element
        ctype = "void *" if element is None else f"{element} *"
        qualifier = "restrict " if self.restrict else ""
        slot = self.access(load.buffer, load.indices, index)
        self.emit(f"{ctype}{qualifier}{self.bind(var)} = *({ctype}*)&{slot};")

    def s_AttrStmt(self, s: S.AttrStmt) -> None:
        self.stmt(s.body)

    def s_AssertStmt(self, s: S.AssertStmt) -> None:
        cond = s.condition
        if isinstance(cond, E.Not):
            failed = self.expr(cond.a).text
        elif isinstance(cond, E.EQ | E.NE):  # `!(a == b)` is `a != b`, for floats too
            a, b = self.operands([cond.a, cond.b])
            failed = f"{a.text} {'!=' if isinstance(cond, E.EQ) else '=='} {b.text}"
        else:
            failed = f"!{self.expr(cond).text}"
        self.error_if(failed, s.message)
        self.stmt(s.body)

    def s_DeferStmt(self, s: S.DeferStmt) -> None:
        """The cleanup runs after the body and at every error exit inside it."""
        self.cleanups.append(s.cleanup)
        self.stmt(s.body)
        self.cleanups.pop()
        self.stmt(s.cleanup)

    def s_IfThenElse(self, s: S.IfThenElse) -> None:
        cond = self.expr(s.condition)
        self.emit(f"if ({cond.text}) {{")
        self.block(s.then_case)
        if s.else_case is not None:
            self.emit("} else {")
            self.block(s.else_case)
        self.emit("}")

    def s_BufferStore(self, s: S.BufferStore) -> None:
        parts = [s.value, *s.indices, *([s.predicate] if s.predicate is not None else [])]
        values = self.operands(parts)
        value = values[0].text
        if s.value.dtype.is_bool:
            value = f"(uint8_t){value}"
        target = self.access(s.buffer, s.indices, values[1])
        if s.predicate is not None:  # a lane whose predicate is false is not written
            self.emit(f"if ({values[2].text}) {target} = {value};")
        else:
            self.emit(f"{target} = {value};")

    # -- loops ---------------------------------------------------------------------------------
    def s_For(self, s: S.For) -> None:
        if s.kind == S.ForKind.PARALLEL:
            raise LoomError(
                f"function {self.func_name}: parallel loop {s.loop_var.name} reached the C code "
                "generator; the lower_parallel pass must run first (it is in "
                "loom.transform.pipeline.BUILD, which loom.build runs)"
            )
        begin, extent = self.operands([s.min, s.extent])
        begin, end = self.loop_end(s, begin, extent)
        name = self.bind(s.loop_var)
        t = c_type(s.loop_var.dtype)
        if (
            type(s.extent) is IntImm
            and s.extent.value < 65535  # the most the pragma takes
            and any(key == S.UNROLL_FULL for key, _ in s.annotations)
        ):
            self.emit(f"#pragma GCC unroll {s.extent.value}")  # GCC and clang: unroll completely
        self.emit(f"for ({t} {name} = {begin.text}; {name} < {end}; ++{name}) {{")
        self.loop_body(s)
        self.emit("}")

    def loop_end(self, s: S.For, begin: CExpr, extent: CExpr) -> tuple[CExpr, str]:
        """The loop's first value and its end `begin + extent` (the IR's wrapping add), each
        evaluated once, before the loop."""
        dt = s.loop_var.dtype
        begin = self.temporary(begin, dt)
        extent = self.temporary(extent, dt)
        if begin.text == "0":
            return begin, extent.text
        lo, hi = dtype_range(dt)
        if isinstance(s.min, IntImm) and isinstance(s.extent, IntImm):
            value = (s.min.value + s.extent.value - lo) % (hi - lo + 1) + lo
            return begin, int_literal(value, dt)
        (a_lo, a_hi), (b_lo, b_hi) = self.bounds.range(s.min), self.bounds.range(s.extent)
        if lo <= a_lo + b_lo and a_hi + b_hi <= hi:
            end = CExpr(f"({begin.text} + {extent.text})")
        else:
            u = "uint64_t" if dt.bits == 64 else "uint32_t"
            end = CExpr(f"({c_type(dt)})(({u}){begin.text} + ({u}){extent.text})")
        return begin, self.temporary(end, dt).text

    def loop_body(self, s: S.For) -> None:
        """The body of `s` one level deeper, with the loop variable's bound known."""
        lo_min, hi_min = self.bounds.range(s.min)
        _, hi_extent = self.bounds.range(s.extent)
        _, top = dtype_range(s.loop_var.dtype)
        bound = (lo_min, max(lo_min, min(top, hi_min + hi_extent - 1)))
        old = self.bounds.push(s.loop_var, bound)
        self.block(s.body)
        self.bounds.pop(s.loop_var, old)

    # -- memory --------------------------------------------------------------------------------
    def s_Allocate(self, s: S.Allocate) -> None:
        """A stack buffer (lower_memory_scopes turned every other allocation into calls): an
        aligned local array."""
        buf = s.buffer
        nbytes = stack_buffer_bytes(s)
        self.stack_bytes += nbytes
        elements = nbytes // buf.dtype.itemsize
        align = max(buf.alignment, self.module.target.alignment)
        element = memory_type(buf.dtype)
        name = self.bind(buf.data)
        self.pointee[buf.data] = element
        self.emit(f"LOOM_ALIGNED({align}) {element} {name}[{max(elements, 1)}];")
        self.stmt(s.body)
