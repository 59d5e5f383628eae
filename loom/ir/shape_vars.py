"""Shape variables as parameters: a function whose argument buffers have symbolic shapes
(te.var) takes each shape variable as a parameter that the caller fills in from the arrays it
passes (the pass loom/transform/bind_shape_vars.py; the interpreter binds them the same way).

TVM binds a shape variable inside the function, from the `DLTensor` shape of the argument that
defines it. loom's entry points take bare data pointers (docs/architecture.md, decision 4), so
the binding is the caller's: after the function's own parameters comes one scalar parameter per
shape variable that is not a parameter already, in the order the buffers name them first. The
function's attribute `SHAPE_PARAMS_ATTR` counts them; its signature marks them `implicit`, and
the call path (loom/runtime/call.py) reads each one's value from the array whose dimension is
that variable by itself, then checks every dimension of every array against the values (a
dimension such as `n * 4` included), naming the variable when two arrays disagree.

A variable that appears only inside a compound dimension (`n * 4`, `m + 1`) is not defined by
any array: it must be a scalar argument (`[m, A, B]`), or lowering fails here, naming it.
"""

from __future__ import annotations

import keyword

from loom.errors import LoweringError
from loom.ir.buffer import Buffer
from loom.ir.expr import IntImm, Var
from loom.ir.function import PrimFunc
from loom.ir.visitor import free_vars

SHAPE_PARAMS_ATTR = "shape_params"
"""Function attribute: how many of its last parameters are shape variables the caller binds."""


def shape_params(func: PrimFunc) -> int:
    """How many of `func`'s last parameters are shape variables bound from its arguments."""
    return func.attr(SHAPE_PARAMS_ATTR, 0)


def _check_shape_var(func: PrimFunc, buf: Buffer, v: Var) -> None:
    """A shape variable the caller binds: an integer of 32 or 64 bits (a narrower one would wrap
    in the loop extents computed from it), named so that a signature can write it (a Python
    identifier: loom/abi/shape_expr.py)."""
    where = f"function {func.name}: the shape variable {v.name} of argument {buf.name}"
    if not v.dtype.is_integer or v.dtype.bits < 32:
        raise LoweringError(
            f"{where} is {v.dtype}; shape variables must be int32 or int64 (extents computed "
            "from a narrower one would wrap around)"
        )
    if not v.name.isidentifier() or keyword.iskeyword(v.name) or v.name in ("min", "max"):
        raise LoweringError(
            f"{where}: its name must be a Python identifier other than a keyword, min or max "
            "(signatures write shapes as expressions in these names)"
        )


def bind_shape_vars(func: PrimFunc) -> PrimFunc:
    """`func` with its shape variables appended as parameters (itself when it has none)."""
    if func.attr(SHAPE_PARAMS_ATTR) is not None:
        return func  # bound already (a module lowered, then built)
    buffers = [p for p in func.params if isinstance(p, Buffer)]
    if all(isinstance(d, IntImm) for b in buffers for d in b.shape):
        return func
    scalars = {p for p in func.params if isinstance(p, Var)}
    names = {p.name for p in func.params}
    bound: list[Var] = []
    for buf in buffers:
        for d in buf.shape:
            if isinstance(d, Var) and d not in scalars and d not in bound:
                if d.name in names:
                    raise LoweringError(
                        f"function {func.name}: the shape variable {d.name} of argument "
                        f"{buf.name} has the name of another argument; rename one of them"
                    )
                names.add(d.name)
                bound.append(d)
    defined = scalars | set(bound)
    for buf in buffers:
        for v in set().union(*map(free_vars, buf.shape)):
            _check_shape_var(func, buf, v)
        for d in buf.shape:
            missing = sorted(v.name for v in free_vars(d) - defined)
            if missing:
                raise LoweringError(
                    f"function {func.name}: argument {buf.name} has the dimension {d}, but no "
                    f"argument's shape defines {', '.join(missing)} (only a dimension that is "
                    "a variable by itself does); pass it as a scalar argument"
                )
    if not bound:
        return func  # every shape variable is a parameter already
    return func.replace(params=(*func.params, *bound)).with_attr(SHAPE_PARAMS_ATTR, len(bound))
