"""Imports go one way between loom's layers, and no modules import each other in a cycle
(docs/architecture.md, "Layers").

Every `import` in loom/ counts, at module level or inside a function (except under
`if TYPE_CHECKING:`, which never runs).
"""

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).parent.parent / "loom"

# Lowest first: a module may import from its own layer and the layers below it. A name with "="
# is that module alone, not the modules below it: the lazy package facades, whose __init__
# imports nothing but loom.lazy (their names are imported on first use).
LAYERS = [
    (
        "abi",
        [
            "loom.errors",
            "loom.registry",
            "loom.version",
            "loom.lazy",
            "loom.abi",
            "=loom.backend",
            "=loom.backend.npu",
        ],
    ),
    ("runtime", ["loom.runtime", "loom.nd", "loom.backend.npu.simulator"]),
    (
        "compiler",
        [
            "loom.ir",
            "loom.tir",
            "loom.te",
            "loom.memory",
            "loom.transform",
            "loom.target",
            "loom.codegen",
            "loom.ops",
            "loom.backend",
            "loom.graph",
            "loom.frontend",
        ],
    ),
    ("packaging", ["loom.packaging"]),
    ("api", ["loom", "loom.driver", "loom.model", "loom.cli", "loom.demo"]),
]


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest prefix matching `module`."""
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if prefix.startswith("="):
                if module == prefix[1:]:
                    return index
                continue
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    assert best is not None, f"module {module} belongs to no layer; add it to LAYERS"
    return best


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for p in ROOT.rglob("*.py")}


def _type_checking_blocks(tree: ast.AST) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    return skip


def imports_of(path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    """The loom modules `path` imports (a `from package import submodule` names the
    submodule)."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_blocks(tree)
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("loom"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("loom"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
    return found


def _packages_entered(module: str, target: str) -> set[str]:
    """The packages whose __init__ importing `target` from `module` runs: those above `target`
    that are not above `module` (those are already being imported)."""
    parts = target.split(".")
    above_target = {".".join(parts[:k]) for k in range(1, len(parts))}
    parts = module.split(".")
    above_module = {".".join(parts[:k]) for k in range(1, len(parts) + 1)}
    return above_target - above_module


def import_graph() -> dict[str, set[str]]:
    """module -> the loom modules importing it runs (the packages entered on the way count)."""
    modules = all_modules()
    graph = {}
    for name, path in modules.items():
        imported = imports_of(path, modules) & set(modules)
        entered = {pkg for target in imported for pkg in _packages_entered(name, target)}
        graph[name] = (imported | entered) & set(modules)
    return graph


def test_imports_go_down_the_layers():
    wrong = []
    for module, imported in import_graph().items():
        for target in imported:
            if layer_of(target) > layer_of(module):
                wrong.append(
                    f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} "
                    f"({LAYERS[layer_of(target)][0]})"
                )
    assert not wrong, "imports against the layers:\n" + "\n".join(sorted(wrong))


def import_cycles() -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    graph = import_graph()
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles():
    cycles = import_cycles()
    assert not cycles, "modules that import each other in a cycle:\n" + "\n".join(
        ", ".join(c) for c in cycles
    )


def test_no_imports_inside_functions():
    """An import inside a function hides a dependency (it was how cycles were broken before)."""
    found = []
    for name, path in all_modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found += [
                    f"{name}:{inner.lineno}: {ast.unparse(inner)}"
                    for inner in ast.walk(node)
                    if isinstance(inner, ast.Import | ast.ImportFrom)
                ]
    assert not found, "imports inside functions:\n" + "\n".join(found)


def test_layer_table_detects_an_upward_import():
    """The check itself can fail: the runtime importing the code generator is caught."""
    assert layer_of("loom.codegen.llvm") > layer_of("loom.runtime.module")
    assert layer_of("loom.backend.npu.simulator") < layer_of("loom.backend.npu.codegen")


LOADED_BY_EACH = """
import importlib, sys
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "loom" or m.startswith("loom.")]:
        del sys.modules[loaded]
    importlib.import_module(name)
    print(name, *sorted(m for m in sys.modules if m.startswith("loom.")))
"""


def test_runtime_modules_load_no_compiler_when_imported_first():
    """Importing a runtime module (its parent packages included) loads nothing above the
    runtime, for the NPU's simulator in loom/backend/npu too."""
    runtime = layer_of("loom.runtime")
    names = sorted(m for m in all_modules() if layer_of(m) <= runtime)
    out = subprocess.run(
        [sys.executable, "-c", LOADED_BY_EACH, *names], capture_output=True, text=True, check=True
    ).stdout
    wrong = []
    for line in out.splitlines():
        name, *loaded = line.split()
        above = [m for m in loaded if layer_of(m) > max(layer_of(name), runtime)]
        if above:
            wrong.append(f"{name} loads {above}")
    assert len(out.splitlines()) == len(names)
    assert not wrong, "runtime modules that load the compiler:\n" + "\n".join(wrong)


def test_importing_the_runtime_loads_no_compiler():
    code = (
        "import sys, loom.runtime\nprint(sorted(m for m in sys.modules if m.startswith('loom.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = eval(out)
    compiler = [m for m in loaded if layer_of(m) > layer_of("loom.runtime")]
    assert not compiler, f"import loom.runtime loaded compiler modules: {compiler}"
    assert "loom.runtime.load" in loaded
