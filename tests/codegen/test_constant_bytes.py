"""A library's constant arrays (plan_memory's constant pool: a model's weights) reach the object
code byte for byte: the LLVM code generator writes them as hex escapes (loom/codegen/llvm/
module.py, `_bytes_text`), every byte value included."""

import numpy as np
import pytest

import loom
from loom.ir import op
from loom.ir.buffer import decl_buffer
from loom.ir.expr import StringImm, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.stmt import For, ForKind, LetStmt
from loom.memory.program import GLOBALS_ATTR, GlobalArray

SYMBOL = "loom_test_bytes"


def reading(data: bytes) -> IRModule:
    """out[i] = the library's array `SYMBOL` (holding `data`) at i."""
    n = len(data)
    out = decl_buffer((n,), "uint8", "out")
    table = decl_buffer((n,), "uint8", "table")
    i = Var("i")
    copy = For(i, op.const(0), op.const(n), ForKind.SERIAL, out.store(table[i], [i]))
    address = op.call_intrin("handle", "global_address", StringImm(SYMBOL))
    func = PrimFunc("read_table", (out,), LetStmt(table.data, address, copy))
    return IRModule((func,)).with_attr(GLOBALS_ATTR, (GlobalArray(SYMBOL, n, 64, data),))


@pytest.mark.parametrize(
    "data",
    [
        bytes(range(256)),  # every value: printable, quote, backslash, NUL, high bytes
        b'"\\"\\\\\x00\n',
        np.linspace(-1, 1, 1000, dtype=np.float32).tobytes(),
    ],
)
def test_constant_bytes_reach_the_code(data):
    mod = loom.build(reading(data), target="llvm")
    out = np.zeros(len(data), np.uint8)
    mod["read_table"](out)
    assert out.tobytes() == data
