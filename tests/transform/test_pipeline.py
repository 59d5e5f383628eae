"""The lowering pipeline: the order of the passes, the phases between them, how `expand` inserts
backend and user passes at a phase, and what the LOWER passes make of a hand-built function
(before/expected, as in TVM's tests)."""

from loom.ir import (
    Broadcast,
    Buffer,
    FloatImm,
    For,
    IntImm,
    IRModule,
    Mul,
    PrimFunc,
    Ramp,
    Var,
    assert_structural_equal,
    decl_buffer,
)
from loom.transform import PHASES, Pass, PassContext
from loom.transform.pipeline import BUILD, LOWER, Phase, expand


def names(pipeline):
    return [item.name if isinstance(item, Pass) else f"<{item.name}>" for item in pipeline]


def marker(name):
    return Pass(name, lambda mod: mod)


def test_lower_order():
    assert names(LOWER) == [
        "<schedule>",
        "bind_shape_vars",
        "simplify",
        "check_bounds",
        "flatten_buffer",
        "inject_double_buffer",
        "<flatten>",
        "vectorize_loop",
        "unroll_loop",
        "<vectorize>",
        "simplify",
        "<final>",
    ]


def test_build_order():
    assert names(BUILD) == [
        "lower_pragmas",
        "<memory>",
        "plan_memory",
        "lower_memory_scopes",
        "simplify",
        "lower_parallel",
        "verify_memory",
        "check_extern_calls",
        "<build>",
        "legalize",
    ]


def test_phases_are_the_user_phases_in_order():
    phases = [item.name for item in LOWER + BUILD if isinstance(item, Phase)]
    assert tuple(phases) == PHASES


def test_expand_without_extra_passes_drops_the_phases():
    expanded = expand(LOWER + BUILD, PassContext())
    assert expanded == [item for item in LOWER + BUILD if isinstance(item, Pass)]


def test_expand_puts_backend_passes_then_user_passes_at_their_phase():
    backend = [("flatten", marker("backend_flatten")), ("build", marker("backend_build"))]
    user = [("flatten", marker("user_flatten")), (0, marker("user_schedule"))]
    ctx = PassContext(config={"tir.add_lower_pass": user})
    assert names(expand(LOWER, ctx, backend)) == [
        "user_schedule",
        "bind_shape_vars",
        "simplify",
        "check_bounds",
        "flatten_buffer",
        "inject_double_buffer",
        "backend_flatten",
        "user_flatten",
        "vectorize_loop",
        "unroll_loop",
        "simplify",
    ]
    assert names(expand(BUILD, ctx, backend))[-2:] == ["backend_build", "legalize"]


def test_expand_keeps_the_order_of_several_passes_at_one_phase():
    first, second = marker("first"), marker("second")
    ctx = PassContext(config={"tir.add_lower_pass": [("final", first), ("final", second)]})
    assert names(expand(LOWER, ctx))[-2:] == ["first", "second"]


def test_lower_passes_before_expected():
    """for i, vectorized j: B[i, j] = A[i, j] + (1.0 * 1.0) -> one vector statement per row."""

    def params():
        return decl_buffer((4, 4), "float32", "A"), decl_buffer((4, 4), "float32", "B")

    def before(A, B):
        i, j = Var("i"), Var("j")
        one = Mul(FloatImm(1.0), FloatImm(1.0))  # simplify folds it
        body = For(j, IntImm(0), IntImm(4), "vectorized", B.store(A[i, j] + one, (i, j)))
        return For(i, IntImm(0), IntImm(4), "serial", body)

    def expected(A, B):
        i = Var("i")
        Af, Bf = (Buffer(b.name, b.dtype, (IntImm(16),), b.data) for b in (A, B))
        ramp = Ramp(i * 4, IntImm(1), 4)
        body = Bf.store(Af.load([ramp]) + Broadcast(FloatImm(1.0), 4), (ramp,))
        return For(i, IntImm(0), IntImm(4), "serial", body)

    def mod(build):
        A, B = params()
        return IRModule((PrimFunc("main", (A, B), build(A, B)),))

    ctx = PassContext()
    assert_structural_equal(ctx.run(expand(LOWER, ctx), mod(before)), mod(expected))
