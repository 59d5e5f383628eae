"""Aligned numpy arrays for loom kernels (`loom.nd.array`, `loom.nd.empty`, `loom.nd.zeros`)."""

from loom.runtime.ndarray import array, empty, zeros

__all__ = ["array", "empty", "zeros"]
