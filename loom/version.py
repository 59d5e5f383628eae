"""loom's version, readable from every layer."""

__version__ = "0.1.0"
