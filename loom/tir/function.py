"""TVM's `tvm.tir.PrimFunc(params, body, ...)`, making loom's PrimFunc."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loom.ir.buffer import Buffer
from loom.ir.expr import Var
from loom.ir.function import PrimFunc as LoomPrimFunc
from loom.ir.offset_buffer import lower_offset_buffers, plain_buffer
from loom.ir.stmt import Stmt
from loom.tir.nodes import StandsFor


class PrimFunc(metaclass=StandsFor):
    """`PrimFunc(params, body, ret_type=None, buffer_map=None, attrs=None)` returns loom's
    PrimFunc: `params` are buffers, scalar Vars, or handle Vars that `buffer_map` maps to their
    buffers; its name is `attrs["global_symbol"]` ("main" without it). The buffers of
    `tir.decl_buffer` and the ir_builder become loom's (their element offset must be 0)."""

    loom_class = LoomPrimFunc

    def __new__(
        cls,
        params: Sequence[Buffer | Var],
        body: Stmt,
        ret_type=None,
        buffer_map: Mapping[Var, Buffer] | None = None,
        attrs: Mapping | None = None,
        span=None,
    ) -> LoomPrimFunc:
        del span
        if ret_type is not None:
            raise TypeError(
                "PrimFunc: ret_type is not supported: loom's functions return their status"
            )
        if not isinstance(body, Stmt):
            raise TypeError(f"PrimFunc: body must be a statement, got {body!r}")
        buffer_map = dict(buffer_map or {})
        attrs = dict(attrs or {})
        name = str(attrs.pop("global_symbol", "main"))
        loom_params = []
        for p in params:
            if isinstance(p, Var) and p in buffer_map:
                p = buffer_map[p]
            if isinstance(p, Buffer):
                p = plain_buffer(p)
            elif not isinstance(p, Var):
                raise TypeError(f"PrimFunc: a parameter must be a Buffer or a Var, got {p!r}")
            loom_params.append(p)
        return LoomPrimFunc(name, tuple(loom_params), lower_offset_buffers(body), attrs)
