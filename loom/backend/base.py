"""The accelerator plug-in API: one class declares everything an accelerator adds to loom.

A `Backend` names its target (`loom.build(..., target=<name>)`), the memories of the
accelerator (memory scopes with fixed address ranges and who may access them), the runtime
library of its instructions (the symbols generated code may call), its tensor intrinsics,
its pragma rules (data-movement loops to instructions), its operator strategies (op name ->
compute and schedule), its passes at named phases, and its code generation. Passes always
receive the whole IRModule: the host function and the accelerator kernels.
"""

from __future__ import annotations

from collections.abc import Callable

from loom.errors import LoomError
from loom.ir import op
from loom.ir.buffer import Buffer
from loom.ir.function import IRModule, PrimFunc
from loom.ir.stmt import NOP, AssertStmt
from loom.memory.pragma import PragmaRule
from loom.memory.scope import MemoryScope
from loom.runtime import abi
from loom.runtime.module import Module
from loom.te.tensorize import TensorIntrin
from loom.transform.pass_infra import PHASES, Pass, as_pass

KERNEL_ATTR = "backend_kernel"
"""PrimFunc attribute naming the backend whose kernel the function is."""


class Backend:
    """Override what your accelerator has; the defaults declare nothing."""

    name: str = ""
    doc: str = ""
    vector_ir: bool = False
    """Whether `codegen` takes vector IR (False: vectorized loops are lowered serially, as for
    C, whose compiler vectorizes them itself)."""

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

    def partition(self, func: PrimFunc) -> IRModule:
        """The module of one lowered function: by default the whole computation becomes the
        kernel `<name>_<backend>` and the host function `<name>` calls it."""
        kernel = func.replace(name=f"{func.name}_{self.name}").with_attr(KERNEL_ATTR, self.name)
        args = [p.data if isinstance(p, Buffer) else p for p in func.params]
        call = op.equal(op.call_func(kernel.name, *args), 0)
        host = PrimFunc(func.name, func.params, AssertStmt(call, None, NOP))
        return IRModule((host, kernel))

    def codegen(self, mod: IRModule, target) -> Module:
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


_BACKENDS: dict[str, Backend] = {}


_OWNERS: dict[tuple[str, str], str] = {}
"""(kind, name) of each memory scope, runtime library and pragma rule a backend registered ->
that backend's name: only the same backend may replace them."""


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
    from loom import memory
    from loom.target.target import KINDS

    if not isinstance(backend, Backend):
        raise TypeError(f"register takes a loom.backend.Backend, got {backend!r}")
    if not backend.name.isidentifier() or backend.name in KINDS:
        raise LoomError(
            f"backend name must be an identifier other than {list(KINDS)}, got {backend.name!r}"
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
            owner = _OWNERS.get((kind, item.name))
            if item.name in existing and existing[item.name] != item and owner != backend.name:
                by = f"by backend {owner}" if owner else "by loom or by hand"
                raise LoomError(
                    f"backend {backend.name}: its {kind} {item.name!r} is already registered "
                    f"{by} with another declaration; give yours another name"
                )
    owners = dict(_OWNERS)
    undo = []  # how to put back what was there, should a registry refuse an item
    try:
        for kind, items, registered, register_part, unregister_part in parts:
            existing = {x.name: x for x in registered}
            for item in items:
                old = existing.get(item.name)
                undo.append(
                    (lambda r=register_part, o=old: r(o, replace=True))
                    if old is not None
                    else (lambda u=unregister_part, n=item.name: u(n))
                )
                register_part(item, replace=True)
                # a name is owned by the backend that brought it; equal declarations of
                # names others own are accepted, not taken over
                if old is None:
                    _OWNERS[(kind, item.name)] = backend.name
    except Exception:
        for restore in reversed(undo):
            restore()
        _OWNERS.clear()
        _OWNERS.update(owners)
        raise
    _BACKENDS[backend.name] = backend
    return backend


def get(name: str) -> Backend:
    try:
        return _BACKENDS[name]
    except KeyError:
        raise LoomError(f"no backend {name!r}; registered: {sorted(_BACKENDS)}") from None


def list_backends() -> list[Backend]:
    return [_BACKENDS[n] for n in sorted(_BACKENDS)]


def is_backend(name: str) -> bool:
    return name in _BACKENDS
