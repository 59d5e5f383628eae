"""`te.extern`: a stage whose loop program is written by hand (TVM's ExternOp).

`fcompute(ins, outs)` receives one buffer per input and per output and returns the statement
computing the outputs (or an expression evaluated for its effect, such as an extern call). The
buffers it sees stand for the real ones: lowering puts the stage's input and output buffers in
their place (loom/te/lower.py), so an extern stage reads and writes whole tensors.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

from loom.abi.dtype import DataType
from loom.errors import LoomError
from loom.ir import op as irop
from loom.ir.buffer import Buffer, decl_buffer
from loom.ir.expr import PrimExpr
from loom.ir.offset_buffer import decl_offset_buffer
from loom.ir.stmt import Stmt
from loom.te.multi_output import output_tensor
from loom.te.packed_call import checked
from loom.te.tensor import (
    Extent,
    IterVar,
    Operation,
    Tensor,
    as_int,
    check_dtype,
    normalize_shape,
)


class ExternOp(Operation):
    """`body` computes the outputs, reading `input_placeholders` (the buffers standing for
    `inputs`) and writing `output_placeholders`."""

    def __init__(
        self,
        name: str,
        inputs: tuple[Tensor, ...],
        input_placeholders: tuple[Buffer, ...],
        output_placeholders: tuple[Buffer, ...],
        body: Stmt,
        shapes: tuple[tuple[Extent, ...], ...],
        tag: str = "",
        attrs: dict | None = None,
    ):
        self.name = name
        self.shapes = shapes
        self.inputs = inputs
        self.input_placeholders = input_placeholders
        self.output_placeholders = output_placeholders
        self.body = body
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.reduce_axis: tuple[IterVar, ...] = ()
        self.shape = self.output_shape(0)
        self.dtype = output_placeholders[0].dtype

    @property
    def num_outputs(self) -> int:
        return len(self.output_placeholders)

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self.inputs)

    def output(self, index: int = 0) -> Tensor:
        return output_tensor(self, index)

    def output_shape(self, index: int) -> tuple[Extent, ...]:
        return self.shapes[index]

    def output_dtype(self, index: int) -> DataType:
        return self.output_placeholders[index].dtype


def _shapes(shape, name: str) -> list[tuple[Extent, ...]]:
    """One shape, or a list of shapes (one per output)."""
    if isinstance(shape, list | tuple) and shape and isinstance(shape[0], list | tuple):
        return [normalize_shape(s, f"extern {name}") for s in shape]
    if (
        isinstance(shape, list | tuple)
        and shape
        and not all(isinstance(d, numbers.Integral | PrimExpr) for d in shape)
    ):
        raise TypeError(f"extern {name}: shape must be a tuple of dimensions, got {shape!r}")
    return [normalize_shape(shape, f"extern {name}")]


def _check_buffers(
    buffers, tensors_or_specs: list[tuple[str, tuple, DataType]], what: str, name: str
) -> tuple[Buffer, ...]:
    if not isinstance(buffers, list | tuple) or len(buffers) != len(tensors_or_specs):
        raise ValueError(
            f"extern {name}: {what} must be a list of {len(tensors_or_specs)} buffers, "
            f"got {buffers!r}"
        )
    for b, (label, shape, dt) in zip(buffers, tensors_or_specs):
        if not isinstance(b, Buffer):
            raise TypeError(f"extern {name}: {what} holds buffers (decl_buffer), got {b!r}")
        if b.dtype != dt or len(b.shape) != len(shape):
            raise ValueError(
                f"extern {name}: buffer {b.name} of {what} is {b.dtype} with "
                f"{len(b.shape)} dimensions, but {label} is {dt} with {len(shape)}"
            )
        for got, want in zip(b.shape, shape):
            if irop.convert(got) != irop.convert(want):
                raise ValueError(
                    f"extern {name}: buffer {b.name} of {what} has shape "
                    f"{[str(d) for d in b.shape]}, but {label} has {list(shape)}"
                )
        # lowering puts the tensor's own buffer in its place: compact, from its first element
        offset = getattr(b, "elem_offset", None)
        compact = decl_buffer(b.shape, b.dtype).element_strides()
        if (offset is not None and as_int(offset) != 0) or (
            b.strides and tuple(b.strides) != compact
        ):
            raise ValueError(
                f"extern {name}: buffer {b.name} of {what} declares an element offset or "
                "strides; an extern stage's buffers are whole, compact tensors"
            )
    return tuple(buffers)


def extern(
    shape,
    inputs,
    fcompute: Callable,
    name: str = "extern",
    dtype=None,
    in_buffers=None,
    out_buffers=None,
    tag: str = "",
    attrs: dict | None = None,
):
    """Tensors computed by a hand-written statement: `fcompute(ins, outs)` gets a buffer per
    input tensor and per output and returns a loop-IR statement or an expression (evaluated
    for its effect: `call_extern`, `call_packed`). `shape` is one output's shape or a list of
    shapes; `dtype` one dtype or a list (default: the first input's); `in_buffers` and
    `out_buffers` give the buffers instead of new compact ones. Returns the output tensor, or
    the list of them for several outputs."""
    if not isinstance(inputs, list | tuple):
        raise TypeError(f"extern {name}: inputs must be a list of tensors, got {inputs!r}")
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"extern {name}: inputs must be tensors, got {t!r}")
    if not callable(fcompute):
        raise TypeError(f"extern {name}: fcompute must be a function (ins, outs) -> statement")
    shapes = _shapes(shape, name)
    if dtype is None:
        if not inputs:
            raise ValueError(
                f"extern {name}: cannot infer the output dtype without inputs; pass dtype="
            )
        dtypes = [inputs[0].dtype] * len(shapes)
    elif isinstance(dtype, list | tuple):
        if len(dtype) != len(shapes):
            raise ValueError(f"extern {name}: {len(dtype)} dtypes for {len(shapes)} outputs")
        dtypes = [check_dtype(d) for d in dtype]
    else:
        dtypes = [check_dtype(dtype)] * len(shapes)
    in_specs = [(f"input {t.name}", t.shape, t.dtype) for t in inputs]
    out_specs = [(f"output {k}", s, d) for k, (s, d) in enumerate(zip(shapes, dtypes))]
    if in_buffers is None:
        in_buffers = [decl_offset_buffer(t.shape, t.dtype, t.op.name) for t in inputs]
    if out_buffers is None:
        out_buffers = [decl_offset_buffer(s, d, name) for s, d in zip(shapes, dtypes)]
    ins = _check_buffers(in_buffers, in_specs, "in_buffers", name)
    outs = _check_buffers(out_buffers, out_specs, "out_buffers", name)
    if len({id(b) for b in ins + outs}) != len(ins) + len(outs):
        raise ValueError(f"extern {name}: a buffer is given twice in in_buffers/out_buffers")
    body = fcompute(list(ins), list(outs))
    if isinstance(body, PrimExpr):
        body = checked(body)
    if not isinstance(body, Stmt):
        raise TypeError(
            f"extern {name}: fcompute must return a statement or an expression, got {body!r}"
        )
    op = ExternOp(name, tuple(inputs), ins, outs, body, tuple(shapes), tag, attrs)
    if not op.num_outputs:
        raise LoomError(f"extern {name} has no outputs")
    outputs = [op.output(k) for k in range(op.num_outputs)]
    return outputs[0] if len(outputs) == 1 else outputs
