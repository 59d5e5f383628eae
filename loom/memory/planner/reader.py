"""Reading planning problems from the benchmark CSV format (MiniMalloc's): a header
`id,lower,upper,size` and optional `alignment` and `offset` columns; lifetimes [lower, upper)."""

from __future__ import annotations

import csv
import os

from loom.errors import LoomError
from loom.memory.planner.buffer import Buffer, validate

REQUIRED = ("id", "lower", "upper", "size")


def read_csv(path: str | os.PathLike) -> tuple[Buffer, ...]:
    """The buffers of a CSV file; a LoomError names the file and line of a bad row."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        columns = [c.strip() for c in reader.fieldnames or ()]
        missing = [c for c in REQUIRED if c not in columns]
        if missing:
            raise LoomError(f"{path}: missing column(s) {', '.join(missing)}; have {columns}")
        buffers = [_row(path, reader.line_num, row) for row in reader]
    return validate(buffers)


def _row(path: str | os.PathLike, line: int, row: dict[str, str]) -> Buffer:
    row = {k.strip(): (v or "").strip() for k, v in row.items() if k is not None}
    try:
        offset = row.get("offset", "")
        return Buffer(
            name=row["id"],
            size=int(row["size"]),
            start=int(row["lower"]),
            end=int(row["upper"]),
            alignment=int(row.get("alignment") or 1),
            offset=int(offset) if offset not in ("", "-1") else None,
        )
    except (ValueError, LoomError) as e:
        raise LoomError(f"{path}, line {line}: {e}") from None
