"""The packaging layer (docs/architecture.md): from a code generator's objects to a loaded
module (`finish`), and a module tree to one exported library (`export_library`)."""

from loom.packaging.build import finish
from loom.packaging.export import export_library

__all__ = ["export_library", "finish"]
