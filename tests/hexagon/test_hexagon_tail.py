"""A vectorized loop whose length is not a multiple of the vector: the whole vectors run
unguarded and only the last, partial one is guarded (vectorize_loop peels it). Without a target
or on a CPU the tail is one masked vector; on Hexagon, whose masked vector loads are not safe
at a buffer's edge, it runs as a serial loop. Results match numpy on Hexagon (qemu), LLVM and C
for several lengths."""

import numpy as np
import pytest

import loom
from loom.backend.hexagon import strategies as hx
from loom.ir.expr import BufferLoad
from loom.ir.stmt import BufferStore, For, IfThenElse
from loom.ir.visitor import Visitor

from .conftest import missing_tools

TARGET = loom.target.hexagon("v66")
LANES = 128  # int8 lanes of one 128-byte HVX vector
LENGTHS = [1, 100, 127, 129, 300, 1000, 1024, 1151]


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


@pytest.mark.parametrize("n", [n for n in LENGTHS if n > LANES])
def test_lowered_tail_without_target_is_one_masked_vector(n):
    stores = stores_of(loom.lower(*elementwise(n), name="k"))
    full = [(s, loops) for s, loops, guarded in stores if s.value.dtype.lanes == LANES]
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
def test_lowered_tail_for_hexagon_is_serial(n):
    """Hexagon's masked vector loads are not safe: the tail is a guarded serial loop."""
    stores = stores_of(loom.lower(*elementwise(n), name="k", target=TARGET))
    vector = [(s, loops, g) for s, loops, g in stores if s.value.dtype.lanes == LANES]
    scalar = [(s, loops, g) for s, loops, g in stores if s.value.dtype.lanes == 1]
    ((head, head_loops, head_guarded),) = vector
    assert not masked(head) and not head_guarded
    assert [lp.extent.value for lp in head_loops] == whole_vector_loops(n)
    if n % LANES == 0:
        assert scalar == []
        return
    ((_, tail_loops, tail_guarded),) = scalar
    assert tail_guarded and [lp.extent.value for lp in tail_loops] == [LANES]


def test_a_partial_vector_alone_stays_one_masked_vector():
    """Shorter than one vector: there is no loop to peel; one masked vector, as before."""
    ((store, loops, _),) = stores_of(loom.lower(*elementwise(100), name="k"))
    assert masked(store) and loops == ()


def test_two_dimensional_tail_is_peeled_in_every_row():
    """A 2-d elementwise kernel split along its rows: each row has whole vectors and a tail."""
    X = loom.te.placeholder((3, 300), "int8", name="X")
    Y = loom.te.compute((3, 300), lambda i, j: X[i, j] + 1, name="Y")
    s = loom.te.create_schedule(Y.op)
    _, inner = s[Y].split(Y.op.axis[1], factor=LANES)
    s[Y].vectorize(inner)
    stores = stores_of(loom.lower(s, [X, Y], name="k"))
    assert [(masked(st), [lp.extent.value for lp in loops]) for st, loops, _ in stores] == [
        (False, [3, 2]),
        (True, [3]),
    ]


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
@pytest.mark.parametrize("dtype,shape", [("int16", (3, 70)), ("int32", (5, 37))])
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
