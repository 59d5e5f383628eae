"""A test-only module type ("blob"): a payload of bytes imported by a host module."""

from loom.abi import FunctionSignature, ParamSpec
from loom.runtime import Module, register_loader

TYPE_KEY = "test_blob"


class BlobModule(Module):
    def __init__(self, data: bytes, label: str):
        sig = FunctionSignature("blob_kernel", (ParamSpec("x", "float32", (4,)),))
        super().__init__(TYPE_KEY, {"blob_kernel": sig})
        self.data = data
        self.label = label

    def save_payload(self) -> bytes:
        return self.data

    def metadata(self) -> dict:
        return {"label": self.label}


def load_blob(payload: bytes, record: dict) -> BlobModule:
    return BlobModule(payload, record["label"])


def register() -> None:
    register_loader(TYPE_KEY, load_blob)
