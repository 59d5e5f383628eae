"""export_library and load_module: a module tree as one shared library, and back.

Export: every DSO-exportable module (host code, "llvm" or "c") contributes its object file;
every other module is packed as a payload under its type key; the artifact record (metadata
and payloads, see artifact.py) becomes an object of its own whose section `.loom_artifact`
holds the raw bytes; the system linker links them into one `.so` (`cc -shared` for the host,
`ld.lld -shared` for other ISAs), or a `.tar` keeps the objects, sources and link flags to link
later.

Load: the file is read and verified in Python first (ELF, artifact magic, version, lengths,
checksums, a loader for every payload type); only then is the library opened, and each imported
module rebuilt by the loader registered for its type key.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import pathlib
import tarfile
import tempfile
from collections.abc import Callable

from loom.codegen.common import MODULE_PROVIDER
from loom.errors import LoomError
from loom.runtime import abi, artifact, elf, host_runtime
from loom.runtime.module import Module, NativeModule
from loom.runtime.native_lib import cache_dir, find_tool, run
from loom.runtime.signature import FunctionSignature


def _producer() -> str:
    import loom

    return f"loom {loom.__version__}"


_LOADERS: dict[str, Callable[[bytes, dict], Module]] = {}


def register_loader(type_key: str, fn: Callable[[bytes, dict], Module]) -> None:
    """`fn(payload, record) -> Module` rebuilds modules of `type_key` from their payload and
    their metadata record (type key, functions, and what the module's `metadata()` wrote)."""
    if type_key in ("llvm", "c"):
        raise LoomError(f"modules of type {type_key!r} are linked into the library itself")
    _LOADERS[type_key] = fn


def unregister_loader(type_key: str) -> None:
    _LOADERS.pop(type_key, None)


def list_loaders() -> list[str]:
    return sorted(_LOADERS)


# -- export ---------------------------------------------------------------------------------------
def _records(root: Module) -> tuple[list[dict], list[tuple[str, bytes]]]:
    modules = root.walk()
    index = {id(m): k for k, m in enumerate(modules)}
    records, payloads = [], []
    for m in modules:
        record = {
            "type_key": m.type_key,
            "dso": m.dso_exportable,
            "functions": [sig.to_json() for sig in m.signatures.values()],
            "imports": [index[id(c)] for c in m.imports],
            "payload": None,
            **m.metadata(),
        }
        if not m.dso_exportable:
            record["payload"] = len(payloads)
            payloads.append((m.type_key, m.save_payload()))
        records.append(record)
    return records, payloads


def _host_shell(root: Module) -> NativeModule:
    """A host module without functions that imports `root` (a device module): the host
    library every export is."""
    import llvmlite.binding as llvm

    from loom.codegen.llvm.emit import target_machine
    from loom.target import Target

    target = Target("llvm")
    empty = llvm.parse_assembly(f'target triple = "{target.triple}"')
    shell = NativeModule(
        "llvm", {}, {}, target, object_code=target_machine(target).emit_object(empty)
    )
    shell.import_module(root)
    return shell


def _triple(natives: list[NativeModule]) -> str:
    triples = {m.target.triple for m in natives}
    if len(triples) != 1:
        raise LoomError(
            f"host modules of one library must share a target triple, got {sorted(triples)}"
        )
    return triples.pop()


def export_library(
    root: Module, path, *, cc: str | None = None, options: list[str] = ()
) -> pathlib.Path:
    """Write `root` and every module it imports as one shared library, or a `.tar`."""
    path = pathlib.Path(path)
    if not any(m.dso_exportable for m in root.walk()):
        root = _host_shell(root)
    natives = [m for m in root.walk() if m.dso_exportable]
    for m in natives:
        if m.object_code is None:
            raise LoomError(f"host module {m.type_key} has no object code to export")
    records, payloads = _records(root)
    metadata = {
        "format_version": artifact.FORMAT_VERSION,
        "producer": _producer(),
        "modules": records,
    }
    blob = artifact.pack(metadata, payloads)
    triple = _triple(natives)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        tmp_dir = pathlib.Path(tmp)
        objects = []
        for k, m in enumerate(natives):
            obj = tmp_dir / f"module{k}_{m.type_key}.o"
            obj.write_bytes(m.object_code)
            objects.append(obj)
        art = tmp_dir / "loom_artifact.o"
        art.write_bytes(artifact.object_for(blob, triple))
        objects.append(art)
        flags = _provider_flags(natives) + list(options)
        if path.suffix == ".tar":
            _write_tar(path, natives, objects, blob, triple, flags)
        else:
            _link(objects, path, triple, cc, flags)
    return path


def _provider_names(records) -> list[str]:
    """The names of the runtime libraries providing the undefined symbols of modules (their
    artifact records, or NativeModules), other than modules of the same library."""
    names = []
    for r in records:
        symbols = (r.get("extern_symbols") or {}) if isinstance(r, dict) else r.extern_symbols
        names += [lib for lib in symbols.values() if not lib.startswith(MODULE_PROVIDER)]
    return list(dict.fromkeys(names))


def _provider_libraries(records) -> list[abi.RuntimeLibrary]:
    return [abi.get_library(name) for name in _provider_names(records)]


def _provider_flags(natives: list[NativeModule]) -> list[str]:
    """Link flags of the libraries that provide the modules' undefined symbols, except those
    loom builds and loads itself (load_module loads them first), so that the library does not
    depend on paths of this machine."""
    flags: list[str] = []
    for lib in _provider_libraries(natives):
        if lib.load is None and lib.link_flags is not None:
            flags += [f for f in lib.link_flags() if f not in flags]
    return flags


def _link(
    objects: list[pathlib.Path], output: pathlib.Path, triple: str, cc: str | None, flags: list[str]
) -> None:
    host = elf_machine_of_triple(triple) == _host_machine()
    if host:
        tool = find_tool(cc or "cc")
        run(
            [tool, "-shared", "-o", str(output), *map(str, objects), "-lm", *flags],
            f"linking {output.name}",
        )
    else:
        tool = find_tool(cc or "ld.lld", "lld")
        # a DT_HASH table: the device runtime's loader finds symbols through it
        run(
            [tool, "-shared", "--hash-style=sysv", "-o", str(output), *map(str, objects), *flags],
            f"linking {output.name} for {triple}",
        )


def _write_tar(
    path: pathlib.Path,
    natives: list[NativeModule],
    objects: list[pathlib.Path],
    blob: bytes,
    triple: str,
    flags: list[str],
) -> None:
    with tarfile.open(path, "w") as tar:
        for obj in objects:
            tar.add(obj, arcname=obj.name)
        for k, m in enumerate(natives):
            for fmt, text in m.sources.items():
                _add_bytes(tar, f"module{k}_{m.type_key}.{fmt}", text.encode())
        _add_bytes(tar, "loom_artifact.bin", blob)
        manifest = {"objects": [o.name for o in objects], "triple": triple, "link_flags": flags}
        _add_bytes(tar, "loom_link.json", json.dumps(manifest, indent=1).encode())


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    import io

    tar.addfile(info, io.BytesIO(data))


# -- load -----------------------------------------------------------------------------------------
_TRIPLE_MACHINES = {"x86_64": 62, "aarch64": 183, "hexagon": 164, "riscv64": 243, "arm": 40}


def elf_machine_of_triple(triple: str) -> int | None:
    return _TRIPLE_MACHINES.get(triple.split("-")[0])


def _host_machine() -> int | None:
    from loom.target.target import _host

    return elf_machine_of_triple(_host()[0])


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
        if require_loaders and key not in _LOADERS:
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
    if parsed.machine == _host_machine():
        host_runtime.library()  # the kernels resolve its symbols through the global namespace
        dso = [r for r in art.metadata["modules"] if r["dso"]]
        unregistered = []
        for name in _provider_names(dso):
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
            from loom.target import Target

            native = NativeModule(
                record["type_key"],
                sigs,
                {},
                Target(record["target"]),
                library,
                extern_symbols=record.get("extern_symbols"),
                memories=tuple(record.get("memories", ())),
            )
            native.library_path = str(path.resolve())  # what to_device sends to a device
            modules.append(native)
        else:
            payload = art.payloads[record["payload"]][1]
            modules.append(_LOADERS[record["type_key"]](payload, record))
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
        _link(objects, partial, manifest["triple"], None, manifest["link_flags"])
        os.replace(partial, output)
    return output
