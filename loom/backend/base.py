"""The target plug-in API: one class declares everything a kind of target adds to loom.

A `Backend` names its target kind (`loom.build(..., target=<name>)`), the options its target
strings take, the device its code runs on, its memories (memory scopes, with who may access
them), the runtime libraries its code may call, its tensor intrinsics, its pragma rules
(data-movement loops to instructions), its operator strategies (op name -> compute and
schedule), its passes at named phases, and its code generation. Passes always receive the whole
IRModule: the host function and the accelerator kernels.

Every target kind is one: the CPU kinds `llvm` and `c` (loom/backend/cpu), Hexagon
(loom/backend/hexagon), the reference NPU (loom/backend/npu) and a user's accelerator are all
registered with `register`, and `loom.build` asks this registry how to build a target.
An accelerator (`partitions = True`, the default) has its functions split into a host function
that runs on the CPU and kernels for the accelerator.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from loom import abi, memory
from loom.errors import LoomError
from loom.ir import op
from loom.ir.buffer import Buffer
from loom.ir.function import IRModule, PrimFunc
from loom.ir.stmt import NOP, AssertStmt
from loom.memory.pragma import PragmaRule
from loom.memory.scope import MemoryScope
from loom.registry import Registry
from loom.runtime.module import Module
from loom.te.tensorize import TensorIntrin
from loom.transform.lower_memory import DEVICE_ATTR
from loom.transform.pass_infra import PHASES, Pass, as_pass

KERNEL_ATTR = "backend_kernel"
"""PrimFunc attribute naming the backend whose kernel the function is."""


class Backend:
    """Override what your target has; the defaults declare nothing."""

    name: str = ""
    doc: str = ""
    vector_ir: bool = False
    """Whether `codegen` takes vector IR (False: vectorized loops are lowered serially, as for
    C, whose compiler vectorizes them itself)."""
    device: str = "cpu"
    """The processor the generated code runs on, as memory scopes and runtime libraries name
    it. An accelerator's code runs on the host CPU and calls the accelerator's library."""
    kernel_device: str | None = None
    """The device its kernels (`partition`'s) run on, as memory scopes and pools name it, for
    the checks of who touches what (None: the backend's name)."""
    partitions: bool = True
    """Whether a function is split into a host function and kernels (`partition`)."""
    options: tuple[str, ...] = ("mtriple", "mcpu", "mattr")
    """The target-string options `-key=value` this kind takes (besides -opt-level, -align and
    -stack-limit, which every kind takes)."""
    masked_loads_are_safe: bool = True
    """Whether the code generator's masked vector loads never touch masked-off lanes."""
    replaceable: bool = True
    """Whether registering another backend under this name replaces this one (loom's CPU and
    Hexagon kinds say no)."""

    def describe_target(self, options: dict[str, str], host: tuple[str, str, str]):
        """(triple, cpu, features) of a target of this kind from its options (consume the ones
        used; the others stay options). `host` is the host's (triple, cpu, features). By
        default: -mtriple/-mcpu/-mattr, the host's where not given."""
        host_triple, host_cpu, host_features = host
        triple = options.pop("mtriple", host_triple)
        is_host = triple == host_triple
        cpu = options.pop("mcpu", host_cpu if is_host else "generic")
        features = options.pop("mattr", host_features if is_host and cpu == host_cpu else "")
        return triple, cpu, features

    def target_text(self, target) -> str:
        """The target string (without its remaining options) that parses back to `target`."""
        return f"{self.name} -mtriple={target.triple} -mcpu={target.cpu}"

    def memory_capacity(self, target, scope: str) -> int | None:
        """The target's own limit on a memory scope (bytes), or None."""
        return None

    def vector_bytes(self, target) -> int | None:
        """Bytes in the widest vector register of `target`, or None: decided by its triple."""
        return None

    def vector_problem(self, target, node) -> str | None:
        """Why the code generator cannot emit `node` (an expression or statement of vector
        code) for `target`, or None if it can. A vectorized loop with such a node runs as
        power-of-two vectors and the rest, or serially (loom/transform/vectorize_loop.py)."""
        return None

    def llvm_fixups(self) -> tuple[Callable[[str], str], ...]:
        """Rewrites of the optimized LLVM IR text, run before instruction selection (for an
        LLVM-based code generator: work-arounds for what the LLVM back end cannot compile)."""
        return ()

    def memories(self) -> list[MemoryScope]:
        return []

    def libraries(self) -> list[abi.RuntimeLibrary]:
        return []

    def intrinsics(self) -> dict[str, TensorIntrin]:
        return {}

    def pragma_rules(self) -> list[PragmaRule]:
        return []

    def strategies(self) -> dict[str, Callable]:
        """op name -> function returning (schedule, args) for that operator."""
        return {}

    def passes(self) -> list[tuple[str, Pass]]:
        """(phase, pass) pairs: PHASES of the lowering pipeline, or "build" (after memory
        lowering and the checks)."""
        return []

    def schedule_group(self, s, outputs: list, pattern, target) -> None:
        """Schedule further, in place, the kernel of one node or fused group of a model for
        `target`: `s` has loom/graph/lower.py's default schedule (intermediates inlined, a
        reduction inside its epilogue's innermost loop), `outputs` are the kernel's output
        tensors and `pattern` the group's fusion pattern (loom.graph.ops.Pattern). By default
        nothing: the default schedule is correct everywhere."""

    def graph_patterns(self) -> list:
        """The chains of graph operators this target takes from a model
        (loom.graph.passes.partition.GraphPattern), longest first; the host keeps the rest."""
        return []

    def graph_passes(self, target) -> list:
        """(phase, graph pass) pairs run on the whole graph of a model compiled for `target` at
        the graph pipeline's phases (loom/graph/passes/pipeline.py), before a user's."""
        return []

    def lower_region(self, region, graph, name: str) -> list[PrimFunc]:
        """The functions of one of this backend's regions of `graph` (a `loom.region` node):
        the first, named `name`, is host code taking the region's inputs (constants included,
        each once, in order) then its outputs, and main calls it; the others are the kernels it
        calls."""
        raise LoomError(
            f"backend {self.name} declares graph patterns but does not lower its regions "
            "(define lower_region)"
        )

    def partition(self, func: PrimFunc) -> IRModule:
        """The module of one lowered function: by default the whole computation becomes the
        kernel `<name>_<backend>` and the host function `<name>` calls it (only if
        `partitions`)."""
        kernel = func.replace(name=f"{func.name}_{self.name}").with_attr(KERNEL_ATTR, self.name)
        kernel = kernel.with_attr(DEVICE_ATTR, self.kernel_device or self.name)
        args = [p.data if isinstance(p, Buffer) else p for p in func.params]
        call = op.equal(op.call_func(kernel.name, *args), 0)
        host = PrimFunc(func.name, func.params, AssertStmt(call, None, NOP))
        return IRModule((host, kernel))

    def codegen(self, mod: IRModule, target) -> Module:
        """The module tree of `mod` lowered for `target`: code generated, not yet linked
        (loom.packaging.finish resolves its symbols, links and loads it)."""
        raise LoomError(f"backend {self.name} defines no code generation")

    def strategy(self, op_name: str, *args, **kwargs):
        """(schedule, args) of operator `op_name` on this accelerator."""
        table = self.strategies()
        if op_name not in table:
            raise LoomError(
                f"backend {self.name} has no strategy for {op_name!r}; it has {sorted(table)}"
            )
        return table[op_name](*args, **kwargs)

    def __repr__(self) -> str:
        return f"<loom backend {self.name}>"


def _check_backend(backend) -> None:
    if not isinstance(backend, Backend):
        raise TypeError(f"register takes a loom.backend.Backend, got {backend!r}")


BACKENDS: Registry[Backend] = Registry(
    "target kind",
    check=_check_backend,
    builtins=("loom.target",),  # llvm, c, hexagon, npu
)


@dataclasses.dataclass(frozen=True)
class _Owner:
    """Backend `backend` brought the memory scope, runtime library or pragma rule `name` of
    kind `kind`: only the same backend may replace it."""

    kind: str
    name: str
    backend: str


_OWNERS: Registry[_Owner] = Registry("owner", key=lambda o: f"{o.kind}:{o.name}")


def _owner(kind: str, name: str) -> str | None:
    found = _OWNERS.find(f"{kind}:{name}")
    return found.backend if found is not None else None


def checked_passes(backend: Backend) -> list[tuple[str, Pass]]:
    """The backend's passes as (phase, Pass), each phase one of PHASES."""
    out = []
    for item in backend.passes():
        if not isinstance(item, tuple) or len(item) != 2:
            raise LoomError(
                f"backend {backend.name}: passes() must give (phase, pass), got {item!r}"
            )
        phase, p = item
        if phase not in PHASES:
            raise LoomError(
                f"backend {backend.name}: unknown phase {phase!r} for pass {p!r}; phases are "
                f"{list(PHASES)}"
            )
        out.append((phase, as_pass(p)))
    return out


def register(backend: Backend) -> Backend:
    """Make `backend` available: its memories, runtime libraries and pragma rules are
    registered, and `target=<backend.name>` builds for it. A name already registered by loom
    or by another backend is an error unless the same declaration is registered again, and
    nothing is registered then."""
    _check_backend(backend)
    if not backend.name.isidentifier():
        raise LoomError(f"backend name must be an identifier, got {backend.name!r}")
    old = BACKENDS.find(backend.name)
    if old is not None and old is not backend and not old.replaceable:
        raise LoomError(
            f"backend name {backend.name!r} is taken by one of loom's own target kinds "
            f"{[b.name for b in BACKENDS if not b.replaceable]}; give yours another name"
        )
    checked_passes(backend)
    for name, intrin in backend.intrinsics().items():
        if not isinstance(intrin, TensorIntrin):
            raise TypeError(
                f"backend {backend.name}: intrinsic {name!r} must be a TensorIntrin "
                f"(loom.te.decl_tensor_intrin), got {intrin!r}"
            )
    parts = [  # kind, declared, registered now, register, unregister
        ("memory scope", backend.memories(), memory.list(), memory.register, memory.unregister),
        (
            "runtime library",
            backend.libraries(),
            abi.list_libraries(),
            abi.register_library,
            abi.unregister_library,
        ),
        (
            "pragma rule",
            backend.pragma_rules(),
            memory.list_pragma_rules(),
            memory.register_pragma_rule,
            memory.pragma.unregister_pragma_rule,
        ),
    ]
    for kind, items, registered, _, _ in parts:  # refuse before registering anything
        existing = {x.name: x for x in registered}
        for item in items:
            owner = _owner(kind, item.name)
            if item.name in existing and existing[item.name] != item and owner != backend.name:
                by = f"by backend {owner}" if owner else "by loom or by hand"
                raise LoomError(
                    f"backend {backend.name}: its {kind} {item.name!r} is already registered "
                    f"{by} with another declaration; give yours another name"
                )
    owners = _OWNERS.snapshot()
    undo = []  # how to put back what was there, should a registry refuse an item
    try:
        for kind, items, registered, register_part, unregister_part in parts:
            existing = {x.name: x for x in registered}
            for item in items:
                old = existing.get(item.name)
                undo.append(
                    (lambda r=register_part, o=old: r(o, replace=True))
                    if old is not None
                    else (lambda u=unregister_part, n=item.name: u(n, missing_ok=True))
                )
                register_part(item, replace=True)
                # a name is owned by the backend that brought it; equal declarations of
                # names others own are accepted, not taken over
                if old is None:
                    _OWNERS.register(_Owner(kind, item.name, backend.name), replace=True)
    except Exception:
        for restore in reversed(undo):
            restore()
        _OWNERS.restore(owners)
        raise
    BACKENDS.register(backend, replace=True)
    return backend


get = BACKENDS.get
list_backends = BACKENDS.items


def is_backend(name: str) -> bool:
    return name in BACKENDS
