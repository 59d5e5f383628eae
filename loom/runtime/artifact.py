"""The artifact record embedded in an exported library (docs/architecture.md, decision 5).

Layout (little-endian), stored as raw bytes in the ELF section `.loom_artifact`:

    magic "LOOMARTF" (8) | format version u32 | payload count u32 | total length u64
    metadata:  length u64 | sha256 (32) | JSON (utf-8)
    payload *: type-key length u16 | type key | length u64 | sha256 (32) | bytes

The metadata records the format version, the producer, and the module tree: for each module
its type key, functions with their signatures, imported modules (by index; module 0 is the
root), target, memories used, extern symbols with their providers, and the index of its
payload (non-DSO modules). Reading checks the magic, the version, every length against the
bytes present and every checksum, and the metadata against its schema (`check_metadata`), so a
corrupt, truncated or newer artifact is refused before anything of the library runs.

Whole-file seal: every file export_library writes (`.so` or `.tar`) ends with a 56-byte
trailer that checksums every byte before it (host code, artifact, payloads):

    magic "LOOMSEAL" (8) | seal version u32 | flags u32 (0) | covered length u64 | sha256 (32)

The dynamic loader ignores bytes after the ELF's last section, and tar readers those after the
archive's end. `unseal` checks the trailer before anything else of a file is parsed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct

from loom.abi import shape_expr
from loom.abi.dtype import dtype
from loom.errors import LoomError

MAGIC = b"LOOMARTF"
FORMAT_VERSION = 2
"""2: a signature's dimension may be the text of a symbolic one ("n", "n * 4"), and a parameter
may be `implicit` (a shape variable the caller binds; loom/abi/signature.py). Version 1 records
are version 2 records without them, so both are read."""
SECTION = ".loom_artifact"
SYMBOL = "__loom_artifact"
_HEADER = struct.Struct("<8sIIQ")
_LENGTH = struct.Struct("<Q")
_KEY_LENGTH = struct.Struct("<H")
SEAL_MAGIC = b"LOOMSEAL"
SEAL_VERSION = 1
_SEAL = struct.Struct("<8sIIQ32s")
SEAL_SIZE = _SEAL.size


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


def seal(data: bytes) -> bytes:
    """`data` followed by the trailer that checksums every byte of it (see the module doc)."""
    return data + _SEAL.pack(SEAL_MAGIC, SEAL_VERSION, 0, len(data), hashlib.sha256(data).digest())


def is_sealed(data: bytes) -> bool:
    """Whether the file ends with a seal's trailer (unseal checks it)."""
    return len(data) >= SEAL_SIZE and data[-SEAL_SIZE:][:8] == SEAL_MAGIC


def unseal(data: bytes, where: str = "the file") -> bytes:
    """The bytes a sealed file's trailer covers, after checking the trailer and the sha256 of
    every byte before it; an ArtifactError if anything of the file was changed."""
    if not is_sealed(data):
        raise ArtifactError(
            f"{where} does not end with loom's whole-file checksum: it is truncated or "
            "damaged, or was not written by export_library (files written by a loom that did "
            "not yet checksum whole files are refused too: export it again)"
        )
    _, version, flags, covered, digest = _SEAL.unpack(data[-SEAL_SIZE:])
    if version > SEAL_VERSION:
        raise ArtifactError(
            f"{where} has a whole-file checksum of version {version}; this loom reads version "
            f"{SEAL_VERSION} at most: upgrade loom to load it"
        )
    if version != SEAL_VERSION or flags != 0 or covered != len(data) - SEAL_SIZE:
        raise ArtifactError(
            f"{where} has a damaged whole-file checksum trailer (version {version}, flags "
            f"{flags}, covering {covered} of the {len(data) - SEAL_SIZE} bytes before it): "
            "the file is corrupt"
        )
    body = data[:-SEAL_SIZE]
    if hashlib.sha256(body).digest() != digest:
        raise ArtifactError(
            f"{where} fails its whole-file checksum (sha256 of its first {covered} bytes): "
            "the file is corrupt"
        )
    return body


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
    if version < 1:
        raise ArtifactError(f"{where} has an invalid loom artifact format version {version}")
    if total > len(blob):
        raise ArtifactError(
            f"{where} is truncated: its artifact record says {total} bytes, {len(blob)} are present"
        )
    if total < _HEADER.size or any(blob[total:]):
        raise ArtifactError(
            f"{where}: its artifact record says {total} bytes, but {len(blob)} bytes are "
            "present and not all of the rest is padding: the file is corrupt"
        )
    reader = _Reader(blob[:total], where)
    reader.at = _HEADER.size
    try:
        metadata = json.loads(reader.checked("the metadata").decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ArtifactError(f"{where}: the metadata is not valid JSON: {e}") from None
    if not isinstance(metadata, dict):
        raise ArtifactError(
            f"{where}: the metadata must be a JSON object, got {type(metadata).__name__}"
        )
    payloads = []
    for k in range(count):
        (n,) = _KEY_LENGTH.unpack(reader.take(_KEY_LENGTH.size, f"the type key of payload {k}"))
        try:
            key = reader.take(n, f"the type key of payload {k}").decode("utf-8")
        except UnicodeDecodeError:
            raise ArtifactError(f"{where}: the type key of payload {k} is not UTF-8") from None
        payloads.append((key, reader.checked(f"payload {k} (type {key!r})")))
    if reader.at != total:
        raise ArtifactError(
            f"{where}: {total - reader.at} bytes follow the last payload of the artifact "
            "record: the file is corrupt"
        )
    return Artifact(version, metadata, tuple(payloads))


def _fail(where: str, what: str) -> ArtifactError:
    return ArtifactError(f"{where}: the metadata is malformed: {what}")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_signature(f, where: str, what: str) -> None:
    if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not f["name"]:
        raise _fail(where, f"{what} must be an object with a non-empty name, got {f!r}")
    params = f.get("params")
    if not isinstance(params, list):
        raise _fail(where, f"the parameters of {what} must be a list, got {params!r}")
    for p in params:
        if not isinstance(p, dict) or set(p) - {
            "name",
            "dtype",
            "shape",
            "alignment",
            "written",
            "implicit",
        }:
            raise _fail(where, f"a parameter of {what} is not a parameter record: {p!r}")
        shape, alignment = p.get("shape"), p.get("alignment", 1)
        ok = (
            isinstance(p.get("name"), str)
            and isinstance(p.get("dtype"), str)
            and _valid_dtype(p["dtype"])
            and (shape is None or (isinstance(shape, list) and all(map(_is_dimension, shape))))
            and isinstance(p.get("implicit", False), bool)
            and _is_int(alignment)
            and alignment >= 1
            and isinstance(p.get("written", False), bool)
        )
        if not ok:
            raise _fail(where, f"parameter {p!r} of {what} is invalid")


def _is_dimension(d) -> bool:
    """A constant dimension (an int >= 0) or a symbolic one (loom/abi/shape_expr.py)."""
    if isinstance(d, str):
        try:
            shape_expr.variables(d)
        except ValueError:
            return False
        return True
    return _is_int(d) and d >= 0


def _valid_dtype(text: str) -> bool:
    try:
        dtype(text)
    except (ValueError, TypeError):
        return False
    return True


def check_metadata(metadata: dict, payloads, where: str = "the library") -> list[dict]:
    """Check the metadata against its schema and the payloads present: a list of module
    records (module 0 the root, each other module imported by exactly one module of a lower
    index), each payload used by exactly one module of its type. Returns the records."""
    modules = metadata.get("modules")
    if not isinstance(modules, list) or not modules:
        raise ArtifactError(f"{where}: the metadata lists no modules")
    if "format_version" in metadata and metadata["format_version"] not in range(
        1, FORMAT_VERSION + 1
    ):
        raise _fail(where, f"format_version is {metadata['format_version']!r}")
    if not isinstance(metadata.get("producer", ""), str):
        raise _fail(where, "the producer is not a string")
    imported: dict[int, int] = {}
    used: set[int] = set()
    for k, r in enumerate(modules):
        what = f"module {k}"
        if not isinstance(r, dict):
            raise _fail(where, f"{what} is not an object")
        key = r.get("type_key")
        if not isinstance(key, str) or not key:
            raise _fail(where, f"{what} has no type key")
        what = f"module {k} ({key})"
        if not isinstance(r.get("dso"), bool):
            raise _fail(where, f"{what}: 'dso' must be true or false")
        functions = r.get("functions")
        if not isinstance(functions, list):
            raise _fail(where, f"{what}: 'functions' must be a list")
        for f in functions:
            _check_signature(f, where, f"a function of {what}")
        names = [f["name"] for f in functions]
        if len(set(names)) != len(names):
            raise _fail(where, f"{what} lists a function twice: {names}")
        imports = r.get("imports")
        if not isinstance(imports, list) or not all(_is_int(i) for i in imports):
            raise _fail(where, f"{what}: 'imports' must be a list of module indices")
        for i in imports:
            if not k < i < len(modules) or i in imported:
                raise _fail(
                    where,
                    f"{what} imports module {i}: each module other than the root is "
                    "imported once, by a module listed before it",
                )
            imported[i] = k
        target = r.get("target")
        if target is not None and not isinstance(target, str):
            raise _fail(where, f"{what}: 'target' must be a string")
        memories = r.get("memories", [])
        if not isinstance(memories, list) or not all(isinstance(m, str) for m in memories):
            raise _fail(where, f"{what}: 'memories' must be a list of strings")
        symbols = r.get("extern_symbols") or {}
        if not isinstance(symbols, dict) or not all(
            isinstance(n, str) and isinstance(lib, str) for n, lib in symbols.items()
        ):
            raise _fail(where, f"{what}: 'extern_symbols' must map symbols to library names")
        payload = r.get("payload")
        if r["dso"]:
            if payload is not None or not isinstance(target, str):
                raise _fail(where, f"{what} is linked code: it has a target and no payload")
        elif (
            not _is_int(payload)
            or not 0 <= payload < len(payloads)
            or payloads[payload][0] != key
            or payload in used
        ):
            raise ArtifactError(f"{where}: module {key!r} has no payload of its type")
        else:
            used.add(payload)
    if len(imported) != len(modules) - 1:
        orphans = [k for k in range(1, len(modules)) if k not in imported]
        raise _fail(where, f"modules {orphans} are imported by no module")
    if len(used) != len(payloads):
        extra = [k for k in range(len(payloads)) if k not in used]
        raise _fail(where, f"payloads {extra} belong to no module")
    return modules
