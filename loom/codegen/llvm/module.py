"""Loop IR modules to LLVM modules: entry points, parallel tasks, allocations, declarations.

Every PrimFunc `f` becomes two functions:
- `f.impl`, internal, taking each buffer as a `noalias` pointer aligned as its signature says
  and each scalar by value;
- `f`, the entry point `int32_t f(void *const *args)` (docs/architecture.md, decision 4), which
  reads one pointer per argument (a buffer's data, or a pointer to a scalar) and calls `f.impl`.
A parallel task (made by the lower_parallel pass from a parallel loop) becomes one internal
function `int32_t task(int32_t task_id, int32_t num_tasks, void *closure)`, and no entry point.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from llvmlite import ir

from loom.abi import FunctionSignature
from loom.codegen.common import (
    check_function_names,
    check_stack,
    global_arrays,
    stack_buffer_bytes,
    unknown_global,
)
from loom.codegen.llvm.fast_math import FLUSH_DENORMALS_ATTR, float_flags
from loom.codegen.llvm.function import FunctionCodegen
from loom.codegen.llvm.types import I1, I8, I32, I64, PTR, value_type
from loom.errors import LoomError
from loom.ir import stmt as S
from loom.ir.buffer import Buffer
from loom.ir.expr import Var
from loom.ir.function import IRModule, PrimFunc
from loom.transform.lower_parallel import (
    CLOSURE_NOALIAS_ATTR,
    closure_handles,
    describe_task,
    is_task,
)

if TYPE_CHECKING:  # the target package registers the kinds, which import this
    from loom.target.target import Target


MXCSR_FTZ, MXCSR_DAZ = 1 << 15, 1 << 6
"""x86's MXCSR bits: flush denormal results to zero; read denormal operands as zero."""


def _key(value):
    """`value` as a dict key that tells -0.0 from 0.0 (equal, with equal hashes, in Python)."""
    if type(value) is float:
        return value.hex()
    if type(value) is tuple:
        return tuple(v.hex() if type(v) is float else v for v in value)
    return value


def _bytes_text(data: bytes) -> str:
    """LLVM's text of a byte array constant, every byte as a hex escape (`c"\\3f\\80..."`):
    `bytes.hex` makes it in C, where `ir.Constant` escapes a byte at a time in Python (a
    model's weights: 0.6 s for 14 MB, against 0.09 s); LLVM reads the same bytes."""
    return 'c"' + ("\\" + data.hex("\\") if data else "") + '"'


class ModuleCodegen:
    """Builds one LLVM module from an IRModule for a target."""

    def __init__(self, target: Target, name: str = "loom", arrays: dict | None = None):
        self.target = target
        self.float_flags = float_flags(target)
        self.masked_loads_are_safe = target.masked_loads_are_safe
        self.arrays = dict(arrays or {})  # symbol -> GlobalArray (codegen/common.global_arrays)
        self.module = ir.Module(name)
        self.module.triple = target.triple
        self.strings: dict[str, ir.GlobalVariable] = {}
        self.tasks: dict[str, ir.Function] = {}  # parallel tasks, declared before any body
        self.constants: dict[tuple, ir.Constant] = {}  # constant()
        self.scalar_constants: dict[tuple, ir.Constant] = {}  # by loom dtype and value
        self.splat_constants: dict[tuple, tuple] = {}  # FunctionCodegen.splat's, by type, lanes
        self.expect = self.declare("llvm.expect.i1", I1, [I1, I1])

    def constant(self, typ: ir.Type, value) -> ir.Constant:
        """`ir.Constant(typ, value)` (value hashable: a tuple for a vector), one object per module
        for each: llvmlite formats a constant's text once per object, and a vector constant's
        text (each lane) took a third of the module's printing."""
        key = (str(typ), _key(value))
        c = self.constants.get(key)
        if c is None:
            c = ir.Constant(typ, list(value) if isinstance(value, tuple) else value)
            self.constants[key] = c
        return c

    # -- declarations --------------------------------------------------------------------------
    def declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        """A function declaration; one symbol used with two signatures is an error."""
        fnty = ir.FunctionType(ret, args)
        existing = self.module.globals.get(name)
        if existing is None:
            return ir.Function(self.module, fnty, name)
        if existing.function_type != fnty:
            raise LoomError(
                f"symbol {name} is called with two signatures: {existing.function_type} and {fnty}"
            )
        return existing

    def runtime(self, name: str) -> ir.Function:
        signatures = {
            "loom_set_last_error": (ir.VoidType(), [PTR]),
            "loom_alloc": (PTR, [I64, I64]),
            "loom_free": (ir.VoidType(), [PTR]),
            "loom_parallel_launch": (I32, [PTR, PTR, I32]),
        }
        return self.declare(name, *signatures[name])

    def string(self, text: str) -> ir.Value:
        g = self.strings.get(text)
        if g is None:
            data = bytearray(text.encode()) + b"\0"
            typ = ir.ArrayType(I8, len(data))
            g = ir.GlobalVariable(self.module, typ, f".str.{len(self.strings)}")
            g.global_constant = True
            g.linkage = "private"
            g.initializer = ir.Constant(typ, data)
            g.type = PTR  # opaque, like every pointer in LLVM 22
            self.strings[text] = g
        return g

    def loop_id(self, hint: str) -> ir.MDValue:
        """A new loop ID (`!N = !{!N, !{"<hint>"}}`, hint e.g. "llvm.loop.unroll.disable") for
        one loop's latch branch (loop_hints.py says which loops): LLVM wants one ID per loop,
        whose first operand is itself."""
        property_ = self.module.add_metadata([ir.MetaDataString(self.module, hint)])
        unique = ir.MetaDataString(self.module, f"loom.loop.{len(self.module.metadata)}")
        loop_id = self.module.add_metadata([unique, property_])  # the key keeps it apart
        loop_id.operands = (loop_id, property_)  # its own first operand
        return loop_id

    def global_array(self, symbol: str) -> ir.Value:
        """The array of the library named `symbol`, emitted on first use (internal: only this
        module's functions address it)."""
        g = self.module.globals.get(symbol)
        if g is not None:
            return g
        array = self.arrays.get(symbol)
        if array is None:
            raise unknown_global(symbol, self.arrays)
        typ = ir.ArrayType(I8, array.nbytes)
        g = ir.GlobalVariable(self.module, typ, symbol)
        g.linkage = "internal"
        g.align = array.alignment
        if array.data is not None:
            g.global_constant = True
            g.initializer = ir.FormattedConstant(typ, _bytes_text(bytes(array.data)))
        else:
            g.initializer = ir.Constant(typ, None)  # zeroinitializer
        g.type = PTR  # opaque, like every pointer in LLVM 22
        return g

    # -- functions -----------------------------------------------------------------------------
    def add_function(self, func: PrimFunc, signature: FunctionSignature) -> None:
        params = [PTR if isinstance(p, Buffer) else value_type(p.dtype) for p in func.params]
        impl = ir.Function(self.module, ir.FunctionType(I32, params), f"{func.name}.impl")
        impl.linkage = "internal"
        cg = FunctionCodegen(self, impl, func.name)
        for arg, param, spec in zip(impl.args, func.params, signature.params):
            if isinstance(param, Buffer):
                arg.add_attribute("noalias")
                arg.add_attribute("nonnull")
                arg.attributes.align = spec.alignment
                cg.bind(param.data, arg)
                cg.distinct.add(param.data)
            else:
                cg.bind(param, arg)
        cg.stmt(func.body)
        cg.finish()
        self._check_stack(cg, func.name)
        self._entry(func, impl)

    def declare_task(self, func: PrimFunc) -> None:
        """The internal function of a parallel task, `int32_t task(int32_t task_id, int32_t
        num_tasks, void *closure)`, so that any function may take its address."""
        types = [str(p.dtype) if isinstance(p, Var) else None for p in func.params]
        if types != ["int32", "int32", "handle"]:
            raise LoomError(
                f"parallel task {func.name} must take (int32 task_id, int32 num_tasks, handle "
                f"closure), got {types}"
            )
        task = ir.Function(self.module, ir.FunctionType(I32, [I32, I32, PTR]), func.name)
        task.linkage = "internal"
        self.tasks[func.name] = task

    def add_task(self, func: PrimFunc) -> None:
        task = self.tasks[func.name]
        cg = FunctionCodegen(self, task, func.name)
        for arg, param in zip(task.args, func.params):
            cg.bind(param, arg)
        if func.attr(CLOSURE_NOALIAS_ATTR):
            cg.distinct |= closure_handles(func)
        cg.stmt(func.body)
        cg.finish()
        self._check_stack(cg, describe_task(func))

    def function_address(self, name: str) -> ir.Function:
        """A parallel task of the module, or the entry point of another function."""
        task = self.tasks.get(name)
        return task if task is not None else self.declare(name, I32, [PTR])

    def _entry(self, func: PrimFunc, impl: ir.Function) -> None:
        entry = self.declare(func.name, I32, [PTR])  # declared already if its address is taken
        b = ir.IRBuilder(entry.append_basic_block("entry"))
        args = []
        for k, param in enumerate(func.params):
            slot = b.gep(entry.args[0], [self.constant(I64, k)], source_etype=PTR)
            ptr = b.load(slot, typ=PTR)
            args.append(ptr if isinstance(param, Buffer) else self._load_scalar(b, ptr, param))
        if func.attr(FLUSH_DENORMALS_ATTR) and self.target.triple.startswith("x86_64"):
            b.ret(self._with_denormals_flushed(b, impl, args))
        else:
            b.ret(b.call(impl, args))

    def _with_denormals_flushed(self, b: ir.IRBuilder, impl: ir.Function, args) -> ir.Value:
        """`impl(args)` with MXCSR's flush-to-zero and denormals-are-zero bits set, the caller's
        MXCSR restored after (fast_math.py, -fp-flush-denormals). `impl` is not inlined: LLVM
        assumes the default floating-point modes and could move its arithmetic across the
        switch."""
        impl.attributes.add("noinline")
        saved, flushed = b.alloca(I32), b.alloca(I32)
        saved.type = flushed.type = PTR  # opaque, like every pointer in LLVM 22
        b.call(self.declare("llvm.x86.sse.stmxcsr", ir.VoidType(), [PTR]), [saved])
        mode = b.or_(b.load(saved, typ=I32), self.constant(I32, MXCSR_FTZ | MXCSR_DAZ))
        b.store(mode, flushed)
        load_mxcsr = self.declare("llvm.x86.sse.ldmxcsr", ir.VoidType(), [PTR])
        b.call(load_mxcsr, [flushed])
        status = b.call(impl, args)
        b.call(load_mxcsr, [saved])
        return status

    @staticmethod
    def _load_scalar(b: ir.IRBuilder, ptr: ir.Value, param: Var) -> ir.Value:
        if param.dtype.is_bool:
            return b.icmp_unsigned("!=", b.load(ptr, typ=I8), ir.Constant(I8, 0))
        return b.load(ptr, typ=value_type(param.dtype))

    @functools.cached_property
    def alignment(self) -> int:
        return self.target.alignment  # parses the target's features: once, not per buffer

    @functools.cached_property
    def stack_limit(self) -> int:
        return self.target.stack_limit

    def _check_stack(self, cg: FunctionCodegen, name: str) -> None:
        check_stack(name, cg.stack_bytes, self.stack_limit)

    # -- allocations ---------------------------------------------------------------------------
    def allocate(self, cg: FunctionCodegen, s: S.Allocate) -> None:
        """A stack buffer (lower_memory_scopes turned every other allocation into calls)."""
        buf = s.buffer
        nbytes = stack_buffer_bytes(s)
        cg.stack_bytes += nbytes
        align = max(buf.alignment, self.alignment)
        cg.bind(buf.data, cg.alloca(ir.ArrayType(I8, max(nbytes, 1)), align))
        cg.stack_buffers.add(buf.data)
        with cg.region():  # an unrolled copy binds buf.data again: nothing of this one is reused
            cg.stmt(s.body)


def generate(mod: IRModule, target: Target, signatures: dict[str, FunctionSignature]) -> ir.Module:
    """The LLVM module of every function of `mod`."""
    check_function_names(mod, target.backend.libraries())
    mcg = ModuleCodegen(target, arrays=global_arrays(mod))
    for func in mod:
        if is_task(func):
            mcg.declare_task(func)
    for func in mod:
        if is_task(func):
            mcg.add_task(func)
        else:
            mcg.add_function(func, signatures[func.name])
    return mcg.module
