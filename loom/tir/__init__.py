"""TVM's `tvm.tir` names over loom's loop IR (`import loom as tvm`; docs/tvm-compat.md).

The IR classes are loom.ir's; those whose fields TVM orders or types otherwise (IntImm,
FloatImm, Evaluate, For, Allocate, AttrStmt, PrimFunc) are TVM's constructors making loom's
nodes (loom/tir/nodes.py). `decl_buffer` makes TVM's buffers with an element offset,
`ir_builder` writes statements, `call_intrin` takes TVM's `tir.` names.
"""

from loom.ir.buffer import Buffer
from loom.ir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Broadcast,
    BufferLoad,
    Call,
    CallKind,
    Cast,
    Div,
    FloorDiv,
    FloorMod,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    StringImm,
    Sub,
    Var,
)
from loom.ir.function import IRModule
from loom.ir.offset_buffer import decl_offset_buffer as decl_buffer
from loom.ir.op import (
    abs_ as abs,
)
from loom.ir.op import (
    all_ as all,
)
from loom.ir.op import (
    any_ as any,
)
from loom.ir.op import (
    floordiv,
    floormod,
    if_then_else,
    likely,
    max_value,
    min_value,
    truncdiv,
    truncmod,
)
from loom.ir.stmt import (
    AssertStmt,
    BufferStore,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)
from loom.te.math import ceil, erf, exp, floor, log, pow, round, sigmoid, sqrt, tanh
from loom.te.operation import const
from loom.te.operation import size_var as SizeVar
from loom.te.packed_call import call_packed
from loom.tir import ir_builder, stmt_functor
from loom.tir.function import PrimFunc
from loom.tir.nodes import Allocate, AttrStmt, Evaluate, FloatImm, For, IntImm
from loom.tir.op import (
    call_extern,
    call_intrin,
    call_pure_extern,
    indexdiv,
    indexmod,
    reinterpret,
)

__all__ = [
    "EQ",
    "GE",
    "GT",
    "LE",
    "LT",
    "NE",
    "Add",
    "Allocate",
    "And",
    "AssertStmt",
    "AttrStmt",
    "Broadcast",
    "Buffer",
    "BufferLoad",
    "BufferStore",
    "Call",
    "CallKind",
    "Cast",
    "Div",
    "Evaluate",
    "FloatImm",
    "FloorDiv",
    "FloorMod",
    "For",
    "ForKind",
    "IRModule",
    "IfThenElse",
    "IntImm",
    "Let",
    "LetStmt",
    "Max",
    "Min",
    "Mod",
    "Mul",
    "Not",
    "Or",
    "PrimExpr",
    "PrimFunc",
    "Ramp",
    "Select",
    "SeqStmt",
    "SizeVar",
    "Stmt",
    "StringImm",
    "Sub",
    "Var",
    "abs",
    "all",
    "any",
    "call_extern",
    "call_intrin",
    "call_packed",
    "call_pure_extern",
    "ceil",
    "const",
    "decl_buffer",
    "erf",
    "exp",
    "floor",
    "floordiv",
    "floormod",
    "if_then_else",
    "indexdiv",
    "indexmod",
    "ir_builder",
    "likely",
    "log",
    "max_value",
    "min_value",
    "pow",
    "reinterpret",
    "round",
    "sigmoid",
    "sqrt",
    "stmt_functor",
    "tanh",
    "truncdiv",
    "truncmod",
]
