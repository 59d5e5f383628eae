"""Text of IR values, in the style of TVM's `tvm.lower` output.

Names are made unique per printed unit: two distinct variables both called `i` print as `i` and
`i_1`. Buffers print under the name of their storage (`data`), so a flattened view of a parameter
prints with the parameter's name.
"""

from __future__ import annotations

import json

import numpy as np

from loom.abi.dtype import DataType
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.buffer import Buffer
from loom.ir.function import IRModule, PrimFunc
from loom.ir.node import set_printer


def to_text(value) -> str:
    """The text of any IR value (expression, statement, buffer, function, module)."""
    p = _Printer()
    if isinstance(value, IRModule):
        return p.module(value)
    if isinstance(value, PrimFunc):
        return p.func(value)
    if isinstance(value, S.Stmt):
        p.stmt(value, 0)
        return "\n".join(p.lines)
    if isinstance(value, E.PrimExpr):
        return p.expr(value)
    if isinstance(value, Buffer):
        return p.buffer_decl(value)
    return object.__repr__(value)


def _const_text(value, dt: DataType) -> str:
    if dt.is_bool:
        return "True" if value else "False"
    if dt.is_float:
        text = str(np.float32(value)) if dt.bits == 32 else repr(float(value))
        if dt.bits == 32 and np.isfinite(value):
            return f"{text}f"
        return f"{dt}({text})"
    if str(dt) == "int32":
        return str(value)
    return f"{dt}({value})"


def _attr_text(value) -> str:
    """An attribute value as JSON when it is plain data (strings, numbers, lists), else repr."""
    try:
        return json.dumps(value)
    except TypeError:
        return repr(value)


class _Printer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.var_names: dict[E.Var, str] = {}
        self.used_names: set[str] = set()

    # -- naming --------------------------------------------------------------------------------
    def name_of(self, v: E.Var) -> str:
        name = self.var_names.get(v)
        if name is None:
            name = v.name
            k = 0
            while name in self.used_names:
                k += 1
                name = f"{v.name}_{k}"
            self.used_names.add(name)
            self.var_names[v] = name
        return name

    def buffer_name(self, b: Buffer) -> str:
        return self.name_of(b.data)

    # -- modules and functions ---------------------------------------------------------------
    def module(self, mod: IRModule) -> str:
        parts = []
        for f in mod.functions:
            self.__init__()
            parts.append(self.func(f))
        return "\n\n".join(parts)

    def buffer_decl(self, b: Buffer) -> str:
        shape = ", ".join(self.expr(s) for s in b.shape)
        extra = ""
        if b.strides:
            extra += ", strides=[" + ", ".join(self.expr(s) for s in b.strides) + "]"
        if b.scope != "global":
            extra += f', scope="{b.scope}"'
        if b.alignment:
            extra += f", align={b.alignment}"
        return f"Buffer({b.dtype}, [{shape}]{extra})"

    def func(self, f: PrimFunc) -> str:
        params = []
        for p in f.params:
            if isinstance(p, Buffer):
                params.append(f"{self.buffer_name(p)}: {self.buffer_decl(p)}")
            else:
                params.append(f"{self.name_of(p)}: {p.dtype}")
        header = f"@{f.name} = primfn({', '.join(params)}) {{"
        self.lines = [header]
        if f.attrs:
            items = ", ".join(f'"{k}": {_attr_text(v)}' for k, v in f.attrs)
            self.lines.insert(0, f"# attrs: {{{items}}}")
        self.stmt(f.body, 1)
        self.lines.append("}")
        return "\n".join(self.lines)

    # -- statements ----------------------------------------------------------------------------
    def emit(self, indent: int, text: str) -> None:
        self.lines.append("  " * indent + text)

    def block(self, indent: int, header: str, body: S.Stmt) -> None:
        self.emit(indent, header + " {")
        self.stmt(body, indent + 1)
        self.emit(indent, "}")

    def stmt(self, s: S.Stmt, indent: int) -> None:
        method = getattr(self, "s_" + type(s).__name__)
        method(s, indent)

    def s_SeqStmt(self, s: S.SeqStmt, indent: int) -> None:
        for child in s.seq:
            self.stmt(child, indent)

    def s_For(self, s: S.For, indent: int) -> None:
        keyword = "for" if s.kind == S.ForKind.SERIAL else s.kind.value
        v = s.loop_var
        header = (
            f"{keyword} ({self.name_of(v)}: {v.dtype}, {self.expr(s.min)}, {self.expr(s.extent)})"
        )
        if s.annotations:
            header += " " + ", ".join(f"{k}={val!r}" for k, val in s.annotations)
        self.block(indent, header, s.body)

    def s_Allocate(self, s: S.Allocate, indent: int) -> None:
        b = s.buffer
        shape = ", ".join(self.expr(x) for x in b.shape)
        extra = ""
        if b.strides:
            extra += ", strides=[" + ", ".join(self.expr(x) for x in b.strides) + "]"
        if b.alignment:
            extra += f", align={b.alignment}"
        self.emit(
            indent,
            f"allocate({self.buffer_name(b)}: Pointer({b.scope} {b.dtype}), "
            f"{b.dtype}, [{shape}]{extra}), storage_scope = {b.scope};",
        )
        self.stmt(s.body, indent)

    def s_LetStmt(self, s: S.LetStmt, indent: int) -> None:
        value = self.expr(s.value)
        self.emit(indent, f"let {self.name_of(s.var)}: {s.var.dtype} = {value};")
        self.stmt(s.body, indent)

    def s_AttrStmt(self, s: S.AttrStmt, indent: int) -> None:
        about = f"[{self.name_of(s.node)}] " if s.node is not None else ""
        self.emit(indent, f'attr {about}"{s.key}" = {self.expr(s.value)};')
        self.stmt(s.body, indent)

    def s_AssertStmt(self, s: S.AssertStmt, indent: int) -> None:
        message = "last error" if s.message is None else repr(s.message)
        self.emit(indent, f"assert({self.expr(s.condition)}, {message});")
        self.stmt(s.body, indent)

    def s_DeferStmt(self, s: S.DeferStmt, indent: int) -> None:
        cleanup = _Printer()
        cleanup.var_names, cleanup.used_names = self.var_names, self.used_names
        cleanup.stmt(s.cleanup, 0)
        self.emit(indent, f"defer {{ {'; '.join(cleanup.lines)} }}")
        self.stmt(s.body, indent)

    def s_BufferStore(self, s: S.BufferStore, indent: int) -> None:
        target = self.access(s.buffer, s.indices, s.predicate)
        self.emit(indent, f"{target} = {self.expr(s.value)}")

    def s_IfThenElse(self, s: S.IfThenElse, indent: int) -> None:
        self.block(indent, f"if ({self.expr(s.condition)})", s.then_case)
        if s.else_case is not None:
            self.lines[-1] += " else {"
            self.stmt(s.else_case, indent + 1)
            self.emit(indent, "}")

    def s_Evaluate(self, s: S.Evaluate, indent: int) -> None:
        if not S.is_nop(s):
            self.emit(indent, self.expr(s.value))

    # -- expressions ---------------------------------------------------------------------------
    def access(self, b: Buffer, indices, predicate) -> str:
        idx = ", ".join(self.expr(i) for i in indices)
        if predicate is not None:
            idx += f", predicate={self.expr(predicate)}"
        return f"{self.buffer_name(b)}[{idx}]"

    def expr(self, e: E.PrimExpr) -> str:
        if isinstance(e, E.BinaryOp | E.CompareOp | E.LogicalOp):
            a, b = self.expr(e.a), self.expr(e.b)
            if e.symbol.isidentifier():
                return f"{e.symbol}({a}, {b})"
            return f"({a} {e.symbol} {b})"
        return getattr(self, "e_" + type(e).__name__)(e)

    def e_Var(self, e: E.Var) -> str:
        return self.name_of(e)

    def e_IntImm(self, e: E.IntImm) -> str:
        return _const_text(e.value, e.dtype)

    def e_FloatImm(self, e: E.FloatImm) -> str:
        return _const_text(e.value, e.dtype)

    def e_StringImm(self, e: E.StringImm) -> str:
        return '"' + e.value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    def e_Not(self, e: E.Not) -> str:
        return f"!{self.expr(e.a)}"

    def e_Select(self, e: E.Select) -> str:
        return (
            f"select({self.expr(e.condition)}, {self.expr(e.true_value)}, "
            f"{self.expr(e.false_value)})"
        )

    def e_Cast(self, e: E.Cast) -> str:
        return f"cast({e.dtype}, {self.expr(e.value)})"

    def e_BufferLoad(self, e: E.BufferLoad) -> str:
        return self.access(e.buffer, e.indices, e.predicate)

    def e_Call(self, e: E.Call) -> str:
        args = ", ".join(self.expr(a) for a in e.args)
        if e.kind == E.CallKind.EXTERN:
            sep = ", " if args else ""
            return f'call_extern("{e.op}"{sep}{args}, dtype={e.dtype})'
        if e.kind == E.CallKind.FUNCTION:
            sep = ", " if args else ""
            return f'call_func("{e.op}"{sep}{args})'
        return f"@{e.op}({args})"

    def e_Ramp(self, e: E.Ramp) -> str:
        return f"ramp({self.expr(e.base)}, {self.expr(e.stride)}, {e.lanes})"

    def e_Broadcast(self, e: E.Broadcast) -> str:
        return f"broadcast({self.expr(e.value)}, {e.lanes})"

    def e_ProducerLoad(self, e) -> str:  # a tensor read in a te.compute rule
        return f"{e.tensor.name}[{', '.join(self.expr(i) for i in e.indices)}]"

    def e_Reduce(self, e) -> str:  # a te reduction
        axes = ", ".join(
            f"{self.name_of(iv.var)}: [{self.expr(iv.dom.min)}, "
            f"{self.expr(iv.dom.min + iv.dom.extent)})"
            for iv in e.axis
        )
        text = f"{e.combiner.name}({self.expr(e.source)}, axis=[{axes}]"
        if not (isinstance(e.condition, E.IntImm) and e.condition.value):
            text += f", where={self.expr(e.condition)}"
        return text + ")"

    def e_Let(self, e: E.Let) -> str:
        return f"(let {self.name_of(e.var)} = {self.expr(e.value)} in {self.expr(e.body)})"


set_printer(to_text)
