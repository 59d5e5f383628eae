"""The `loom` command: `loom inspect LIB` shows what an exported library holds; `loom compile
MODEL.onnx -o LIB` compiles a model (and writes the header of its C entry point beside it);
`loom run LIB --input NAME=FILE.npy` runs it; `loom plan MODEL.onnx -o plan.png` plans its memory
pools and draws them."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

from loom import abi
from loom.abi import FunctionSignature
from loom.errors import LoomError
from loom.memory.picture import Panel, draw, summary_line
from loom.memory.pool import Pool
from loom.model import compile as compile_model
from loom.model import lower_model
from loom.runtime import artifact, elf
from loom.runtime.load import load_module, read_archive, read_library
from loom.runtime.model import Model
from loom.runtime.session import device
from loom.target import Target, as_target


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
                "model": m.get("model"),
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
    for m in modules:
        if m.get("model"):
            lines += ["", *_model_lines(m["model"])]
    lines += ["", "payloads:"]
    lines += [f"  #{p['index']} {p['type_key']}: {p['bytes']} bytes" for p in info["payloads"]]
    if not info["payloads"]:
        lines.append("  none")
    return "\n".join(lines)


def _model_lines(model: dict) -> list[str]:
    def values(items) -> str:
        return ", ".join(f"{n}: {t}[{', '.join(map(str, s))}]" for n, s, t in items)

    lines = [
        f"model: main function {model['main']}",
        f"  inputs: {values(model['inputs'])}",
        f"  outputs: {values(model['outputs'])}",
        f"  {len(model['groups'])} kernels (fused groups), in call order:",
    ]
    lines += [
        f"    {g['kernel']}: {' + '.join(g['ops'])}  [{g['target']}]" for g in model["groups"]
    ]
    pools = model.get("pools", ())
    if pools:
        lines.append(f"  memory pools (C entry point {model.get('name', 'model')}_run):")
    for p in pools:
        where = {"caller": "given by the caller", "static": "in the library"}.get(
            p["placement"], f"fixed addresses of {p['scope']}"
        )
        lines.append(
            f"    {p['name']}: {p['kind']}, {where}, {p['size']:,} bytes for {p['buffers']} "
            f"buffers (lower bound {p['lower_bound']:,}), reached from "
            f"{', '.join(p['accessible_from'])}"
        )
    return lines


def _shape_arg(text: str) -> tuple[str, tuple[int, ...]]:
    name, sep, dims = text.rpartition("=")
    try:
        if not sep or not name:
            raise ValueError
        return name, tuple(int(d) for d in dims.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--shape takes NAME=D0,D1,..., e.g. input=1,3,224,224; got {text!r}"
        ) from None


def _input_arg(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--input takes NAME=FILE.npy, got {text!r}")
    return name, path


def _pool_arg(text: str) -> Pool:
    """NAME[:KEY=VALUE...] with keys size, access (devices joined by +), kind, alignment,
    scope, placement: e.g. dram:access=cpu+npu or spad:access=npu:scope=npu.spad."""
    name, *items = text.split(":")
    fields: dict = {}
    try:
        for item in items:
            key, sep, value = item.partition("=")
            if not sep or key not in _POOL_KEYS:
                raise ValueError(f"{item!r} is not one of {', '.join(k + '=' for k in _POOL_KEYS)}")
            fields[_POOL_KEYS[key]] = value
        for key in ("size", "alignment"):
            if key in fields:
                fields[key] = int(fields[key])
        if "accessible_from" in fields:
            fields["accessible_from"] = tuple(fields["accessible_from"].split("+"))
        return Pool(name, **fields)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"--pool {text!r}: {e}") from None


_POOL_KEYS = {
    "size": "size",
    "access": "accessible_from",
    "kind": "kind",
    "alignment": "alignment",
    "scope": "scope",
    "placement": "placement",
}


def _compile(args) -> int:
    shapes = dict(args.shape) if args.shape else None
    compiled = compile_model(
        args.model, target=args.target, shapes=shapes, pools=args.pool or (), name=args.name
    )
    compiled.export_library(args.output)
    header = pathlib.Path(args.output).with_name(f"{compiled.info.name}.h")
    compiled.export_header(header)
    print(
        f"{args.model}: {len(compiled.graph.nodes)} kernels for {compiled.target}, "
        f"written to {args.output}; its C entry point {compiled.info.name}_run is declared "
        f"in {header}"
    )
    return 0


def _plan(args) -> int:
    shapes = dict(args.shape) if args.shape else None
    done = lower_model(args.model, target=args.target, shapes=shapes, pools=args.pool or ())
    panels = [Panel(p.pool.name, p.blocks, p.plan, p.pool.size) for p in done.memory_plan.pools]
    for panel in panels:
        print(summary_line(panel))
    if args.output:
        draw(panels, args.output, title=f"{args.model} for {as_target(args.target)}")
        print(f"written to {args.output}")
    return 0


def _run(args) -> int:
    module = load_module(args.library)
    model = Model(module)
    inputs = {}
    for name, path in args.input or []:
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise LoomError(f"--input {name}={path}: cannot read a .npy array: {e}") from None
    if model.device_isa is None:
        outputs = model(**inputs)
    else:  # a device's model runs in a session: the emulator unless --device names another
        with device(args.device or f"{model.device_isa}-sim") as session:
            outputs = model.on(session)(**inputs)
    out_dir = pathlib.Path(args.output_dir) if args.output_dir else None
    for name, value in outputs.items():
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            np.save(out_dir / f"{name}.npy", value)
        flat = value.ravel()
        preview = np.array2string(flat[:8], precision=5, separator=", ")
        print(
            f"{name}: {value.dtype}{list(value.shape)} {preview}{' ...' if flat.size > 8 else ''}"
        )
    return 0


POOL_HELP = (
    "a memory pool, NAME[:size=BYTES][:access=DEV+DEV][:kind=workspace|constant][:alignment=N]"
    "[:scope=FIXED_SCOPE][:placement=caller|static|fixed] (repeat; default: a caller-given "
    "workspace and a constant pool)"
)


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
    comp = sub.add_parser("compile", help="compile an ONNX model into a library")
    comp.add_argument("model", help="an .onnx file")
    comp.add_argument("-o", "--output", required=True, help="the library to write (.so or .tar)")
    comp.add_argument("--target", default="llvm", help="the target (default: llvm, this CPU)")
    comp.add_argument(
        "--shape", action="append", type=_shape_arg, help="NAME=D0,D1,...: an input's shape"
    )
    comp.add_argument("--name", help="the model's name: its C entry point is NAME_run")
    comp.add_argument("--pool", action="append", type=_pool_arg, help=POOL_HELP)
    plan = sub.add_parser(
        "plan", help="plan a model's memory pools: a line per pool, and a picture with -o"
    )
    plan.add_argument("model", help="an .onnx file")
    plan.add_argument("-o", "--output", help="the picture to write (.png, .svg, .pdf)")
    plan.add_argument("--target", default="llvm", help="the target (default: llvm, this CPU)")
    plan.add_argument(
        "--shape", action="append", type=_shape_arg, help="NAME=D0,D1,...: an input's shape"
    )
    plan.add_argument("--pool", action="append", type=_pool_arg, help=POOL_HELP)
    run = sub.add_parser("run", help="run a compiled model on .npy inputs")
    run.add_argument("library", help="a library written by `loom compile`")
    run.add_argument("--input", action="append", type=_input_arg, help="NAME=FILE.npy")
    run.add_argument("--output-dir", help="write each output to DIR/NAME.npy")
    run.add_argument(
        "--device", help="the device session of a device's model (default: its emulator)"
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "compile":
            return _compile(args)
        if args.command == "run":
            return _run(args)
        if args.command == "plan":
            return _plan(args)
        info = inspect_library(args.library)
    except (LoomError, TypeError, ValueError) as e:
        print(f"loom {args.command}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(info, indent=2) if args.json else format_report(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
