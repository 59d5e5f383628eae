"""bind_shape_vars: each shape variable of a function's argument buffers (te.var in a shape)
becomes a parameter that the caller fills in from the arrays it passes (loom/ir/shape_vars.py)."""

from __future__ import annotations

from loom.ir import shape_vars
from loom.transform.pass_infra import Pass, register_pass

bind_shape_vars = register_pass(
    Pass("bind_shape_vars", lambda mod: mod.map_functions(shape_vars.bind_shape_vars))
)
