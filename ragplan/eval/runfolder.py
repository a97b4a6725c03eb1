"""A run folder on disk: its settings and its results, written so that a kill loses nothing finished.

* ``settings.json`` — what was run (:class:`RunSettings`), written atomically;
* ``results.jsonl`` — one JSON line per finished question, appended and fsynced one at a time.

The runner (:mod:`ragplan.eval.runner`) writes folders; the reports (:mod:`ragplan.eval.report`) read them.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ragplan import __version__

__all__ = ["RunSettings", "RunFolder", "atomic_write", "previous_wall_time"]


@dataclass
class RunSettings:
    """Everything needed to (re)start a run; saved as ``settings.json``."""

    method: str
    benchmark: str
    data: str
    model: str = ""
    base_url: str = ""
    limit: int | None = None
    year: int | None = None
    concurrency: int = 4
    context: dict[str, Any] = field(default_factory=dict)
    """Extra context settings for every item (max_steps, row_cap, temperature …)."""
    benchmark_options: dict[str, Any] = field(default_factory=dict)
    """Options of the benchmark itself (e.g. ``context_only`` for HotpotQA-style data)."""
    item_timeout_s: float = 900.0
    """Wall-time budget of one question; past it the question is recorded as timed out."""
    rate_limit_retries: int = 4
    """Re-runs of a question whose LLM calls were rate limited (429), with exponential backoff."""
    backoff_s: float = 5.0
    """First backoff after a rate limit; doubles each retry, with jitter."""
    created: str = ""
    ragplan_version: str = __version__

    @classmethod
    def load(cls, path: Path) -> "RunSettings":
        """Read ``settings.json``."""
        data = json.loads(path.read_text())
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class RunFolder:
    """The files of one run (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.settings_file = self.path / "settings.json"
        self.results_file = self.path / "results.jsonl"

    def save_settings(self, settings: RunSettings) -> None:
        """Write ``settings.json`` atomically."""
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write(self.settings_file, json.dumps(asdict(settings), indent=2, default=str))

    def load_records(self, repair: bool = False) -> dict[str, dict[str, Any]]:
        """Finished records by id; with ``repair`` a torn last line (a kill mid-write) is cut off the file."""
        if not self.results_file.exists():
            return {}
        raw = self.results_file.read_bytes()
        records: dict[str, dict[str, Any]] = {}
        good_end = 0
        pos = 0
        for line in raw.splitlines(keepends=True):
            pos += len(line)
            if not line.endswith(b"\n"):
                break
            try:
                rec = json.loads(line)
                records[rec["id"]] = rec
                good_end = pos
            except (json.JSONDecodeError, KeyError, TypeError):
                break
        if repair and good_end < len(raw):
            with open(self.results_file, "r+b") as fh:
                fh.truncate(good_end)
        return records

    def append(self, record: dict[str, Any]) -> None:
        """Append one record as a line, flushed to disk before returning."""
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with open(self.results_file, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename (no torn file on a kill)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def previous_wall_time(run_dir: Path) -> float:
    """Wall time already spent on this run folder by earlier (interrupted or finished) invocations."""
    try:
        return float(json.loads((run_dir / "summary.json").read_text())["cost"].get("wall_time_s", 0.0))
    except (OSError, ValueError, KeyError, TypeError):
        return 0.0
