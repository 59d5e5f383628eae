"""A second, independent fuzzer for loom (docs/testing.md).

A case is a small JSON-able dict drawn from one seed (`generate.make_case`): input tensors,
a chain of compute stages whose rules are random expression trees (every dtype, shifts and
bitwise operations, casts, math functions, reductions with `where`/`init`, guarded reads),
and a random valid schedule (split, fuse, reorder, tile, vectorize, unroll, parallel,
compute_at, compute_inline, cache_read, cache_write, set_scope, storage_align).

- `program.to_code(case)` prints it as a loom.te program; the runner executes that text, so the
  printed reproduction is exactly what ran.
- `oracle.evaluate(case, inputs)` computes the expected output with numpy, directly from the
  expression trees (not with loom's interpreter), together with an error bound for floats.
- `worker` runs cases on the interpreter, `llvm`, `c` and (a sample) Hexagon under qemu;
  `runner` drives a pool of worker subprocesses, so a crash or a hang names its case.

`python -m tests.fuzz -n 1000` runs cases; `python -m tests.fuzz --show SEED` prints one.
"""
