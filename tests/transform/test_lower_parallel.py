"""lower_parallel: hand-built IR before the pass and the IR expected after it (TVM's
before/expected style). A parallel loop becomes a closure (a uint64 stack buffer: begin,
extent, the captured variables) and a launch of a new task function, which unpacks the same
variables, computes its chunk of the iterations and runs the body as a serial loop; integers
the caller knows the bounds of keep them in the task."""

import pytest

from loom import LoomError
from loom.ir import (
    NOP,
    Allocate,
    AssertStmt,
    Buffer,
    Cast,
    Div,
    For,
    IntImm,
    IRModule,
    LetStmt,
    PrimFunc,
    Ramp,
    Var,
    assert_structural_equal,
    decl_buffer,
    op,
    seq,
    to_text,
)
from loom.transform.lower_parallel import lower_parallel

U64 = "uint64"


def i32(value: int) -> IntImm:
    return IntImm(value)


def launch(task: str, values: list) -> Allocate:
    """allocate closure: uint64[2 + n]; closure[k] = values[k]; assert(launch(task) == 0)"""
    env = decl_buffer((len(values),), U64, "closure", scope="local")
    stores = [env.store(value, (i32(k),)) for k, value in enumerate(values)]
    status = op.call_extern(
        "int32",
        "loom_parallel_launch",
        op.call_intrin("handle", "function_address", task),
        op.call_intrin("handle", "address_of", env.load([i32(0)])),
        i32(0),
    )
    return Allocate(env, seq(*stores, AssertStmt(op.equal(status, i32(0)), None, NOP)))


def task(name, owner, loop_var, captured, lets, body, extent, noalias=True) -> PrimFunc:
    """The task of a loop over [0, extent) (constants: the task knows them) capturing
    `captured` variables, bound by the (var, value) pairs `lets(slot)`; `slot(k)` reads
    closure[k]."""
    task_id, num_tasks, closure = Var("task_id"), Var("num_tasks"), Var("closure", "handle")
    env = Buffer("closure", U64, (i32(2 + captured),), closure)

    def slot(k):
        return env.load([i32(k)])

    b, e = Var("begin"), Var("extent")
    # the chunk arithmetic in 64 bits (extent + tasks - 1 must not wrap), start/stop back in 32
    tasks, chunk = Var("tasks", "int64"), Var("chunk", "int64")
    start, stop = Var("start"), Var("stop")

    def i64(x):
        return op.cast(x, "int64")

    prologue = [
        (b, i32(0)),
        (e, i32(extent)),
        *lets(slot),
        (tasks, op.max_(i64(num_tasks), i64(1))),
        (chunk, Div(op.sub(op.add(i64(e), tasks), i64(1)), tasks)),
        (start, op.cast(op.min_(op.max_(op.mul(i64(task_id), chunk), i64(0)), i64(e)), "int32")),
        (stop, op.cast(op.max_(op.min_(op.add(i64(start), chunk), i64(e)), i64(start)), "int32")),
    ]
    stmt = For(loop_var, op.add(b, start), op.sub(stop, start), "serial", body)
    for var, value in reversed(prologue):
        stmt = LetStmt(var, value, stmt)
    attrs = {"parallel_task": owner, "parallel_loop": loop_var.name}
    if noalias:
        attrs["closure_noalias"] = True
    return PrimFunc(name, (task_id, num_tasks, closure), stmt, attrs)


def pointer(slot):
    return Cast("handle", slot)


def check(before: IRModule, expected: IRModule) -> None:
    assert_structural_equal(lower_parallel(before), expected)


def test_a_loop_capturing_a_buffer_and_a_scalar():
    A, B = decl_buffer((64,), "float32", "A"), decl_buffer((64,), "float32", "B")
    s, i = Var("s", "float32"), Var("i")
    body = B.store(A[i] * s, (i,))
    before = IRModule((PrimFunc("f", (A, s, B), For(i, i32(0), i32(64), "parallel", body)),))

    caller = launch(
        "f_task_0",
        [
            op.const(0, U64),
            op.const(64, U64),
            Cast(U64, A.data),
            Cast(U64, op.call_intrin("uint32", "reinterpret", s)),
            Cast(U64, B.data),
        ],
    )

    def lets(slot):
        bits = Cast("uint32", slot(3))
        return [
            (A.data, pointer(slot(2))),
            (s, op.call_intrin("float32", "reinterpret", bits)),
            (B.data, pointer(slot(4))),
        ]

    expected = IRModule(
        (PrimFunc("f", (A, s, B), caller), task("f_task_0", "f", i, 3, lets, body, 64))
    )
    check(before, expected)


def test_two_parallel_loops_in_one_function():
    A, B = decl_buffer((32,), "int32", "A"), decl_buffer((32,), "int32", "B")
    i, j = Var("i"), Var("j")
    first, second = B.store(A[i] + i32(1), (i,)), A.store(B[j] * i32(2), (j,))
    before = IRModule(
        (
            PrimFunc(
                "g",
                (A, B),
                seq(
                    For(i, i32(0), i32(32), "parallel", first),
                    For(j, i32(0), i32(16), "parallel", second),
                ),
            ),
        )
    )

    def lets_of(x, y):
        def lets(slot):
            return [(x, pointer(slot(2))), (y, pointer(slot(3)))]

        return lets

    a, b = Cast(U64, A.data), Cast(U64, B.data)
    caller = seq(
        launch("g_task_0", [op.const(0, U64), op.const(32, U64), a, b]),
        launch("g_task_1", [op.const(0, U64), op.const(16, U64), b, a]),
    )
    expected = IRModule(
        (
            PrimFunc("g", (A, B), caller),
            task("g_task_0", "g", i, 2, lets_of(A.data, B.data), first, 32),
            task("g_task_1", "g", j, 2, lets_of(B.data, A.data), second, 16),
        )
    )
    check(before, expected)


def test_a_loop_in_a_serial_loop_captures_the_outer_variable_with_its_bounds():
    A, B = decl_buffer((64,), "float32", "A"), decl_buffer((64,), "float32", "B")
    o, i = Var("o"), Var("i")
    body = B.store(A[o * 16 + i], (o * 16 + i,))
    inner = For(i, i32(0), i32(16), "parallel", body)
    before = IRModule((PrimFunc("h", (A, B), For(o, i32(0), i32(4), "serial", inner)),))

    values = [op.const(0, U64), op.const(16, U64), Cast(U64, o), Cast(U64, A.data)]
    caller = For(o, i32(0), i32(4), "serial", launch("h_task_0", [*values, Cast(U64, B.data)]))

    def lets(slot):
        outer = op.min_(op.max_(Cast("int32", slot(2)), i32(0)), i32(3))  # o is in [0, 3]
        return [(o, outer), (A.data, pointer(slot(3))), (B.data, pointer(slot(4)))]

    expected = IRModule(
        (PrimFunc("h", (A, B), caller), task("h_task_0", "h", i, 3, lets, body, 16))
    )
    check(before, expected)


def test_a_stack_allocation_in_the_body_moves_into_the_task():
    A, B = decl_buffer((32,), "float32", "A"), decl_buffer((32,), "float32", "B")
    T = decl_buffer((4,), "float32", "T", scope="local")
    i, k = Var("i"), Var("k")
    body = Allocate(
        T,
        seq(
            For(k, i32(0), i32(4), "serial", T.store(A[i * 4 + k], (k,))),
            For(k, i32(0), i32(4), "serial", B.store(T[k] * T[3 - k], (i * 4 + k,))),
        ),
    )
    before = IRModule((PrimFunc("m", (A, B), For(i, i32(0), i32(8), "parallel", body)),))

    def lets(slot):
        return [(A.data, pointer(slot(2))), (B.data, pointer(slot(3)))]

    values = [op.const(0, U64), op.const(8, U64), Cast(U64, A.data), Cast(U64, B.data)]
    expected = IRModule(
        (
            PrimFunc("m", (A, B), launch("m_task_0", values)),
            task("m_task_0", "m", i, 2, lets, body, 8),
        )
    )
    check(before, expected)


def test_nested_parallel_loops_become_a_task_launching_a_task():
    A = decl_buffer((8, 8), "float32", "A")
    i, j = Var("i"), Var("j")
    body = A.store(A[i, j] * op.const(2.0, "float32"), (i, j))
    loops = For(i, i32(0), i32(8), "parallel", For(j, i32(0), i32(8), "parallel", body))
    after = lower_parallel(IRModule((PrimFunc("n", (A,), loops),)))
    assert after.names() == ["n", "n_task_0", "n_task_1"]
    outer, inner = after["n_task_0"], after["n_task_1"]
    assert outer.attr("parallel_task") == inner.attr("parallel_task") == "n"
    assert (outer.attr("parallel_loop"), inner.attr("parallel_loop")) == ("i", "j")
    assert '@function_address("n_task_0")' in to_text(after["n"])
    assert '@function_address("n_task_1")' in to_text(outer)  # launched by the outer task
    assert "parallel" not in to_text(after).replace("parallel_", "")


def test_a_pointer_that_may_alias_another_leaves_the_closure_without_noalias():
    A = decl_buffer((16,), "float32", "A")
    p = Var("p", "handle")
    P = Buffer("P", "float32", (i32(8),), p)
    i = Var("i")
    loop = For(i, i32(0), i32(8), "parallel", P.store(A[i], (i,)))
    body = LetStmt(p, op.call_intrin("handle", "address_of", A.load([i32(8)])), loop)
    after = lower_parallel(IRModule((PrimFunc("q", (A,), body),)))
    assert after["q_task_0"].attr("closure_noalias") is None  # p points into A


def test_a_module_without_parallel_loops_is_unchanged():
    A = decl_buffer((4,), "int32", "A")
    i = Var("i")
    mod = IRModule((PrimFunc("z", (A,), For(i, i32(0), i32(4), "serial", A.store(i, (i,)))),))
    assert lower_parallel(mod) is mod


def test_task_names_avoid_existing_functions():
    A = decl_buffer((4,), "int32", "A")
    i = Var("i")
    taken = PrimFunc("w_task_0", (A,), NOP)
    mod = IRModule(
        (PrimFunc("w", (A,), For(i, i32(0), i32(4), "parallel", A.store(i, (i,)))), taken)
    )
    assert lower_parallel(mod).names() == ["w", "w_task_0", "w_task_1"]
    assert '@function_address("w_task_1")' in to_text(lower_parallel(mod)["w"])


def test_capturing_a_vector_variable_is_an_error():
    A = decl_buffer((16,), "int32", "A")
    v, i = Var("v", "int32x4"), Var("i")
    ramp = Ramp(op.mul(i, i32(4)), i32(1), 4)
    loop = For(i, i32(0), i32(4), "parallel", A.store(v, (ramp,)))
    body = LetStmt(v, A.load([Ramp(i32(0), i32(1), 4)]), loop)
    with pytest.raises(LoomError, match=r"parallel loop i uses the vector variable v"):
        lower_parallel(IRModule((PrimFunc("vv", (A,), body),)))
