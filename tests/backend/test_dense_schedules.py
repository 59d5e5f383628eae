"""Matrix products on the CPU: the `matmul` strategy (loom/backend/cpu/strategies.py), the
register tiles (dense_tiles.py), the model kernels' schedules (dense_schedules.py) and the
graph pass giving Gemm a constant B it reads untransposed (loom/graph/passes/pack_weights.py).
Results against numpy and onnxruntime; the kernels checked for register tiles of vectors."""

import numpy as np
import pytest

import loom
from loom.backend.cpu import dense_schedules, group_schedules
from loom.backend.cpu import strategies as cpu
from loom.backend.cpu.dense_tiles import VectorUnit, choose_tile
from loom.graph.ir import Graph, Node
from loom.graph.passes.pack_weights import pack_weights
from loom.ir.expr import BufferLoad
from loom.ir.stmt import Allocate, BufferStore, For, ForKind
from loom.ir.visitor import children, post_order_visit

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(0)
HOST = loom.target.Target("llvm")
LANES = VectorUnit.of(HOST).lanes("float32")


def floats(*shape):
    return RNG.standard_normal(shape).astype("float32")


# -- the strategy ---------------------------------------------------------------------------------


def run_strategy(m, n, k, target="llvm", **options):
    sch, args = cpu.matmul(m, n, k, target=loom.target.Target(target), **options)
    mod = loom.build(sch, args, target=target, name="mm")
    a, b = floats(m, k), floats(k, n)
    b_arg = cpu.pack_weights(b, int(args[1].shape[2])) if options.get("prepacked") else b
    c = np.full((m, n), np.nan, np.float32)
    mod["mm"](a, b_arg, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    return mod


@pytest.mark.parametrize(
    "m, n, k",
    [(1, 1, 1), (1, 1000, 300), (1, 17, 5), (2, 3, 4), (37, 45, 29), (64, 128, 64), (33, 130, 67)],
)
@pytest.mark.parametrize("layout", ["auto", "pack", "direct", "prepacked"])
def test_strategy_matches_numpy(m, n, k, layout):
    options = {"auto": {}, "pack": {"pack": True}, "direct": {"pack": False}}
    run_strategy(m, n, k, **options.get(layout, {"prepacked": True}))


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell -mattr=+avx2,+fma", "llvm"])
def test_strategy_tiles_follow_the_target(target):
    run_strategy(40, 72, 24, target=target, pack=False)
    sch, args = cpu.matmul(40, 72, 24, target=loom.target.Target(target), pack=False)
    lanes = VectorUnit.of(loom.target.Target(target)).lanes("float32")
    widths = {x.dtype.lanes for x in vector_accesses(loom.lower(sch, args, target=target))}
    assert widths == {lanes}, widths


@pytest.mark.parametrize(
    "m, prepacked, rows",
    [(64, False, 6), (512, False, 6), (8, False, 4), (12, False, 6), (64, True, 4)],
)
def test_strategy_pads_its_rows_to_tiles_of_all_its_accumulators(m, prepacked, rows):
    """AVX2's 12 accumulators are 6 rows x 2 vectors: with B packed per panel, m = 64 or 512
    takes 6-row tiles, the last computing past m (PADDED_ROWS_MAX_WASTE: 66 rows for 64) on A's
    last row, in a padded stage of the tile's sums; m = 8 (12 rows: too many) and B prepacked
    keep choose_tile's 4."""
    target = "llvm -mcpu=haswell -mattr=+avx2,+fma"
    n = 16 * cpu.MIN_PANEL_TASKS  # panels of 16 columns: enough to pack each where it is used
    run_strategy(m, n, 32, target=target, prepacked=prepacked)
    sch, args = cpu.matmul(m, n, 32, target=loom.target.Target(target), prepacked=prepacked)
    buffers = {a.buffer.name: a.buffer for a in allocations(loom.lower(sch, args)["main"].body)}
    tile = buffers.get("C.padded", buffers.get("C.local"))
    assert [int(d.value) for d in tile.shape] == [rows * 16], tile
    assert ("C.padded" in buffers) == (m % rows != 0), sorted(buffers)


@pytest.mark.parametrize("core, rows", [("znver5", 6), ("skylake-avx512", 6), ("znver4", 4)])
def test_a_full_width_avx512_core_pads_its_rows_to_tiles_of_24_accumulators(core, rows):
    """strategies.WIDE_PANEL_ACCUMULATORS: with B packed per panel, a core that runs 512-bit
    registers whole takes tiles of 6 rows x 4 vectors (m = 64: 66 rows, the last tile past
    m); Zen 4, which runs them as two halves, keeps 4 x 4."""
    target = loom.target.Target(f"llvm -mcpu={core}")
    assert VectorUnit.of(target).halves == (core == "znver4")
    sch, args = cpu.matmul(64, 1024, 32, target=target)  # rows of B 4 KB apart: packed
    buffers = {a.buffer.name: a.buffer for a in allocations(loom.lower(sch, args)["main"].body)}
    tile = buffers.get("C.padded", buffers.get("C.local"))
    assert [int(d.value) for d in tile.shape] == [rows * 64], tile


def test_tiles_of_24_accumulators_match_numpy_on_this_machine():
    """The 6 x 64 tiles of a full-width AVX-512 core (this machine's, where it has one), m
    padded to whole tiles: 64 and 1024 rows, one and two threads."""
    if VectorUnit.of(None).vector_bytes < 64 or VectorUnit.of(None).halves:
        pytest.skip("this machine has no full-width AVX-512 core")
    before = loom.runtime.num_threads()
    try:
        for threads in (1, 2):
            loom.runtime.set_num_threads(threads)
            run_strategy(64, 1024, 96)
            run_strategy(1024, 1024, 64)
    finally:
        loom.runtime.set_num_threads(before)


def test_strategy_packs_b_only_for_many_rows():
    sch, args = cpu.matmul(1, 256, 64)
    assert [t.op.name for t in args] == ["A", "B", "C"]
    assert "packedB" not in {st.op.name for st in sch.stages}
    sch, _ = cpu.matmul(cpu.PACK_MIN_ROWS, 256, 64)
    assert "packedB" in {st.op.name for st in sch.stages}


@pytest.mark.parametrize(
    "target, n, packs_from",
    [
        ("llvm -mcpu=haswell -mattr=+avx2,+fma", 768, 4 * cpu.NARROW_PACK_MIN_TILES),  # 4 x 16
        ("llvm -mcpu=znver4 -mattr=+avx512f", 768, cpu.PACK_MIN_ROWS),  # 64 floats: 256 bytes
        ("llvm -mcpu=znver4 -mattr=+avx512f", 1024, 4 * cpu.NARROW_PACK_MIN_TILES),  # 4 KB apart
    ],
    ids=["avx2", "avx512", "avx512-rows-4kb-apart"],
)
def test_panels_the_l1_holds_badly_are_packed_for_fewer_rows(target, n, packs_from):
    """AVX2's panels of 16 floats are a cache line per row of B, and rows of B 4 KB apart share
    their L1 sets: packed from four row tiles of A (measured in strategies.NARROW_PANEL_BYTES
    and NARROW_PACK_MIN_TILES); AVX-512's 64-float panels of rows 3 KB apart from PACK_MIN_ROWS
    rows."""
    pinned = loom.target.Target(target)
    for m in (packs_from - 4, packs_from):
        sch, _ = cpu.matmul(m, n, 1024, target=pinned)
        assert ("packedB" in {st.op.name for st in sch.stages}) == (m == packs_from), m


def test_a_narrow_packed_product_is_right():
    sch, _ = cpu.matmul(16, 1024, 40, rows=4, cols=16)
    assert "packedB" in {st.op.name for st in sch.stages}
    run_strategy(16, 1024, 40, rows=4, cols=16)


def test_strategy_packs_each_panel_in_the_parallel_loop():
    # enough panels for every thread: each panel is packed on the stack of the thread using it
    panels = cpu.MIN_PANEL_TASKS + 1
    run_strategy(37, panels * LANES, 29, pack=True, cols=LANES)
    sch, args = cpu.matmul(37, panels * LANES, 29, pack=True, cols=LANES)
    (loop,) = [f for f in loops_of(loom.lower(sch, args)) if f.kind == ForKind.PARALLEL]
    assert int(loop.extent.value) == panels
    packs = [a.buffer for a in allocations(loop.body) if a.buffer.name == "packedB"]
    assert [(b.scope, b.shape[0].value) for b in packs] == [("local", 29 * LANES)]


@pytest.mark.parametrize(
    "panels, tasks, group",
    [
        (cpu.PANEL_GROUP * cpu.MIN_PANEL_TASKS, cpu.MIN_PANEL_TASKS, cpu.PANEL_GROUP),
        # too few groups for the threads: one panel at a time
        (
            cpu.PANEL_GROUP * (cpu.MIN_PANEL_TASKS - 1),
            cpu.PANEL_GROUP * (cpu.MIN_PANEL_TASKS - 1),
            1,
        ),
    ],
)
def test_strategy_packs_panels_in_groups_while_enough_remain(panels, tasks, group):
    """PANEL_GROUP panels packed at each iteration of the parallel loop, B read row by row."""
    run_strategy(37, panels * LANES, 29, pack=True, cols=LANES)
    sch, args = cpu.matmul(37, panels * LANES, 29, pack=True, cols=LANES)
    (loop,) = [f for f in loops_of(loom.lower(sch, args)) if f.kind == ForKind.PARALLEL]
    assert int(loop.extent.value) == tasks
    packs = [a.buffer for a in allocations(loop.body) if a.buffer.name == "packedB"]
    assert [(b.scope, b.shape[0].value) for b in packs] == [("local", group * 29 * LANES)]


def test_strategy_packs_partial_panels_before_the_tiles():
    # a partial last panel would run on one thread after the parallel loop: all of B packed first
    n = (cpu.MIN_PANEL_TASKS + 1) * LANES - 3
    run_strategy(37, n, 29, pack=True, cols=LANES)
    sch, args = cpu.matmul(37, n, 29, pack=True, cols=LANES)
    packs = [a.buffer for a in allocations(loom.lower(sch, args)["main"].body)]
    assert [b.scope for b in packs if b.name == "packedB"] == ["global"]


def test_strategy_packs_a_panel_too_large_for_the_stack_before_the_tiles():
    k = cpu.PANEL_STACK_BYTES // (4 * LANES) + 1
    sch, args = cpu.matmul(2, LANES * cpu.MIN_PANEL_TASKS, k, pack=True, cols=LANES)
    packs = [a.buffer for a in allocations(loom.lower(sch, args)["main"].body)]
    assert [b.scope for b in packs if b.name == "packedB"] == ["global"]


def loops_of(module) -> list:
    found = []
    for f in module:
        post_order_visit(f.body, lambda n: found.append(n) if isinstance(n, For) else None)
    return found


def allocations(stmt) -> list:
    found = []
    post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, Allocate) else None)
    return found


def test_strategy_rejects_bad_options():
    with pytest.raises(ValueError, match="m must be a positive int"):
        cpu.matmul(0, 4, 4)
    with pytest.raises(ValueError, match="exclude each other"):
        cpu.matmul(4, 4, 4, pack=True, prepacked=True)
    with pytest.raises(ValueError, match="b must be a matrix"):
        cpu.pack_weights(np.zeros(3, np.float32), 16)
    with pytest.raises(ValueError, match="cols must be a positive int"):
        cpu.pack_weights(np.zeros((3, 3), np.float32), 0)


def test_pack_weights_layout():
    b = np.arange(3 * 5, dtype=np.float32).reshape(3, 5)
    packed = cpu.pack_weights(b, 2)
    assert packed.shape == (3, 3, 2)
    np.testing.assert_array_equal(packed[1], b[:, 2:4])
    np.testing.assert_array_equal(packed[2], np.stack([b[:, 4], np.zeros(3)], axis=1))


def test_tiles_divide_the_rows_and_columns_when_they_can():
    avx512, avx2 = VectorUnit(64, 32), VectorUnit(32, 16)
    tile = choose_tile(1024, 1024, 1024, "float32", avx512)
    assert (tile.rows, tile.cols, tile.k_unroll) == (4, 64, 4)
    assert choose_tile(1, 1024, 1024, "float32", avx512).rows == 1
    tile = choose_tile(128, 80, 7, "float32", avx512)  # 5 vectors: the whole row
    assert tile.cols == 80 and tile.k_unroll == 1 and 128 % tile.rows == 0
    tile = choose_tile(96, 1024, 64, "float32", avx2)
    assert tile.lanes == 8 and tile.rows * tile.vectors <= 12 and 96 % tile.rows == 0


# -- model kernels ---------------------------------------------------------------------------------


def make_model(nodes, inputs, outputs, initializers=None):
    graph = helper.make_graph(
        nodes,
        "m",
        [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, x.shape) for n, x in inputs],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def compiled_matches_onnxruntime(m, feeds):
    compiled = loom.compile(m, target="llvm")
    got = compiled(**feeds)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds
    )
    for g, w in zip(got.values(), want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    return compiled


def vector_accesses(module) -> list:
    """The vector loads and stores of a module lowered for its target."""
    found = []

    def record(n):
        if isinstance(n, BufferLoad) and n.dtype.lanes > 1:
            found.append(n)
        elif isinstance(n, BufferStore) and n.value.dtype.lanes > 1:
            found.append(n.value)

    for f in module:
        post_order_visit(f.body, record)
    return found


def kernel_of(compiled, *ops):
    names = [g["kernel"] for g in compiled.info.groups if tuple(g["ops"]) == tuple(ops)]
    assert len(names) == 1, [g["ops"] for g in compiled.info.groups]
    return next(f for f in compiled.lowered.module if f.name == names[0])


def unrolled_around_vectors(stmt) -> list[int]:
    """For each vectorized loop, how many unrolled loops enclose it."""
    found = []

    def visit(n, depth):
        if isinstance(n, For):
            if n.kind == ForKind.VECTORIZED:
                found.append(depth)
                return
            depth += n.kind == ForKind.UNROLLED
        for child in children(n):
            visit(child, depth)

    visit(stmt, 0)
    return found


def assert_register_tile(func):
    """The kernel accumulates in a local tile, its vectors of one register each, inside
    unrolled loops over the reduction's steps and the tile's rows or registers (the default
    loops and group_schedules.py unroll one loop at most): a regression fails."""
    loops, locals_ = [], []
    post_order_visit(func.body, lambda n: loops.append(n) if isinstance(n, For) else None)
    post_order_visit(func.body, lambda n: locals_.append(n) if isinstance(n, Allocate) else None)
    assert any(a.buffer.scope == "local" for a in locals_), [a.buffer for a in locals_]
    vector = [f for f in loops if f.kind == ForKind.VECTORIZED]
    assert vector and all(int(f.extent.value) <= LANES for f in vector), vector
    assert max(unrolled_around_vectors(func.body)) >= 2


MATMULS = [(1, 64, 32), (1, 1024, 1024), (37, 300, 80), (64, 128, 512), (5, 7, 17), (130, 33, 250)]


@pytest.mark.parametrize("m, k, n", MATMULS)
def test_matmul_with_constant_weights(m, k, n):
    a, b = floats(m, k), floats(k, n)
    model = make_model(
        [helper.make_node("MatMul", ["a", "b"], ["out"])], [("a", a)], ["out"], {"b": b}
    )
    compiled = compiled_matches_onnxruntime(model, {"a": a})
    if n >= LANES:
        assert_register_tile(kernel_of(compiled, "MatMul"))


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((8, 64, 48), (48, 40)),
        ((4, 33, 20), (4, 20, 64)),
        ((2, 3, 17, 32), (2, 3, 32, 17)),
        ((2, 1, 16, 8), (3, 8, 32)),
    ],
)
def test_batch_matmul_of_two_inputs(a_shape, b_shape):
    a, b = floats(*a_shape), floats(*b_shape)
    model = make_model(
        [helper.make_node("MatMul", ["a", "b"], ["out"])], [("a", a), ("b", b)], ["out"]
    )
    compiled = compiled_matches_onnxruntime(model, {"a": a, "b": b})
    if b_shape[-1] >= LANES:
        assert_register_tile(kernel_of(compiled, "MatMul"))


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("constant_b", [True, False])
@pytest.mark.parametrize(
    "alpha, beta, bias", [(1.0, 1.0, None), (0.5, 2.0, "row"), (1.0, 1.0, "matrix")]
)
def test_gemm(trans_a, trans_b, constant_b, alpha, beta, bias):
    m, k, n = 24, 40, 48
    a = floats(*((k, m) if trans_a else (m, k)))
    b = floats(*((n, k) if trans_b else (k, n)))
    inputs, inits = [("a", a)], {}
    (inits.__setitem__("b", b) if constant_b else inputs.append(("b", b)))
    names = ["a", "b"]
    if bias is not None:
        inits["c"] = floats(n) if bias == "row" else floats(m, n)
        names.append("c")
    node = helper.make_node(
        "Gemm", names, ["out"], transA=trans_a, transB=trans_b, alpha=alpha, beta=beta
    )
    compiled = compiled_matches_onnxruntime(
        make_model([node], inputs, ["out"], inits), dict(inputs)
    )
    if not trans_a and (constant_b or not trans_b):  # B's rows contiguous in the kernel
        assert_register_tile(kernel_of(compiled, "Gemm"))


@pytest.mark.parametrize("n", [80, 256])
def test_a_one_row_gemm_streams_b_by_rows(n):
    """A batch-1 dense layer (transposed constant weights, bias): the row's accumulators are
    updated with the loop over the row inside the reduction's (dense_schedules.py)."""
    a, w, bias = floats(1, 40), floats(n, 40), floats(n)
    node = helper.make_node("Gemm", ["a", "w", "bias"], ["out"], transB=1)
    model = make_model([node], [("a", a)], ["out"], {"w": w, "bias": bias})
    compiled = compiled_matches_onnxruntime(model, {"a": a})
    kernel = kernel_of(compiled, "Gemm")
    assert_register_tile(kernel)
    loops = []
    post_order_visit(kernel.body, lambda n: loops.append(n) if isinstance(n, For) else None)
    k_outer = next(f for f in loops if f.loop_var.name == "k.outer")
    inner = []
    post_order_visit(k_outer.body, lambda n: inner.append(n) if isinstance(n, For) else None)
    assert any(f.loop_var.name.startswith("j") for f in inner)  # the row inside the steps


@pytest.mark.parametrize("n, rows", [(1000, 16), (1024, 8)])
def test_a_one_row_gemm_reads_many_rows_of_b_unless_they_alias(n, rows):
    """A one-row product takes ROW_K_UNROLL rows of B per step, ALIASED_ROW_K_UNROLL when B's
    rows are a multiple of ALIASING_BYTES long (they would share the L1 cache's sets)."""
    assert rows in (dense_schedules.ROW_K_UNROLL, dense_schedules.ALIASED_ROW_K_UNROLL)
    a, w = floats(1, 64), floats(n, 64)
    model = make_model(
        [helper.make_node("Gemm", ["a", "w"], ["out"], transB=1)], [("a", a)], ["out"], {"w": w}
    )
    kernel = kernel_of(compiled_matches_onnxruntime(model, {"a": a}), "Gemm")
    loops = []
    post_order_visit(kernel.body, lambda n: loops.append(n) if isinstance(n, For) else None)
    k_inner = [f for f in loops if f.loop_var.name == "k.inner"]
    assert k_inner and all(int(f.extent.value) == rows for f in k_inner), k_inner


def test_a_matmul_with_its_epilogue_in_one_kernel():
    a, b, bias = floats(2, 50, 64), floats(64, 96), floats(96)
    nodes = [
        helper.make_node("MatMul", ["a", "b"], ["p"]),
        helper.make_node("Add", ["p", "bias"], ["s"]),
        helper.make_node("Relu", ["s"], ["out"]),
    ]
    compiled = compiled_matches_onnxruntime(
        make_model(nodes, [("a", a)], ["out"], {"b": b, "bias": bias}), {"a": a}
    )
    assert_register_tile(kernel_of(compiled, "MatMul", "Add", "Relu"))


def test_a_big_product_runs_in_parallel(monkeypatch):
    monkeypatch.setattr(group_schedules, "PARALLEL_MIN_WORK", 1 << 12)
    a, b = floats(64, 64), floats(64, 64)
    model = make_model(
        [helper.make_node("MatMul", ["a", "b"], ["out"])], [("a", a)], ["out"], {"b": b}
    )
    compiled = compiled_matches_onnxruntime(model, {"a": a})
    loops = []
    post_order_visit(
        kernel_of(compiled, "MatMul").body,
        lambda n: loops.append(n) if isinstance(n, For) else None,
    )
    assert ForKind.PARALLEL in {f.kind for f in loops}


# -- pack_weights ----------------------------------------------------------------------------------


def gemm_graph(trans_b, constant_b=True, readers=1):
    b = floats(6, 4) if trans_b else floats(4, 6)
    nodes = [
        Node("Gemm", ("a", "b"), (f"y{r}",), {"transB": trans_b} if trans_b else {})
        for r in range(readers)
    ]
    return Graph(
        ("a",) if constant_b else ("a", "b"),
        tuple(f"y{r}" for r in range(readers)),
        nodes,
        {"b": b} if constant_b else {},
    )


def test_pack_weights_transposes_a_constant_b_once():
    graph = gemm_graph(trans_b=1, readers=2)
    packed = pack_weights(graph)
    assert all(n.attr("transB", 0) == 0 for n in packed.nodes)
    (name,) = {n.inputs[1] for n in packed.nodes}
    assert name != "b"
    np.testing.assert_array_equal(packed.constants[name], graph.constants["b"].T)
    assert packed.constants[name].flags.c_contiguous


def test_pack_weights_leaves_other_gemms():
    for graph in (gemm_graph(trans_b=0), gemm_graph(trans_b=1, constant_b=False)):
        assert pack_weights(graph) is graph
