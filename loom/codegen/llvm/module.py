"""Loop IR modules to LLVM modules: entry points, parallel loops, allocations, declarations.

Every PrimFunc `f` becomes two functions:
- `f.impl`, internal, taking each buffer as a `noalias` pointer aligned as its signature says
  and each scalar by value;
- `f`, the entry point `int32_t f(void *const *args)` of DESIGN.md decision 4, which reads one
  pointer per argument (a buffer's data, or a pointer to a scalar) and calls `f.impl`.
A parallel loop's body is outlined into a task function run by the runtime's thread pool.
"""

from __future__ import annotations

import itertools

from llvmlite import ir

from loom.codegen.common import captured_vars, check_stack, stack_buffer_bytes
from loom.codegen.llvm.function import FunctionCodegen
from loom.codegen.llvm.types import I1, I8, I32, I64, PTR, value_type
from loom.errors import LoomError
from loom.ir import stmt as S
from loom.ir.buffer import Buffer
from loom.ir.expr import Var
from loom.ir.function import IRModule, PrimFunc
from loom.runtime.signature import FunctionSignature
from loom.target import Target


class ModuleCodegen:
    """Builds one LLVM module from an IRModule for a target."""

    def __init__(self, target: Target, name: str = "loom"):
        self.target = target
        self.module = ir.Module(name)
        self.module.triple = target.triple
        self.strings: dict[str, ir.GlobalVariable] = {}
        self.counter = itertools.count()
        self.expect = self.declare("llvm.expect.i1", I1, [I1, I1])

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
            else:
                cg.bind(param, arg)
        cg.stmt(func.body)
        cg.finish()
        self._check_stack(cg, func.name)
        self._entry(func, impl)

    def _entry(self, func: PrimFunc, impl: ir.Function) -> None:
        entry = ir.Function(self.module, ir.FunctionType(I32, [PTR]), func.name)
        b = ir.IRBuilder(entry.append_basic_block("entry"))
        args = []
        for k, param in enumerate(func.params):
            slot = b.gep(entry.args[0], [ir.Constant(I64, k)], source_etype=PTR)
            ptr = b.load(slot, typ=PTR)
            args.append(ptr if isinstance(param, Buffer) else self._load_scalar(b, ptr, param))
        b.ret(b.call(impl, args))

    @staticmethod
    def _load_scalar(b: ir.IRBuilder, ptr: ir.Value, param: Var) -> ir.Value:
        if param.dtype.is_bool:
            return b.icmp_unsigned("!=", b.load(ptr, typ=I8), ir.Constant(I8, 0))
        return b.load(ptr, typ=value_type(param.dtype))

    def _check_stack(self, cg: FunctionCodegen, name: str) -> None:
        check_stack(name, cg.stack_bytes, self.target.stack_limit)

    # -- allocations ---------------------------------------------------------------------------
    def allocate(self, cg: FunctionCodegen, s: S.Allocate) -> None:
        """A stack buffer (lower_memory_scopes turned every other allocation into calls)."""
        buf = s.buffer
        nbytes = stack_buffer_bytes(s)
        cg.stack_bytes += nbytes
        align = max(buf.alignment, self.target.alignment)
        cg.bind(buf.data, cg.alloca(ir.ArrayType(I8, max(nbytes, 1)), align))
        cg.stmt(s.body)

    # -- parallel loops ------------------------------------------------------------------------
    def parallel_for(self, cg: FunctionCodegen, loop: S.For) -> None:
        """Outline the loop body into `task(task_id, num_tasks, closure)`, each task running a
        contiguous chunk of the iterations, and launch it on the runtime's thread pool."""
        b = cg.builder
        captured = captured_vars(loop.body, loop.loop_var)
        begin, extent = cg.expr(loop.min), cg.expr(loop.extent)
        fields = [begin, extent, *(cg.values[v] for v in captured)]
        closure_type = ir.LiteralStructType([f.type for f in fields])
        closure = cg.alloca(closure_type, 8)
        for k, value in enumerate(fields):
            b.store(
                value,
                b.gep(
                    closure, [ir.Constant(I32, 0), ir.Constant(I32, k)], source_etype=closure_type
                ),
            )
        task = ir.Function(
            self.module,
            ir.FunctionType(I32, [I32, I32, PTR]),
            f"{cg.name}.parallel.{next(self.counter)}",
        )
        task.linkage = "internal"
        sub = FunctionCodegen(self, task, cg.name)
        tb = sub.builder
        task_id, num_tasks, env = task.args
        loaded = [
            tb.load(
                tb.gep(env, [ir.Constant(I32, 0), ir.Constant(I32, k)], source_etype=closure_type),
                typ=f.type,
            )
            for k, f in enumerate(fields)
        ]
        for var, value in zip(captured, loaded[2:]):
            sub.bind(var, value)
        lo, n = loaded[0], loaded[1]
        it = n.type
        tasks = tb.sext(num_tasks, it) if it.width > 32 else num_tasks
        tid = tb.sext(task_id, it) if it.width > 32 else task_id
        chunk = tb.sdiv(tb.add(n, tb.sub(tasks, ir.Constant(it, 1))), tasks)
        start = tb.mul(tid, chunk)
        stop = tb.add(start, chunk)
        stop = tb.select(tb.icmp_signed("<", stop, n), stop, n)
        sub.serial_loop(loop.loop_var, tb.add(lo, start), tb.add(lo, stop), loop.body)
        sub.finish()
        self._check_stack(sub, cg.name)
        status = b.call(self.runtime("loom_parallel_launch"), [task, closure, ir.Constant(I32, 0)])
        cg.error_if(b.icmp_signed("!=", status, ir.Constant(I32, 0)), None)


def generate(mod: IRModule, target: Target, signatures: dict[str, FunctionSignature]) -> ir.Module:
    """The LLVM module of every function of `mod`."""
    mcg = ModuleCodegen(target)
    for func in mod:
        mcg.add_function(func, signatures[func.name])
    return mcg.module
