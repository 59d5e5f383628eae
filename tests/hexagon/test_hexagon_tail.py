"""A vectorized loop whose length is not a multiple of the vector: the whole vectors run
unguarded and only the last, partial one is guarded (vectorize_loop peels it). Without a target,
on a CPU and on Hexagon the tail is one masked vector; in C (scalar code) it is one guarded
iteration of the loop over vectors. On Hexagon the tail's masked loads read only the aligned
HVX blocks that hold an enabled lane and its store is a predicated HVX store
(loom/codegen/llvm/hvx.py), so nothing is read past a buffer's last aligned block. Results
match numpy on Hexagon (qemu), LLVM and C for lengths below, at and above multiples of the
vector, and for rows that start anywhere in an HVX block."""

import re

import numpy as np
import pytest

import loom
from loom import te
from loom.backend import hexagon
from loom.backend.hexagon import strategies as hx
from loom.ir.expr import BufferLoad
from loom.ir.stmt import BufferStore, For, IfThenElse
from loom.ir.visitor import Visitor

from .conftest import missing_tools

TARGET = loom.target.hexagon("v66")
LANES = 128  # int8 lanes of one 128-byte HVX vector
LENGTHS = [1, 2, 3, 31, 64, 100, 127, 128, 129, 255, 300, 1000, 1024, 1151]


def fmadd(x, y):
    return x * y + x


class _Stores(Visitor):
    """Every store with the loops around it and whether a guard (an `if`) encloses it."""

    def __init__(self):
        self.loops: tuple[For, ...] = ()
        self.guarded = False
        self.found: list[tuple[BufferStore, tuple[For, ...], bool]] = []

    def visit_For(self, s):
        saved, self.loops = self.loops, (*self.loops, s)
        self.generic_visit(s)
        self.loops = saved

    def visit_IfThenElse(self, s: IfThenElse):
        saved, self.guarded = self.guarded, True
        self.generic_visit(s)
        self.guarded = saved

    def visit_BufferStore(self, s: BufferStore):
        self.found.append((s, self.loops, self.guarded))


def stores_of(mod, buffer="Y"):
    v = _Stores()
    v.visit(next(iter(mod)).body)
    return [found for found in v.found if found[0].buffer.name == buffer]


def masked(store: BufferStore) -> bool:
    loads = []

    class Loads(Visitor):
        def visit_BufferLoad(self, e: BufferLoad):
            loads.append(e)
            self.generic_visit(e)

    Loads().visit(store.value)
    return store.predicate is not None or any(ld.predicate is not None for ld in loads)


def whole_vector_loops(n):
    """The loop extents around the store of the whole vectors (simplify inlines one of 1)."""
    return [n // LANES] if n // LANES > 1 else []


def elementwise(n):
    return hx.elementwise(fmadd, (n,), 2, "int8", TARGET)


def _a_masked_vector_load() -> BufferLoad:
    """A contiguous masked vector load, as the vectorizer makes for a tail."""
    found = []

    class Loads(Visitor):
        def visit_BufferLoad(self, e: BufferLoad):
            if e.predicate is not None:
                found.append(e)

    Loads().visit(next(iter(loom.lower(*elementwise(100), name="k"))).body)
    return found[0]


HEXAGON_MASKED_LOADS = hexagon.vector_problem(_a_masked_vector_load()) is None
"""Whether the Hexagon back end takes contiguous masked vector loads (which the code generator
emits as aligned-block loads); until it does, its tails run serially."""
needs_hexagon_masked_loads = pytest.mark.skipif(
    not HEXAGON_MASKED_LOADS,
    reason="loom/backend/hexagon/__init__.py's vector_problem still refuses contiguous masked "
    "vector loads (loom/codegen/llvm/hvx.py emits them safely)",
)

TAIL_TARGETS = [
    pytest.param(None, id="no-target"),
    pytest.param("llvm", id="llvm"),
    pytest.param(TARGET, id="hexagon", marks=needs_hexagon_masked_loads),
]


@pytest.mark.parametrize("target", TAIL_TARGETS)
@pytest.mark.parametrize("n", [n for n in LENGTHS if n > LANES])
def test_lowered_tail_is_one_masked_vector(target, n):
    stores = stores_of(loom.lower(*elementwise(n), name="k", target=target))
    full = [(s, loops) for s, loops, guarded in stores if s.value.dtype.lanes == LANES]
    assert [s.value.dtype.lanes for s, _, _ in stores] == [LANES] * len(full)
    assert all(not guarded for _, _, guarded in stores)
    if n % LANES == 0:
        ((store, loops),) = full
        assert not masked(store) and [lp.extent.value for lp in loops] == whole_vector_loops(n)
        return
    (head, head_loops), (tail, tail_loops) = full
    # whole vectors: one unmasked store in a loop over them
    assert not masked(head) and [lp.extent.value for lp in head_loops] == whole_vector_loops(n)
    # the last, partial vector: one masked store, outside every loop
    assert masked(tail) and tail_loops == ()
    assert tail.predicate is not None


@pytest.mark.parametrize("n", [n for n in LENGTHS if n > LANES])
def test_lowered_tail_in_c_is_one_guarded_iteration(n):
    """C takes scalar code: the loop over whole vectors runs unguarded, then one iteration of
    the vector loop's body (its serial loop over the lanes) under the guard."""
    stores = stores_of(loom.lower(*elementwise(n), name="k", target="c"))
    shapes = [([lp.extent.value for lp in loops], guarded) for _, loops, guarded in stores]
    head = ([*whole_vector_loops(n), LANES], False)
    assert shapes == ([head] if n % LANES == 0 else [head, ([LANES], True)])
    assert all(s.value.dtype.lanes == 1 for s, _, _ in stores)


@pytest.mark.parametrize("target", [None, "llvm"])
def test_a_partial_vector_alone_stays_one_masked_vector(target):
    """Shorter than one vector: there is no loop to peel; one masked vector, as before."""
    ((store, loops, _),) = stores_of(loom.lower(*elementwise(100), name="k", target=target))
    assert masked(store) and loops == ()


@needs_hexagon_masked_loads
@pytest.mark.parametrize("n", [100, 1000, 1151])
def test_hexagon_tail_reads_aligned_blocks_and_stores_under_a_predicate(n):
    """No masked load reaches LLVM (whose Hexagon lowering reads whole vectors): the tail reads
    aligned HVX blocks (`load <32 x i32>`, 128-byte aligned, one below and one above the first
    vector's start for each operand) and writes under a predicate (`if (q) vmem(...) = v`)."""
    mod = loom.build(*elementwise(n), target=TARGET, name="k")
    ll, asm = mod.get_source("ll"), mod.get_source("asm")
    assert "llvm.masked.load" not in ll
    blocks = re.findall(r"load <32 x i32>, ptr %[\w.]+, align (\d+)", ll)
    assert blocks and set(blocks) == {"128"} and len(blocks) <= 4  # X0 and X1: two blocks each
    predicated_store = r"llvm\.masked\.store\.v128i8\.p0\(<128 x i8> %[\w.]+, ptr [\w ]*align 128"
    assert re.search(predicated_store, ll)
    assert re.search(r"if \(q\d\) vmem\(", asm), "no predicated HVX store"


@needs_hexagon_masked_loads
def test_hexagon_tail_with_64_byte_vectors_compiles_to_hvx():
    """-hvx=64 (compiled only: qemu-hexagon models 128-byte HVX): the column sums of rows of 100
    int8, which start anywhere in a 64-byte block; the tail reads 64-byte blocks and shifts
    them into place with valign."""
    target = loom.target.hexagon("v66", hvx=64)
    mod = loom.build(*hx.column_sum(9, 100, "int8", "int32", target), target=target)
    ll, asm = mod.get_source("ll"), mod.get_source("asm")
    assert "llvm.masked.load" not in ll and "llvm.hexagon.V6.valignb(" in ll
    assert re.search(r"load <16 x i32>, ptr %[\w.]+, align 64", ll)
    assert re.search(r"if \(q\d\) vmem\(", asm) and "valign(" in asm


def run_on(how, request, sch_args, arrays, name="k"):
    if how == "hexagon":
        if missing_tools():
            pytest.skip(
                f"needs {missing_tools()}: run `make setup` (Debian packages clang, lld, qemu-user)"
            )
        dev = request.getfixturevalue("dev")
        mod = loom.build(*sch_args, target=TARGET, name=name).to_device(dev)
        on_device = [loom.nd.array(a, device=dev) for a in arrays]
        mod[name](*on_device)
        for a, d in zip(arrays, on_device):
            a[...] = d.numpy()
    else:
        loom.build(*sch_args, target=how, name=name)[name](*arrays)


def rand(shape, dtype, seed):
    return np.random.default_rng(seed).integers(-50, 50, shape).astype(dtype)


@pytest.mark.parametrize("how", ["hexagon", "llvm", "c"])
@pytest.mark.parametrize("n", LENGTHS)
def test_elementwise_tail_matches_numpy(request, how, n):
    a, b = rand(n, "int8", 1), rand(n, "int8", 2)
    out = np.full(n, 7, np.int8)
    run_on(how, request, elementwise(n), [a, b, out])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, fmadd(a, b).astype(np.int8))


@pytest.mark.parametrize("how", ["hexagon", "llvm", "c"])
@pytest.mark.parametrize(
    "dtype,shape",
    [("int16", (3, 70)), ("int32", (5, 37)), ("int16", (7, 33)), ("int8", (3, 300))],
)
def test_fused_elementwise_tail_matches_numpy(request, how, dtype, shape):
    a, b = rand(shape, dtype, 3), rand(shape, dtype, 4)
    out = np.zeros(shape, dtype)
    run_on(how, request, hx.elementwise(fmadd, shape, 2, dtype, TARGET), [a, b, out])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, fmadd(a, b).astype(dtype))


@pytest.mark.parametrize("how", ["hexagon", "llvm", "c"])
@pytest.mark.parametrize("cols", [100, 130])
def test_reduction_tail_matches_numpy(request, how, cols):
    """column_sum and matmul accumulate in a local tile computed at the split's outer loop: the
    tile (its allocation and its reduction) is peeled with the rest of the loop body."""
    x = rand((9, cols), "int8", 5)
    out = np.zeros(cols, np.int32)
    run_on(how, request, hx.column_sum(9, cols, "int8", "int32", TARGET), [x, out])
    np.testing.assert_array_equal(out, x.astype(np.int32).sum(0))

    a, b = rand((3, 16), "int8", 6), rand((16, cols), "int8", 7)
    c = np.zeros((3, cols), np.int32)
    run_on(how, request, hx.matmul(3, cols, 16, "int8", "int32", TARGET), [a, b, c])
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))


@pytest.mark.parametrize("how", ["hexagon", "llvm", "c"])
@pytest.mark.parametrize("dtype,cols", [("int8", 300), ("int16", 100), ("int32", 45)])
def test_shifted_rows_with_padding_match_numpy(request, how, dtype, cols):
    """Rows of `cols` elements (each starting elsewhere in an HVX block) read 3 columns to the
    left, zero where that is before the row: the first vector of a row has its first lanes
    masked off, the last its last ones (a tail); only enabled lanes' blocks are read."""
    rows, shift = 5, 3
    width = hx.lanes(dtype, TARGET)
    X = te.placeholder((rows, cols), dtype, name="X")
    Y = te.compute(
        (rows, cols),
        lambda i, j: te.if_then_else(j >= shift, X[i, j - shift] * 2, te.const(0, dtype)),
        name="Y",
    )
    s = te.create_schedule(Y.op)
    _, inner = s[Y].split(Y.op.axis[1], factor=width)
    s[Y].vectorize(inner)
    x = rand((rows, cols), dtype, 8)
    y = np.full((rows, cols), 7, dtype)
    run_on(how, request, (s, [X, Y]), [x, y])
    expected = np.zeros((rows, cols), dtype)
    expected[:, shift:] = x[:, :-shift] * 2
    np.testing.assert_array_equal(y, expected)
