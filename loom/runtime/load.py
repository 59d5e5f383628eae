"""load_module: a library written by export_library, back into a module tree.

The file is read once and verified in Python first: the whole-file checksum (the seal at its
end, artifact.unseal), then the ELF, the artifact's magic, version, lengths and checksums, the
metadata's schema and a loader for every payload type; only then is the library opened, and
each imported module rebuilt by the loader registered for its type key. A `.tar` is verified
the same way (seal, then every member, the manifest's schema) and linked by loom with flags it
derives from the registered runtime libraries, never from the archive. Every defect of a file
is an ArtifactError. Loading needs no compiler: it is part of the runtime layer
(docs/architecture.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import pathlib
import re
import tarfile
import tempfile

from loom import abi
from loom.abi import MODULE_PROVIDER, FunctionSignature
from loom.errors import LoomError
from loom.runtime import artifact, elf, host_runtime
from loom.runtime.device_module import DeviceModule
from loom.runtime.library import SharedLibrary
from loom.runtime.linker import link_objects
from loom.runtime.module import LOADERS, Module, NativeModule, list_loaders, register_loader
from loom.runtime.native_lib import cache_dir


def provider_names(records) -> list[str]:
    """The names of the runtime libraries providing the undefined symbols of modules (their
    artifact records, or NativeModules), other than modules of the same library."""
    names = []
    for r in records:
        symbols = (r.get("extern_symbols") or {}) if isinstance(r, dict) else r.extern_symbols
        names += [lib for lib in symbols.values() if not lib.startswith(MODULE_PROVIDER)]
    return list(dict.fromkeys(names))


def runtime_link_flags(records) -> list[str]:
    """The link flags of the runtime libraries that provide the undefined symbols of the linked
    modules (artifact records, or NativeModules), except those loom builds and loads itself
    (load_module loads them first): the only flags a library is linked with besides -lm."""
    flags: list[str] = []
    for name in provider_names(records):
        lib = abi.get_library(name)
        if lib.load is None and lib.link_flags is not None:
            flags += [f for f in lib.link_flags() if f not in flags]
    return flags


def _read(path: pathlib.Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise LoomError(f"cannot read {path}: {e.strerror}") from None


def read_library(path, require_loaders: bool = True) -> tuple[elf.ElfFile, artifact.Artifact, int]:
    """Parse and verify a library without loading it: (ELF, artifact, file size). The
    whole-file checksum comes first; every defect is an ArtifactError. With `require_loaders`,
    every payload's type must have a registered loader."""
    path = pathlib.Path(path)
    data = _read(path)
    where = str(path)
    if data[-artifact.SEAL_SIZE :][:8] != artifact.SEAL_MAGIC:
        _not_sealed(data, where)
    body = artifact.unseal(data, where)
    try:
        parsed = elf.parse(body)
    except LoomError as e:
        raise artifact.ArtifactError(f"{where}: {e}") from None
    if parsed.type != 3:
        raise artifact.ArtifactError(f"{where} is not a shared object (ELF type {parsed.type})")
    section = parsed.section(artifact.SECTION)
    if section is None:
        raise artifact.ArtifactError(
            f"{where} is not a loom library: it has no {artifact.SECTION} section"
        )
    art = artifact.unpack(body[section.offset : section.offset + section.size], where)
    _check_metadata(art, where, require_loaders)
    defined = {s.name for s in parsed.symbols if s.dynamic and not s.undefined}
    for record in art.metadata["modules"]:
        missing = [f["name"] for f in record["functions"] if f["name"] not in defined]
        if record["dso"] and missing:
            raise artifact.ArtifactError(
                f"{where}: module {record['type_key']!r} lists functions the library does not "
                f"define: {missing}"
            )
    return parsed, art, len(data)


def _not_sealed(data: bytes, where: str) -> None:
    """Say what a file without loom's seal is, when that is plain (not an ELF file, an ELF
    file without an artifact); else the seal's own error. Nothing of the file is used."""
    try:
        parsed = elf.parse(data)
    except LoomError as e:
        if data[:4] != b"\x7fELF":
            raise artifact.ArtifactError(f"{where}: {e}") from None
    else:
        if parsed.section(artifact.SECTION) is None:
            raise artifact.ArtifactError(
                f"{where} is not a loom library: it has no {artifact.SECTION} section"
            )
    artifact.unseal(data, where)


def _check_metadata(art: artifact.Artifact, where: str, require_loaders: bool) -> None:
    for record in artifact.check_metadata(art.metadata, art.payloads, where):
        key = record["type_key"]
        if require_loaders and not record["dso"] and key not in LOADERS:
            raise artifact.ArtifactError(
                f"{where} contains a module of type {key!r}, which has no registered loader "
                f"(registered: {list_loaders() or 'none'}); register one with "
                "loom.runtime.register_loader"
            )


# -- .tar exports -----------------------------------------------------------------------------
TAR_MANIFEST = "loom_link.json"
TAR_ARTIFACT = "loom_artifact.bin"
TAR_ARTIFACT_OBJECT = "loom_artifact.o"
TAR_FORMAT = 1
_MEMBER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}")
_TRIPLE = re.compile(r"[A-Za-z0-9_.]+(-[A-Za-z0-9_.]+){0,4}")
_MANIFEST_KEYS = {"format", "triple", "objects", "sources"}


@dataclasses.dataclass(frozen=True)
class Archive:
    """A verified `.tar` export: the objects to link (one per linked module of the artifact, in
    the order of its records, then the artifact's object), the sources, the artifact."""

    triple: str
    objects: tuple[tuple[str, bytes], ...]
    sources: tuple[tuple[str, bytes], ...]
    artifact: artifact.Artifact
    size: int
    digest: str  # sha256 of the sealed bytes, hex


def read_archive(path, require_loaders: bool = True) -> Archive:
    """Verify a `.tar` export without using any of it: the whole-file checksum first, then
    every member (regular files with plain names, exactly those the manifest lists), the
    manifest's schema, the artifact, and every object (an ELF object for the manifest's
    triple). Every defect is an ArtifactError."""
    path = pathlib.Path(path)
    data = _read(path)
    where = str(path)
    body = artifact.unseal(data, where)
    members = _tar_members(body, where)
    manifest = _manifest(members, where)
    art = artifact.unpack(members[TAR_ARTIFACT], f"{where} ({TAR_ARTIFACT})")
    _check_metadata(art, where, require_loaders)
    linked = [r for r in art.metadata["modules"] if r["dso"]]
    if len(manifest["objects"]) != len(linked) + 1:
        raise artifact.ArtifactError(
            f"{where}: {TAR_MANIFEST} lists {len(manifest['objects'])} objects for "
            f"{len(linked)} linked modules and the artifact's object"
        )
    machine = elf.elf_machine_of_triple(manifest["triple"])
    for name in manifest["objects"]:
        try:
            parsed = elf.parse(members[name])
        except LoomError as e:
            raise artifact.ArtifactError(f"{where}: member {name}: {e}") from None
        if parsed.type != 1 or parsed.machine != machine:
            raise artifact.ArtifactError(
                f"{where}: member {name} is not a relocatable {manifest['triple']} object "
                f"(ELF type {parsed.type}, {parsed.machine_name})"
            )
        if name == TAR_ARTIFACT_OBJECT:
            section = parsed.section(artifact.SECTION)
            if section is None or (
                members[name][section.offset : section.offset + section.size]
                != members[TAR_ARTIFACT]
            ):
                raise artifact.ArtifactError(
                    f"{where}: {TAR_ARTIFACT_OBJECT} does not hold the artifact {TAR_ARTIFACT}"
                )
    return Archive(
        manifest["triple"],
        tuple((n, members[n]) for n in manifest["objects"]),
        tuple((n, members[n]) for n in manifest["sources"]),
        art,
        len(data),
        hashlib.sha256(data).hexdigest(),
    )


def _tar_members(body: bytes, where: str) -> dict[str, bytes]:
    """The members of a plain tar held in memory, by name: regular files with plain names
    (no directory, absolute or `..` part), each once, nothing but zeros after the archive."""
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as tar:
            for info in tar:
                if not info.isreg():
                    raise artifact.ArtifactError(
                        f"{where}: member {info.name!r} is not a regular file (a link, "
                        "directory or device): a loom archive holds files only"
                    )
                if not _MEMBER_NAME.fullmatch(info.name):
                    raise artifact.ArtifactError(
                        f"{where}: member name {info.name!r} is not a plain file name (absolute "
                        "paths, directories and `..` are refused)"
                    )
                if info.name in members:
                    raise artifact.ArtifactError(f"{where}: member {info.name!r} appears twice")
                content = tar.extractfile(info).read()
                if len(content) != info.size:
                    raise artifact.ArtifactError(f"{where}: member {info.name!r} is truncated")
                members[info.name] = content
            end = tar.offset
    except (tarfile.TarError, EOFError, OSError, ValueError, UnicodeError) as e:
        raise artifact.ArtifactError(f"{where} is not a readable tar archive: {e}") from None
    if any(body[end:]):
        raise artifact.ArtifactError(f"{where}: data follows the end of the tar archive")
    return members


def _manifest(members: dict[str, bytes], where: str) -> dict:
    """The manifest, checked against its schema and against the members present."""
    if TAR_MANIFEST not in members:
        raise artifact.ArtifactError(f"{where} has no {TAR_MANIFEST}: not a loom export")
    if TAR_ARTIFACT not in members:
        raise artifact.ArtifactError(f"{where} has no {TAR_ARTIFACT}: not a loom export")
    try:
        manifest = json.loads(members[TAR_MANIFEST].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise artifact.ArtifactError(f"{where}: {TAR_MANIFEST} is not valid JSON: {e}") from None

    def bad(what: str) -> artifact.ArtifactError:
        return artifact.ArtifactError(f"{where}: {TAR_MANIFEST} is malformed: {what}")

    if not isinstance(manifest, dict) or set(manifest) != _MANIFEST_KEYS:
        keys = sorted(manifest) if isinstance(manifest, dict) else type(manifest).__name__
        raise bad(f"expected an object with the keys {sorted(_MANIFEST_KEYS)}, got {keys}")
    if manifest["format"] != TAR_FORMAT or isinstance(manifest["format"], bool):
        raise bad(f"format {manifest['format']!r}: this loom reads format {TAR_FORMAT}")
    triple = manifest["triple"]
    if (
        not isinstance(triple, str)
        or not _TRIPLE.fullmatch(triple)
        or elf.elf_machine_of_triple(triple) is None
    ):
        raise bad(f"triple {triple!r} is not a target triple loom links for")
    names = []
    for key in ("objects", "sources"):
        value = manifest[key]
        if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
            raise bad(f"{key!r} must be a list of member names")
        names += value
    objects = manifest["objects"]
    if (
        not objects
        or objects[-1] != TAR_ARTIFACT_OBJECT
        or not all(n.endswith(".o") for n in objects)
    ):
        raise bad(f"'objects' must be .o members ending with {TAR_ARTIFACT_OBJECT}: {objects}")
    expected = set(names) | {TAR_MANIFEST, TAR_ARTIFACT}
    if len(set(names)) != len(names) or {TAR_MANIFEST, TAR_ARTIFACT} & set(names):
        raise bad(f"a member is listed twice: {names}")
    if set(members) != expected:
        raise artifact.ArtifactError(
            f"{where}: its members do not match {TAR_MANIFEST}: missing "
            f"{sorted(expected - set(members)) or 'none'}, not listed "
            f"{sorted(set(members) - expected) or 'none'}"
        )
    return manifest


def load_module(path) -> Module:
    """Load a library written by export_library (a `.so`, or a `.tar` linked first)."""
    path = pathlib.Path(path)
    if path.suffix == ".tar":
        path = _link_tar(path)
    parsed, art, _ = read_library(path)
    library = None
    if parsed.machine == elf.host_machine():
        host_runtime.library()  # the kernels resolve its symbols through the global namespace
        dso = [r for r in art.metadata["modules"] if r["dso"]]
        unregistered = []
        for name in provider_names(dso):
            try:
                lib = abi.get_library(name)
            except LoomError:
                # a library linked by name (DT_NEEDED) loads without its registration
                unregistered.append(name)
                continue
            if lib.load is not None:
                lib.load()  # its symbols become global before the library is loaded
        try:
            library = SharedLibrary(path.resolve())
        except OSError as e:
            hint = (
                f" (it needs runtime libraries {unregistered} that are not registered: "
                "import the backend or module that declares them first)"
                if unregistered
                else ""
            )
            raise LoomError(f"cannot load {path}: {e}{hint}") from None
    modules: list[Module] = []
    for record in art.metadata["modules"]:
        sigs = {f["name"]: FunctionSignature.from_json(f) for f in record["functions"]}
        if record["dso"]:
            native = NativeModule(
                record["type_key"],
                sigs,
                {},
                record["target"],
                library,
                extern_symbols=record.get("extern_symbols"),
                memories=tuple(record.get("memories", ())),
            )
            native.library_path = str(path.resolve())  # what to_device sends to a device
            modules.append(native)
        else:
            payload = art.payloads[record["payload"]][1]
            modules.append(LOADERS.get(record["type_key"]).load(payload, record))
    for module, record in zip(modules, art.metadata["modules"]):
        module.imports = [modules[k] for k in record["imports"]]
    return modules[0]


def _link_tar(path: pathlib.Path) -> pathlib.Path:
    """Verify a `.tar` export, link its objects into a sealed `.so` in loom's cache (named by
    the checksum of the archive and of the link flags) and return the `.so`. The linker gets
    the objects under names loom chooses and the flags of the registered runtime libraries the
    artifact names, never anything the archive says."""
    archive = read_archive(path)
    linked = [r for r in archive.artifact.metadata["modules"] if r["dso"]]
    try:
        flags = runtime_link_flags(linked)
    except LoomError as e:
        raise LoomError(
            f"cannot link {path}: {e} (a .tar is linked with the runtime libraries its "
            "modules need: import the backend or module that declares them first)"
        ) from None
    # the link depends on the archive and on the flags of the libraries registered here
    key = hashlib.sha256(json.dumps([archive.digest, flags]).encode()).hexdigest()
    output = cache_dir() / f"{path.stem}-{key[:16]}.so"
    if output.exists():
        try:
            artifact.unseal(output.read_bytes(), str(output))
            return output
        except (OSError, artifact.ArtifactError):
            pass  # a damaged cache entry: link again
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        objects = []
        for k, (_, code) in enumerate(archive.objects):
            objects.append(pathlib.Path(tmp) / f"object{k}.o")
            objects[-1].write_bytes(code)
        partial = pathlib.Path(tmp) / "linked.so"
        link_objects(objects, partial, archive.triple, None, flags)
        sealed = pathlib.Path(tmp) / "sealed.so"
        sealed.write_bytes(artifact.seal(partial.read_bytes()))
        os.replace(sealed, output)
    return output


def _load_device_module(payload: bytes, record: dict) -> DeviceModule:
    sigs = {f["name"]: FunctionSignature.from_json(f) for f in record["functions"]}
    return DeviceModule(
        record["type_key"],
        sigs,
        payload,
        record["target"],
        extern_symbols=record.get("extern_symbols"),
        memories=tuple(record.get("memories", ())),
    )


for _isa in ("hexagon", "aarch64"):
    register_loader(_isa, _load_device_module)
