"""lower_parallel: parallel loops become task functions launched on the runtime's thread pool.

Runs in `pipeline.BUILD` (for a target), never in `loom.lower` without one. Afterwards no `For`
of kind parallel is left. Each one (nested in other loops or in another parallel loop too)
has become

- a new PrimFunc of the module, the *task* `int32 <f>_task_<k>(int32 task_id, int32 num_tasks,
  handle closure)`, with the function attribute `parallel_task` (the name of the function the
  loop was written in; it also keeps that function's attributes). A task is internal: no entry
  point, no signature; only its address is used. It reads the captured variables from its
  closure (under their own names: they are the same `Var`s, the body moves into the task
  unchanged), computes its chunk of the iterations as the runtime splits them
  (`chunk = ceil(extent / num_tasks)` in 64 bits, task `t` runs
  `[t * chunk, min((t + 1) * chunk, extent))`) and runs the body as a serial loop over it;
- in its place, the closure and the launch:

      allocate closure: uint64[2 + n], "local" {
        closure[0] = uint64(begin); closure[1] = uint64(extent)
        closure[2 + k] = the k-th captured variable, packed in 64 bits
        assert(loom_parallel_launch(function_address("<f>_task_<k>"), address_of(closure[0]),
                                    0) == 0)          # message None: the failing task set it
      }

The captured variables are those the body uses from outside (loop and let variables, buffer
data pointers), in first-use order. A slot holds an integer or bool cast to uint64, a float's
bits (`reinterpret` to the unsigned integer of its width, then cast), a handle cast to uint64;
the task casts back.

The task keeps what the caller knows: an integer (begin, extent, a captured variable) whose
constant bounds at the loop are narrower than its dtype is unpacked as `min(max(x, lo), hi)`
(the same value), and the chunk arithmetic is written so that its bounds follow (`num_tasks`
is at least 1, `0 <= start <= stop <= extent`); code generators proving that index arithmetic
cannot overflow (the C back end) see the loop variable's range, as they did in the caller.
When every captured pointer reaches memory no other one does (buffer parameters,
allocations), the task has the attribute `closure_noalias` (the C back end then declares them
`restrict`). What a task writes through the pointers it unpacks counts as written by the
function launching it (`loom.codegen.signature`: they are that function's own variables).
"""

from __future__ import annotations

from loom.abi.dtype import HANDLE, INT32, DataType
from loom.errors import LoomError
from loom.ir import expr as E
from loom.ir import op
from loom.ir import stmt as S
from loom.ir.bound import ConstIntBoundAnalyzer, Range, dtype_range
from loom.ir.buffer import Buffer, decl_buffer
from loom.ir.expr import PrimExpr, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.visitor import Mutator, visit_each_once, visit_kinds_once
from loom.transform.lower_memory import owns_memory
from loom.transform.pass_infra import Pass, register_pass

PARALLEL_TASK_ATTR = "parallel_task"
"""Function attribute of a task made by lower_parallel: the name of the function whose parallel
loop it runs. Such a function is internal: no entry point, no signature, not listed."""

PARALLEL_LOOP_ATTR = "parallel_loop"
"""Function attribute of a task: the name of the loop variable of the loop it runs."""

CLOSURE_NOALIAS_ATTR = "closure_noalias"
"""Function attribute of a task (True) when the pointers in its closure reach distinct memory."""

LAUNCH = "loom_parallel_launch"
"""The runtime's `int32 loom_parallel_launch(handle task, handle closure, int32 num_tasks)`
(num_tasks 0: as many as it has threads); non-zero when a task failed (it set the error)."""

SLOT = DataType("uint", 64)
HEADER = 2  # closure[0] = begin, closure[1] = extent, then the captured variables


def is_task(func: PrimFunc) -> bool:
    """True for a parallel task made by lower_parallel (not an entry point)."""
    return func.attr(PARALLEL_TASK_ATTR) is not None


def entry_functions(mod: IRModule) -> list[PrimFunc]:
    """The functions of `mod` that are entry points: all but the parallel tasks."""
    return [f for f in mod if not is_task(f)]


def describe_task(func: PrimFunc) -> str:
    """`f_task_0 (parallel loop i of f)`, for messages."""
    return (
        f"{func.name} (parallel loop {func.attr(PARALLEL_LOOP_ATTR)} of "
        f"{func.attr(PARALLEL_TASK_ATTR)})"
    )


def closure_handles(task: PrimFunc) -> set[Var]:
    """The pointers a task unpacks from its closure (the `let`s at the start of its body)."""
    closure = task.params[-1] if task.params else None
    out: set[Var] = set()
    body = task.body
    while isinstance(body, S.LetStmt):
        value = body.value
        if (
            body.var.dtype.is_handle
            and isinstance(value, E.Cast)
            and isinstance(value.value, E.BufferLoad)
            and value.value.buffer.data is closure
        ):
            out.add(body.var)
        body = body.body
    return out


# -- the captured variables ---------------------------------------------------------------------
def used_vars(node) -> list[Var]:
    """Variables and buffer data pointers used in `node`, in first-use order."""
    found: dict[Var, None] = {}

    def record(n) -> None:
        if isinstance(n, Var):
            found.setdefault(n)
        elif isinstance(n, E.BufferLoad | S.BufferStore | S.Allocate):
            found.setdefault(n.buffer.data)
        elif isinstance(n, E.Call) and n.op == "address_of":
            found.setdefault(n.args[0].buffer.data)

    visit_each_once(node, record)
    return list(found)


_BINDERS = frozenset({S.For, S.LetStmt, E.Let, S.Allocate})


def bound_vars(node) -> set[Var]:
    """Variables defined inside `node`: loop and let variables, allocated buffers."""
    bound: set[Var] = set()

    def record(n) -> None:
        if isinstance(n, S.For):
            bound.add(n.loop_var)
        elif isinstance(n, S.LetStmt | E.Let):
            bound.add(n.var)
        else:
            bound.add(n.buffer.data)

    visit_kinds_once(node, _BINDERS, record)
    return bound


def captured_vars(body: S.Stmt, loop_var: Var) -> list[Var]:
    """The variables a loop body uses from outside itself, in first-use order."""
    inner = bound_vars(body) | {loop_var}
    return [v for v in used_vars(body) if v not in inner]


_OWNERS = frozenset({S.Allocate, S.LetStmt})


def distinct_pointers(func: PrimFunc) -> set[Var]:
    """Handles of `func` to memory no other handle reaches: buffer parameters (the calling
    convention refuses a written array that shares memory with another argument), allocations
    (stack buffers, memory from an allocator, fixed addresses: `owns_memory`)."""
    out = {p.data for p in func.params if isinstance(p, Buffer)}

    def record(n) -> None:
        if isinstance(n, S.Allocate):
            out.add(n.buffer.data)
        elif owns_memory(n):
            out.add(n.var)

    visit_kinds_once(func.body, _OWNERS, record)
    return out


# -- packing values in 64-bit slots -------------------------------------------------------------
def _bits_type(dt: DataType) -> DataType:
    return DataType("uint", dt.bits)


def pack(value: PrimExpr) -> PrimExpr:
    """`value` in a uint64 slot."""
    dt = value.dtype
    if dt.is_float:
        value = op.call_intrin(_bits_type(dt), "reinterpret", value)
    return op.cast(value, SLOT)


def unpack(slot: PrimExpr, dt: DataType) -> PrimExpr:
    """The value of dtype `dt` that `pack` put in `slot`."""
    if dt.is_float:
        return op.call_intrin(dt, "reinterpret", op.cast(slot, _bits_type(dt)))
    return op.cast(slot, dt)


def within(value: PrimExpr, bound: Range | None) -> PrimExpr:
    """`value`, known to lie in `bound`, as `min(max(value, lo), hi)` (when narrower than its
    dtype), so that a bound analysis of the task finds the bound again; a constant if the
    bound is one value."""
    if bound is None or not value.dtype.is_integer or bound == dtype_range(value.dtype):
        return value
    lo, hi = bound
    if lo == hi:
        return op.const(lo, value.dtype)
    return op.min_(op.max_(value, op.const(lo, value.dtype)), op.const(hi, value.dtype))


# -- the pass ------------------------------------------------------------------------------------
class _Outline(Mutator):
    def __init__(self, func: PrimFunc, taken: set[str]):
        self.func = func
        self.taken = taken
        self.distinct = distinct_pointers(func)
        self.tasks: list[PrimFunc | None] = []
        self.count = 0
        self.bounds = ConstIntBoundAnalyzer()  # of the variables in scope, as the C back end's

    def fresh_name(self) -> str:
        while True:
            name = f"{self.func.name}_task_{self.count}"
            self.count += 1
            if name not in self.taken:
                self.taken.add(name)
                return name

    def loop_range(self, loop: S.For) -> Range | None:
        """The bound of the loop variable: [lo(min), hi(min) + hi(extent) - 1]."""
        full = dtype_range(loop.loop_var.dtype)
        if full is None:
            return None
        lo_min, hi_min = self.bounds.range(loop.min)
        _, hi_extent = self.bounds.range(loop.extent)
        return lo_min, max(lo_min, min(full[1], hi_min + hi_extent - 1))

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        value = self.visit(s.value)
        bound = self.bounds.range(value)
        old = self.bounds.push(s.var, bound) if bound is not None else None
        body = self.visit(s.body)
        if bound is not None:
            self.bounds.pop(s.var, old)
        if value is s.value and body is s.body:
            return s
        return s.replace(value=value, body=body)

    def visit_For(self, loop: S.For) -> S.Stmt:
        bound = self.loop_range(loop)
        old = self.bounds.push(loop.loop_var, bound) if bound is not None else None
        try:
            if loop.kind != S.ForKind.PARALLEL:
                return self.generic_mutate(loop)
            return self.outline(loop)
        finally:
            if bound is not None:
                self.bounds.pop(loop.loop_var, old)

    def outline(self, loop: S.For) -> S.Stmt:
        name = self.fresh_name()
        slot = len(self.tasks)
        self.tasks.append(None)  # the outer task before the inner ones it launches
        body = self.visit(loop.body)
        captured = captured_vars(body, loop.loop_var)
        for v in captured:
            if v.dtype.lanes != 1:
                raise LoomError(
                    f"function {self.func.name}: parallel loop {loop.loop_var.name} uses the "
                    f"vector variable {v.name} ({v.dtype}) from outside; a parallel task can "
                    "capture only scalars"
                )
        self.tasks[slot] = self.task(name, loop, body, captured)
        return self.launch(name, loop, captured)

    def task(self, name: str, loop: S.For, body: S.Stmt, captured: list[Var]) -> PrimFunc:
        dt = loop.loop_var.dtype
        task_id, num_tasks = Var("task_id", INT32), Var("num_tasks", INT32)
        closure = Var("closure", HANDLE)
        env = Buffer("closure", SLOT, (HEADER + len(captured),), closure)
        begin, extent = Var("begin", dt), Var("extent", dt)
        # the chunk arithmetic is done in 64 bits: extent + tasks - 1 must not wrap
        wide = dt if dt.bits >= 64 else DataType(dt.kind, 64)
        tasks, chunk = Var("tasks", wide), Var("chunk", wide)
        start, stop = Var("start", dt), Var("stop", dt)
        zero, one = op.const(0, wide), op.const(1, wide)
        extent_wide = op.cast(extent, wide)
        bound = self.bounds.range
        loop_body = S.For(
            loop.loop_var,
            op.add(begin, start),
            op.sub(stop, start),
            S.ForKind.SERIAL,
            body,
            loop.annotations,
        )
        lets = [
            (begin, within(unpack(env.load([op.const(0, "int32")]), dt), bound(loop.min))),
            (extent, within(unpack(env.load([op.const(1, "int32")]), dt), bound(loop.extent))),
            *(
                (v, within(unpack(env.load([op.const(HEADER + k, "int32")]), v.dtype), bound(v)))
                for k, v in enumerate(captured)
            ),
            (tasks, op.max_(op.cast(num_tasks, wide), one)),  # the runtime runs at least one
            (chunk, E.Div(op.sub(op.add(extent_wide, tasks), one), tasks)),  # ceil(extent/tasks)
            (
                start,
                op.cast(
                    op.min_(op.max_(op.mul(op.cast(task_id, wide), chunk), zero), extent_wide), dt
                ),
            ),
            (
                stop,
                op.cast(
                    op.max_(
                        op.min_(op.add(op.cast(start, wide), chunk), extent_wide),
                        op.cast(start, wide),
                    ),
                    dt,
                ),
            ),
        ]
        stmt: S.Stmt = loop_body
        for var, value in reversed(lets):
            stmt = S.LetStmt(var, value, stmt)
        func = PrimFunc(name, (task_id, num_tasks, closure), stmt, self.func.attrs)
        func = func.with_attr(PARALLEL_TASK_ATTR, self.func.name)
        func = func.with_attr(PARALLEL_LOOP_ATTR, loop.loop_var.name)
        if all(v in self.distinct for v in captured if v.dtype.is_handle):
            func = func.with_attr(CLOSURE_NOALIAS_ATTR, True)
        return func

    def launch(self, name: str, loop: S.For, captured: list[Var]) -> S.Stmt:
        env = decl_buffer((HEADER + len(captured),), SLOT, "closure", scope="local")
        values = [loop.min, loop.extent, *captured]
        stores = [S.store(env, pack(v), [op.const(k, "int32")]) for k, v in enumerate(values)]
        status = op.call_extern(
            "int32",
            LAUNCH,
            op.call_intrin(HANDLE, "function_address", name),
            op.call_intrin(HANDLE, "address_of", env.load([op.const(0, "int32")])),
            op.const(0, "int32"),
        )
        check = S.AssertStmt(op.equal(status, op.const(0, "int32")), None, S.NOP)
        return S.Allocate(env, S.seq(*stores, check))


_CALLS = frozenset({E.Call})


def _extern_names(mod: IRModule) -> set[str]:
    names: set[str] = set()
    for func in mod:
        visit_kinds_once(
            func.body, _CALLS, lambda n: names.add(n.op) if n.kind != "intrin" else None
        )
    return names


def _run(mod: IRModule) -> IRModule:
    taken = set(mod.names()) | _extern_names(mod)
    funcs: list[PrimFunc] = []
    tasks: list[PrimFunc] = []
    for func in mod:
        outline = _Outline(func, taken)
        funcs.append(func.with_body(outline.visit(func.body)))
        tasks += outline.tasks
    if not tasks:
        return mod
    return mod.replace(functions=(*funcs, *tasks))


lower_parallel = register_pass(Pass("lower_parallel", _run))
