"""Reading JSON Lines files whose every line must be one JSON object (shops, gold sets, seed plans …).

One reader, so every such file fails the same way: the first bad line is an error naming the file and
line (not JSON — often a truncated file —, or not an object), raised as the caller's own error class.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["read_jsonl_objects"]


def read_jsonl_objects(path: str | Path, error: type[Exception] = ValueError) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of ``path``; ``error`` naming the file and line of the
    first line that is not a JSON object, or the file when it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read: {exc}") from None
    rows: list[tuple[int, dict[str, Any]]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{path}:{n}: not valid JSON ({exc.msg}, column {exc.colno}; a truncated file?)") from None
        if not isinstance(row, dict):
            raise error(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
        rows.append((n, row))
    return rows
