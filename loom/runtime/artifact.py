"""The artifact record embedded in an exported library (docs/architecture.md, decision 5).

Layout (little-endian), stored as raw bytes in the ELF section `.loom_artifact`:

    magic "LOOMARTF" (8) | format version u32 | payload count u32 | total length u64
    metadata:  length u64 | sha256 (32) | JSON (utf-8)
    payload *: type-key length u16 | type key | length u64 | sha256 (32) | bytes

The metadata records the format version, the producer, and the module tree: for each module
its type key, functions with their signatures, imported modules (by index; module 0 is the
root), target, memories used, extern symbols with their providers, and the index of its
payload (non-DSO modules). Reading checks the magic, the version, every length against the
bytes present and every checksum, so a corrupt, truncated or newer artifact is refused before
anything of the library runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct

from loom.errors import LoomError

MAGIC = b"LOOMARTF"
FORMAT_VERSION = 1
SECTION = ".loom_artifact"
SYMBOL = "__loom_artifact"
_HEADER = struct.Struct("<8sIIQ")
_LENGTH = struct.Struct("<Q")
_KEY_LENGTH = struct.Struct("<H")


class ArtifactError(LoomError):
    """A library whose artifact record cannot be trusted (corrupt, truncated, too new)."""


@dataclasses.dataclass(frozen=True)
class Artifact:
    version: int
    metadata: dict
    payloads: tuple[tuple[str, bytes], ...]


def pack(metadata: dict, payloads: list[tuple[str, bytes]]) -> bytes:
    meta = json.dumps(metadata, sort_keys=True).encode()
    parts = [_LENGTH.pack(len(meta)), hashlib.sha256(meta).digest(), meta]
    for key, data in payloads:
        raw_key = key.encode()
        parts += [
            _KEY_LENGTH.pack(len(raw_key)),
            raw_key,
            _LENGTH.pack(len(data)),
            hashlib.sha256(data).digest(),
            data,
        ]
    body = b"".join(parts)
    return _HEADER.pack(MAGIC, FORMAT_VERSION, len(payloads), _HEADER.size + len(body)) + body


class _Reader:
    def __init__(self, blob: bytes, where: str):
        self.blob, self.at, self.where = blob, 0, where

    def take(self, n: int, what: str) -> bytes:
        if self.at + n > len(self.blob):
            raise ArtifactError(
                f"{self.where} is truncated: {what} needs {n} bytes at offset "
                f"{self.at} of the artifact, only {len(self.blob) - self.at} "
                "remain"
            )
        out = self.blob[self.at : self.at + n]
        self.at += n
        return out

    def checked(self, what: str) -> bytes:
        (n,) = _LENGTH.unpack(self.take(_LENGTH.size, f"the length of {what}"))
        digest = self.take(32, f"the checksum of {what}")
        data = self.take(n, what)
        if hashlib.sha256(data).digest() != digest:
            raise ArtifactError(
                f"{self.where}: {what} ({n} bytes) fails its checksum: the file is corrupt"
            )
        return data


def unpack(blob: bytes, where: str = "the library") -> Artifact:
    """Read and verify an artifact record; every problem is an ArtifactError naming it."""
    if len(blob) < _HEADER.size:
        raise ArtifactError(f"{where} is truncated: its artifact record has {len(blob)} bytes")
    magic, version, count, total = _HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise ArtifactError(f"{where} has no loom artifact record (bad magic {magic!r})")
    if version > FORMAT_VERSION:
        raise ArtifactError(
            f"{where} has loom artifact format version {version}; this loom "
            f"reads version {FORMAT_VERSION} at most: upgrade loom to load it"
        )
    if total > len(blob):
        raise ArtifactError(
            f"{where} is truncated: its artifact record says {total} bytes, {len(blob)} are present"
        )
    reader = _Reader(blob[:total], where)
    reader.at = _HEADER.size
    try:
        metadata = json.loads(reader.checked("the metadata"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ArtifactError(f"{where}: the metadata is not valid JSON: {e}") from None
    payloads = []
    for k in range(count):
        (n,) = _KEY_LENGTH.unpack(reader.take(_KEY_LENGTH.size, f"the type key of payload {k}"))
        key = reader.take(n, f"the type key of payload {k}").decode(errors="replace")
        payloads.append((key, reader.checked(f"payload {k} (type {key!r})")))
    return Artifact(version, metadata, tuple(payloads))
