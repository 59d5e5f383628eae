"""The `loom` command: `loom inspect LIB` shows what an exported library holds."""

from __future__ import annotations

import argparse
import json
import sys

from loom import abi
from loom.abi import FunctionSignature
from loom.errors import LoomError
from loom.runtime.load import read_library
from loom.target import Target


def inspect_library(path: str) -> dict:
    """Everything `loom inspect` reports, as a JSON-ready dict; nothing of the library runs."""
    parsed, art, size = read_library(path, require_loaders=False)
    modules = art.metadata["modules"]
    root_target = next((m.get("target") for m in modules if m.get("dso")), None)
    device = Target(root_target).device if root_target else "cpu"
    undefined = []
    for name in parsed.undefined_symbols():
        lib = abi.provider(name, device)
        undefined.append({"symbol": name, "provider": lib.name if lib else None})
    payloads = [
        {"index": k, "type_key": key, "bytes": len(data)}
        for k, (key, data) in enumerate(art.payloads)
    ]
    return {
        "file": str(path),
        "bytes": size,
        "machine": parsed.machine_name,
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
                "extern_symbols": m.get("extern_symbols", {}),
                "payload_bytes": len(art.payloads[m["payload"]][1])
                if m["payload"] is not None
                else None,
            }
            for k, m in enumerate(modules)
        ],
        "undefined_symbols": undefined,
        "payloads": payloads,
    }


def _describe(sig: dict) -> str:
    return FunctionSignature.from_json(sig).describe()


def format_report(info: dict) -> str:
    lines = [
        f"{info['file']}: {info['machine']} shared object, {info['bytes']} bytes, loom "
        f"artifact format {info['format_version']} ({info['producer']})",
        "",
        "module tree:",
    ]
    modules = info["modules"]

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
        "undefined symbols:",
    ]
    width = max((len(u["symbol"]) for u in info["undefined_symbols"]), default=0)
    for u in info["undefined_symbols"]:
        provider = u["provider"] or "NO DECLARED PROVIDER"
        lines.append(f"  {u['symbol'].ljust(width)}  <- {provider}")
    if not info["undefined_symbols"]:
        lines.append("  none")
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
        help="show the module tree, functions, memories, "
        "undefined symbols and payloads of a library",
    )
    inspect.add_argument("library", help="a .so written by export_library")
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
