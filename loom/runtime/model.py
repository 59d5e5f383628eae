"""A compiled model at run time: its `main` function, its constants and its interface.

`loom.compile` builds a host module whose `main` takes the model's inputs, then its outputs,
then one byte array per memory pool the caller gives (allocated here for each call); the
constants are in the library (docs/memory-planning.md). The `ModelModule` imported by that host
module holds the names, shapes and dtypes of the inputs and outputs and the pools;
`export_library` stores it as a payload of the library and `load_module` rebuilds it (its loader
is registered here), so `Model(load_module("model.so"))` runs the model in a process that has no
compiler.

A model compiled for a device (Hexagon) runs in a device session:
`Model(module, device=session)` loads its code there, and each call copies the arrays in and
out.
"""

from __future__ import annotations

import json
import pathlib
import threading
from collections.abc import Mapping, Sequence

import numpy as np

from loom.abi.dtype import dtype
from loom.errors import LoomError
from loom.runtime import c_entry
from loom.runtime.module import Module, register_loader
from loom.runtime.ndarray import empty

TYPE_KEY = "loom.model"


class ModelModule(Module):
    """The interface of a compiled model (no code of its own): its inputs and outputs, the
    kernels `main` calls, and its memory pools. `pools` describes every pool (name, kind,
    placement, size in bytes, the devices that reach it, lower bound and buffers planned);
    `main` takes the inputs, the outputs, then an array of `size` bytes for each pool whose
    placement is "caller", in `pools`' order."""

    def __init__(
        self,
        main: str,
        inputs: Sequence[tuple[str, tuple[int, ...], str]],
        outputs: Sequence[tuple[str, tuple[int, ...], str]],
        groups: Sequence[dict] = (),
        pools: Sequence[dict] = (),
        name: str = "model",
        alignment: int = 64,
    ):
        super().__init__(TYPE_KEY, {})
        self.main = main
        self.name = name
        """The model's name: its C entry point is `<name>_run` (loom/runtime/c_entry.py)."""
        self.alignment = int(alignment)
        """The alignment in bytes `main` requires of every input and output."""
        self.inputs = [(n, tuple(int(d) for d in s), str(dtype(t))) for n, s, t in inputs]
        self.outputs = [(n, tuple(int(d) for d in s), str(dtype(t))) for n, s, t in outputs]
        self.groups = [dict(g) for g in groups]
        self.pools = [dict(p) for p in pools]

    @property
    def caller_pools(self) -> list[dict]:
        """The pools the caller passes to `main`, in order."""
        return [p for p in self.pools if p["placement"] == "caller"]

    def _interface(self) -> dict:
        return {
            "name": self.name,
            "alignment": self.alignment,
            "main": self.main,
            "inputs": [[n, list(s), t] for n, s, t in self.inputs],
            "outputs": [[n, list(s), t] for n, s, t in self.outputs],
            "groups": self.groups,
            "pools": self.pools,
        }

    def metadata(self) -> dict:
        return {"model": self._interface()}

    def save_payload(self) -> bytes:
        return json.dumps(self._interface()).encode()

    @staticmethod
    def load(payload: bytes, record: dict) -> ModelModule:
        try:
            interface = json.loads(payload.decode())
            return ModelModule(
                interface["main"],
                interface["inputs"],
                interface["outputs"],
                interface.get("groups", ()),
                interface.get("pools", ()),
                interface.get("name", "model"),
                interface.get("alignment", 64),
            )
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
            raise LoomError(f"the model payload of this library is damaged: {e}") from None


register_loader(TYPE_KEY, ModelModule.load)


class Model:
    """A runnable model: `model(input=x)` or `model(x)` returns {output name: array}."""

    def __init__(self, module: Module, device=None):
        found = [m for m in module.walk() if isinstance(m, ModelModule)]
        if not found:
            raise LoomError(f"{module!r} holds no compiled model (it was not made by loom.compile)")
        self.module = module
        self.info = found[0]
        self.device = device
        self.device_isa = next(
            (m.device_isa for m in module.walk() if self.info.main in m.function_names()), None
        )
        """The device whose code `main` is (None: the host)."""
        if device is not None:
            self._main = module.to_device(device)[self.info.main]
        elif self.device_isa is not None:
            self._main = None  # runs in a device session: `on(session)`
        else:
            self._main = module[self.info.main]
        self.input_names = tuple(n for n, _, _ in self.info.inputs)
        self.output_names = tuple(n for n, _, _ in self.info.outputs)
        # what a call needs, resolved once: a call then only compares and allocates
        self._input_types = tuple((s, dtype(t).numpy) for _, s, t in self.info.inputs)
        self._output_types = tuple((s, dtype(t).numpy) for _, s, t in self.info.outputs)
        self._pool_types = tuple((p["size"], p["alignment"]) for p in self.info.caller_pools)
        self._per_thread = threading.local()  # each thread's pools, kept across its calls

    def _arrays(self, args: Sequence, kwargs: Mapping) -> list[np.ndarray]:
        """The inputs in order: as given when they are C-contiguous ndarrays of the right shape
        and dtype (the common case, checked first), else converted or refused by `_convert`."""
        if not kwargs and len(args) == len(self._input_types):
            for value, (shape, np_dtype) in zip(args, self._input_types):
                if (
                    type(value) is not np.ndarray
                    or value.dtype != np_dtype
                    or value.shape != shape
                    or not value.flags.c_contiguous
                ):
                    return self._convert(args, kwargs)
            return list(args)
        return self._convert(args, kwargs)

    def _convert(self, args: Sequence, kwargs: Mapping) -> list[np.ndarray]:
        names = self.input_names
        if len(args) > len(names):
            raise TypeError(
                f"the model takes {len(names)} inputs {list(names)}, got {len(args)} positional "
                "arguments"
            )
        given = dict(zip(names, args))
        for name, value in kwargs.items():
            if name not in names:
                raise TypeError(f"unknown input {name!r}; the inputs are {list(names)}")
            if name in given:
                raise TypeError(f"input {name!r} given twice")
            given[name] = value
        missing = [n for n in names if n not in given]
        if missing:
            raise TypeError(f"missing inputs {missing} (the inputs are {list(names)})")
        arrays = []
        for name, shape, dt in self.info.inputs:
            a = np.asarray(given[name])
            if a.shape != shape or a.dtype != np.dtype(dtype(dt).numpy):
                raise ValueError(
                    f"input {name!r} must be {dt}{list(shape)}, got {a.dtype}{list(a.shape)}"
                )
            arrays.append(np.require(a, requirements="C"))  # 0-d stays 0-d
        return arrays

    def on(self, device) -> Model:
        """This model loaded into a device session (`loom.device("hexagon-sim")`)."""
        return Model(self.module, device=device)

    def __call__(self, *args, **kwargs) -> dict[str, np.ndarray]:
        if self._main is None:
            raise LoomError(
                f"this model runs on a {self.device_isa} device: call it in a session, "
                "model.on(session)(...) with session = loom.device(...)"
            )
        inputs = self._arrays(args, kwargs)
        alignment = self.info.alignment  # aligned as `main` requires: it needs no copies
        outputs = [empty(s, t, alignment) for s, t in self._output_types]
        self._main(*inputs, *outputs, *self._pools())
        return dict(zip(self.output_names, outputs))

    def _pools(self) -> list[np.ndarray]:
        """The caller's pools of this thread: made at its first call and kept for the next
        ones (a thread runs one call at a time, and `main` needs nothing of a pool's earlier
        contents), so calls from several threads never share one."""
        pools = getattr(self._per_thread, "pools", None)
        if pools is None:
            pools = [empty((size,), np.uint8, align) for size, align in self._pool_types]
            self._per_thread.pools = pools
        return pools

    def export_library(self, path, **kwargs) -> None:
        self.module.export_library(path, **kwargs)

    def c_header(self) -> str:
        """The text of `<name>.h`: the structs and the prototype of the library's C entry point
        `<name>_run` (loom/runtime/c_entry.py)."""
        return c_entry.header(self.info.name, self.info)

    def export_header(self, path) -> None:
        """Write `c_header()` to `path` (conventionally `<name>.h`)."""
        pathlib.Path(path).write_text(self.c_header())


__all__ = ["TYPE_KEY", "Model", "ModelModule"]
