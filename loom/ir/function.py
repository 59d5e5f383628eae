"""PrimFunc (one function of the loop IR) and IRModule (a set of functions)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from loom.ir.buffer import Buffer
from loom.ir.expr import Var
from loom.ir.node import Node, node
from loom.ir.stmt import Stmt


def _freeze_attrs(attrs) -> tuple[tuple[str, Any], ...]:
    if isinstance(attrs, dict):
        attrs = attrs.items()
    frozen = ((str(k), tuple(v) if isinstance(v, list) else v) for k, v in attrs)
    return tuple(sorted(frozen, key=lambda kv: kv[0]))


@node
class PrimFunc(Node):
    """A function: parameters are buffers (passed by data pointer) or scalar variables."""

    name: str
    params: tuple[Buffer | Var, ...]
    body: Stmt
    attrs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"function name must be an identifier, got {self.name!r}")
        self._set("params", tuple(self.params))
        self._set("attrs", _freeze_attrs(self.attrs))
        seen = set()
        for p in self.params:
            if not isinstance(p, Buffer | Var):
                raise TypeError(f"parameter of {self.name} must be a Buffer or Var, got {p!r}")
            if p.name in seen:
                raise ValueError(f"function {self.name} has two parameters named {p.name!r}")
            seen.add(p.name)

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def with_attr(self, key: str, value: Any) -> PrimFunc:
        attrs = dict(self.attrs)
        attrs[key] = value
        return self.replace(attrs=_freeze_attrs(attrs))

    def with_body(self, body: Stmt) -> PrimFunc:
        return self if body is self.body else self.replace(body=body)


@node
class IRModule(Node):
    """Functions by name, in the order they were added."""

    functions: tuple[PrimFunc, ...]
    attrs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        self._set("functions", tuple(self.functions))
        self._set("attrs", _freeze_attrs(self.attrs))
        names = [f.name for f in self.functions]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"IRModule has more than one function named {sorted(dup)}")

    def __getitem__(self, name: str) -> PrimFunc:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(f"no function {name!r} in module; it has {self.names()}")

    def __contains__(self, name: object) -> bool:
        return any(f.name == name for f in self.functions)

    def __iter__(self) -> Iterator[PrimFunc]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def names(self) -> list[str]:
        return [f.name for f in self.functions]

    def with_function(self, func: PrimFunc) -> IRModule:
        """Replace the function of that name, or add it at the end."""
        if func.name in self:
            funcs = tuple(func if f.name == func.name else f for f in self.functions)
        else:
            funcs = (*self.functions, func)
        return self.replace(functions=funcs)

    def map_functions(self, fn) -> IRModule:
        """Apply `fn(PrimFunc) -> PrimFunc` to every function."""
        funcs = tuple(fn(f) for f in self.functions)
        if all(a is b for a, b in zip(funcs, self.functions)):
            return self
        return self.replace(functions=funcs)

    def attr(self, key: str, default: Any = None) -> Any:
        return dict(self.attrs).get(key, default)

    def with_attr(self, key: str, value: Any) -> IRModule:
        attrs = dict(self.attrs)
        attrs[key] = value
        return self.replace(attrs=_freeze_attrs(attrs))
