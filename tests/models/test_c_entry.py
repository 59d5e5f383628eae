"""A compiled model's C entry point: a C program includes `<name>.h`, links the exported library
and runs `<name>_run` with its own memory (inputs, outputs and the workspace pool), with no
Python; its outputs are the Python call's.

A small model built here always runs; mobilenet_v2 and resnet18 come from the model cache
(tests/models/test_models.py compares them with onnxruntime; here the C run is compared with
the Python run of the same compiled model)."""

from __future__ import annotations

import pathlib
import subprocess

import numpy as np
import pytest

import loom
from loom.runtime import host_runtime
from loom.runtime.c_entry import field_names
from loom.runtime.native_lib import find_tool
from tests.models.test_models import FETCH, MODELS_DIR

onnx = pytest.importorskip("onnx")
helper = onnx.helper


def program(name: str, info) -> str:
    """A C program reading each input from in<k>.bin, writing each output to out<k>.bin."""
    ins = field_names(n for n, _, _ in info.inputs)
    outs = field_names(n for n, _, _ in info.outputs)
    pools = field_names(p["name"] for p in info.caller_pools)
    upper = name.upper()
    lines = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        f'#include "{name}.h"',
        "static void *aligned(size_t align, size_t n) {",
        "  return aligned_alloc(align, (n + align - 1) / align * align);",
        "}",
        "static void *read_file(const char *path, size_t n) {",
        f'  void *p = aligned({upper}_ALIGNMENT, n); FILE *f = fopen(path, "rb");',
        "  if (!p || !f || fread(p, 1, n, f) != n) { perror(path); exit(2); }",
        "  fclose(f); return p;",
        "}",
        "int main(void) {",
        f"  {name}_inputs in; {name}_outputs out; {name}_pools pools;",
    ]
    for k, (field, (_, shape, dt)) in enumerate(zip(ins, info.inputs)):
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
        lines.append(f'  in.{field} = read_file("in{k}.bin", {nbytes});')
    sizes = []
    for field, (_, shape, dt) in zip(outs, info.outputs):
        sizes.append(int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize)
        lines.append(f"  out.{field} = aligned({upper}_ALIGNMENT, {sizes[-1]});")
    for field in pools:
        prefix = f"{upper}_{field.upper()}"
        lines.append(f"  pools.{field} = aligned({prefix}_ALIGNMENT, {prefix}_SIZE);")
    lines.append(f"  int32_t status = {name}_run(&in, &out, &pools);")
    lines.append('  if (status) { fprintf(stderr, "status %d\\n", status); return 1; }')
    for k, (field, nbytes) in enumerate(zip(outs, sizes)):
        lines.append(f'  FILE *f{k} = fopen("out{k}.bin", "wb");')
        lines.append(
            f"  if (!f{k} || fwrite(out.{field}, 1, {nbytes}, f{k}) != {nbytes}) return 3;"
        )
        lines.append(f"  fclose(f{k});")
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


def run_in_c(compiled, feeds: dict, tmp_path: pathlib.Path) -> list[np.ndarray]:
    name = compiled.info.name
    compiled.export_library(tmp_path / f"{name}.so")
    compiled.export_header(tmp_path / f"{name}.h")
    (tmp_path / "main.c").write_text(program(name, compiled.info))
    for k, (n, _, _) in enumerate(compiled.info.inputs):
        np.ascontiguousarray(feeds[n]).tofile(tmp_path / f"in{k}.bin")
    exe = tmp_path / "prog"
    subprocess.run(
        [
            find_tool("cc"),
            "-O1",
            "-o",
            str(exe),
            "main.c",
            f"./{name}.so",
            f"-Wl,-rpath,{tmp_path}",
            *host_runtime.host_link_flags(),
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    )
    done = subprocess.run([str(exe)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return [
        np.fromfile(tmp_path / f"out{k}.bin", dtype=dt).reshape(shape)
        for k, (_, shape, dt) in enumerate(compiled.info.outputs)
    ]


def small_model():
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 16])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 16])
    z = helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [2, 16])
    w = onnx.numpy_helper.from_array(np.linspace(-1, 1, 256, dtype="float32").reshape(16, 16), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["a"]),
        helper.make_node("Softmax", ["a"], ["b"]),  # a reduction: its own kernel
        helper.make_node("MatMul", ["b", "w"], ["c"]),
        helper.make_node("Tanh", ["c"], ["y"]),
        helper.make_node("Add", ["a", "c"], ["z"]),
    ]
    graph = helper.make_graph(nodes, "small", [x], [y, z], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_c_program_runs_a_small_model_like_python(tmp_path):
    compiled = loom.compile(small_model(), name="small")
    assert compiled.info.caller_pools and compiled.memory_plan["workspace"].placed
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 16)).astype("float32")}
    want = compiled(**feeds)
    for got, name in zip(run_in_c(compiled, feeds, tmp_path), compiled.output_names):
        np.testing.assert_array_equal(got, want[name])


@pytest.mark.slow
@pytest.mark.parametrize("model", ["mobilenet_v2", "resnet18"])
def test_a_c_program_runs_a_real_model_like_python(model, tmp_path):
    path = MODELS_DIR / f"{model}.onnx"
    if not path.exists():
        pytest.skip(f"{path} is not in the model cache; run: {FETCH}")
    compiled = loom.compile(path)
    workspace = compiled.memory_plan["workspace"]
    tensors = sum(b.size for b in workspace.placed)
    print(
        f"{model}: workspace {workspace.size:,} bytes for {len(workspace.placed)} tensors of "
        f"{tensors:,} bytes in all; lower bound {workspace.plan.lower_bound:,}"
    )
    assert workspace.plan.lower_bound <= workspace.size < tensors
    feeds = {"input": np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype("float32")}
    want = compiled(**feeds)
    for got, name in zip(run_in_c(compiled, feeds, tmp_path), compiled.output_names):
        np.testing.assert_array_equal(got, want[name])


def test_a_static_workspace_is_in_the_library_and_the_caller_gives_no_pool(tmp_path):
    pools = [loom.memory.Pool("ws", placement="static"), loom.memory.Pool("w", kind="constant")]
    compiled = loom.compile(small_model(), name="small_static", pools=pools)
    assert compiled.info.caller_pools == []
    assert "void *unused;" in compiled.c_header()  # C has no empty struct
    assert compiled.memory_plan["ws"].placed
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 16)).astype("float32")}
    want = compiled(**feeds)
    for got, name in zip(run_in_c(compiled, feeds, tmp_path), compiled.output_names):
        np.testing.assert_array_equal(got, want[name])
