"""The calling convention's record of a compiled function: what it expects of each argument
(docs/architecture.md, decision 4).

Every entry point has the C signature `int32_t name(void *const *args)`: one pointer per
argument. The signature says what each pointer must point at (a buffer's dtype, shape and
alignment and whether the function writes it, or a scalar's dtype); it is stored in the
artifact's metadata and checked before every call.

A symbolic shape (te.var) makes a dimension the text of an integer expression in the shape
variables (loom/abi/shape_expr.py): "n", "n * 4". Each shape variable that is not an argument
is an `implicit` scalar parameter after the others, which the caller fills in from the shape of
the array whose dimension is that variable by itself (loom/transform/bind_shape_vars.py).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """One argument: a buffer (shape, alignment, whether the function writes it) or a scalar
    (`implicit`: a shape variable the caller binds from the arrays, not an argument it is
    given)."""

    name: str
    dtype: str
    shape: tuple[int | str, ...] | None = None  # None: a scalar; str: a symbolic dimension
    alignment: int = 1
    written: bool = False
    implicit: bool = False

    @property
    def is_symbolic(self) -> bool:
        return self.is_buffer and not all(isinstance(d, int) for d in self.shape)

    @property
    def is_buffer(self) -> bool:
        return self.shape is not None

    def to_json(self) -> dict:
        return dataclasses.asdict(self) | {"shape": list(self.shape) if self.is_buffer else None}

    @staticmethod
    def from_json(d: dict) -> ParamSpec:
        shape = tuple(d["shape"]) if d.get("shape") is not None else None
        return ParamSpec(
            d["name"],
            d["dtype"],
            shape,
            d.get("alignment", 1),
            d.get("written", False),
            d.get("implicit", False),
        )


@dataclasses.dataclass(frozen=True)
class FunctionSignature:
    name: str
    params: tuple[ParamSpec, ...]

    def to_json(self) -> dict:
        return {"name": self.name, "params": [p.to_json() for p in self.params]}

    @staticmethod
    def from_json(d: dict) -> FunctionSignature:
        return FunctionSignature(d["name"], tuple(ParamSpec.from_json(p) for p in d["params"]))

    @property
    def arguments(self) -> tuple[ParamSpec, ...]:
        """The parameters a caller passes: all but the implicit shape variables."""
        return tuple(p for p in self.params if not p.implicit)

    @property
    def is_symbolic(self) -> bool:
        return any(p.implicit or p.is_symbolic for p in self.params)

    def describe(self) -> str:
        parts = []
        for p in self.arguments:
            if p.is_buffer:
                parts.append(f"{p.name}: {p.dtype}[{', '.join(str(d) for d in p.shape)}]")
            else:
                parts.append(f"{p.name}: {p.dtype}")
        return f"{self.name}({', '.join(parts)})"
