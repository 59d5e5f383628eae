"""Importers of models from other frameworks into loom graphs: `from_onnx` (needs the onnx
package, an optional dependency: `pip install onnx`)."""

from loom.frontend.onnx import OPSET, UnsupportedModelError, UnsupportedNode, from_onnx

__all__ = ["OPSET", "UnsupportedModelError", "UnsupportedNode", "from_onnx"]
