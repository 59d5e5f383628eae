"""The tuning records: the best knob values measured per (strategy, arguments, target), in one
JSON file that builds with a tunable strategy read (docs/tuning.md).

The file is `$LOOM_TUNING_FILE`, else `tuning.json` in loom's cache directory (`$LOOM_CACHE_DIR`,
else `~/.cache/loom`). It maps a record key (knobs.py, `Tunable.key`) to `{"config": {knob:
value}, "seconds": the best median time, "trials": how many candidates were measured}`. It is
written whole to a temporary file and renamed, so a reader never sees half a file; a file that
is not such JSON is an error naming it (it is not silently replaced).
"""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
import threading

from loom.errors import LoomError
from loom.runtime.native_lib import cache_dir

_LOCK = threading.Lock()


def path() -> pathlib.Path:
    override = os.environ.get("LOOM_TUNING_FILE")
    return pathlib.Path(override) if override else cache_dir() / "tuning.json"


def load() -> dict[str, dict]:
    """Every record (an empty dict when there is no file yet)."""
    p = path()
    try:
        text = p.read_text()
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise LoomError(
            f"the tuning records {p} are not JSON ({e}); remove or fix the file"
        ) from None
    if not isinstance(data, dict) or not all(
        isinstance(r, dict) and isinstance(r.get("config"), dict) for r in data.values()
    ):
        raise LoomError(f"the tuning records {p} are not a map of records with a 'config'")
    return data


def best(key: str) -> dict | None:
    """The recorded best knob values for `key`, or None."""
    record = load().get(key)
    return None if record is None else dict(record["config"])


def record(key: str, config: dict, seconds: float, trials: int) -> None:
    """Record `config` as the best for `key` (replacing an earlier record)."""
    p = path()
    with _LOCK:
        data = load()
        data[key] = {"config": config, "seconds": seconds, "trials": trials}
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tuning-")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, p)
