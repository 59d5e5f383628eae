"""export_library: a module tree as one shared library (loom.runtime.load loads it back).

Export: every DSO-exportable module (host code, "llvm" or "c") contributes its object file;
every other module is packed as a payload under its type key; the artifact record (metadata
and payloads, see artifact.py) becomes an object of its own whose section `.loom_artifact`
holds the raw bytes; the system linker links them into one `.so` (`cc -shared` for the host,
`ld.lld -shared` for other ISAs), or a `.tar` keeps the objects, sources and a manifest to link
later (load_module links it with the flags of the registered runtime libraries). Either file
ends with a seal (artifact.seal): the sha256 of every byte before it, checked first on load.
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import tarfile
import tempfile
from collections.abc import Callable

import llvmlite.binding as llvm
from llvmlite import ir

from loom.codegen.llvm.emit import target_machine
from loom.errors import LoomError
from loom.runtime import artifact, elf, module
from loom.runtime.linker import link_objects, link_relocatable
from loom.runtime.load import (
    TAR_ARTIFACT,
    TAR_ARTIFACT_OBJECT,
    TAR_FORMAT,
    TAR_MANIFEST,
    runtime_link_flags,
)
from loom.runtime.module import Module, NativeModule
from loom.runtime.native_lib import cache_dir
from loom.target import Target
from loom.version import __version__


def _producer() -> str:
    return f"loom {__version__}"


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
    target = Target("llvm")
    empty = llvm.parse_assembly(f'target triple = "{target.triple}"')
    shell = NativeModule(
        "llvm", {}, {}, target, object_code=target_machine(target).emit_object(empty)
    )
    shell.import_module(root)
    return shell


def _triple(natives: list[NativeModule]) -> str:
    triples = {m.triple for m in natives}
    if len(triples) != 1:
        raise LoomError(
            f"host modules of one library must share a target triple, got {sorted(triples)}"
        )
    return triples.pop()


def export_library(
    root: Module,
    path,
    *,
    cc: str | None = None,
    options: list[str] = (),
    fcompile: Callable | None = None,
) -> pathlib.Path:
    """Write `root` and every module it imports as one shared library, or a `.tar`, sealed
    with a checksum of the whole file. `options` are extra link flags for a `.so`; a `.tar` is
    linked when loaded, with only the flags of the runtime libraries its modules need.
    `fcompile(output, objects, options)` links the `.so` instead of loom's linker (TVM's
    `export_library(path, fcompile=tvm.contrib.cc.create_shared)`), given the objects and the
    runtime libraries' flags as options."""
    path = pathlib.Path(path)
    tar = path.suffix == ".tar"
    if fcompile is not None and not callable(fcompile):
        raise TypeError(f"export_library: fcompile must be a function, got {fcompile!r}")
    if tar and (options or cc or fcompile):
        raise LoomError(
            "export_library: cc= and options= are for a .so; a .tar is linked when loaded, "
            "by the system linker with the flags of the runtime libraries its modules need "
            "(docs/export.md)"
        )
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
        art = tmp_dir / TAR_ARTIFACT_OBJECT
        art.write_bytes(artifact_object(blob, triple))
        objects.append(art)
        if tar:
            data = _tar_bytes(natives, objects, blob, triple)
        elif fcompile is not None:
            linked = tmp_dir / "linked.so"
            flags = ["-lm", *runtime_link_flags(natives), *options]
            fcompile(str(linked), [str(o) for o in objects], flags)
            if not linked.is_file():
                raise LoomError(f"export_library: fcompile {fcompile!r} wrote no {linked.name}")
            data = linked.read_bytes()
        else:
            linked = tmp_dir / "linked.so"
            link_objects(objects, linked, triple, cc, runtime_link_flags(natives) + list(options))
            data = linked.read_bytes()
    _write_replacing(path, data if artifact.is_sealed(data) else artifact.seal(data))
    return path


def save(root: Module, path, fmt: str = "") -> pathlib.Path:
    """TVM's `Module.save`: the module's code in the format `fmt` or the file's suffix:
    "o" (an object file that also holds the artifact record, so a shared library linked from
    it with `loom.contrib.cc.create_shared` loads with `load_module`), "ll", "s" or "c" (the
    generated source, for reading; "s" is `get_source("asm")`)."""
    path = pathlib.Path(path)
    fmt = fmt or path.suffix.lstrip(".")
    if not isinstance(root, NativeModule):
        raise LoomError(f"save: a {root.type_key} module has no code of its own to save")
    if fmt in ("ll", "s", "asm", "c"):
        source = {"s": "asm"}.get(fmt, fmt)
        _write_replacing(path, root.get_source(source).encode())
        return path
    if fmt != "o":
        raise ValueError(
            f"save: fmt must be 'o', 'll', 's' or 'c' (or the file's suffix), got {fmt!r}"
        )
    if root.imports:
        raise LoomError(
            "save: the module imports others; an object file holds one module's code: use "
            "export_library for the whole tree"
        )
    records, payloads = _records(root)
    blob = artifact.pack(
        {"format_version": artifact.FORMAT_VERSION, "producer": _producer(), "modules": records},
        payloads,
    )
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        code, art = pathlib.Path(tmp) / "code.o", pathlib.Path(tmp) / TAR_ARTIFACT_OBJECT
        code.write_bytes(root.object_code)
        art.write_bytes(artifact_object(blob, root.triple))
        merged = pathlib.Path(tmp) / "merged.o"
        link_relocatable([code, art], merged, root.triple)
        _write_replacing(path, merged.read_bytes())
    return path


def saved_objects(paths) -> list[str]:
    """Which of the object files `paths` hold a loom artifact (objects `save` wrote)."""
    found = []
    for p in paths:
        try:
            data = pathlib.Path(p).read_bytes()
            if elf.parse(data).section(artifact.SECTION) is not None:
                found.append(str(p))
        except (OSError, LoomError):  # not an ELF object (a C source): not loom's
            continue
    return found


def seal_linked(path) -> bool:
    """Seal a shared library that a tool other than loom's linker linked from objects `save`
    wrote (`loom.contrib.cc.create_shared` calls this): when it holds a loom artifact and no
    seal yet, append the seal (the checksum `load_module` checks first). False when it is not
    loom's (no artifact section) and was left as it is."""
    path = pathlib.Path(path)
    data = path.read_bytes()
    if artifact.is_sealed(data):
        return True
    try:
        has_artifact = elf.parse(data).section(artifact.SECTION) is not None
    except LoomError:  # not an ELF file
        return False
    if has_artifact:
        _write_replacing(path, artifact.seal(data))
    return has_artifact


def _write_replacing(path: pathlib.Path, data: bytes) -> None:
    """Write a new file and rename it over `path`: a process that has the old file mapped
    keeps it intact, and no reader sees a half-written file."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_bytes(data)
        os.replace(partial, path)
    except OSError as e:
        partial.unlink(missing_ok=True)
        raise LoomError(f"cannot write {path}: {e.strerror}") from None


def _tar_bytes(
    natives: list[NativeModule], objects: list[pathlib.Path], blob: bytes, triple: str
) -> bytes:
    """A plain tar of the objects, the sources, the artifact and the manifest (members loom
    names, every one listed in the manifest; no link flags: load_module derives them)."""
    out = io.BytesIO()
    sources = []
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for obj in objects:
            _add_bytes(tar, obj.name, obj.read_bytes())
        for k, m in enumerate(natives):
            for fmt, text in m.sources.items():
                sources.append(f"module{k}_{m.type_key}.{fmt}")
                _add_bytes(tar, sources[-1], text.encode())
        _add_bytes(tar, TAR_ARTIFACT, blob)
        manifest = {
            "format": TAR_FORMAT,
            "triple": triple,
            "objects": [o.name for o in objects],
            "sources": sources,
        }
        _add_bytes(tar, TAR_MANIFEST, json.dumps(manifest, indent=1).encode())
    return out.getvalue()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def artifact_object(blob: bytes, triple: str) -> bytes:
    """An object file for `triple` whose section `.loom_artifact` holds `blob` as raw bytes."""
    mod = ir.Module("loom_artifact")
    mod.triple = triple
    typ = ir.ArrayType(ir.IntType(8), len(blob))
    g = ir.GlobalVariable(mod, typ, artifact.SYMBOL)
    g.global_constant = True
    g.initializer = ir.Constant(typ, bytearray(blob))
    g.section = artifact.SECTION
    g.visibility = "hidden"
    parsed = llvm.parse_assembly(str(mod))
    return target_machine(Target(f"llvm -mtriple={triple} -mcpu=generic")).emit_object(parsed)


module.EXPORTER = export_library
module.SAVER = save
