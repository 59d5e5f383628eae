"""Passes over IRModules, the context they run in, and the pipeline that orders them."""

from loom.transform.pass_infra import (
    PHASES,
    Pass,
    PassContext,
    PassInstrument,
    PrintAfterAll,
    as_pass,
    get_pass,
    list_configs,
    list_passes,
    module_pass,
    prim_func_pass,
    register_config,
    register_pass,
)

__all__ = [
    "PHASES",
    "Pass",
    "PassContext",
    "PassInstrument",
    "PrintAfterAll",
    "as_pass",
    "get_pass",
    "list_configs",
    "list_passes",
    "module_pass",
    "prim_func_pass",
    "register_config",
    "register_pass",
]
