"""Accelerator back ends: the plug-in API (`Backend`, `register`) and the built-in ones."""

from loom.backend.base import (
    KERNEL_ATTR,
    Backend,
    get,
    is_backend,
    register,
)
from loom.backend.base import list_backends as list

__all__ = ["KERNEL_ATTR", "Backend", "get", "is_backend", "list", "register"]
