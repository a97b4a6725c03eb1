"""The passage store of a text index: passages in SQLite, addressed by row (= the FAISS label); given sentences
in a JSON ``sentences`` column (stores from before that column are read as passages without sentences).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Iterable

from ragplan.tools.retrieval import Passage

__all__ = ["PassageStore", "write_store"]

_SCHEMA = ("CREATE TABLE passages (row INTEGER PRIMARY KEY, id TEXT NOT NULL, title TEXT NOT NULL, text TEXT NOT NULL, "
           "sentences TEXT)")


def write_store(passages: Iterable[Passage], path: str | Path) -> int:
    """Write ``passages`` (rows 0, 1, …) to a new SQLite file at ``path``, whole or not at all (through a temporary file
    beside it, renamed); returns the count."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.unlink(missing_ok=True)  # (left by a killed build; journal_mode=OFF leaves no journal)
    rows = ((i, q.id, q.title, q.text, json.dumps(q.sentences, ensure_ascii=False) if q.sentences else None)
            for i, q in enumerate(passages))
    try:
        with contextlib.closing(sqlite3.connect(tmp)) as con, con:  # committed, then closed
            con.executescript(f"PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; {_SCHEMA};")
            count = con.executemany("INSERT INTO passages VALUES (?, ?, ?, ?, ?)", rows).rowcount
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)
    return count


def _passage(rec: tuple) -> Passage:
    row, pid, title, text, sents = rec
    return Passage(id=pid, title=title, text=text, source="local", meta={"row": row},
                   sentences=json.loads(sents) if sents else [])


class PassageStore:
    """Read-only access to a passage store written by :func:`write_store` (thread-safe)."""

    def __init__(self, path: str | Path) -> None:
        """Open ``path`` read-only; raises ``sqlite3.DatabaseError`` for a file that is not a store."""
        uri = Path(path).resolve().as_uri() + "?mode=ro&immutable=1"
        self._con = sqlite3.connect(uri, uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        self._count = int(self._con.execute("SELECT COUNT(*) FROM passages").fetchone()[0])
        columns = {r[1] for r in self._con.execute("PRAGMA table_info(passages)")}
        self._cols = "row, id, title, text, " + ("sentences" if "sentences" in columns else "NULL")

    def __len__(self) -> int:
        return self._count

    def get(self, rows: Iterable[int]) -> dict[int, Passage]:
        """The passages at ``rows`` (missing rows are left out), keyed by row."""
        want = json.dumps(sorted({int(r) for r in rows if r >= 0}))  # one parameter, however many rows
        with self._lock:
            recs = self._con.execute(f"SELECT {self._cols} FROM passages WHERE row IN (SELECT value FROM json_each(?))",
                                     (want,)).fetchall()
        return {rec[0]: _passage(rec) for rec in recs}

    def range(self, start: int, stop: int) -> list[Passage]:
        """The passages at rows ``start`` ≤ row < ``stop``, in row order."""
        with self._lock:
            cur = self._con.execute(f"SELECT {self._cols} FROM passages WHERE row >= ? AND row < ? ORDER BY row",
                                    (start, stop))
            return [_passage(rec) for rec in cur]

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._con.close()
