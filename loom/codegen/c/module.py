"""Loop IR modules to one C source file: entry points, parallel tasks, declarations.

Every PrimFunc `f` becomes two C functions, as in the LLVM back end:
- `static int32_t f_impl(...)`, taking each buffer as a `T *restrict` and each scalar by value;
- `int32_t f(void *const *args)`, the entry point (docs/architecture.md, decision 4), which reads
  one pointer per argument (a buffer's data, or a pointer to a scalar; a bool is one byte) and
  calls `f_impl`.
A parallel task (made by the lower_parallel pass from a parallel loop) becomes one function
`static int32_t f_task_<k>(int32_t task_id, int32_t num_tasks, void *closure)`, declared
before every definition (any function may take its address), and no entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom import abi
from loom.abi import FunctionSignature
from loom.codegen.c.compile import C_FLAGS
from loom.codegen.c.function import FunctionCodegen
from loom.codegen.c.names import C_BUILTINS, C_KEYWORDS, Namer, sanitize
from loom.codegen.c.types import c_type, declaration, memory_type
from loom.codegen.common import check_stack, global_arrays, unknown_global
from loom.errors import LoomError
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.buffer import Buffer
from loom.ir.function import IRModule, PrimFunc
from loom.ir.visitor import post_order_visit
from loom.runtime import host_runtime
from loom.transform.lower_parallel import (
    CLOSURE_NOALIAS_ATTR,
    closure_handles,
    describe_task,
    entry_functions,
    is_task,
)

if TYPE_CHECKING:  # the target package registers the kinds, which import this
    from loom.target.target import Target

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
        self.arrays = global_arrays(mod)
        self.arrays_used: dict[str, str] = {}  # symbol -> its C definition
        self.global_names = Namer(
            [f.name for f in mod] + list(host_runtime.SYMBOLS) + externs + list(self.arrays)
        )
        self.runtime_used: dict[str, None] = {}
        self.externs_used: dict[str, str | None] = {}  # name -> declaration (None: a header's)
        self.headers: dict[str, None] = {}
        self.definitions: list[str] = []
        self.tasks: dict[str, str] = {}  # parallel task -> its C name
        self.prototypes: list[str] = []
        for func in mod:
            if is_task(func):
                self._declare_task(func)

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
        doc = f"/* entry point of {func.name}: int32_t name(void *const *args), see loom's "
        doc += "docs/architecture.md, decision 4 */"
        name = func.name
        if name == "main" or name in C_KEYWORDS or name in C_BUILTINS or sanitize(name) != name:
            # C gives the name another meaning: a C function of another name, exported as it
            name = self.global_names.fresh(f"entry_{func.name}")
            label = f'__asm__(LOOM_SYMBOL("{func.name}"))'
            doc += f"\nint32_t {name}(void *const *args) {label};"
        self.add_definition(doc, f"int32_t {name}(void *const *args)", lines)

    def _declare_task(self, func: PrimFunc) -> None:
        types = [str(p.dtype) if isinstance(p, E.Var) else None for p in func.params]
        if types != ["int32", "int32", "handle"]:
            raise LoomError(
                f"parallel task {func.name} must take (int32 task_id, int32 num_tasks, handle "
                f"closure), got {types}"
            )
        name = func.name
        if name == "main" or name in C_KEYWORDS or name in C_BUILTINS or sanitize(name) != name:
            name = self.global_names.fresh(f"task_{func.name}")
        self.tasks[func.name] = name
        self.prototypes.append(f"static int32_t {name}(int32_t, int32_t, void *);")

    def add_task(self, func: PrimFunc) -> None:
        """A parallel task: `static int32_t task(int32_t task_id, int32_t num_tasks, void
        *closure)`; with `closure_noalias`, the pointers it unpacks are `restrict`."""
        cg = self.function_codegen(func.name)
        cg.element_types = _element_types(func)
        cg.closure_handles = closure_handles(func)
        cg.restrict = bool(func.attr(CLOSURE_NOALIAS_ATTR))
        params = [declaration(c_type(p.dtype), cg.bind(p)) for p in func.params]
        cg.stmt(func.body)
        cg.emit("return 0;")
        self.check_stack(cg, describe_task(func))
        doc = f"/* {describe_task(func)}: a chunk of its iterations per task */"
        head = f"static int32_t {self.tasks[func.name]}({', '.join(params)})"
        self.add_definition(doc, head, cg.lines)

    def global_array(self, symbol: str) -> str:
        """The C name of the library's array `symbol`, defined on first use (static: only this
        file's functions address it)."""
        if symbol not in self.arrays_used:
            array = self.arrays.get(symbol)
            if array is None:
                raise unknown_global(symbol, self.arrays)
            aligned = f"__attribute__((aligned({array.alignment})))"
            array_type = f"uint8_t {symbol}[{array.nbytes}] {aligned}"
            if array.data is None:
                self.arrays_used[symbol] = f"static {array_type};"
            else:
                data = _bytes_text(array.data)
                self.arrays_used[symbol] = f"static const {array_type} = {{\n{data}\n}};"
        return symbol

    def function_address(self, name: str, caller: str) -> str:
        """The C name of a parallel task, or of another function's entry point."""
        if name in self.tasks:
            return self.tasks[name]
        self.declare_entry(name, caller)
        return name

    def check_stack(self, cg: FunctionCodegen, name: str) -> None:
        check_stack(name, cg.stack_bytes, self.target.stack_limit)

    def function_codegen(self, func_name: str) -> FunctionCodegen:
        """A generator for the body of a new C function of PrimFunc `func_name`."""
        return FunctionCodegen(self, func_name, Namer(outer=self.global_names))

    def add_definition(self, doc: str, head: str, body: list[str]) -> None:
        self.definitions.append("\n".join([doc, head + " {", *body, "}"]))

    # -- the file ------------------------------------------------------------------------------
    def source(self) -> str:
        names = ", ".join(f.name for f in entry_functions(self.mod)) or "(none)"
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
        if self.prototypes:
            parts.append("/* parallel tasks */\n" + "\n".join(self.prototypes))
        if self.arrays_used:
            parts.append(
                "/* the library's arrays (memory pools) */\n" + "\n".join(self.arrays_used.values())
            )
        parts += self.definitions
        return "\n\n".join(parts) + "\n"


def _bytes_text(data: bytes) -> str:
    """An initializer's bytes, 40 to a line."""
    return "\n".join(
        ",".join(str(b) for b in data[k : k + 40]) + "," for k in range(0, len(data), 40)
    )


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
        if is_task(func):
            mcg.add_task(func)
        else:
            mcg.add_function(func, signatures[func.name])
    return mcg.source()
