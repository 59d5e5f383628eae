"""Which array arguments a function writes: its signature refuses read-only or aliased arrays
for those, so a write it misses is a silent error."""

from loom.abi import FunctionSignature, ParamSpec
from loom.backend.npu import simulator as npu_sim
from loom.codegen.signature import signature_of
from loom.ir import op
from loom.ir.buffer import decl_buffer
from loom.ir.expr import Var
from loom.ir.function import PrimFunc
from loom.ir.stmt import Evaluate, LetStmt, seq

ROW = (op.const(1, "int32"), op.const(16, "int32"))
ACC = op.const(npu_sim.ACC_BASE, "uint32")


def call(name, *args):
    return Evaluate(op.call_extern("int32", name, *args))


def written(func, callees=None) -> list[bool]:
    return [p.written for p in signature_of(func, 64, callees).params]


def test_a_read_only_parameter_keeps_an_input_an_input():
    A, C = decl_buffer((16,), "int8", "A"), decl_buffer((16,), "int8", "C")
    body = seq(
        call("npu_mvin", op.call_intrin("handle", "address_of", A.load([0])), ACC, *ROW),
        call("npu_mvout", op.call_intrin("handle", "address_of", C.load([0])), ACC, *ROW),
    )
    assert written(PrimFunc("f", (A, C), body)) == [False, True]


def test_one_address_object_both_read_and_written_is_written():
    C = decl_buffer((16,), "int8", "C")
    address = op.call_intrin("handle", "address_of", C.load([0]))  # the same object twice
    body = seq(call("npu_mvin", address, ACC, *ROW), call("npu_mvout", address, ACC, *ROW))
    assert written(PrimFunc("f", (C,), body)) == [True]


def test_an_address_bound_to_a_variable_may_be_written_through():
    C = decl_buffer((16,), "int8", "C")
    p = Var("p", "handle")
    body = LetStmt(p, C.data, call("npu_mvin", p, ACC, *ROW))
    assert written(PrimFunc("f", (C,), body)) == [True]


def test_calls_to_other_functions_use_their_signatures():
    A, C = decl_buffer((16,), "int8", "A"), decl_buffer((16,), "int8", "C")
    body = Evaluate(op.call_func("g", A.data, C.data))
    g = FunctionSignature(
        "g", (ParamSpec("x", "int8", (16,), 64, False), ParamSpec("y", "int8", (16,), 64, True))
    )
    assert written(PrimFunc("f", (A, C), body), {"g": g}) == [False, True]
    assert written(PrimFunc("f", (A, C), body)) == [True, True]  # g unknown: it may write both


def test_an_address_cast_before_a_read_only_parameter_is_only_read():
    A, C = decl_buffer((16,), "int8", "A"), decl_buffer((16,), "int8", "C")
    address = op.call_intrin("handle", "address_of", A.load([0]))
    source = op.cast(op.cast(address, "uint64"), "handle")
    body = seq(
        call("npu_mvin", source, ACC, *ROW),
        call("npu_mvout", op.call_intrin("handle", "address_of", C.load([0])), ACC, *ROW),
    )
    assert written(PrimFunc("f", (A, C), body)) == [False, True]
