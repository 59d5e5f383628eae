"""What TVM scripts import as `tvm.testing`: result checks that name the arrays' shapes."""

from __future__ import annotations

import numpy as np


def assert_allclose(actual, desired, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """Raises AssertionError unless `actual` and `desired` have the same shape and agree within
    `atol + rtol * |desired|` elementwise. Unlike numpy's check, shapes that merely broadcast
    fail, as in TVM; the tolerances default to TVM's (1e-7 each), not numpy's."""
    actual, desired = np.asanyarray(actual), np.asanyarray(desired)
    if actual.shape != desired.shape:
        raise AssertionError(f"shapes differ: actual {actual.shape}, desired {desired.shape}")
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, verbose=True)
