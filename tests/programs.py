"""Programs several test files share."""

import numpy as np

from loom.demo import examples_dir, load_example

# where tests place the example accelerator's scratchpad (loom.memory.scratchpad_emu)
SCRATCHPAD_BASE = 0x4000_0000

VTCM_SEED = load_example(examples_dir() / "vtcm_seed.py")


def seed_program():
    """The VTCM question's program: two int8 inputs copied into `local.vtcm`, then added."""
    return VTCM_SEED.make()


def seed_inputs():
    """(a, b, expected c) for the seed program."""
    a, b, c = VTCM_SEED.inputs(np.random.default_rng(0))
    return a, b, VTCM_SEED.reference(a, b, c)[2]
