"""A run folder on disk (docs/evaluation.md, "A run"), written so that a kill loses nothing finished."""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ragplan import __version__
from ragplan.jsonl import FileFormatError, read_text
from ragplan.llm_cache import fingerprint_of

__all__ = ["RunSettings", "RunFolder", "atomic_write", "record_line"]

_append_lock = threading.Lock()  # appends to results files, from any thread, one line at a time


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
    checkpoints: bool = True
    """Checkpoint each question after every node, so ``--resume`` continues a question in flight at a kill."""
    llm_cache_dir: str = ""
    """The LLM record/replay cache every call went through (empty = none); see ``llm_cache.json``."""
    llm_replay: bool = False
    """Whether every LLM call was served from ``llm_cache_dir`` only (a replay, no endpoint)."""
    created: str = ""
    ragplan_version: str = __version__

    @classmethod
    def load(cls, path: Path) -> "RunSettings":
        """Read ``settings.json``; :class:`~ragplan.jsonl.FileFormatError` naming it when it is no run's settings."""
        try:
            data = json.loads(read_text(path))
            known = {f.name for f in fields(cls)}
            return cls(**{k: v for k, v in data.items() if k in known})
        except (ValueError, AttributeError, TypeError) as exc:
            raise FileFormatError(str(exc) if isinstance(exc, FileFormatError) else f"{path}: not a run's settings ({exc})") from None


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
        """Finished records by id; broken lines are skipped with a warning (``repair``: moved out of the file)."""
        if not self.results_file.exists():
            return {}
        raw = self.results_file.read_bytes()
        records: dict[str, dict[str, Any]] = {}
        good: list[bytes] = []
        bad: list[tuple[int, bytes]] = []
        for n, line in enumerate(raw.splitlines(keepends=True), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict) or not isinstance(rec.get("id"), str) or not line.endswith(b"\n"):
                    raise ValueError("not a complete record with an id")
            except (ValueError, UnicodeDecodeError):
                bad.append((n, line))
                continue
            records[rec["id"]] = rec
            good.append(line)
        if bad:
            where = ", ".join(str(n) for n, _ in bad[:10]) + (" …" if len(bad) > 10 else "")
            warnings.warn(f"{self.results_file}: skipped {len(bad)} unreadable line(s) (line {where})"
                          + ("; moved to results.rejected.jsonl" if repair else ""), RuntimeWarning, stacklevel=2)
            if repair:
                with open(self.path / "results.rejected.jsonl", "ab") as fh:
                    for n, line in bad:
                        fh.write(json.dumps({"line": n, "text": line.decode("utf-8", "replace").rstrip("\n")}).encode() + b"\n")
                tmp = self.results_file.with_name(self.results_file.name + ".tmp")
                tmp.write_bytes(b"".join(good))
                os.replace(tmp, self.results_file)
        return records

    def start_invocation(self) -> int:
        """Record that a run (or a resume) starts now; returns its number (1, 2, …)."""
        path = self.path / "invocations.jsonl"
        n = 1 + sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 1
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"invocation": n, "started": time.time()}) + "\n")
        return n

    def wall_time(self, records: dict[str, dict[str, Any]], now: float | None = None) -> float:
        """Wall time of every invocation, killed ones included (the running one up to ``now``)."""
        path = self.path / "invocations.jsonl"
        if not path.exists():
            return 0.0
        starts: dict[int, float] = {}
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
                starts[int(row["invocation"])] = float(row["started"])
            except (ValueError, KeyError, TypeError):
                continue
        ends: dict[int, float] = {}
        for rec in records.values():
            k, at = rec.get("invocation"), rec.get("finished_at")
            if isinstance(k, int) and isinstance(at, (int, float)):
                ends[k] = max(ends.get(k, 0.0), float(at))
        last = max(starts, default=0)
        return round(sum(max(0.0, (now if k == last and now is not None else ends.get(k, start)) - start)
                         for k, start in starts.items()), 3)

    def record_llm_cache(self, cache_dir: str, replay: bool, digests: list[str]) -> dict[str, Any]:
        """Write ``llm_cache.json`` (the entries used by this and earlier invocations) and return its summary."""
        path = self.path / "llm_cache.json"
        try:
            earlier = json.loads(path.read_text(encoding="utf-8")).get("digests") or []
        except (OSError, ValueError, AttributeError):
            earlier = []
        used = sorted(set(digests) | {d for d in earlier if isinstance(d, str)})
        info = {"dir": cache_dir, "replay": replay, **fingerprint_of(used)}
        atomic_write(path, json.dumps({**info, "digests": used}, indent=1))
        return info

    def append(self, record: dict[str, Any]) -> None:
        """Append one record as a line, flushed to disk before returning (see :meth:`append_lines`)."""
        self.append_lines([record_line(record)])

    def append_lines(self, lines: list[bytes]) -> None:
        """Append whole lines in one write under an exclusive ``flock``, fsynced before returning."""
        with _append_lock, open(self.results_file, "ab") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file is closed
            fh.write(b"".join(lines))
            fh.flush()
            os.fsync(fh.fileno())


def record_line(record: dict[str, Any]) -> bytes:
    """A record as one ``results.jsonl`` line (UTF-8, ending in a newline)."""
    return (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename (no torn file on a kill)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
