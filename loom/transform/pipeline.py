"""The passes of lowering, in order. Read top to bottom.

`Phase` entries are where user passes from PassContext config "tir.add_lower_pass" run.
"""

from __future__ import annotations

import dataclasses

from loom.transform.bind_shape_vars import bind_shape_vars
from loom.transform.check_bounds import check_bounds
from loom.transform.flatten_buffer import flatten_buffer
from loom.transform.inject_double_buffer import inject_double_buffer
from loom.transform.legalize import legalize
from loom.transform.lower_memory import lower_memory_scopes
from loom.transform.lower_parallel import lower_parallel
from loom.transform.lower_pragma import lower_pragmas
from loom.transform.pass_infra import Pass, PassContext
from loom.transform.plan_memory import plan_memory
from loom.transform.simplify import simplify
from loom.transform.unroll_loop import unroll_loop
from loom.transform.vectorize_loop import vectorize_loop
from loom.transform.verify_memory import check_extern_calls, verify_memory


@dataclasses.dataclass(frozen=True)
class Phase:
    name: str


LOWER = [
    Phase("schedule"),  # loops as the schedule made them, N-d buffers
    bind_shape_vars,  # symbolic shapes: each shape variable a parameter the caller fills in
    simplify,
    check_bounds,  # each N-d access proven in range, a build error, or checked at run time
    flatten_buffer,
    inject_double_buffer,  # double_buffer(): two copies of a stage's buffer, one per parity
    Phase("flatten"),  # 1-d buffer accesses
    vectorize_loop,
    unroll_loop,
    Phase("vectorize"),  # vector operations, no unrolled loops left
    simplify,
    Phase("final"),
]


BUILD = [  # after LOWER, for a target (the module's "target" attribute)
    lower_pragmas,  # pragma'd copy nests become data-movement calls (mvin, mvout, ...)
    Phase("memory"),  # backend and user passes see main and every kernel; they may pin buffers
    plan_memory,  # every buffer of the program in a pool at an offset (docs/memory-planning.md)
    lower_memory_scopes,  # every allocation as its scope says: stack, allocator, fixed address
    simplify,
    lower_parallel,  # parallel loops become task functions launched with a closure
    verify_memory,  # no special-scope allocation left, no access to an inaccessible scope
    check_extern_calls,  # every extern call declared by a runtime library for the device
    Phase("build"),  # backend and user passes: the whole module, still in the IR's semantics
    legalize,  # the IR's semantics as primitive operations the code generators render as is
]


def expand(pipeline: list, ctx: PassContext, extra: list[tuple[str, Pass]] = ()) -> list[Pass]:
    """The pipeline with each phase replaced by the passes for it: a backend's (`extra`), then
    the user's (PassContext config "tir.add_lower_pass")."""
    out: list[Pass] = []
    for item in pipeline:
        if isinstance(item, Phase):
            out.extend(p for phase, p in extra if phase == item.name)
            out.extend(ctx.user_passes(item.name))
        else:
            out.append(item)
    return out
