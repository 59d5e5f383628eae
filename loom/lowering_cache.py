"""Lowered modules of schedules built before in this process, so that building an unchanged
kernel again (a tuner, a notebook cell run twice, a server) skips lowering: with the compile
cache of object code and linked libraries (loom/runtime/compile_cache.py) such a build takes a
millisecond or two instead of a hundred (docs/native.md, "Compile cache").

The key is a fingerprint, valid in this process, of everything lowering reads
(loom/ir/fingerprint.py, `process_fingerprint`): the schedule with its tensors and their
computations, the argument list, the name, the target, the pools, the current PassContext (its
opt level, configuration and user passes, disabled passes) and every registry's entries by
identity (memory scopes, passes, intrinsics, target kinds: what a backend or a user registered).
A value that cannot be walked, or a PassContext with instruments (which expect to see the
passes run), is not cached. Only this process's memory holds these entries: a registry's
entries are known by identity, which another process does not share.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from loom import registry
from loom.ir.fingerprint import process_fingerprint
from loom.ir.function import IRModule
from loom.runtime import compile_cache
from loom.transform.pass_infra import PassContext

_ENTRIES = 256
_LOCK = threading.Lock()
_LOWERED: collections.OrderedDict[str, tuple[IRModule, list]] = collections.OrderedDict()


def lowered(inputs: tuple, lower: Callable[[], IRModule]) -> IRModule:
    """`lower()`, or the module it returned before for the same `inputs` (the arguments of
    `loom.lower`, with the target) in the same state of the PassContext and the registries."""
    key = _key(inputs)
    if key is None:
        return lower()
    with _LOCK:
        entry = _LOWERED.get(key[0])
        if entry is not None:
            _LOWERED.move_to_end(key[0])
            return entry[0]
    mod = lower()
    with _LOCK:
        # the objects the key names by identity stay alive with the entry
        _LOWERED[key[0]] = (mod, key[1])
        while len(_LOWERED) > _ENTRIES:
            _LOWERED.popitem(last=False)
    return mod


def clear() -> None:
    with _LOCK:
        _LOWERED.clear()


def _key(inputs: tuple) -> tuple[str, list] | None:
    if not compile_cache.enabled():
        return None
    ctx = PassContext.current()
    if ctx.instruments:
        return None
    # every registry's entries by identity (read without importing the modules that register
    # loom's own entries: a lookup may do that during lowering, making the next key differ once)
    registries = registry.registries()
    registered = [r.registered() for r in registries]
    entries = [list(items.values()) for items in registered]
    names = [[r.what, *items, *map(id, items.values())] for r, items in zip(registries, registered)]
    state = (ctx.opt_level, ctx.config, sorted(ctx.disabled_pass), names)
    found = process_fingerprint((inputs, state))
    if found is None:
        return None
    return found[0], [found[1], entries]
