"""flatten_buffer: every buffer access becomes a 1-d access of its storage.

Afterwards every BufferLoad/BufferStore/Allocate refers to a 1-d buffer (same `data`, shape =
the storage size), indices computed from the buffer's strides (storage_align padding included).
Parameters keep their N-d buffers: they describe the function's signature.
"""

from __future__ import annotations

from loom.ir.buffer import Buffer
from loom.ir.expr import BufferLoad, PrimExpr, Var
from loom.ir.function import PrimFunc
from loom.ir.simplify import simplify
from loom.ir.stmt import Allocate, BufferStore, Stmt
from loom.ir.visitor import Mutator
from loom.transform.pass_infra import Pass, register_pass


def flattened(buf: Buffer) -> Buffer:
    """`buf.flattened()` with its size simplified."""
    flat = buf.flattened()
    return flat if flat is buf else flat.replace(shape=(simplify(flat.shape[0]),))


class _Flatten(Mutator):
    def __init__(self) -> None:
        self.flat: dict[Var, Buffer] = {}

    def flat_buffer(self, buf: Buffer) -> Buffer:
        flat = self.flat.get(buf.data)
        if flat is None:
            flat = self.flat[buf.data] = flattened(buf)
        return flat

    def flat_indices(self, buf: Buffer, indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        if buf.ndim == 1 and not buf.strides:
            return indices
        return (simplify(buf.flat_index(indices)),)

    def visit_BufferLoad(self, e: BufferLoad) -> PrimExpr:
        e = self.generic_mutate(e)
        return BufferLoad(
            self.flat_buffer(e.buffer), self.flat_indices(e.buffer, e.indices), e.predicate
        )

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        s = self.generic_mutate(s)
        return BufferStore(
            self.flat_buffer(s.buffer), s.value, self.flat_indices(s.buffer, s.indices), s.predicate
        )

    def visit_Allocate(self, s: Allocate) -> Stmt:
        body = self.visit(s.body)
        return Allocate(self.flat_buffer(s.buffer), body)


def flatten_func(func: PrimFunc) -> PrimFunc:
    return func.with_body(_Flatten().visit(func.body))


flatten_buffer = register_pass(Pass("flatten_buffer", lambda mod: mod.map_functions(flatten_func)))
