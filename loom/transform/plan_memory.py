"""plan_memory: one planning pass over the whole module (docs/memory-planning.md).

It runs after the phase "memory" (where a user's or a backend's pass sees `main` and every
kernel, and may pin a buffer with loom.memory.pin) and before lower_memory_scopes. It collects
every buffer of the program with its size, alignment and lifetime:
- a model's tensors: the values `main` passes between kernels (`main`'s attribute TENSORS_ATTR,
  buffers `main`'s body uses but does not bind) and its constants (CONSTANTS_ATTR, with their
  values);
- every allocation in a fixed-address memory scope (an accelerator's scratchpad), in any
  function;
- a kernel's own buffers in host memory (scope `global`, constant size, not one per iteration
  of a parallel loop) when the kernel runs inside a program (called from an entry): they go to
  a workspace pool, a caller pool reaching the kernel as an extra parameter passed down the
  calls, so nothing is allocated during the run. Outside a program they stay run-time
  allocations.
Lifetimes are counted on one clock: the walk of the program from each function no other calls
(`main`), through each call into its callee, a tick per statement. A tensor lives from the
first call that is given it to the end of the last one; an allocation from its statement to
the end of its body.

Each buffer's candidate pools are those of its kind (a workspace or constant pool; a fixed
allocation goes to the pool of its scope) that every device touching it can reach: the devices
of the functions it is passed to, through every call they pass it on to. A pinned buffer goes
where its pin says. Each pool is planned by loom.memory.plan, every plan checked by
loom.memory.planner.check, and then `verify` fails the build if a function touches a buffer in a
pool its device cannot reach. The program is rewritten: a tensor becomes the address of its
offset in its pool, a caller pool a parameter of `main` (after its inputs and outputs), a static
pool an array of the library (GLOBALS_ATTR, the constants' bytes included), a fixed allocation
the constant address `base + offset`. The plan is the module's attribute PLAN_ATTR.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from loom import memory
from loom.abi.dtype import HANDLE
from loom.errors import LoomError
from loom.ir import op
from loom.ir.buffer import Buffer, decl_buffer
from loom.ir.expr import BufferLoad, Call, CallKind, IntImm, PrimExpr, StringImm, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.simplify import simplify
from loom.ir.stmt import Allocate, For, ForKind, LetStmt, Stmt
from loom.ir.visitor import Mutator, Visitor, node_kinds, substitute
from loom.memory.planner import Buffer as Block
from loom.memory.planner import check, plan
from loom.memory.pool import PINS_ATTR, POOLS_ATTR, Pin, Pool
from loom.memory.program import (
    CONSTANTS_ATTR,
    GLOBALS_ATTR,
    PLAN_ATTR,
    TENSORS_ATTR,
    ConstantData,
    GlobalArray,
    MemoryPlan,
    Placed,
    PoolPlan,
)
from loom.memory.scope import FixedAddress, RuntimeAllocator
from loom.transform.lower_memory import (
    MEMORIES_ATTR,
    capacity_error,
    device_of,
    fixed_address,
    target_of,
)
from loom.transform.pass_infra import Pass, PassContext, register_config, register_pass

TIME_LIMIT_KEY = "memory.plan_time_limit"
DEFAULT_TIME_LIMIT = 1.0
"""Seconds the exact search may take per pool when the greedy planners do not reach the lower
bound (PassContext config TIME_LIMIT_KEY)."""
DEFAULT_WORKSPACE = "workspace"
DEFAULT_CONSTANTS = "constants"


def _data_var(arg) -> Var | None:
    """The storage an argument of a call points into: a handle, or the address of a buffer
    element."""
    if isinstance(arg, Var) and arg.dtype.is_handle:
        return arg
    if isinstance(arg, Call) and arg.op == "address_of" and isinstance(arg.args[0], BufferLoad):
        return arg.args[0].buffer.data
    return None


def _calls(func: PrimFunc, names) -> list[Call]:
    found = []

    class Finder(Visitor):
        def visit_Call(self, n: Call) -> None:
            if n.kind == CallKind.FUNCTION and n.op in names:
                found.append(n)
            self.generic_visit(n)

    Finder().visit(func.body)
    return found


class _Receivers:
    """The functions a buffer given to `function` as parameter k reaches: it, and every
    function it passes that parameter on to."""

    def __init__(self, mod: IRModule):
        self.mod = mod
        self.names = set(mod.names())
        self.memo: dict[tuple[str, int], frozenset[str]] = {}

    def of(self, name: str, k: int) -> frozenset[str]:
        key = (name, k)
        if key in self.memo:
            return self.memo[key]
        self.memo[key] = frozenset({name})  # a recursive call reaches nothing new
        func = self.mod[name]
        param = func.params[k] if k < len(func.params) else None
        var = param.data if isinstance(param, Buffer) else param
        found = {name} | (self.of_var(func, var) if var is not None else set())
        self.memo[key] = frozenset(found)
        return self.memo[key]

    def of_var(self, func: PrimFunc, var: Var) -> frozenset[str]:
        """The functions reached by storage `var` of `func` passed to its calls."""
        found: set[str] = set()
        for call in _calls(func, self.names):
            for j, arg in enumerate(call.args):
                if _data_var(arg) is var:
                    found |= self.of(call.op, j)
        return frozenset(found)


class _Clock(Visitor):
    """The lifetimes of the program's buffers on one clock (the module docstring)."""

    def __init__(self, mod: IRModule, tracked: set[Var]):
        self.mod = mod
        self.names = set(mod.names())
        self.tracked = tracked  # the tensors' storage
        self.step = 0
        self.stack: list[str] = []
        self.allocations: dict[int, list] = {}  # id(allocate) -> [function, allocate, start, end]
        self.uses: dict[Var, list[int]] = {}  # tensor storage -> [start, end]
        self.parallel = 0  # parallel loops around the walk
        self.private: set[int] = set()  # allocations inside a parallel loop: one per iteration
        self.roots: dict[int, set[str]] = {}  # id(allocate) -> the roots whose walk reached it

    def run(self, name: str) -> None:
        self.stack.append(name)
        self.visit(self.mod[name].body)
        self.stack.pop()

    def visit(self, node) -> None:
        if isinstance(node, Stmt):
            self.step += 1
        elif Call not in node_kinds(node):
            return  # an expression holds no statement: only its calls count
        super().visit(node)

    def visit_Allocate(self, s: Allocate) -> None:
        start = self.step
        if self.parallel:
            self.private.add(id(s))
        self.roots.setdefault(id(s), set()).add(self.stack[0])
        self.generic_visit(s)
        self._extend(self.allocations, id(s), start, self.step + 1, [self.stack[-1], s])

    def visit_For(self, s: For) -> None:
        parallel = s.kind == ForKind.PARALLEL
        self.parallel += parallel
        self.generic_visit(s)
        self.parallel -= parallel

    def visit_Call(self, n: Call) -> None:
        self.generic_visit(n)
        if n.kind != CallKind.FUNCTION or n.op not in self.names or n.op in self.stack:
            return
        start = self.step
        self.run(n.op)
        for arg in n.args:
            var = _data_var(arg)
            if var is not None and var in self.tracked:
                self._extend(self.uses, var, start, self.step + 1, [])

    @staticmethod
    def _extend(table: dict, key, start: int, end: int, head: list) -> None:
        span = table.get(key)
        if span is None:
            table[key] = [*head, start, end]
        else:
            span[-2], span[-1] = min(span[-2], start), max(span[-1], end)


def _roots(mod: IRModule) -> list[str]:
    """The functions no function of the module calls, in module order."""
    names = set(mod.names())
    called = {c.op for f in mod for c in _calls(f, names) if c.op != f.name}
    return [f.name for f in mod if f.name not in called]


@dataclasses.dataclass
class _Request:
    """A buffer to plan: what it is, its size and alignment, and what may hold it."""

    function: str
    buffer: Buffer
    size: int
    alignment: int
    start: int
    end: int
    kind: str  # "workspace", "constant" or "fixed"
    touched_by: tuple[str, ...]  # function names
    scope: str | None = None
    allocate: Allocate | None = None
    data: ConstantData | None = None
    pin: Pin | None = None
    pool: Pool | None = None
    candidates: tuple[Pool, ...] = ()  # the pools it may go to, in order of preference


def _nbytes(buf: Buffer, func: PrimFunc) -> int:
    nbytes = simplify(buf.storage_elements() * buf.dtype.itemsize)
    if not isinstance(nbytes, IntImm):
        raise LoomError(
            f"function {func.name}: buffer {buf.name} in memory scope {buf.scope} needs a "
            f"constant size to be planned, got {nbytes}"
        )
    return nbytes.value


def _requests(mod: IRModule, target) -> list[_Request]:
    tensors: dict[Var, tuple[PrimFunc, Buffer, ConstantData | None]] = {}
    for func in mod:
        for buf in func.attr(TENSORS_ATTR, ()):
            tensors[buf.data] = (func, buf, None)
        for buf, data in func.attr(CONSTANTS_ATTR, ()):
            tensors[buf.data] = (func, buf, data)
    clock = _Clock(mod, set(tensors))
    for root in _roots(mod):
        clock.run(root)
    receivers = _Receivers(mod)
    requests = []
    for var, (func, buf, data) in tensors.items():
        if var not in clock.uses:
            continue  # no kernel is given it
        start, end = clock.uses[var]
        alignment = max(buf.alignment, target.alignment)
        touched = tuple(sorted(receivers.of_var(func, var)))
        kind = "constant" if data is not None else "workspace"
        requests.append(
            _Request(func.name, buf, _nbytes(buf, func), alignment, start, end, kind, touched)
        )
        requests[-1].data = data
    entries = {f.name for f in mod if _is_entry(f)}
    for fname, s, start, end in clock.allocations.values():
        scope = memory.get(s.buffer.scope)
        func = mod[fname]
        if _is_host_workspace(scope) and id(s) not in clock.private:
            if not clock.roots[id(s)] <= entries or not _has_constant_size(s.buffer):
                continue  # outside a program's run: allocated at run time, as its scope says
            alignment = max(s.buffer.alignment, scope.alignment, target.alignment)
            touched = tuple(sorted({fname} | receivers.of_var(func, s.buffer.data)))
            req = _Request(
                fname,
                s.buffer,
                _nbytes(s.buffer, func),
                alignment,
                start,
                end,
                "workspace",
                touched,
            )
            req.allocate = s
            requests.append(req)
            continue
        if not isinstance(scope.strategy, FixedAddress):
            continue
        nbytes = IntImm(_nbytes(s.buffer, func), "int64")
        too_large = capacity_error(func, s.buffer, scope, nbytes, target)
        if too_large is not None:
            raise too_large
        alignment = max(s.buffer.alignment, scope.alignment, scope.strategy.unit_bits // 8)
        # who may access the scope is verify_memory's to check: it tells a load or store from
        # an address given to a data-movement instruction
        req = _Request(fname, s.buffer, nbytes.value, alignment, start, end, "fixed", ())
        req.scope, req.allocate = scope.name, s
        requests.append(req)
    return requests


def _is_entry(func: PrimFunc) -> bool:
    """A program's entry (a model's `main`): it receives the caller's pools."""
    return func.attr(TENSORS_ATTR) is not None or func.attr(CONSTANTS_ATTR) is not None


def _is_host_workspace(scope) -> bool:
    """A kernel's own buffer in host memory from the runtime's allocator (`global`): inside a
    program it goes to a workspace pool instead, so nothing is allocated during the run."""
    return isinstance(scope.strategy, RuntimeAllocator) and scope.address_space == "host"


def _has_constant_size(buf: Buffer) -> bool:
    return isinstance(simplify(buf.storage_elements()), IntImm)


def _devices(mod: IRModule, target, names: Sequence[str]) -> dict[str, str]:
    return {n: device_of(mod[n], target) for n in names}


def default_pools(mod: IRModule, target) -> tuple[Pool, ...]:
    """Without pools given: a caller-given workspace and a static constant pool that every
    device of the module reaches (host memory), and a pool per fixed-address scope used."""
    devices = tuple(dict.fromkeys(device_of(f, target) for f in mod)) or (target.device,)
    return (
        Pool(DEFAULT_WORKSPACE, accessible_from=devices, alignment=target.alignment),
        Pool(DEFAULT_CONSTANTS, accessible_from=devices, kind="constant"),
    )


def _scope_pool(scope_name: str, pools: Sequence[Pool]) -> Pool:
    for p in pools:
        if p.scope == scope_name:
            return p
    scope = memory.get(scope_name)
    name = "".join(c if c.isalnum() else "_" for c in scope_name)
    return Pool(name, scope.strategy.size, scope.accessible_from, scope.alignment, scope=scope_name)


def _pools(mod: IRModule, target, requests: list[_Request]) -> tuple[Pool, ...]:
    given = tuple(mod.attr(POOLS_ATTR, ()))
    pools = list(given) if given else list(default_pools(mod, target))
    for r in requests:
        if r.kind == "fixed" and not any(p.scope == r.scope for p in pools):
            pools.append(_scope_pool(r.scope, pools))
    for k, p in enumerate(pools):
        if p.scope is not None:
            scope = memory.get(p.scope)
            p.check_scope(scope)
            limits = [scope.strategy.size, target.memory_capacity(p.scope), p.size]
            pools[k] = dataclasses.replace(p, size=min(c for c in limits if c is not None))
    return tuple(pools)


def _pool_named(pools: Sequence[Pool], name: str, pin: Pin) -> Pool:
    for p in pools:
        if p.name == name:
            return p
    raise LoomError(
        f"pin of buffer {pin.buffer} of {pin.function}: no pool {name!r}; the pools are "
        f"{[p.name for p in pools]}"
    )


def _assign(mod: IRModule, target, requests: list[_Request], pools: Sequence[Pool]) -> None:
    """Choose each request's pool: its pin's, else its first candidate."""
    pins = {(p.function, p.buffer): p for p in mod.attr(PINS_ATTR, ())}
    known = {(r.function, r.buffer.name) for r in requests}
    for key, p in pins.items():
        if key not in known:
            options = sorted(b for f, b in known if f == p.function)[:20]
            raise LoomError(
                f"pin: function {p.function} has no planned buffer {p.buffer!r} (its buffers "
                f"are {options})"
            )
    for r in requests:
        r.pin = pins.get((r.function, r.buffer.name))
        if r.pin is not None:
            r.pool = _pool_named(pools, r.pin.pool, r.pin)
            wanted = "fixed" if r.pool.placement == "fixed" else r.pool.kind
            if wanted != r.kind or (r.kind == "fixed" and r.pool.scope != r.scope):
                raise LoomError(
                    f"pin of buffer {r.buffer.name} of {r.function} to pool {r.pool.name}: "
                    f"the buffer is a {_what(r)}, but the pool holds {_pool_what(r.pool)}"
                )
            continue
        if r.kind == "fixed":
            r.pool = next(p for p in pools if p.scope == r.scope)
            continue
        devices = _devices(mod, target, r.touched_by)
        candidates = [
            p
            for p in pools
            if p.kind == r.kind
            and p.placement != "fixed"
            and all(p.accessible(d) for d in devices.values())
        ]
        if not candidates:
            raise LoomError(_no_pool_message(r, devices, pools))
        r.pool, r.candidates = candidates[0], tuple(candidates)


def _what(r: _Request) -> str:
    return f"buffer of scope {r.scope}" if r.kind == "fixed" else r.kind + " tensor"


def _pool_what(pool: Pool) -> str:
    if pool.placement == "fixed":
        return f"the buffers of scope {pool.scope}"
    return f"{pool.kind} tensors"


def _no_pool_message(r: _Request, devices: dict[str, str], pools: Sequence[Pool]) -> str:
    reach = ", ".join(
        f"{p.name} ({'/'.join(p.accessible_from)})" for p in pools if p.kind == r.kind
    )
    users = ", ".join(f"{f} on {d}" for f, d in devices.items())
    return (
        f"no {r.kind} pool can hold {r.buffer.name} of {r.function}: the functions touching "
        f"it disagree ({users}), and no pool is reachable from all of them (the {r.kind} pools: "
        f"{reach or 'none'})"
    )


def _blocks(pool: Pool, requests: list[_Request]) -> list[Block]:
    """The planner's view of the buffers of `pool`."""
    blocks = []
    names: set[str] = set()
    for r in requests:
        offset = r.pin.offset if r.pin is not None else None
        alignment = max(r.alignment, pool.alignment)
        if offset is not None and offset % alignment:
            raise LoomError(
                f"pin of buffer {r.buffer.name} of {r.function}: offset {offset} is not a "
                f"multiple of its alignment {alignment} in pool {pool.name}"
            )
        start, end = (0, 1) if r.kind == "constant" else (r.start, r.end)  # constants: always
        name, copy = r.buffer.name, 1
        while name in names:  # two kernels' buffers of one name
            name, copy = f"{r.buffer.name}#{copy}", copy + 1
        names.add(name)
        blocks.append(Block(name, r.size, start, end, alignment, offset))
    return blocks


SPILL_TRIAL_SECONDS = 0.2
"""The search time of each trial plan while a full pool spills buffers to the next pool."""


def _spill(pool: Pool, requests: list[_Request], time_limit: float) -> None:
    """While the buffers of `pool` (of a fixed size) do not fit, move the largest one that may
    go to a later pool to its next candidate (as TVM's pool candidates: in order of
    preference)."""
    if pool.size is None:
        return
    while True:
        mine = [r for r in requests if r.pool is pool]
        seconds = min(time_limit, SPILL_TRIAL_SECONDS)
        if plan(_blocks(pool, mine), capacity=pool.size, time_limit=seconds).fits is not False:
            return
        movable = [
            r
            for r in mine
            if r.pin is None and pool in r.candidates and r.candidates[-1] is not pool
        ]
        if not movable:
            return  # _plan_pool reports what does not fit
        r = max(movable, key=lambda r: r.size)
        r.pool = r.candidates[r.candidates.index(pool) + 1]


def _plan_pool(pool: Pool, requests: list[_Request], time_limit: float) -> PoolPlan:
    blocks = _blocks(pool, requests)
    # constants are all alive at once: any packing is as good as another but for alignment
    algorithm = "first_fit_by_size" if pool.kind == "constant" else "auto"
    result = plan(blocks, capacity=pool.size, algorithm=algorithm, time_limit=time_limit)
    check(blocks, result)
    if pool.size is not None and result.peak > pool.size:
        largest = sorted(zip(requests, blocks), key=lambda rb: -rb[1].size)[:5]
        listed = ", ".join(f"{r.buffer.name} of {r.function}: {b.size}" for r, b in largest)
        raise LoomError(
            f"pool {pool.name} has {pool.size} bytes, but its buffers need {result.peak} "
            f"(lower bound {result.lower_bound}; the largest: {listed})"
        )
    placed = tuple(
        Placed(
            r.function,
            r.buffer.name,
            pool.name,
            result.offsets[b.name],
            r.size,
            b.start,
            b.end,
            r.touched_by,
        )
        for r, b in zip(requests, blocks)
    )
    return PoolPlan(pool, tuple(blocks), result, placed)


def verify(mod: IRModule, target, memory_plan: MemoryPlan) -> None:
    """Fail when a function touches a buffer in a pool its device cannot reach."""
    for pool_plan in memory_plan.pools:
        pool = pool_plan.pool
        for b in pool_plan.placed:
            for fname in b.touched_by:
                device = device_of(mod[fname], target)
                if not pool.accessible(device):
                    raise LoomError(
                        f"function {fname} runs on {device} but touches buffer {b.buffer} "
                        f"(of {b.function}), which is in pool {pool.name}; only "
                        f"{list(pool.accessible_from)} can access that pool"
                    )


class _Rewrite(Mutator):
    """Planned allocations become their addresses; calls of functions that now take caller
    pools pass them on."""

    def __init__(self, addresses: dict[int, PrimExpr], extra_args: dict[str, list[Var]]):
        self.addresses = addresses  # id(allocate) -> address
        self.extra_args = extra_args  # function -> pool storage to append to its calls

    def visit_Allocate(self, s: Allocate):
        address = self.addresses.get(id(s))
        if address is None:
            return self.generic_mutate(s)
        return LetStmt(s.buffer.data, address, self.visit(s.body))

    def visit_Call(self, n: Call):
        n = self.generic_mutate(n)
        extra = self.extra_args.get(n.op) if n.kind == CallKind.FUNCTION else None
        return n.replace(args=(*n.args, *extra)) if extra else n


def _pool_buffer(pool_plan: PoolPlan) -> Buffer:
    pool = pool_plan.pool
    size = (max(pool_plan.size, 1),)
    return decl_buffer(size, "uint8", f"pool_{pool.name}", alignment=pool.alignment)


def _symbol(pool: Pool) -> str:
    return f"loom_pool_{pool.name}"


def _static_array(pool_plan: PoolPlan, requests: list[_Request]) -> GlobalArray:
    pool = pool_plan.pool
    data = None
    if pool.kind == "constant":
        image = np.zeros(pool_plan.size, np.uint8)
        for r, b in zip(requests, pool_plan.placed):
            raw = np.ascontiguousarray(r.data.array).view(np.uint8).reshape(-1)
            image[b.offset : b.offset + raw.size] = raw
        data = image.tobytes()
    return GlobalArray(_symbol(pool), max(pool_plan.size, 1), pool.alignment, data)


def _callers(mod: IRModule) -> dict[str, set[str]]:
    names = set(mod.names())
    found: dict[str, set[str]] = {}
    for f in mod:
        for call in _calls(f, names):
            found.setdefault(call.op, set()).add(f.name)
    return found


def _thread_pools(mod: IRModule, uses: dict[str, set[str]]) -> dict[str, set[str]]:
    """function -> the caller pools it must take as parameters: those it uses, and those of the
    functions it calls (an entry has every caller pool already)."""
    needs = {f: set(p) for f, p in uses.items() if not _is_entry(mod[f])}
    callers = _callers(mod)
    work = list(needs)
    while work:
        f = work.pop()
        for g in callers.get(f, ()):
            if _is_entry(mod[g]) or needs[f] <= needs.get(g, set()):
                continue
            needs.setdefault(g, set()).update(needs[f])
            work.append(g)
    return needs


def _rewrite(mod: IRModule, target, plans: list[tuple[PoolPlan, list[_Request]]]) -> IRModule:
    caller_buffers = {
        p.pool.name: _pool_buffer(p) for p, _ in plans if p.pool.placement == "caller"
    }
    subst: dict[str, dict[Var, PrimExpr]] = {}  # function -> tensor storage -> address
    addresses: dict[int, PrimExpr] = {}  # id(allocate) -> address
    statics: dict[str, dict[str, tuple[Pool, Buffer]]] = {}  # function -> static pools it uses
    uses: dict[str, set[str]] = {}  # function -> caller pools it uses
    scopes: dict[str, set[str]] = {}
    arrays = list(mod.attr(GLOBALS_ATTR, ()))
    for pool_plan, requests in plans:
        pool = pool_plan.pool
        pool_buf = caller_buffers.get(pool.name) or _pool_buffer(pool_plan)
        for r, b in zip(requests, pool_plan.placed):
            if r.kind == "fixed":
                addresses[id(r.allocate)] = fixed_address(memory.get(r.scope), b.offset)
                scopes.setdefault(r.function, set()).add(r.scope)
                continue
            address = op.call_intrin(HANDLE, "address_of", pool_buf.load([op.const(b.offset)]))
            if r.allocate is not None:  # a kernel's own buffer
                addresses[id(r.allocate)] = address
            else:
                subst.setdefault(r.function, {})[r.buffer.data] = address
            if pool.placement == "static":
                statics.setdefault(r.function, {})[pool.name] = (pool, pool_buf)
            else:
                uses.setdefault(r.function, set()).add(pool.name)
        if pool.placement == "static" and requests:
            arrays.append(_static_array(pool_plan, requests))
    order = list(caller_buffers)
    needs = _thread_pools(mod, uses)
    extra_params = {f: [caller_buffers[p] for p in order if p in n] for f, n in needs.items()}
    extra_args = {f: [b.data for b in bufs] for f, bufs in extra_params.items()}

    def rewrite(func: PrimFunc) -> PrimFunc:
        body = _Rewrite(addresses, extra_args).visit(func.body)
        body = substitute(body, subst.get(func.name, {}))
        for pool, pool_buf in statics.get(func.name, {}).values():
            address = op.call_intrin(HANDLE, "global_address", StringImm(_symbol(pool)))
            body = LetStmt(pool_buf.data, address, body)
        if _is_entry(func):
            params = (*func.params, *caller_buffers.values())
        else:
            params = (*func.params, *extra_params.get(func.name, ()))
        attrs = {k: v for k, v in func.attrs if k not in (TENSORS_ATTR, CONSTANTS_ATTR)}
        if func.name in scopes:
            known = tuple(func.attr(MEMORIES_ATTR, ()))
            attrs[MEMORIES_ATTR] = tuple(dict.fromkeys([*known, *sorted(scopes[func.name])]))
        if body is func.body and params == func.params and len(attrs) == len(func.attrs):
            return func
        return func.replace(params=params, body=body, attrs=attrs)

    mod = mod.map_functions(rewrite)
    return mod.with_attr(GLOBALS_ATTR, tuple(arrays)) if arrays else mod


def plan_module(mod: IRModule, target, time_limit: float = DEFAULT_TIME_LIMIT):
    """(the rewritten module, its MemoryPlan)."""
    requests = _requests(mod, target)
    pools = _pools(mod, target, requests)
    _assign(mod, target, requests, pools)
    plans = []
    for pool in pools:  # in order: a full pool spills to later ones
        _spill(pool, requests, time_limit)
        mine = [r for r in requests if r.pool is pool]
        plans.append((_plan_pool(pool, mine, time_limit), mine))
    memory_plan = MemoryPlan(tuple(p for p, _ in plans))
    verify(mod, target, memory_plan)
    return _rewrite(mod, target, plans), memory_plan


def _run(mod: IRModule) -> IRModule:
    target = target_of(mod)
    time_limit = PassContext.current().config.get(TIME_LIMIT_KEY, DEFAULT_TIME_LIMIT)
    mod, memory_plan = plan_module(mod, target, time_limit)
    return mod.with_attr(PLAN_ATTR, memory_plan)


def _check_time_limit(value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise LoomError(f"{TIME_LIMIT_KEY} must be a number of seconds >= 0, got {value!r}")
    return float(value)


register_config(
    TIME_LIMIT_KEY,
    _check_time_limit,
    "seconds plan_memory's exact search may take per pool (default 1)",
)

plan_memory = register_pass(Pass("plan_memory", _run))

__all__ = [
    "DEFAULT_TIME_LIMIT",
    "TIME_LIMIT_KEY",
    "default_pools",
    "plan_memory",
    "plan_module",
    "verify",
]
