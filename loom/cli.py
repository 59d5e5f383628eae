"""The `loom` command: `loom inspect LIB` shows what an exported library holds."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from loom import abi
from loom.abi import FunctionSignature
from loom.errors import LoomError
from loom.runtime import artifact, elf
from loom.runtime.load import read_archive, read_library
from loom.target import Target


def inspect_library(path: str) -> dict:
    """Everything `loom inspect` reports, as a JSON-ready dict; nothing of the library runs.
    The file is verified as load_module verifies it (whole-file checksum first); a `.tar`
    export is read member by member, without linking it."""
    if pathlib.Path(path).suffix == ".tar":
        archive = read_archive(path, require_loaders=False)
        art, size, kind = archive.artifact, archive.size, "tar"
        objects = [elf.parse(code) for _, code in archive.objects[:-1]]
        machine = elf.MACHINES.get(elf.elf_machine_of_triple(archive.triple), archive.triple)
        linked_undefined = sorted(
            {s for o in objects for s in o.undefined_symbols()}
            - {s.name for o in objects for s in o.symbols if not s.undefined and s.binding}
        )
    else:
        parsed, art, size = read_library(path, require_loaders=False)
        kind, machine, objects = "shared object", parsed.machine_name, None
        linked_undefined = parsed.undefined_symbols()
    modules = art.metadata["modules"]
    devices = [_device(m.get("target")) for m in modules]
    root_device = next((d for m, d in zip(modules, devices) if m["dso"]), "cpu")
    module_symbols = _module_symbols(modules, devices, art.payloads, objects, linked_undefined)
    payloads = [
        {"index": k, "type_key": key, "bytes": len(data)}
        for k, (key, data) in enumerate(art.payloads)
    ]
    return {
        "file": str(path),
        "kind": kind,
        "bytes": size,
        "machine": machine,
        "integrity": {
            "algorithm": "sha256",
            "covered_bytes": size - artifact.SEAL_SIZE,
            "verified": True,
        },
        "format_version": art.version,
        "producer": art.metadata.get("producer"),
        "modules": [
            {
                "index": k,
                "type_key": m["type_key"],
                "dso_exportable": m["dso"],
                "target": m.get("target"),
                "imports": m["imports"],
                "functions": m["functions"],
                "memories": m.get("memories", []),
                "extern_symbols": m.get("extern_symbols") or {},
                "payload": m["payload"],
                "payload_bytes": len(art.payloads[m["payload"]][1])
                if m["payload"] is not None
                else None,
                "undefined_symbols": module_symbols[k],
            }
            for k, m in enumerate(modules)
        ],
        "undefined_symbols": _with_providers(linked_undefined, {}, root_device),
        "payloads": payloads,
    }


def _device(target: str | None) -> str | None:
    """The device a module's target text names (None if it names no known target)."""
    if target is None:
        return None
    try:
        return Target(target).device
    except (LoomError, ValueError, TypeError):
        return None


def _with_providers(names, recorded: dict, device: str | None) -> list[dict]:
    """Each symbol with the runtime library the artifact records for it, else the registered
    library that provides it on `device` (None: no declared provider)."""
    out = []
    for name in names:
        lib = recorded.get(name)
        if lib is None and device is not None:
            found = abi.provider(name, device)
            lib = found.name if found else None
        out.append({"symbol": name, "provider": lib})
    return out


def _module_symbols(modules, devices, payloads, objects, linked_undefined) -> list[list[dict]]:
    """The undefined symbols of each module, read from its own code: the payload (an ELF
    shared object or object) of a device module, the object of a linked module in a `.tar`.
    In a `.so` the linked modules share one library: each gets the library's undefined
    symbols its record names (and those resolved by sibling modules), the first the rest."""
    out: list[list[dict]] = []
    linked = [k for k, m in enumerate(modules) if m["dso"]]
    claimed = {s for k in linked for s in modules[k].get("extern_symbols") or {}}
    for k, m in enumerate(modules):
        recorded = m.get("extern_symbols") or {}
        if not m["dso"]:
            code = payloads[m["payload"]][1]
            try:
                names = elf.parse(code).undefined_symbols() if code[:4] == b"\x7fELF" else None
            except LoomError:
                names = None  # a payload that is not an ELF file after all
            names = sorted(recorded) if names is None else names
        elif objects is not None:
            names = objects[linked.index(k)].undefined_symbols()
        else:
            names = [s for s in linked_undefined if s in recorded]
            names += [s for s, lib in recorded.items() if lib.startswith(abi.MODULE_PROVIDER)]
            if k == linked[0]:
                names += [s for s in linked_undefined if s not in claimed]
            names = sorted(set(names))
        out.append(_with_providers(names, recorded, devices[k]))
    return out


def _describe(sig: dict) -> str:
    return FunctionSignature.from_json(sig).describe()


def format_report(info: dict) -> str:
    what = (
        f"loom .tar export of {info['machine']} objects (linked when loaded)"
        if info["kind"] == "tar"
        else f"{info['machine']} shared object"
    )
    lines = [
        f"{info['file']}: {what}, {info['bytes']} bytes, loom artifact format "
        f"{info['format_version']} ({info['producer']})",
        f"integrity: sha256 of its first {info['integrity']['covered_bytes']} bytes (all but "
        "the checksum trailer) verified",
        "",
        "module tree:",
    ]
    modules = info["modules"]

    def label(m: dict) -> str:
        return "linked code" if m["dso_exportable"] else f"payload #{m['payload']}"

    def tree(k: int, depth: int) -> None:
        m = modules[k]
        kind = "linked code" if m["dso_exportable"] else f"payload of {m['payload_bytes']} bytes"
        target = f", {m['target']}" if m["target"] else ""
        lines.append(f"{'  ' * (depth + 1)}{m['type_key']} ({kind}{target})")
        for child in m["imports"]:
            tree(child, depth + 1)

    tree(0, 0)
    lines += ["", "functions:"]
    for m in modules:
        lines += [f"  [{m['type_key']}] {_describe(f)}" for f in m["functions"]]
    memories = sorted({s for m in modules for s in m["memories"]})
    lines += [
        "",
        f"memories used: {', '.join(memories) if memories else 'none'}",
        "",
        "undefined symbols, by module:",
    ]
    for m in modules:
        lines.append(f"  [{m['type_key']}] {label(m)}:")
        symbols = m["undefined_symbols"]
        width = max((len(u["symbol"]) for u in symbols), default=0)
        for u in symbols:
            provider = u["provider"] or "NO DECLARED PROVIDER"
            lines.append(f"    {u['symbol'].ljust(width)}  <- {provider}")
        if not symbols:
            lines.append("    none")
    lines += ["", "payloads:"]
    lines += [f"  #{p['index']} {p['type_key']}: {p['bytes']} bytes" for p in info["payloads"]]
    if not info["payloads"]:
        lines.append("  none")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="loom", description="loom, a tensor compiler")
    sub = parser.add_subparsers(dest="command", required=True)
    inspect = sub.add_parser(
        "inspect",
        help="verify a library and show its module tree, functions, memories, "
        "each module's undefined symbols and payloads",
    )
    inspect.add_argument("library", help="a .so or .tar written by export_library")
    inspect.add_argument("--json", action="store_true", help="print JSON for machines")
    args = parser.parse_args(argv)
    try:
        info = inspect_library(args.library)
    except LoomError as e:
        print(f"loom inspect: {e}", file=sys.stderr)
        return 1
    print(json.dumps(info, indent=2) if args.json else format_report(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
