"""The calling convention's record of a compiled function: what it expects of each argument
(docs/architecture.md, decision 4).

Every entry point has the C signature `int32_t name(void *const *args)`: one pointer per
argument. The signature says what each pointer must point at (a buffer's dtype, shape and
alignment and whether the function writes it, or a scalar's dtype); it is stored in the
artifact's metadata and checked before every call.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """One argument: a buffer (shape, alignment, whether the function writes it) or a scalar."""

    name: str
    dtype: str
    shape: tuple[int, ...] | None = None  # None: a scalar
    alignment: int = 1
    written: bool = False

    @property
    def is_buffer(self) -> bool:
        return self.shape is not None

    def to_json(self) -> dict:
        return dataclasses.asdict(self) | {"shape": list(self.shape) if self.is_buffer else None}

    @staticmethod
    def from_json(d: dict) -> ParamSpec:
        shape = tuple(d["shape"]) if d.get("shape") is not None else None
        return ParamSpec(
            d["name"], d["dtype"], shape, d.get("alignment", 1), d.get("written", False)
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

    def describe(self) -> str:
        parts = []
        for p in self.params:
            parts.append(
                f"{p.name}: {p.dtype}{list(p.shape)}" if p.is_buffer else f"{p.name}: {p.dtype}"
            )
        return f"{self.name}({', '.join(parts)})"
