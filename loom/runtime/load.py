"""load_module: a library written by export_library, back into a module tree.

The file is read and verified in Python first (ELF, artifact magic, version, lengths,
checksums, a loader for every payload type); only then is the library opened, and each imported
module rebuilt by the loader registered for its type key. Loading needs no compiler: it is part of
the runtime layer (docs/architecture.md).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import pathlib
import tarfile
import tempfile

from loom import abi
from loom.abi import MODULE_PROVIDER, FunctionSignature
from loom.errors import LoomError
from loom.runtime import artifact, elf, host_runtime
from loom.runtime.device_module import DeviceModule
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


def read_library(path, require_loaders: bool = True) -> tuple[elf.ElfFile, artifact.Artifact, int]:
    """Parse and verify a library without loading it: (ELF, artifact, file size). With
    `require_loaders`, every payload's type must have a registered loader."""
    path = pathlib.Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise LoomError(f"cannot read {path}: {e.strerror}") from None
    where = str(path)
    try:
        parsed = elf.parse(data)
    except LoomError as e:
        raise artifact.ArtifactError(f"{where}: {e}") from None
    section = parsed.section(artifact.SECTION)
    if section is None:
        raise artifact.ArtifactError(
            f"{where} is not a loom library: it has no {artifact.SECTION} section"
        )
    if section.offset + section.size > len(data):
        raise artifact.ArtifactError(
            f"{where} is truncated: the artifact section lies past the end of the file"
        )
    art = artifact.unpack(data[section.offset : section.offset + section.size], where)
    _check_metadata(art, where, require_loaders)
    return parsed, art, len(data)


def _check_metadata(art: artifact.Artifact, where: str, require_loaders: bool) -> None:
    modules = art.metadata.get("modules")
    if not isinstance(modules, list) or not modules:
        raise artifact.ArtifactError(f"{where}: the metadata lists no modules")
    for record in modules:
        if record.get("dso"):
            continue
        key = record.get("type_key")
        if require_loaders and key not in LOADERS:
            raise artifact.ArtifactError(
                f"{where} contains a module of type {key!r}, which has no registered loader "
                f"(registered: {list_loaders() or 'none'}); register one with "
                "loom.runtime.register_loader"
            )
        index = record.get("payload")
        if (
            not isinstance(index, int)
            or not 0 <= index < len(art.payloads)
            or art.payloads[index][0] != key
        ):
            raise artifact.ArtifactError(f"{where}: module {key!r} has no payload of its type")


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
            library = ctypes.CDLL(str(path.resolve()))
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
    """Link the objects of a `.tar` export into a cached `.so`."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:16]
    output = cache_dir() / f"{path.stem}-{digest}.so"
    if output.exists():
        return output
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        try:
            with tarfile.open(path) as tar:
                tar.extractall(tmp, filter="data")
        except (tarfile.TarError, EOFError) as e:
            raise artifact.ArtifactError(f"{path} is not a readable tar archive: {e}") from None
        manifest_path = pathlib.Path(tmp) / "loom_link.json"
        if not manifest_path.exists():
            raise artifact.ArtifactError(f"{path} has no loom_link.json: not a loom export")
        manifest = json.loads(manifest_path.read_text())
        objects = [pathlib.Path(tmp) / name for name in manifest["objects"]]
        partial = pathlib.Path(tmp) / output.name
        link_objects(objects, partial, manifest["triple"], None, manifest["link_flags"])
        os.replace(partial, output)
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
