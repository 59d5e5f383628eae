"""Parallel loops: the body is outlined into a task function run by the runtime's thread pool.

```
struct f_task_0_closure { int32_t begin; int32_t extent; float *A; ... };
static int32_t f_task_0(int32_t task, int32_t num_tasks, void *closure) { ... }
...
struct f_task_0_closure f_task_0_env = {.begin = 0, .extent = 16, .A = A};
if (loom_parallel_launch(f_task_0, &f_task_0_env, 0) != 0) { cleanups; return -1; }
```
Each task runs a contiguous chunk of the iterations, as the LLVM back end's tasks do. A task
that fails has set the last error; the launch returns non-zero and the caller fails with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom.codegen.c.expr import CExpr
from loom.codegen.c.names import Namer
from loom.codegen.c.types import c_type
from loom.codegen.common import captured_vars
from loom.ir import stmt as S

if TYPE_CHECKING:
    from loom.codegen.c.function import FunctionCodegen
    from loom.codegen.c.module import ModuleCodegen


def parallel_for(
    module: ModuleCodegen, cg: FunctionCodegen, loop: S.For, begin: CExpr, extent: CExpr
) -> None:
    """Outline `loop` (whose bounds `cg` has evaluated) and launch it from `cg`."""
    captured = captured_vars(loop.body, loop.loop_var)
    task = module.task_name(cg.func_name)
    struct = f"struct {task}_closure"
    sub = module.function_codegen(cg.func_name)
    sub.element_types, sub.bounds = cg.element_types, cg.bounds
    cl = sub.namer.fresh("cl")
    # restrict pointers only if every captured pointer reaches memory no other one does
    restrict = all(v in cg.distinct for v in captured if v.dtype.is_handle)
    fields, unpack = [], []
    field_names = Namer(["begin", "extent"])
    for var in captured:
        field, outer = field_names.fresh(cg.value_of(var)), cg.value_of(var)
        if var.dtype.is_handle:
            element = cg.pointee.get(var)
            ctype = f"{element or 'void'} *"
            sub.pointee[var] = element
            if var in cg.distinct:
                sub.distinct.add(var)
            local = f"{ctype}{'restrict ' if restrict else ''}{sub.bind(var)}"
        else:
            ctype = c_type(var.dtype)
            local = f"const {ctype} {sub.bind(var)}"
        fields.append((field, ctype, outer))
        unpack.append(f"{local} = {cl}->{field};")

    t = c_type(loop.loop_var.dtype)
    members = [f"{t} begin;", f"{t} extent;"]
    members += [f"{ctype}{'' if ctype.endswith('*') else ' '}{f};" for f, ctype, _ in fields]
    module.definitions.append("\n    ".join([f"{struct} {{", *members]) + "\n};")

    k, chunk, start, stop = (sub.namer.fresh(n) for n in ("k", "chunk", "start", "stop"))
    sub.emit(f"const {struct} *{cl} = (const {struct} *)closure;")
    for line in unpack:
        sub.emit(line)
    sub.emit(f"const int64_t {chunk} = ((int64_t){cl}->extent + num_tasks - 1) / num_tasks;")
    sub.emit(f"const int64_t {start} = (int64_t)task * {chunk};")
    end = f"{start} + {chunk}"
    sub.emit(f"const int64_t {stop} = {end} < {cl}->extent ? {end} : {cl}->extent;")
    sub.emit(f"for (int64_t {k} = {start}; {k} < {stop}; ++{k}) {{")
    sub.emit(f"    const {t} {sub.bind(loop.loop_var)} = ({t})({cl}->begin + {k});")
    sub.loop_body(loop)
    sub.emit("}")
    sub.emit("return 0;")
    module.check_stack(sub, cg.func_name)
    module.add_definition(
        f"/* parallel loop {loop.loop_var.name} of {cg.func_name} */",
        f"static int32_t {task}(int32_t task, int32_t num_tasks, void *closure)",
        sub.lines,
    )

    env = cg.namer.fresh(f"{task}_env")
    values = [f".begin = {begin.text}", f".extent = {extent.text}"]
    values += [f".{field} = {outer}" for field, _, outer in fields]
    cg.emit(f"{struct} {env} = {{{', '.join(values)}}};")
    module.use_runtime("loom_parallel_launch")
    cg.error_if(f"loom_parallel_launch({task}, &{env}, 0) != 0", None)
