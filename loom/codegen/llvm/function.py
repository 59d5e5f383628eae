"""Loop IR to LLVM IR for one function: expressions, statements, loops, memory, errors.

Expressions arrive as primitive IR (loom/transform/legalize.py): each operation is rendered as
the LLVM instruction it names; what the IR means beyond that was lowered by the legalize pass.
Errors inside generated code (an assertion, a failed `require` such as an integer division by
zero, a failed allocation, a failed parallel task) set the runtime's last error, run the
cleanups of the enclosing allocations and return -1.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from llvmlite import ir

from loom.abi.dtype import DataType
from loom.codegen.llvm import hvx, register_pieces, vecmath
from loom.codegen.llvm.loop_hints import unroll_hint
from loom.codegen.llvm.types import (
    I1,
    I32,
    I64,
    PTR,
    mangle,
    memory_type,
    value_type,
    vector_type,
)
from loom.errors import LoomError
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.expr import PrimExpr, Var
from loom.transform.legalize import needs_legalize, not_legalized
from loom.transform.lower_memory import owns_memory

if TYPE_CHECKING:
    from loom.codegen.llvm.module import ModuleCodegen

_FLOAT_INTRINSICS = {
    "exp": "llvm.exp",
    "exp2": "llvm.exp2",
    "log": "llvm.log",
    "log2": "llvm.log2",
    "log10": "llvm.log10",
    "sqrt": "llvm.sqrt",
    "sin": "llvm.sin",
    "cos": "llvm.cos",
    "fabs": "llvm.fabs",
    "floor": "llvm.floor",
    "ceil": "llvm.ceil",
    "trunc": "llvm.trunc",
    "round": "llvm.roundeven",
    "pow": "llvm.pow",
    "tanh": "llvm.tanh",
}
_FAST_MATH_OPS = ("fadd", "fsub", "fmul")
"""The float operations that carry the target's fast-math flags (codegen/llvm/fast_math.py)."""
_LIBM = {"erf": {32: "erff", 64: "erf"}}
_NOT_REUSED = frozenset({E.Call, E.Let})
"""Expressions whose value is computed again at each occurrence: a call may have effects (or
branch), a let binds a variable. (A load is reused until a store may change what it read.)"""
_LEAVES = frozenset({Var, E.IntImm, E.FloatImm})
_WRITES_NO_MEMORY = frozenset({"prefetch", "prefetch_write", "address_of"})
"""Calls after which every load stays valid: a prefetch (emitted where written, as every call;
a write prefetch changes no value either) and the address it takes."""
_PREFETCH_LOCALITY, _PREFETCH_DATA = 3, 1
"""llvm.prefetch's arguments after read (0) or write (1): kept in every cache level, the data
cache."""


_ARITH_OPS: dict[tuple[type, DataType], str] = {}
"""The builder method of an arithmetic expression by class and dtype (FunctionCodegen._arith):
found once, with the check that it needs no legalizing (which depends on nothing else)."""


@functools.cache
def _access(dt: DataType) -> tuple[ir.Type, int, bool]:
    """(memory type, alignment, whether elements are bools) of a load or store of `dt`:
    `dt.element` builds a new DataType for a vector, for every access."""
    element = dt.element
    return memory_type(dt), element.itemsize, element.is_bool


class FunctionCodegen:
    """Emits the body of one LLVM function."""

    def __init__(self, mcg: ModuleCodegen, fn: ir.Function, name: str):
        self.mcg = mcg
        self.fn = fn
        self.name = name
        self.entry = fn.append_basic_block("entry")
        self.allocas = ir.IRBuilder(self.entry)
        self.builder = ir.IRBuilder(fn.append_basic_block("body"))
        self.values: dict[Var, ir.Value] = {}
        self.cleanups: list[Callable[[], None]] = []
        self.stack_bytes = 0
        # Values of pure expressions already emitted where the builder is now (each region
        # forgets its own on exit, so a value is reused only where it dominates): an unrolled
        # body repeats its index arithmetic, and emitting it once leaves LLVM less to parse and
        # optimize (bench/build.py).
        self.reuse: dict[PrimExpr, ir.Value] = {}
        self._reused_order: list[PrimExpr] = []
        self._not_reused = 0  # counts emitted _NOT_REUSED expressions
        self._reads_of: dict[PrimExpr, frozenset[Var]] = {}  # reused values that load memory
        self._readers: dict[Var, list[PrimExpr]] = {}  # _reads_of by buffer (may hold stale)
        # The buffers loaded by the expressions emitted so far, in order: what an expression
        # loads is what it added (an append per load, where a set per expression cost more).
        self._read_log: list[Var] = []
        self._expr_methods: dict[type, Callable[[PrimExpr], ir.Value]] = {}  # e_<class name>
        self._stmt_methods: dict[type, Callable[[S.Stmt], None]] = {}  # s_<class name>
        # Pointers to memory that no other pointer of the function reaches (noalias buffer
        # parameters, a task's closure pointers with closure_noalias, allocations): a store
        # through one of them leaves the loads of the others valid.
        self.distinct: set[Var] = set()
        self.stack_buffers: set[Var] = set()  # buffers of this function's stack (allocas)

    def finish(self) -> None:
        """Close the entry block (allocas first, then the body) and return 0 at the end."""
        self.allocas.branch(self.fn.blocks[1])
        if not self.builder.block.is_terminated:
            self.builder.ret(self.constant(I32, 0))

    # -- helpers -------------------------------------------------------------------------------
    def alloca(self, typ: ir.Type, align: int) -> ir.Value:
        ptr = self.allocas.alloca(typ)
        ptr.align = align
        ptr.type = PTR  # llvmlite types allocas as typed pointers; LLVM 22 has only `ptr`
        return ptr

    def bind(self, var: Var, value: ir.Value) -> None:
        self.values[var] = value

    def value_of(self, var: Var) -> ir.Value:
        try:
            return self.values[var]
        except KeyError:
            raise LoomError(
                f"function {self.name}: variable {var.name} is used but not "
                "defined (a lowering bug or a missing parameter)"
            ) from None

    def region(self) -> _Region:
        """Code emitted inside (a loop body, a branch, a let's scope) does not dominate what
        follows it: its reusable values are forgotten on exit."""
        return _Region(self)

    def _forget_since(self, mark: int) -> None:
        for e in self._reused_order[mark:]:
            self.reuse.pop(e, None)
            self._reads_of.pop(e, None)
        del self._reused_order[mark:]

    def forget_loads(self, stored: Var | None = None) -> None:
        """After a store through `stored` (None: any memory may have changed, as after a call,
        or on entering a loop, whose later iterations follow its stores): no reused value may
        stand for a load of memory that may have changed."""
        if not self._reads_of:
            return
        distinct = self.distinct
        if stored is None or stored not in distinct:
            for e in self._reads_of:
                del self.reuse[e]
            self._reads_of.clear()
            self._readers.clear()
            return
        # the loads of `stored`, and of any pointer that may reach the same memory
        suspects = [v for v in self._readers if v is stored or v not in distinct]
        for v in suspects:
            for e in self._readers.pop(v):
                if self._reads_of.pop(e, None) is not None:
                    del self.reuse[e]

    def error_if(self, cond: ir.Value, message: str | None) -> None:
        """If `cond` holds at run time: set the last error (unless `message` is None: the
        callee set it), run cleanups, return -1."""
        fail = self.fn.append_basic_block("error")
        ok = self.fn.append_basic_block("ok")
        self.builder.cbranch(
            self.builder.call(self.mcg.expect, [cond, self.constant(I1, 0)]), fail, ok
        )
        self.builder.position_at_end(fail)
        with self.region():
            if message is not None:
                self.builder.call(
                    self.mcg.runtime("loom_set_last_error"), [self.mcg.string(message)]
                )
            for cleanup in reversed(self.cleanups):
                cleanup()
            self.builder.ret(self.constant(I32, -1))
        self.builder.position_at_end(ok)

    def any_lane(self, cond: ir.Value) -> ir.Value:
        if isinstance(cond.type, ir.VectorType):
            as_int = self.builder.bitcast(cond, ir.IntType(cond.type.count))
            return self.builder.icmp_unsigned("!=", as_int, ir.Constant(as_int.type, 0))
        return cond

    def constant(self, typ: ir.Type, value) -> ir.Constant:
        """`ir.Constant(typ, value)`, one object per module (ModuleCodegen.constant)."""
        return self.mcg.constant(typ, value)

    def splat(self, value: ir.Value, lanes: int) -> ir.Value:
        key = (value.type, lanes)
        parts = self.mcg.splat_constants.get(key)
        if parts is None:
            undef = self.constant(vector_type(value.type, lanes), ir.Undefined)
            zeros = self.constant(vector_type(I32, lanes), (0,) * lanes)
            parts = self.mcg.splat_constants[key] = (undef, self.constant(I32, 0), zeros)
        undef, zero, zeros = parts
        one = self.builder.insert_element(undef, value, zero)
        return self.builder.shuffle_vector(one, undef, zeros)

    def intrinsic(
        self, name: str, ret: ir.Type, args: list[ir.Value], overload: list[ir.Type]
    ) -> ir.Value:
        full = ".".join([name, *(mangle(t) for t in overload)])
        fn = self.mcg.declare(full, ret, [a.type for a in args])
        return self.builder.call(fn, args)

    # -- expressions ---------------------------------------------------------------------------
    def expr(self, e: PrimExpr) -> ir.Value:
        t = type(e)
        # the commonest leaves without a call: a variable, an integer constant met before
        if t is Var:
            value = self.values.get(e)
            if value is not None:
                return value
        elif t is E.IntImm:
            value = self.mcg.scalar_constants.get((e.dtype, e.value))
            if value is not None:
                return value
        method = self._expr_methods.get(t)
        if method is None:
            method = getattr(self, "e_" + t.__name__, None)
            if method is None:
                raise LoomError(f"LLVM code generator: unsupported expression {t.__name__}")
            self._expr_methods[t] = method
        if t in _LEAVES:
            return method(e)
        log = self._read_log
        reusable = t not in _NOT_REUSED
        if reusable:
            value = self.reuse.get(e)
            if value is not None:
                reads = self._reads_of.get(e)
                if reads:
                    log.extend(reads)
                return value
        start = len(log)
        mark = self._not_reused
        value = method(e)
        if t is E.BufferLoad:
            log.append(e.buffer.data)
        if not reusable:
            self._not_reused += 1
            if t is E.Call and e.op not in _WRITES_NO_MEMORY:
                self.forget_loads()  # a call may write memory
        elif self._not_reused == mark:  # nothing under it is computed again either
            self.reuse[e] = value
            self._reused_order.append(e)
            if len(log) > start:
                reads = self._reads_of[e] = frozenset(log[start:])
                for v in reads:
                    self._readers.setdefault(v, []).append(e)
        return value

    def e_Var(self, e: Var) -> ir.Value:
        value = self.values.get(e)
        return value if value is not None else self.value_of(e)

    def e_IntImm(self, e: E.IntImm) -> ir.Value:
        key = (e.dtype, e.value)
        c = self.mcg.scalar_constants.get(key)
        if c is not None:
            return c
        if e.dtype.is_handle:  # not kept: a new null each time, or an instruction
            return (
                ir.Constant(PTR, None)
                if e.value == 0
                else self.builder.inttoptr(ir.Constant(I64, e.value), PTR)
            )
        c = self.mcg.scalar_constants[key] = self.constant(value_type(e.dtype), e.value)
        return c

    def e_FloatImm(self, e: E.FloatImm) -> ir.Value:
        key = (e.dtype, e.value.hex())  # -0.0 is not 0.0
        c = self.mcg.scalar_constants.get(key)
        if c is None:
            c = self.mcg.scalar_constants[key] = self.constant(value_type(e.dtype), e.value)
        return c

    def e_StringImm(self, e: E.StringImm) -> ir.Value:
        return self.mcg.string(e.value)

    def _arith(self, e, int_op: str, float_op: str) -> ir.Value:
        key = (type(e), e.dtype)
        op = _ARITH_OPS.get(key)
        if op is None:
            if needs_legalize(e):
                raise not_legalized(e, "LLVM")
            op = _ARITH_OPS[key] = float_op if e.dtype.is_float else int_op
        a, b = self.expr(e.a), self.expr(e.b)
        if op in _FAST_MATH_OPS:
            return getattr(self.builder, op)(a, b, flags=self.mcg.float_flags)
        return getattr(self.builder, op)(a, b)

    def e_Add(self, e):
        return self._arith(e, "add", "fadd")

    def e_Sub(self, e):
        return self._arith(e, "sub", "fsub")

    def e_Mul(self, e):
        return self._arith(e, "mul", "fmul")

    def e_BitAnd(self, e):
        return self._arith(e, "and_", "and_")

    def e_BitOr(self, e):
        return self._arith(e, "or_", "or_")

    def e_BitXor(self, e):
        return self._arith(e, "xor", "xor")

    def e_ShiftLeft(self, e):  # legalize: the amount is in 0..bits-1
        return self._arith(e, "shl", "shl")

    def e_ShiftRight(self, e):
        return self._arith(e, "lshr" if e.dtype.is_uint else "ashr", "ashr")

    def e_Div(self, e):  # legalize: an integer divisor is neither 0 nor -1 with INT_MIN
        return self._arith(e, "udiv" if e.dtype.is_uint else "sdiv", "fdiv")

    def e_Mod(self, e):
        return self._arith(e, "urem" if e.dtype.is_uint else "srem", "frem")

    def e_FloorDiv(self, e):
        raise not_legalized(e, "LLVM")

    e_FloorMod = e_FloorDiv

    def _minmax(self, e, smaller: bool) -> ir.Value:
        if needs_legalize(e):  # floats: legalize made a select with the IR's NaN rule
            raise not_legalized(e, "LLVM")
        a, b = self.expr(e.a), self.expr(e.b)
        cmp = self.builder.icmp_unsigned if e.dtype.is_uint else self.builder.icmp_signed
        return self.builder.select(cmp("<" if smaller else ">", b, a), b, a)

    def e_Min(self, e):
        return self._minmax(e, True)

    def e_Max(self, e):
        return self._minmax(e, False)

    def _compare(self, e, op: str) -> ir.Value:
        a, b = self.expr(e.a), self.expr(e.b)
        dt = e.a.dtype
        if dt.is_float:
            if op == "!=":
                return self.builder.fcmp_unordered("!=", a, b)
            return self.builder.fcmp_ordered(op, a, b)
        if dt.is_uint or dt.is_bool:
            return self.builder.icmp_unsigned(op, a, b)
        if dt.is_handle:
            return self.builder.icmp_unsigned(op, a, b)
        return self.builder.icmp_signed(op, a, b)

    def e_EQ(self, e):
        return self._compare(e, "==")

    def e_NE(self, e):
        return self._compare(e, "!=")

    def e_LT(self, e):
        return self._compare(e, "<")

    def e_LE(self, e):
        return self._compare(e, "<=")

    def e_GT(self, e):
        return self._compare(e, ">")

    def e_GE(self, e):
        return self._compare(e, ">=")

    def e_And(self, e):
        return self.builder.and_(self.expr(e.a), self.expr(e.b))

    def e_Or(self, e):
        return self.builder.or_(self.expr(e.a), self.expr(e.b))

    def e_Not(self, e):
        return self.builder.not_(self.expr(e.a))

    def e_Select(self, e):
        return self.builder.select(
            self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
        )

    def e_Cast(self, e: E.Cast) -> ir.Value:
        return self.convert(self.expr(e.value), e.value.dtype, e.dtype)

    def convert(self, v: ir.Value, src: DataType, dst: DataType) -> ir.Value:
        b, t = self.builder, value_type(dst)
        s, d = src.element, dst.element
        if d.is_bool:
            if s.is_float:
                return b.fcmp_unordered("!=", v, ir.Constant(v.type, None))
            if s.is_handle:
                return b.icmp_unsigned("!=", v, ir.Constant(PTR, None))
            return b.icmp_unsigned("!=", v, ir.Constant(v.type, None))
        if s.is_handle or d.is_handle:
            return b.ptrtoint(v, t) if s.is_handle else b.inttoptr(v, t)
        if s.is_bool:
            return b.uitofp(v, t) if d.is_float else b.zext(v, t)
        if s.is_float and d.is_float:
            if d.bits == s.bits:
                return v
            return b.fpext(v, t) if d.bits > s.bits else b.fptrunc(v, t)
        if s.is_float:
            return b.fptoui(v, t) if d.is_uint else b.fptosi(v, t)
        if d.is_float:
            return b.uitofp(v, t) if s.is_uint else b.sitofp(v, t)
        if d.bits == s.bits:
            return v
        if d.bits < s.bits:
            return b.trunc(v, t)
        return b.zext(v, t) if s.is_uint else b.sext(v, t)

    def e_Ramp(self, e: E.Ramp) -> ir.Value:
        base = self.splat(self.expr(e.base), e.lanes)
        stride = e.stride
        if isinstance(stride, E.IntImm):
            steps = self.constant(base.type, tuple(k * stride.value for k in range(e.lanes)))
        else:
            lanes = self.constant(base.type, tuple(range(e.lanes)))
            steps = self.builder.mul(self.splat(self.expr(stride), e.lanes), lanes)
        return self.builder.add(base, steps)

    def e_Broadcast(self, e: E.Broadcast) -> ir.Value:
        value = self.expr(e.value)
        if isinstance(value, ir.Constant) and not isinstance(value.constant, list | bytearray):
            return self.constant(vector_type(value.type, e.lanes), (value.constant,) * e.lanes)
        return self.splat(value, e.lanes)

    def e_Let(self, e: E.Let) -> ir.Value:
        self.bind(e.var, self.expr(e.value))
        with self.region():
            return self.expr(e.body)

    # -- memory --------------------------------------------------------------------------------
    def address(self, buffer, index: PrimExpr) -> tuple[ir.Value, bool]:
        """(pointer or vector of pointers, contiguous) for an access of `buffer` at `index`."""
        base = self.values.get(buffer.data)
        if base is None:
            base = self.value_of(buffer.data)  # its error
        elem = memory_type(buffer.dtype)
        if _unit_stride(index):
            return self.builder.gep(base, [self.expr(index.base)], source_etype=elem), True
        idx = self.expr(index)
        ptr = self.builder.gep(base, [idx], source_etype=elem)
        if isinstance(idx.type, ir.VectorType):
            ptr.type = ir.VectorType(PTR, idx.type.count)  # llvmlite types vector GEPs as ptr
        return ptr, False

    def _flat_index(self, e) -> PrimExpr:
        indices = e.indices
        if len(indices) != 1:
            raise LoomError(
                f"buffer {e.buffer.name} is accessed with {len(indices)} indices; "
                "the code generator needs flattened buffers (run flatten_buffer)"
            )
        return indices[0]

    def e_BufferLoad(self, e: E.BufferLoad) -> ir.Value:
        dt = e.dtype
        lanes = dt.lanes
        mt, align, is_bool = _access(dt)
        if e.predicate is not None and lanes > 1 and not self.mcg.masked_loads_are_safe:
            v = self._edge_safe_masked_load(e, mt, align)
        elif lanes > 1 and self._lanes_of_stack(e):
            v = self._load_by_lanes(e, mt, align)
        elif lanes > 1 and self._strided_stride(e) is not None:
            v = self._strided_load(e, mt, align)
        else:
            ptr, contiguous = self.address(e.buffer, self._flat_index(e))
            if lanes == 1 or (contiguous and e.predicate is None):
                v = self.builder.load(ptr, typ=mt, align=align)
            else:
                v = self._masked_pieces(e, ptr, mt.element, align) if contiguous else None
                if v is None:
                    mask = self._mask(e.predicate, lanes)
                    kind = "load" if contiguous else "gather"
                    v = self.intrinsic(
                        f"llvm.masked.{kind}",
                        mt,
                        [ptr, ir.Constant(I32, align), mask, ir.Constant(mt, None)],
                        [mt, ptr.type],
                    )
        if is_bool:
            v = self.builder.icmp_unsigned("!=", v, ir.Constant(v.type, None))
        return v

    def _strided_stride(self, e: E.BufferLoad) -> int | None:
        """The stride of a vector load of a ramp with a small constant stride (which
        `_strided_load` reads contiguously), else None (a gather)."""
        index = e.indices[0] if len(e.indices) == 1 else None
        if (
            e.dtype.lanes > 1
            and isinstance(index, E.Ramp)
            and isinstance(index.stride, E.IntImm)
            and 2 <= index.stride.value <= 4  # wider: more unused elements than a gather loads
            and self.mcg.masked_loads_are_safe
        ):
            return index.stride.value
        return None

    def _strided_load(self, e: E.BufferLoad, mt: ir.Type, align: int) -> ir.Value:
        """A ramp load with constant stride s as one contiguous load of lanes*s elements and a
        shuffle that keeps every s-th: a gather issues one load per lane, this a few vector
        loads and permutes. The last s-1 elements of the span are past the last element read and
        may be past the end of the buffer, so they are masked off (a masked load does not fault
        on masked lanes; LLVM turns the all-true parts into plain loads); with a predicate, each
        lane's element is read where its lane is on (a shuffle spreads the predicate), the
        others are zero."""
        index = e.indices[0]
        stride, lanes = index.stride.value, e.dtype.lanes
        span = lanes * stride
        read = (lanes - 1) * stride + 1
        wide = ir.VectorType(mt.element, span)
        base = self.value_of(e.buffer.data)
        ptr = self.builder.gep(
            base, [self.expr(index.base)], source_etype=memory_type(e.buffer.dtype)
        )
        span_mask = ir.Constant(ir.VectorType(I1, span), [int(k < read) for k in range(span)])
        if e.predicate is None:
            whole = self._span_load(ptr, wide, span_mask, align)
        else:
            whole = self._masked_pieces(e, ptr, mt.element, align, stride)
            if whole is None:
                whole = self._predicated_span_load(e, ptr, wide, span_mask, align)
        picks = ir.Constant(ir.VectorType(I32, lanes), [k * stride for k in range(lanes)])
        return self.builder.shuffle_vector(whole, ir.Constant(wide, ir.Undefined), picks)

    def _masked_pieces(
        self, e: E.BufferLoad, ptr: ir.Value, element: ir.Type, align: int, stride: int = 1
    ) -> ir.Value | None:
        """A predicated load wider than a register on x86, as register-wide pieces
        (codegen/llvm/register_pieces.py: LLVM's own split loads lanes it should not), or None
        where it is not split."""
        span = e.dtype.lanes * stride
        if not register_pieces.applies(self.mcg.target, span, e.buffer.dtype.itemsize):
            return None
        return register_pieces.masked_load(self, e, ptr, element, align, stride)

    def _span_load(self, ptr: ir.Value, wide: ir.Type, mask: ir.Value, align: int) -> ir.Value:
        return self.intrinsic(
            "llvm.masked.load",
            wide,
            [ptr, ir.Constant(I32, align), mask, ir.Constant(wide, None)],
            [wide, ptr.type],
        )

    def _predicated_span_load(self, e, ptr, wide, span_mask, align: int) -> ir.Value:
        """The span of a predicated strided load: where every lane is on (most vectors of a
        padded row), the unpredicated span; else only the on lanes' elements (a shuffle spreads
        lane k's predicate to span element k * stride), the others zero."""
        stride, lanes = e.indices[0].stride.value, e.dtype.lanes
        on = self._mask(e.predicate, lanes)
        bits = ir.IntType(lanes)
        every = self.builder.icmp_unsigned(
            "==", self.builder.bitcast(on, bits), ir.Constant(bits, (1 << lanes) - 1)
        )
        with self.builder.if_else(every, likely=True) as (all_on, some_off):
            with all_on:
                full = self._span_load(ptr, wide, span_mask, align)
                full_block = self.builder.block
            with some_off:
                spread = [
                    k // stride if k % stride == 0 else lanes for k in range(span_mask.type.count)
                ]
                mask = self.builder.shuffle_vector(
                    on,
                    ir.Constant(on.type, None),
                    ir.Constant(ir.VectorType(I32, len(spread)), spread),
                )
                part = self._span_load(ptr, wide, mask, align)
                part_block = self.builder.block
        whole = self.builder.phi(wide)
        whole.add_incoming(full, full_block)
        whole.add_incoming(part, part_block)
        return whole

    def _edge_safe_masked_load(self, e: E.BufferLoad, mt: ir.Type, align: int) -> ir.Value:
        """A predicated load for a target whose masked loads may touch masked-off lanes: a
        contiguous one as HVX aligned-block loads (codegen/llvm/hvx.py), else a guarded
        gather."""
        index = self._flat_index(e)
        if _unit_stride(index) and hvx.handles(self.mcg.target, mt):
            ptr, _ = self.address(e.buffer, index)
            return hvx.masked_load(self, ptr, self._mask(e.predicate, e.dtype.lanes), mt)
        return self._guarded_gather(e, mt, align)

    def _guarded_gather(self, e: E.BufferLoad, mt: ir.Type, align: int) -> ir.Value:
        """A predicated load that touches only valid elements: masked-off lanes read element 0
        of the buffer, and their value is replaced by zero."""
        lanes = e.dtype.lanes
        index = self.expr(self._flat_index(e))
        mask = self._mask(e.predicate, lanes)
        safe = self.builder.select(mask, index, ir.Constant(index.type, None))
        ptrs = self.builder.gep(
            self.value_of(e.buffer.data), [safe], source_etype=memory_type(e.buffer.dtype)
        )
        ptrs.type = ir.VectorType(PTR, lanes)  # llvmlite types vector GEPs as ptr
        every = ir.Constant(ir.VectorType(I1, lanes), [1] * lanes)
        v = self.intrinsic(
            "llvm.masked.gather",
            mt,
            [ptrs, ir.Constant(I32, align), every, ir.Constant(mt, None)],
            [mt, ptrs.type],
        )
        return self.builder.select(mask, v, ir.Constant(mt, None))

    def _mask(self, predicate: PrimExpr | None, lanes: int) -> ir.Value:
        if predicate is None:
            return self.constant(ir.VectorType(I1, lanes), (1,) * lanes)
        return self.expr(predicate)

    def s_BufferStore(self, s: S.BufferStore) -> None:
        self._store(s)
        self.forget_loads(s.buffer.data)

    def _store(self, s: S.BufferStore) -> None:
        dt = s.value.dtype
        mt, align, is_bool = _access(dt)
        value = self.expr(s.value)
        if is_bool:
            value = self.builder.zext(value, mt)
        index = self._flat_index(s)
        if dt.lanes > 1 and s.predicate is None and _constant_stride(index):
            self._strided_store(s.buffer, index, value, dt, align)
            return
        ptr, contiguous = self.address(s.buffer, index)
        if dt.lanes == 1 or (contiguous and s.predicate is None):
            self.builder.store(value, ptr, align=align)
            return
        mask = self._mask(s.predicate, dt.lanes)
        if not self.mcg.masked_loads_are_safe:
            if contiguous and hvx.handles(self.mcg.target, value.type):
                hvx.masked_store(self, value, ptr, mask)
            else:
                self._store_lane_by_lane(value, ptr, contiguous, mask, dt, align)
            return
        kind = "store" if contiguous else "scatter"
        self.intrinsic(
            f"llvm.masked.{kind}",
            ir.VoidType(),
            [value, ptr, ir.Constant(I32, align), mask],
            [value.type, ptr.type],
        )

    def _lanes_of_stack(self, e: E.BufferLoad) -> bool:
        """Whether `e` reads a stack buffer along a ramp of constant stride."""
        return e.buffer.data in self.stack_buffers and _constant_stride(self._flat_index(e))

    def _load_by_lanes(self, e: E.BufferLoad, mt: ir.Type, align: int) -> ir.Value:
        """A vector load of a stack buffer along a ramp of constant stride as one scalar load
        per lane at a constant offset from one address, inserted into the vector: a gather
        keeps the buffer in memory, where these leave LLVM the registers it may hold (a flat
        pixel tile's accumulators, each of its channels read across the pixels:
        conv_schedules._schedule_flat_pixels). With a predicate, a lane that is off reads the
        buffer's first element and is zero (constant once the tile is unrolled: a flat pixel
        tile's last one computes past the last pixel)."""
        base = self.value_of(e.buffer.data)
        mask = None if e.predicate is None else self.expr(e.predicate)
        zero = ir.Constant(mt.element, None)
        v = ir.Constant(mt, ir.Undefined)
        for lane, address in enumerate(self._lane_addresses(e.buffer, e.indices[0], e.dtype)):
            k = ir.Constant(I32, lane)
            on = None if mask is None else self.builder.extract_element(mask, k)
            if on is not None:
                address = self.builder.select(on, address, base)
            x = self.builder.load(address, typ=mt.element, align=align)
            if on is not None:
                x = self.builder.select(on, x, zero)
            v = self.builder.insert_element(v, x, k)
        return v

    def _strided_store(self, buffer, index: E.Ramp, value, dt, align: int) -> None:
        """A vector store along a ramp of constant stride (not 1) as one scalar store per lane
        at a constant offset from one address: as a scatter, LLVM builds a vector of
        addresses and extracts each lane's (on AVX2, three instructions a lane for what an
        addressing mode does; the channel tiles' epilogues of conv_channels.py store so)."""
        for lane, address in enumerate(self._lane_addresses(buffer, index, dt)):
            element = self.builder.extract_element(value, ir.Constant(I32, lane))
            self.builder.store(element, address, align=align)

    def _lane_addresses(self, buffer, index: E.Ramp, dt: DataType) -> list[ir.Value]:
        """The addresses of the lanes of an access of `buffer` along `index` (a ramp of
        constant stride): constant offsets from the first lane's."""
        element = memory_type(dt.element)
        start = self.builder.gep(
            self.value_of(buffer.data), [self.expr(index.base)], source_etype=element
        )
        stride = index.stride.value
        return [
            self.builder.gep(start, [ir.Constant(I64, lane * stride)], source_etype=element)
            for lane in range(dt.lanes)
        ]

    def _store_lane_by_lane(self, value, ptr, contiguous: bool, mask, dt, align: int) -> None:
        """A predicated or scattered vector store as one guarded scalar store per lane: LLVM's
        Hexagon back end cannot select every masked store (it aborts), so loom gives it only
        masked stores of whole aligned HVX vectors (hvx.masked_store) and emits the others so."""
        element = memory_type(dt.element)
        for lane in range(dt.lanes):
            k = ir.Constant(I32, lane)
            if contiguous:
                address = self.builder.gep(ptr, [ir.Constant(I64, lane)], source_etype=element)
            else:
                address = self.builder.extract_element(ptr, k)
            on = self.builder.extract_element(mask, k)
            with self.builder.if_then(on):
                self.builder.store(self.builder.extract_element(value, k), address, align=align)

    # -- calls ---------------------------------------------------------------------------------
    def e_Call(self, e: E.Call) -> ir.Value:
        if e.kind == E.CallKind.EXTERN:
            return self.extern_call(e)
        if e.kind == E.CallKind.FUNCTION:
            return self.function_call(e)
        method = getattr(self, "call_" + e.op, None)
        if method is not None:
            return method(e)
        if needs_legalize(e):
            raise not_legalized(e, "LLVM")
        if vecmath.computes(e.op, e.dtype):  # float32 and float16: vector code, no libm
            args = [self.expr(a) for a in e.args]
            return vecmath.call(self.builder, self.mcg.module, e.op, args)
        if e.op in _FLOAT_INTRINSICS:
            args = [self.expr(a) for a in e.args]
            return self.intrinsic(_FLOAT_INTRINSICS[e.op], args[0].type, args, [args[0].type])
        if e.op in _LIBM:
            return self.libm_call(_LIBM[e.op], e)
        raise LoomError(f"LLVM code generator: intrinsic {e.op} is not supported")

    def libm_call(self, symbols: dict[int, str], e: E.Call) -> ir.Value:
        """A scalar C math function, applied lane by lane to vectors; float16 goes through the
        float32 function."""
        if e.dtype.element.bits == 16:
            f32 = DataType("float", 32, e.dtype.lanes)
            wide = E.Call(f32, e.op, tuple(E.Cast(f32, a) for a in e.args))
            return self.convert(self.libm_call(symbols, wide), f32, e.dtype)
        symbol = symbols[e.dtype.element.bits]
        args = [self.expr(a) for a in e.args]
        scalar = value_type(e.dtype.element)
        fn = self.mcg.declare(symbol, scalar, [scalar] * len(args))
        if e.dtype.lanes == 1:
            return self.builder.call(fn, args)
        out = ir.Constant(value_type(e.dtype), ir.Undefined)
        for lane in range(e.dtype.lanes):
            k = ir.Constant(I32, lane)
            lane_args = [self.builder.extract_element(a, k) for a in args]
            out = self.builder.insert_element(out, self.builder.call(fn, lane_args), k)
        return out

    def call_require(self, e: E.Call) -> ir.Value:
        """The value, once the condition holds in every lane (else fail with the message)."""
        cond, value, message = e.args
        self.error_if(self.any_lane(self.builder.not_(self.expr(cond))), message.value)
        return self.expr(value)

    def call_likely(self, e: E.Call) -> ir.Value:
        cond = self.expr(e.args[0])
        if isinstance(cond.type, ir.VectorType):
            return cond
        return self.builder.call(self.mcg.expect, [cond, self.constant(I1, 1)])

    def call_arithmetic_fence(self, e: E.Call) -> ir.Value:
        """The argument, its own operation emitted without fast-math flags: LLVM fuses or
        reorders two operations only when both carry them. (Not `llvm.arithmetic.fence`: LLVM
        22's Hexagon post-RA scheduler takes minutes on a function with a few of them.)"""
        arg = e.args[0]
        ops = {E.Add: "fadd", E.Sub: "fsub", E.Mul: "fmul"}
        if arg.dtype.is_float and type(arg) in ops:
            a, b = self.expr(arg.a), self.expr(arg.b)
            return getattr(self.builder, ops[type(arg)])(a, b)
        return self.expr(arg)

    def call_if_then_else(self, e: E.Call) -> ir.Value:
        cond, t, f = e.args
        c = self.expr(cond)
        if isinstance(c.type, ir.VectorType):
            return self.builder.select(c, self.expr(t), self.expr(f))
        then_block = self.fn.append_basic_block("ite.then")
        else_block = self.fn.append_basic_block("ite.else")
        done = self.fn.append_basic_block("ite.end")
        self.builder.cbranch(c, then_block, else_block)
        self.builder.position_at_end(then_block)
        with self.region():
            tv = self.expr(t)
        then_end = self.builder.block
        self.builder.branch(done)
        self.builder.position_at_end(else_block)
        with self.region():
            fv = self.expr(f)
        else_end = self.builder.block
        self.builder.branch(done)
        self.builder.position_at_end(done)
        phi = self.builder.phi(tv.type)
        phi.add_incoming(tv, then_end)
        phi.add_incoming(fv, else_end)
        return phi

    def call_address_of(self, e: E.Call) -> ir.Value:
        load = e.args[0]
        ptr, _ = self.address(load.buffer, self._flat_index(load))
        return ptr

    def call_prefetch(self, e: E.Call) -> ir.Value:
        """`llvm.prefetch.p0(ptr, read, locality 3, data)`, write for prefetch_write: a call,
        so LLVM keeps it where it is (x86: prefetcht0 and prefetchw; Hexagon: dcfetch)."""
        write = int(e.op == "prefetch_write")
        flags = [self.constant(I32, v) for v in (write, _PREFETCH_LOCALITY, _PREFETCH_DATA)]
        self.intrinsic("llvm.prefetch", ir.VoidType(), [self.expr(e.args[0]), *flags], [PTR])
        return self.constant(I32, 0)

    call_prefetch_write = call_prefetch

    def call_global_address(self, e: E.Call) -> ir.Value:
        return self.mcg.global_array(e.args[0].value)

    def call_function_address(self, e: E.Call) -> ir.Value:
        return self.mcg.function_address(e.args[0].value)

    def call_reinterpret(self, e: E.Call) -> ir.Value:
        return self.builder.bitcast(self.expr(e.args[0]), value_type(e.dtype))

    def call_isnullptr(self, e: E.Call) -> ir.Value:
        return self.builder.icmp_unsigned("==", self.expr(e.args[0]), ir.Constant(PTR, None))

    def function_call(self, e: E.Call) -> ir.Value:
        """A call of another function of the module through its entry point
        `int32_t name(void *const *args)`: a buffer's data pointer, or a pointer to a scalar's
        stack slot, per argument (docs/architecture.md, decision 4)."""
        vector = self.alloca(ir.ArrayType(PTR, max(len(e.args), 1)), 8)
        for k, arg in enumerate(e.args):
            value = self.expr(arg)
            if not arg.dtype.is_handle:
                slot_type = ir.IntType(8) if arg.dtype.is_bool else value.type
                slot = self.alloca(slot_type, arg.dtype.itemsize)
                stored = self.builder.zext(value, slot_type) if arg.dtype.is_bool else value
                self.builder.store(stored, slot)
                value = slot
            at = self.builder.gep(vector, [ir.Constant(I64, k)], source_etype=PTR)
            self.builder.store(value, at)
        return self.builder.call(self.mcg.function_address(e.op), [vector])

    def extern_call(self, e: E.Call) -> ir.Value:
        args = [self.expr(a) for a in e.args]
        fn = self.mcg.declare(e.op, value_type(e.dtype), [a.type for a in args])
        return self.builder.call(fn, args)

    # -- statements ----------------------------------------------------------------------------
    def stmt(self, s: S.Stmt) -> None:
        t = type(s)
        method = self._stmt_methods.get(t)
        if method is None:
            method = getattr(self, "s_" + t.__name__, None)
            if method is None:
                raise LoomError(f"LLVM code generator: unsupported statement {t.__name__}")
            self._stmt_methods[t] = method
        method(s)

    def s_SeqStmt(self, s: S.SeqStmt) -> None:
        for child in s.seq:
            self.stmt(child)

    def s_Evaluate(self, s: S.Evaluate) -> None:
        if not isinstance(s.value, E.IntImm):
            self.expr(s.value)

    def s_LetStmt(self, s: S.LetStmt) -> None:
        self.bind(s.var, self.expr(s.value))
        if owns_memory(s):
            self.distinct.add(s.var)
        with self.region():
            self.stmt(s.body)

    def s_AttrStmt(self, s: S.AttrStmt) -> None:
        self.stmt(s.body)

    def s_AssertStmt(self, s: S.AssertStmt) -> None:
        cond = self.expr(s.condition)
        self.error_if(self.builder.not_(cond), s.message)
        self.stmt(s.body)

    def s_DeferStmt(self, s: S.DeferStmt) -> None:
        """The cleanup runs after the body and at every error exit inside it."""
        self.cleanups.append(lambda: self.stmt(s.cleanup))
        self.stmt(s.body)
        self.cleanups.pop()
        self.stmt(s.cleanup)

    def s_IfThenElse(self, s: S.IfThenElse) -> None:
        cond = self.expr(s.condition)
        then_block = self.fn.append_basic_block("if.then")
        done = self.fn.append_basic_block("if.end")
        else_block = self.fn.append_basic_block("if.else") if s.else_case is not None else done
        self.builder.cbranch(cond, then_block, else_block)
        self.builder.position_at_end(then_block)
        with self.region():
            self.stmt(s.then_case)
        self.builder.branch(done)
        if s.else_case is not None:
            self.builder.position_at_end(else_block)
            with self.region():
                self.stmt(s.else_case)
            self.builder.branch(done)
        self.builder.position_at_end(done)

    def s_For(self, s: S.For) -> None:
        if s.kind == S.ForKind.PARALLEL:
            raise LoomError(
                f"function {self.name}: parallel loop {s.loop_var.name} reached the LLVM code "
                "generator; the lower_parallel pass must run first (it is in "
                "loom.transform.pipeline.BUILD, which loom.build runs)"
            )
        lo = self.expr(s.min)
        end = self.builder.add(lo, self.expr(s.extent))
        self.serial_loop(s.loop_var, lo, end, s.body, unroll_hint(s))

    def serial_loop(
        self, var: Var, begin: ir.Value, end: ir.Value, body: S.Stmt, hint: str | None = None
    ) -> None:
        """for var in [begin, end): body; `hint` is the unroller's loop metadata
        (loop_hints.py)."""
        pre = self.builder.block
        header = self.fn.append_basic_block(f"for.{var.name}")
        body_block = self.fn.append_basic_block(f"for.{var.name}.body")
        exit_block = self.fn.append_basic_block(f"for.{var.name}.end")
        self.builder.branch(header)
        self.builder.position_at_end(header)
        i = self.builder.phi(begin.type)
        i.add_incoming(begin, pre)
        self.builder.cbranch(self.builder.icmp_signed("<", i, end), body_block, exit_block)
        self.builder.position_at_end(body_block)
        self.bind(var, i)
        self.forget_loads()  # a later iteration runs after this one's stores
        with self.region():
            self.stmt(body)
        nxt = self.builder.add(i, self.constant(i.type, 1))
        i.add_incoming(nxt, self.builder.block)
        latch = self.builder.branch(header)
        if hint is not None:
            latch.set_metadata("llvm.loop", self.mcg.loop_id(hint))
        self.builder.position_at_end(exit_block)

    def s_Allocate(self, s: S.Allocate) -> None:
        self.distinct.add(s.buffer.data)
        self.mcg.allocate(self, s)


class _Region:
    """FunctionCodegen.region's context (a class: a generator's context manager cost more, for
    each loop, branch and let)."""

    __slots__ = ("cg", "mark")

    def __init__(self, cg: FunctionCodegen):
        self.cg = cg
        self.mark = len(cg._reused_order)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        self.cg._forget_since(self.mark)


def _constant_stride(index: PrimExpr) -> bool:
    """Whether a vector index is a ramp of a constant stride other than 1 (strided lanes)."""
    return (
        isinstance(index, E.Ramp) and isinstance(index.stride, E.IntImm) and index.stride.value != 1
    )


def _unit_stride(index: PrimExpr) -> bool:
    """Whether a vector index is a ramp of stride 1 (a contiguous access)."""
    return (
        isinstance(index, E.Ramp) and isinstance(index.stride, E.IntImm) and index.stride.value == 1
    )
