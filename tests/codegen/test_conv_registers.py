"""A convolution's register tile stays in the registers (conv_schedules.py, `_Budget.fits`).

A tile's step holds its accumulators, the loaded vectors its channels share and the broadcast
of the moment: on AVX2 (16 registers) a tile of 3 channels x 4 input vectors needs 17, and
LLVM kept its accumulators on the stack (a store and a load per multiply-add; mobilenet_v2's
1x1 convolution of 144 channels to 24 at 56x56 ran at half the speed). These compile the 1x1
convolutions of tests/graph/test_conv_schedules.py, and the models', for an AVX2 CPU and check
the machine code: no loop of multiply-adds stores a vector on the stack (at a constant
offset, or at an index: a flat channel tile's accumulators of all its pixels are a stack
buffer indexed by the tile, which LLVM keeps in registers through a block of the reduction
only when no bound check is inside it: conv_schedules._step_block).

Windows of several kernel rows are left out on purpose: their tiles' rows read some of the
next kernel row's vectors, which LLVM loads once and keeps (a few of them on the stack). That
trade pays: with the kernel-row loop kept rolled instead, resnet18's 3x3 convolution at 56x56
on Zen 3 (AVX2) was 1.4 times slower.
"""

import re

import numpy as np
import pytest

import loom
from tests.graph.test_conv_schedules import CONVS, conv_model

AVX2 = "llvm -mcpu=haswell -mattr=+avx2"  # 16 registers of 8 floats

MODEL_LAYERS = {
    "mobilenet_v2 1x1 144->24 56x56": ((1, 144, 56, 56), (24, 144, 1, 1), {}, True, None),
    "ppocr 1x1 48->96 80x80": ((1, 48, 80, 80), (96, 48, 1, 1), {}, True, "HardSwish"),
    "mobilenet_v2 1x1 96->576 14x14": ((1, 96, 14, 14), (576, 96, 1, 1), {}, True, "Clip"),
    "mobilenet_v2 1x1 960->160 7x7": ((1, 960, 7, 7), (160, 960, 1, 1), {}, True, None),
    "mobilenet_v2 1x1 576->96 14x14": ((1, 576, 14, 14), (96, 576, 1, 1), {}, True, None),
    "mobilenet_v2 1x1 320->1280 7x7": ((1, 320, 7, 7), (1280, 320, 1, 1), {}, True, "Clip"),
}

LABEL = re.compile(r"^(\.LBB\w+):")
BACK_JUMP = re.compile(r"^\s+j\w+\s+(\.LBB\w+)")
STACK_STORE = re.compile(r"^\s+vmov\w+\s+%[xyz]mm\d+, -?\w*\(%rsp(,%\w+(,\d)?)?\)")


def innermost_loops(asm: str) -> list[list[str]]:
    """The bodies of the innermost loops of `asm` (x86 assembly): from a label to the jump
    back to it, with no other such loop inside."""
    lines = asm.splitlines()
    at = {}
    loops = []
    for i, line in enumerate(lines):
        label = LABEL.match(line)
        if label:
            at[label.group(1)] = i
        jump = BACK_JUMP.match(line)
        if jump and jump.group(1) in at:
            loops.append((at[jump.group(1)], i))
    return [
        lines[a : b + 1]
        for a, b in loops
        if not any(a < c and d < b for c, d in loops if (c, d) != (a, b))
    ]


POINTWISE = {
    **{name: conv for name, conv in CONVS.items() if conv[1][2:] == (1, 1)},
    **MODEL_LAYERS,
}


@pytest.mark.parametrize("case", sorted(POINTWISE))
def test_multiply_add_loops_keep_their_vectors_in_registers(case):
    x_shape, w_shape, attrs, bias, activation = POINTWISE[case]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype("float32")
    w = rng.standard_normal(w_shape).astype("float32")
    b = rng.standard_normal(w_shape[:1]).astype("float32") if bias else None
    compiled = loom.compile(conv_model(x, w, b, activation, **attrs), target=AVX2)
    loops = [
        body
        for body in innermost_loops(compiled.module.get_source("asm"))
        if any("vfmadd" in line for line in body)
    ]
    assert loops, "no loop of multiply-adds"
    spilled = [line.strip() for body in loops for line in body if STACK_STORE.search(line)]
    assert not spilled, spilled
