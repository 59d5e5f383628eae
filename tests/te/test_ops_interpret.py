"""Every case of tests/cases.py lowered and run by the reference interpreter matches numpy."""

import numpy as np
import pytest

import loom
from tests.cases import CASES


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_matches_numpy(case):
    sch, args = case.make()
    mod = loom.lower(sch, args, name="kernel")
    arrays = case.inputs(np.random.default_rng(7))
    expected = case.reference(*[a.copy() for a in arrays])
    loom.ir.interpret(mod, *arrays)
    for got, want in zip(arrays, expected):
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)


def test_catalogue_uses_every_schedule_primitive():
    from loom.te.schedule import Stage

    used = set()
    names = [
        "split",
        "fuse",
        "reorder",
        "tile",
        "vectorize",
        "unroll",
        "parallel",
        "compute_at",
        "compute_inline",
        "compute_root",
        "set_scope",
        "pragma",
        "storage_align",
    ]
    originals = {n: getattr(Stage, n) for n in names}

    def spy(name):
        def call(self, *a, **k):
            used.add(name)
            return originals[name](self, *a, **k)

        return call

    from loom.te.schedule import Schedule

    sched_originals = {n: getattr(Schedule, n) for n in ("cache_read", "cache_write")}

    def sched_spy(name):
        def call(self, *a, **k):
            used.add(name)
            return sched_originals[name](self, *a, **k)

        return call

    try:
        for n in names:
            setattr(Stage, n, spy(n))
        for n in sched_originals:
            setattr(Schedule, n, sched_spy(n))
        for c in CASES:
            c.make()
    finally:
        for n, f in originals.items():
            setattr(Stage, n, f)
        for n, f in sched_originals.items():
            setattr(Schedule, n, f)
    assert used == set(names) | {"cache_read", "cache_write"}
