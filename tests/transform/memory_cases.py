"""What the tests of lower_memory_scopes and plan_memory share: a one-function module around a
body, and a loop that reads and writes a buffer (their fixed-address memories: the fixture
`scopes` of tests/transform/conftest.py)."""

from loom.ir import FloatImm, For, IntImm, IRModule, PrimFunc, Var, decl_buffer, seq
from loom.target import Target

SCRATCH_BASE = 0x1000
WORDS_BASE = 0x200


def func(build, target="llvm", attrs=()):
    """The module of one function `main(A)` (A: 8 floats) whose body is `build(A)`."""
    A = decl_buffer((8,), "float32", "A")
    mod = IRModule((PrimFunc("main", (A,), build(A), attrs),))
    return mod.with_attr("target", Target(target))


def copy_through(T, A):
    """for i in 0..8: T[i] = A[i]; A[i] = T[i] * 2"""
    i = Var("i")
    body = seq(T.store(A[i], (i,)), A.store(T[i] * FloatImm(2.0), (i,)))
    return For(i, IntImm(0), IntImm(8), "serial", body)
