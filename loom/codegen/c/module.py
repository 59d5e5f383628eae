"""Loop IR modules to one C source file: entry points, parallel tasks, declarations, helpers.

Every PrimFunc `f` becomes two C functions, as in the LLVM back end:
- `static int32_t f_impl(...)`, taking each buffer as a `T *restrict` and each scalar by value;
- `int32_t f(void *const *args)`, the entry point of DESIGN.md decision 4, which reads one
  pointer per argument (a buffer's data, or a pointer to a scalar; a bool is one byte) and
  calls `f_impl`.
A parallel loop's body is outlined into `static int32_t f_task_<k>(task, num_tasks, closure)`
(parallel.py).
"""

from __future__ import annotations

from loom.codegen.c.function import FunctionCodegen
from loom.codegen.c.helpers import helper_definition, helper_name
from loom.codegen.c.names import C_BUILTINS, C_KEYWORDS, Namer, sanitize
from loom.codegen.c.types import c_type, memory_type
from loom.codegen.common import check_stack
from loom.errors import LoomError
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.buffer import Buffer
from loom.ir.function import IRModule, PrimFunc
from loom.ir.visitor import post_order_visit
from loom.runtime import abi, host_runtime
from loom.runtime.linker import C_FLAGS
from loom.runtime.signature import FunctionSignature
from loom.target import Target

_HEADERS = ("math.h", "stdbool.h", "stddef.h", "stdint.h")
_MACROS = """\
#if defined(__GNUC__) || defined(__clang__)
#define LOOM_LIKELY(x) __builtin_expect(!!(x), 1)
#define LOOM_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LOOM_ALIGNED(n) __attribute__((aligned(n)))
#define LOOM_STRING_(x) #x
#define LOOM_STRING(x) LOOM_STRING_(x)
#define LOOM_SYMBOL(name) LOOM_STRING(__USER_LABEL_PREFIX__) name
#else
#define LOOM_LIKELY(x) (x)
#define LOOM_UNLIKELY(x) (x)
#define LOOM_ALIGNED(n) _Alignas(n)
#endif"""


class ModuleCodegen:
    """Builds the C source of an IRModule for a target."""

    def __init__(self, mod: IRModule, target: Target):
        self.target = target
        self.mod = mod
        for func in mod:
            if not func.name.isidentifier() or not func.name.isascii():
                raise LoomError(f"function name {func.name!r} is not a C identifier")
        externs = _extern_names(mod)
        self.global_names = Namer([f.name for f in mod] + list(host_runtime.SYMBOLS) + externs)
        self.runtime_used: dict[str, None] = {}
        self.externs_used: dict[str, str | None] = {}  # name -> declaration (None: a header's)
        self.headers: dict[str, None] = {}
        self.helpers: dict[str, str] = {}
        self.definitions: list[str] = []
        self.task_counts: dict[str, int] = {}

    # -- declarations --------------------------------------------------------------------------
    def use_runtime(self, name: str) -> None:
        self.runtime_used.setdefault(name)

    def declare_extern(self, name: str, caller: str) -> bool:
        """Declare extern symbol `name` as its runtime library does; True if it returns void."""
        lib, sym = abi.lookup(name, self.target.device, caller)
        if name in host_runtime.SYMBOLS:
            self.use_runtime(name)
        elif lib.name == "libc":  # the header's prototype (size_t, const) is the real one
            self.headers.setdefault("string.h")
            self.externs_used.setdefault(name, None)
        else:
            self.externs_used.setdefault(name, sym.c_declaration() + ";")
        return sym.ret == "void"

    def declare_entry(self, name: str, caller: str) -> None:
        """Declare the entry point of another function of the module tree."""
        if name == "main" or name in C_KEYWORDS or name in C_BUILTINS or sanitize(name) != name:
            raise LoomError(
                f"function {caller} calls function {name!r}, whose name C cannot "
                "call directly; give it a plain identifier"
            )
        self.externs_used.setdefault(name, f"int32_t {name}(void *const *args);")

    def helper(self, kind: str, dt) -> str:
        name = helper_name(kind, dt)
        if name not in self.helpers:
            self.helpers[name] = helper_definition(kind, dt)
        return name

    # -- functions -----------------------------------------------------------------------------
    def add_function(self, func: PrimFunc, signature: FunctionSignature) -> None:
        impl = self.global_names.fresh(f"{func.name}_impl")
        cg = self.function_codegen(func.name)
        cg.element_types = _element_types(func)
        params = []
        for param in func.params:
            if isinstance(param, Buffer):
                element = memory_type(param.dtype)
                name = cg.bind(param.data)
                cg.pointee[param.data] = element
                cg.distinct.add(param.data)
                params.append(f"{element} *restrict {name}")
            else:
                params.append(f"{c_type(param.dtype)} {cg.bind(param)}")
        cg.stmt(func.body)
        cg.emit("return 0;")
        self.check_stack(cg, func.name)
        doc = f"/* {signature.describe()}: generated by loom from PrimFunc {func.name} */"
        self.add_definition(doc, f"static int32_t {impl}({', '.join(params) or 'void'})", cg.lines)
        self._entry(func, impl)

    def _entry(self, func: PrimFunc, impl: str) -> None:
        args = []
        for k, param in enumerate(func.params):
            if isinstance(param, Buffer):
                args.append(f"({memory_type(param.dtype)} *)args[{k}]")
            elif param.dtype.is_bool:
                args.append(f"*(const uint8_t *)args[{k}] != 0")
            elif param.dtype.is_handle:
                args.append(f"*(void *const *)args[{k}]")
            else:
                args.append(f"*(const {c_type(param.dtype)} *)args[{k}]")
        lines = [] if args else ["    (void)args;"]
        lines.append(f"    return {impl}({', '.join(args)});")
        doc = f"/* entry point of {func.name} (int32_t name(void *const *args), DESIGN.md 4) */"
        name = func.name
        if name == "main" or name in C_KEYWORDS or name in C_BUILTINS or sanitize(name) != name:
            # C gives the name another meaning: a C function of another name, exported as it
            name = self.global_names.fresh(f"entry_{func.name}")
            label = f'__asm__(LOOM_SYMBOL("{func.name}"))'
            doc += f"\nint32_t {name}(void *const *args) {label};"
        self.add_definition(doc, f"int32_t {name}(void *const *args)", lines)

    def check_stack(self, cg: FunctionCodegen, name: str) -> None:
        check_stack(name, cg.stack_bytes, self.target.stack_limit)

    # -- pieces for parallel.py -------------------------------------------------------------
    def task_name(self, func_name: str) -> str:
        number = self.task_counts[func_name] = self.task_counts.get(func_name, -1) + 1
        return self.global_names.fresh(f"{func_name}_task_{number}")

    def function_codegen(self, func_name: str) -> FunctionCodegen:
        """A generator for the body of a new C function of PrimFunc `func_name`."""
        return FunctionCodegen(self, func_name, Namer(outer=self.global_names))

    def add_definition(self, doc: str, head: str, body: list[str]) -> None:
        self.definitions.append("\n".join([doc, head + " {", *body, "}"]))

    # -- the file ------------------------------------------------------------------------------
    def source(self) -> str:
        names = ", ".join(f.name for f in self.mod) or "(none)"
        parts = [
            f"/* Generated by loom from the loop IR of {names}, for target {self.target}.\n"
            f" * Compile with: cc -c {' '.join(C_FLAGS)} */",
            "\n".join(f"#include <{h}>" for h in sorted({*_HEADERS, *self.headers})),
            _MACROS,
        ]
        decls = [host_runtime.SYMBOLS[n] + ";" for n in self.runtime_used]
        if decls:
            parts.append("/* loom's host runtime */\n" + "\n".join(decls))
        externs = [d for d in self.externs_used.values() if d is not None]
        if externs:
            parts.append(
                "/* extern symbols, as their runtime libraries declare them */\n"
                + "\n".join(externs)
            )
        parts += list(self.helpers.values())
        parts += self.definitions
        return "\n\n".join(parts) + "\n"


def _extern_names(mod: IRModule) -> list[str]:
    names: dict[str, None] = {}
    for func in mod:
        post_order_visit(
            func.body,
            lambda n: (
                names.setdefault(n.op)
                if isinstance(n, E.Call) and n.kind == E.CallKind.EXTERN
                else None
            ),
        )
    return list(names)


def _element_types(func: PrimFunc) -> dict[E.Var, str]:
    """For each handle variable viewed by buffers of a single element type, that type (its
    C declaration then needs no casts)."""
    seen: dict[E.Var, set[str]] = {}

    def record(n) -> None:
        buf = None
        if isinstance(n, E.BufferLoad | S.BufferStore | S.Allocate):
            buf = n.buffer
        elif isinstance(n, E.Call) and n.op == "address_of":
            buf = n.args[0].buffer
        if buf is not None:
            seen.setdefault(buf.data, set()).add(memory_type(buf.dtype))

    post_order_visit(func.body, record)
    return {var: next(iter(types)) for var, types in seen.items() if len(types) == 1}


def generate(mod: IRModule, target: Target, signatures: dict[str, FunctionSignature]) -> str:
    """The C source of every function of `mod`."""
    mcg = ModuleCodegen(mod, target)
    for func in mod:
        mcg.add_function(func, signatures[func.name])
    return mcg.source()
