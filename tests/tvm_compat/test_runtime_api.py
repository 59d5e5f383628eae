"""TVM's runtime API as TVM scripts use it, through `import loom as tvm` (docs/tvm-compat.md,
"Runtime API"): device handles, NDArrays, modules' entry_name and type_key, global functions,
runtime.enabled."""

import shutil

import numpy as np
import pytest

import loom as tvm
from loom import te
from loom.contrib import cc

N = 1024


def build_add(target="llvm"):
    A = te.placeholder((N,), name="A")
    B = te.placeholder((N,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    return tvm.build(s, [A, B, C], target, name="myadd")


@pytest.fixture(scope="module")
def myadd():
    return build_add()


# -- devices -------------------------------------------------------------------------------------
def test_the_host_device_handle():
    dev = tvm.cpu(0)
    assert (dev.device_type, dev.device_id) == (1, 0)
    assert str(dev) == repr(dev) == "cpu(0)"
    assert dev.exist
    dev.sync()
    assert tvm.cpu() == dev
    assert tvm.device("llvm", 0) == dev
    assert tvm.device("cpu", 0) == dev
    assert tvm.device("c") == dev
    assert tvm.device("llvm -mcpu=generic", 0) == dev  # a target's text, by its first word
    assert tvm.device(1, 0) == dev  # DLPack's number of the CPU
    assert tvm.cpu(1) != dev and str(tvm.cpu(1)) == "cpu(1)"
    assert tvm.device("cpu", 1) == tvm.cpu(1)
    assert len({tvm.cpu(0), tvm.device("llvm", 0), tvm.cpu(1)}) == 2
    assert isinstance(dev, tvm.runtime.Device)


def test_bad_devices_are_refused():
    with pytest.raises(ValueError, match="device_id must be an int >= 0"):
        tvm.cpu(-1)
    with pytest.raises(tvm.LoomError, match="no runtime for 'cuda'"):
        tvm.device("cuda", 0)
    with pytest.raises(tvm.LoomError, match="is the host: it takes only dev_id"):
        tvm.device("llvm", host="localhost")
    with pytest.raises(tvm.LoomError, match="dev_id must be 0"):
        tvm.device("hexagon-sim", 1)
    with pytest.raises(tvm.LoomError, match="device_type must be 1"):
        tvm.runtime.Device(2, 0)


def test_device_sessions_are_still_what_other_names_give():
    # no emulator is started: a TCP device without an address is refused before connecting
    with pytest.raises(tvm.LoomError, match="needs host= and port="):
        tvm.device("hexagon")


# -- arrays --------------------------------------------------------------------------------------
def test_nd_array_on_the_host_device():
    dev = tvm.cpu(0)
    x = np.arange(12, dtype="float32").reshape(3, 4)
    a = tvm.nd.array(x, dev)
    assert isinstance(a, tvm.nd.NDArray)
    assert a.shape == (3, 4) and all(type(d) is int for d in a.shape)
    assert a.dtype == "float32" and type(a.dtype) is str
    assert a.device == dev
    np.testing.assert_array_equal(a.numpy(), x)
    assert a.numpy() is not a.numpy()  # a copy each time
    x[0, 0] = 99  # the array copied x
    assert a.numpy()[0, 0] == 0
    with pytest.warns(DeprecationWarning, match="numpy"):
        np.testing.assert_array_equal(a.asnumpy(), a.numpy())
    assert tvm.nd.array([1, 2, 3], dev).dtype == "int64"
    assert tvm.nd.array(np.zeros(2, "int8"), tvm.device("llvm", 0)).dtype == "int8"
    assert tvm.nd.array(a, dev).numpy()[1, 1] == 5  # from another NDArray
    with pytest.raises(TypeError, match="the second argument is the device"):
        tvm.nd.array(x, "float32")


def test_nd_empty():
    dev = tvm.cpu(0)
    e = tvm.nd.empty((2, 3), "int32", dev)
    assert (e.shape, e.dtype, e.device) == ((2, 3), "int32", dev)
    f = tvm.nd.empty((5,), device=dev)
    assert f.dtype == "float32"
    assert tvm.nd.empty([np.int64(4)], "float64", dev).shape == (4,)
    with pytest.raises(TypeError, match="device must be a loom Device"):
        tvm.nd.empty((2,), "float32", "cpu")


def test_copyfrom_and_copyto():
    dev = tvm.cpu(0)
    a = tvm.nd.empty((4,), "float32", dev)
    assert a.copyfrom(np.arange(4)) is a  # converted to the array's dtype
    np.testing.assert_array_equal(a.numpy(), [0, 1, 2, 3])
    b = tvm.nd.empty((4,), "float32", dev)
    assert a.copyto(b) is b
    np.testing.assert_array_equal(b.numpy(), [0, 1, 2, 3])
    c = a.copyto(tvm.cpu(1))
    assert isinstance(c, tvm.nd.NDArray) and c.device == tvm.cpu(1)
    np.testing.assert_array_equal(c.numpy(), a.numpy())
    b.copyfrom(tvm.nd.array(np.full(4, 7, "float32"), dev))
    np.testing.assert_array_equal(b.numpy(), [7, 7, 7, 7])
    b[:] = np.ones(4, "float32")
    np.testing.assert_array_equal(b.numpy(), [1, 1, 1, 1])
    with pytest.raises(ValueError, match=r"source has shape \(3,\), this array has shape \(4,\)"):
        a.copyfrom(np.zeros(3))
    with pytest.raises(ValueError, match="target has shape"):
        a.copyto(tvm.nd.empty((5,), "float32", dev))
    with pytest.raises(ValueError, match="target must be an array, a Device or a Session"):
        a.copyto("cpu")
    with pytest.raises(ValueError, match="assigned as a whole"):
        a[1] = 3


# -- built functions take them ------------------------------------------------------------------
@pytest.mark.parametrize("target", ["llvm", "c"])
def test_a_built_kernel_runs_on_nd_arrays(target):
    if target == "c" and shutil.which("cc") is None:
        pytest.skip("the c target needs a C compiler")
    f = build_add(target)
    dev = tvm.device(target, 0)
    rng = np.random.default_rng(0)
    a = tvm.nd.array(rng.uniform(size=N).astype("float32"), dev)
    b = tvm.nd.array(rng.uniform(size=N).astype("float32"), dev)
    c = tvm.nd.array(np.zeros(N, dtype="float32"), dev)
    f(a, b, c)
    np.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
    f["myadd"](a, b, tvm.nd.empty((N,), "float32", dev).copyfrom(np.zeros(N)))
    timer = f.time_evaluator("myadd", number=2, repeat=1)
    assert timer(a, b, c).mean > 0


def test_wrong_nd_arrays_get_the_usual_errors(myadd):
    dev = tvm.cpu(0)
    a = tvm.nd.array(np.zeros(N, "float32"), dev)
    with pytest.raises(TypeError, match="argument B must have dtype float32, got int32"):
        myadd(a, tvm.nd.array(np.zeros(N, "int32"), dev), a)
    with pytest.raises(ValueError, match="argument C must have shape"):
        myadd(a, a, tvm.nd.empty((N + 1,), "float32", dev))


# -- modules -------------------------------------------------------------------------------------
def test_entry_name_and_type_key(myadd):
    assert myadd.type_key == "llvm"
    assert myadd.entry_name == "__tvm_main__"
    dev = tvm.cpu(0)
    a = tvm.nd.array(np.ones(N, "float32"), dev)
    c = tvm.nd.empty((N,), "float32", dev)
    myadd[myadd.entry_name](a, a, c)
    np.testing.assert_array_equal(c.numpy(), np.full(N, 2, "float32"))
    assert myadd.entry_func is myadd["myadd"]


def test_entry_name_of_a_module_with_two_functions():
    A = te.placeholder((N,), name="A")
    B = te.compute(A.shape, lambda i: A[i] * 2, name="B")
    C = te.compute(A.shape, lambda i: A[i] + 1, name="C")
    double = tvm.lower(te.create_schedule(B.op), [A, B], name="double")
    inc = tvm.lower(te.create_schedule(C.op), [A, C], name="inc")
    mod = tvm.build(tvm.ir.IRModule((*double.functions, *inc.functions)), target="llvm")
    with pytest.raises(tvm.LoomError, match="module has 2 functions"):
        mod.get_function(mod.entry_name)


def test_c_modules_have_type_key_c():
    if shutil.which("cc") is None:
        pytest.skip("the c target needs a C compiler")
    assert build_add("c").type_key == "c"


# -- global functions ----------------------------------------------------------------------------
def test_register_func_and_get_global_func():
    @tvm.register_func("test.tvm_compat.add_one")
    def add_one(x):
        return x + 1

    assert tvm.get_global_func("test.tvm_compat.add_one")(41) == 42
    assert add_one(1) == 2  # the decorator gives the function back

    @tvm.register_func
    def test_tvm_compat_bare(x):
        return x * 3

    assert tvm.get_global_func("test_tvm_compat_bare")(2) == 6

    tvm.register_func("test.tvm_compat.sub", lambda a, b: a - b)
    assert tvm.get_global_func("test.tvm_compat.sub")(5, 3) == 2
    assert "test.tvm_compat.sub" in tvm.runtime.list_global_func_names()


def test_a_taken_name_needs_override():
    tvm.register_func("test.tvm_compat.taken", lambda: 1)
    with pytest.raises(tvm.LoomError, match=r"'test\.tvm_compat\.taken' is already registered"):
        tvm.register_func("test.tvm_compat.taken", lambda: 2)
    assert tvm.get_global_func("test.tvm_compat.taken")() == 1
    tvm.register_func("test.tvm_compat.taken", lambda: 3, override=True)
    assert tvm.get_global_func("test.tvm_compat.taken")() == 3
    with pytest.raises(tvm.LoomError, match="already registered"):

        @tvm.register_func("test.tvm_compat.taken")
        def again():
            return 4


def test_a_missing_name():
    with pytest.raises(tvm.LoomError, match=r"unknown global function 'test\.tvm_compat\.nothing'"):
        tvm.get_global_func("test.tvm_compat.nothing")
    assert tvm.get_global_func("test.tvm_compat.nothing", allow_missing=True) is None
    tvm.register_func("test.tvm_compat.gone", print)
    tvm.runtime.remove_global_func("test.tvm_compat.gone")
    assert tvm.get_global_func("test.tvm_compat.gone", allow_missing=True) is None
    with pytest.raises(TypeError, match="must be callable"):
        tvm.register_func("test.tvm_compat.not_callable", 3)


# -- runtime.enabled -----------------------------------------------------------------------------
def test_runtime_enabled():
    assert tvm.runtime.enabled("cpu")
    assert tvm.runtime.enabled("llvm")
    assert tvm.runtime.enabled("llvm -mcpu=generic")
    assert tvm.runtime.enabled("c") == (shutil.which("cc") is not None)
    tools = ("clang", "ld.lld", "qemu-hexagon")
    assert tvm.runtime.enabled("hexagon") == all(shutil.which(t) for t in tools)
    for gpu in ("cuda", "opencl", "vulkan", "metal", "rocm"):
        assert not tvm.runtime.enabled(gpu)
    with pytest.raises(tvm.LoomError, match="unknown target 'fpga'"):
        tvm.runtime.enabled("fpga")


def test_time_evaluator_as_tvm_calls_it():
    n = 256
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1, name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], "llvm", name="inc")
    dev = tvm.cpu(0)
    a = tvm.nd.array(np.zeros(n, "float32"), dev)
    b = tvm.nd.array(np.zeros(n, "float32"), dev)
    timer = f.time_evaluator(f.entry_name, dev, number=3)
    result = timer(a, b)
    assert len(result.results) == 1 and result.mean > 0  # TVM's default: one repeat
    assert (b.numpy() == 1).all()
    calls = []
    slow = tvm.build(te.create_schedule(B.op), [A, B], "llvm", name="inc")
    timed = slow["inc"].time

    def counting(args, number, repeat):
        calls.append(number)
        return timed(args, number, repeat)

    slow["inc"].time = counting
    slow.time_evaluator("inc", dev, number=1, repeat=2, min_repeat_ms=5)(a, b)
    assert calls[-1] > 1  # one call of 256 additions lasts far less than 5 ms
    with pytest.raises(TypeError, match=r"dev must be a Device such as loom.cpu\(0\)"):
        f.time_evaluator("inc", 3)
    with pytest.raises(ValueError, match=r"number must be an int >= 1, got 0"):
        f.time_evaluator("inc", dev, number=0)


def _vector_add(name="myadd"):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, _ = s[C].split(C.op.axis[0], factor=64)
    s[C].parallel(xo)
    return tvm.build(s, [A, B, C], "llvm", name=name)


def _check_add(f, name="myadd"):
    a, b = np.random.rand(1000).astype("float32"), np.random.rand(1000).astype("float32")
    c = np.empty_like(a)
    f[name](a, b, c)
    np.testing.assert_allclose(c, a + b)


def test_save_an_object_link_it_with_create_shared_and_load_it(tmp_path):
    fadd = _vector_add()
    fadd.save(str(tmp_path / "myadd.o"))
    fadd.save(str(tmp_path / "myadd.ll"))
    assert "define" in (tmp_path / "myadd.ll").read_text()
    cc.create_shared(str(tmp_path / "myadd.so"), [str(tmp_path / "myadd.o")])
    _check_add(tvm.runtime.load_module(str(tmp_path / "myadd.so")))
    with pytest.raises(ValueError, match=r"save: fmt must be 'o', 'll', 's' or 'c'"):
        fadd.save(str(tmp_path / "myadd.bin"))


def test_export_library_with_tvm_s_fcompile(tmp_path):
    fadd = _vector_add()
    fadd.export_library(str(tmp_path / "packed.so"), cc.create_shared)
    _check_add(tvm.runtime.load_module(str(tmp_path / "packed.so")))
    linked = []

    def recording(output, objects, options=None):
        linked.append(objects)
        cc.create_shared(output, objects, options)

    fadd.export_library(str(tmp_path / "packed2.so"), fcompile=recording)
    assert len(linked) == 1 and all(o.endswith(".o") for o in linked[0])
    _check_add(tvm.runtime.load_module(str(tmp_path / "packed2.so")))
    with pytest.raises(TypeError, match=r"fcompile must be a function"):
        fadd.export_library(str(tmp_path / "bad.so"), fcompile="gcc")


def test_two_saved_modules_in_one_library_are_refused_clearly(tmp_path):
    first, second = tmp_path / "first.o", tmp_path / "second.o"
    _vector_add("first").save(str(first))
    _vector_add("second").save(str(second))
    with pytest.raises(tvm.LoomError, match=r"2 objects written by Module.save"):
        cc.create_shared(str(tmp_path / "both.so"), [str(first), str(second)])


def test_time_evaluator_refuses_an_endless_min_repeat_ms():
    with pytest.raises(ValueError, match=r"min_repeat_ms must be a finite number >= 0, got inf"):
        _vector_add().time_evaluator("myadd", tvm.cpu(0), min_repeat_ms=float("inf"))
