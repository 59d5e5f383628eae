"""The registry of intrinsics: operations a `Call(kind=intrin)` may name, with their typing rule.

Every `Call` of an intrinsic is checked against it when built. The built-in intrinsics and
their rules are declared in loom.ir.intrinsics (which needs the expression classes, so it is
imported after them); back ends may register more.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from loom.registry import Registry


@dataclasses.dataclass(frozen=True)
class Intrinsic:
    name: str
    arity: int | None  # None: any number of arguments
    check: Callable  # check(call) raises TypeError when the call is ill-typed
    doc: str


INTRINSICS: Registry[Intrinsic] = Registry("intrinsic", builtins=("loom.ir.intrinsics",))


def register(name: str, arity: int | None, check: Callable, doc: str) -> None:
    """Declare an intrinsic. Re-registering a name replaces it (back ends may refine a rule)."""
    INTRINSICS.register(Intrinsic(name, arity, check, doc), replace=True)


lookup = INTRINSICS.get


def list_intrinsics() -> list[str]:
    return INTRINSICS.names()


def check_call(call) -> None:
    intrin = lookup(call.op)
    if intrin.arity is not None and len(call.args) != intrin.arity:
        raise TypeError(f"intrinsic {call.op} takes {intrin.arity} arguments, got {len(call.args)}")
    intrin.check(call)


TVM_PREFIX = "tir."
"""How TVM spells its intrinsics' names (`tir.exp`): loom's name is the rest."""


def canonical_name(name: str) -> str:
    """The registered name of an intrinsic named `name` or, as TVM names it, `tir.<name>`;
    an unknown name as it is (building its Call then says it is unknown)."""
    if name.startswith(TVM_PREFIX) and name not in INTRINSICS.names():
        rest = name[len(TVM_PREFIX) :]
        if rest in INTRINSICS.names():
            return rest
    return name
