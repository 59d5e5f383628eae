"""The bottom layer (docs/architecture.md): what compiled code and the runtime agree on.

dtypes, the C type of each, the runtime libraries and the symbols they declare, and the
calling convention's signatures. Nothing here imports the runtime or the compiler.
"""

from loom.abi.dtype import DataType, dtype
from loom.abi.signature import FunctionSignature, ParamSpec
from loom.abi.symbols import (
    C_TYPES,
    COMPILER_RUNTIME,
    LIBC,
    LIBM,
    LIBRARIES,
    MODULE_PROVIDER,
    RUNTIME_SYMBOLS,
    ExternSymbol,
    RuntimeLibrary,
    get_library,
    list_libraries,
    lookup,
    parse_declaration,
    provider,
    read_only_params,
    register_library,
    similar_symbols,
    unregister_library,
)

__all__ = [
    "COMPILER_RUNTIME",
    "C_TYPES",
    "LIBC",
    "LIBM",
    "LIBRARIES",
    "MODULE_PROVIDER",
    "RUNTIME_SYMBOLS",
    "DataType",
    "ExternSymbol",
    "FunctionSignature",
    "ParamSpec",
    "RuntimeLibrary",
    "dtype",
    "get_library",
    "list_libraries",
    "lookup",
    "parse_declaration",
    "provider",
    "read_only_params",
    "register_library",
    "similar_symbols",
    "unregister_library",
]
