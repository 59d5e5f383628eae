"""Packages whose names are imported on first use (PEP 562).

loom's package `__init__` files stay light, so that importing one module of a package does not
import the rest: `import loom.runtime` must not load the compiler, and the NPU's simulator (a
runtime module) must not load the NPU's compiler side. A package lists what it offers and where
it lives; `lazy_attributes` gives the module-level `__getattr__` and `__dir__` that import it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_attributes(
    package: str, namespace: dict, table: dict[str, tuple[str, str | None]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """(__getattr__, __dir__) for `package`: `table` maps a name to (module, attribute), the
    attribute None for the module itself. A value is imported once, then kept in `namespace`."""

    def __getattr__(name: str) -> object:
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module_name, attribute = table[name]
        module = importlib.import_module(module_name)
        value = module if attribute is None else getattr(module, attribute)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__
