"""Users' text files read one way (a file that cannot be read or is not UTF-8, or a line that is not a JSON object, is
the caller's error class naming file and line: :class:`FileFormatError` by default, exit code 2 in the CLI); and files
written whole or not at all."""

from __future__ import annotations

import gzip
import io
import json
import os
import threading
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable

__all__ = ["FileFormatError", "read_text", "read_json", "read_jsonl_objects", "jsonl_text", "atomic_write",
           "saved_bytes"]


class FileFormatError(ValueError):
    """A user's file that cannot be read as it should: the message names the file (and line)."""


def read_text(path: str | Path, error: type[Exception] = FileFormatError) -> str:
    """The UTF-8 text of ``path`` (``.gz`` decompressed, a BOM dropped); ``error`` naming the file when it cannot be
    read, or the file and line of the first byte that is not UTF-8."""
    p = Path(path)
    try:
        data = p.read_bytes()
        data = gzip.decompress(data) if p.suffix == ".gz" else data
    except (OSError, EOFError, zlib.error) as exc:
        raise error(f"{p}: cannot read: {exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(f"{p}:{line}: not UTF-8 text (a binary file?)") from None


def read_json(path: str | Path, error: type[Exception] = FileFormatError, *, object_only: bool = False) -> Any:
    """The JSON value in ``path`` (read as :func:`read_text` reads it); ``error`` naming the file, line and column
    where it is not valid JSON (``{path}: line L column C: not valid JSON``), or saying it is empty (or, with
    ``object_only``, not a JSON object)."""
    text = read_text(path, error)
    if not text.strip():
        raise error(f"{path}: the file is empty")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg}; a truncated file?)") from None
    if object_only and not isinstance(value, dict):
        raise error(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def read_jsonl_objects(path: str | Path, error: type[Exception] = FileFormatError) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of ``path``; ``error`` naming the file and line of the
    first line that is not a JSON object, or the file when it cannot be read."""
    rows: list[tuple[int, dict[str, Any]]] = []
    for n, line in enumerate(read_text(path, error).split("\n"), 1):
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


def jsonl_text(rows: Iterable[Any]) -> str:
    """JSON Lines text: one JSON value a line (non-ASCII kept as is), each line ending in a newline."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def atomic_write(path: str | Path, data: str | bytes, *, exclusive: bool = False) -> bool:
    """Write ``data`` (text as UTF-8) to ``path`` through a temporary file of its own beside it, fsynced, then a rename:
    no torn file on a kill, and each of several concurrent writers leaves a whole file. ``exclusive``: a file already
    at ``path`` is kept (a hard link; where there are none, a rename); whether ``data`` was written."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}-{threading.get_ident()}.tmp")  # created as any file is (umask)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        if exclusive:
            try:
                os.link(tmp, p)  # atomic, and refused when the file exists
                return True
            except FileExistsError:
                return False
            except OSError:  # a file system without hard links
                pass
        os.replace(tmp, p)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def saved_bytes(save: Callable[[io.BytesIO], object]) -> bytes:
    """What ``save(file)`` writes into a file object (``np.save``, ``np.savez``, ``torch.save`` …), as bytes for
    :func:`atomic_write`."""
    buf = io.BytesIO()
    save(buf)
    return buf.getvalue()
