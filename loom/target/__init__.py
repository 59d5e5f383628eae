"""Target descriptions (CPU today; Hexagon and the reference NPU come with their issues)."""

from loom.target.target import Target, as_target, hexagon

__all__ = ["Target", "as_target", "hexagon"]
