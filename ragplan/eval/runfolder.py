"""A run folder on disk (docs/evaluation.md, "A run"), written so that a kill loses nothing finished; ``eval --rerun``'s
check of a re-executed run's records and of the LLM cache entries its replay needs."""

from __future__ import annotations

import fcntl
import json
import os
import re
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Collection

from ragplan import __version__
from ragplan.redact import redact
from ragplan.jsonl import FileFormatError, atomic_write, jsonl_text, read_json, read_text
from ragplan.llm_cache import LLMCache, fingerprint_of

__all__ = ["RunSettings", "RunFolder", "atomic_write", "record_line", "record_problem", "RECORD_NUMBERS",
           "RECORD_TEXTS", "COMPARED_SETTINGS", "saved_settings", "replay_problem", "record_differences", "TIMING_FIELDS"]

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
    checkpoint_db: str = ""
    """A PostgreSQL URL keeping those checkpoints instead of the run folder (saved without its password)."""
    llm_cache_dir: str = ""
    """The LLM record/replay cache every call went through (empty = none); see ``llm_cache.json``."""
    llm_replay: bool = False
    """Whether every LLM call was served from ``llm_cache_dir`` only (a replay, no endpoint)."""
    server: str = ""
    """The LangGraph server the questions run on (``--server URL``; empty: in this process)."""
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


COMPARED_SETTINGS = ("method", "benchmark", "data", "model", "limit", "year", "context", "benchmark_options")
"""The run settings that must agree for an existing run folder to be resumed (by a sweep or ``compare``)."""


def saved_settings(run_dir: Path, new: RunSettings) -> RunSettings | None:
    """The settings of the run ``run_dir`` holds (None: none); ValueError naming the folder when they cannot be read
    or differ from ``new`` in :data:`COMPARED_SETTINGS`."""
    if not (run_dir / "settings.json").is_file():
        return None
    try:
        old = RunSettings.load(run_dir / "settings.json")
    except (OSError, ValueError) as exc:
        raise ValueError(f"{run_dir}: unreadable settings.json ({exc})") from None
    diff = [f"{k} ({getattr(old, k)!r} there, {getattr(new, k)!r} now)" for k in COMPARED_SETTINGS
            if getattr(old, k) != getattr(new, k)]
    if diff:
        raise ValueError(f"{run_dir} holds a run with other settings: {'; '.join(diff)}. Use another --out.")
    return old


class RunFolder:
    """The files of one run (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.settings_file = self.path / "settings.json"
        self.results_file = self.path / "results.jsonl"

    def save_settings(self, settings: RunSettings) -> None:
        """Write ``settings.json`` atomically, credentials redacted (a resume is given them again)."""
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write(self.settings_file, redact(json.dumps(asdict(settings), indent=2, default=str)))

    def load_records(self, repair: bool = False, ids: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
        """Finished records by id. A line that is no valid record is skipped with a warning naming its file and line
        (``repair``: moved to ``results.rejected.jsonl``, so a resume runs its question again); given ``ids`` (the
        benchmark's), records of other ids are left out with a note."""
        if not self.results_file.exists():
            return {}
        raw = self.results_file.read_bytes()
        records: dict[str, dict[str, Any]] = {}
        good: list[bytes] = []
        bad: list[tuple[int, bytes, str]] = []
        unknown: list[int] = []
        for n, line in enumerate(raw.splitlines(keepends=True), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                why = "a torn line (no newline)" if not line.endswith(b"\n") else record_problem(rec)
            except (ValueError, UnicodeDecodeError):
                rec, why = None, "not JSON (a torn line?)"
            if why:
                bad.append((n, line, why))
                continue
            good.append(line)
            if ids is not None and rec["id"] not in ids:
                unknown.append(n)
                continue
            records[rec["id"]] = rec
        if bad:
            where = "; ".join(f"{self.results_file}:{n}: {why}" for n, _, why in bad[:10]) + (" …" if len(bad) > 10 else "")
            warnings.warn(f"skipped {len(bad)} invalid record line(s), their questions count as not done ({where})"
                          + ("; moved to results.rejected.jsonl" if repair else ""), RuntimeWarning, stacklevel=2)
            if repair:
                with open(self.path / "results.rejected.jsonl", "ab") as fh:
                    fh.write(jsonl_text({"line": n, "text": line.decode("utf-8", "replace").rstrip("\n")}
                                        for n, line, _ in bad).encode())
                atomic_write(self.results_file, b"".join(good))
        if unknown:
            where = ", ".join(map(str, unknown[:10])) + (" …" if len(unknown) > 10 else "")
            warnings.warn(f"{self.results_file}: left out {len(unknown)} record(s) whose id is not a question of the run's "
                          f"benchmark (line {where})", RuntimeWarning, stacklevel=2)
        return records

    def drop(self, ids: Collection[str]) -> None:
        """Take the records of ``ids`` out of ``results.jsonl`` (their questions run again), atomically."""
        if not ids or not self.results_file.exists():
            return
        keep = [line for line in self.results_file.read_bytes().splitlines(keepends=True)
                if not line.strip() or json.loads(line).get("id") not in ids]  # (lines checked by load_records)
        atomic_write(self.results_file, b"".join(keep))

    def start_invocation(self) -> int:
        """Record that a run (or a resume) starts now; returns its number (1, 2, …)."""
        path = self.path / "invocations.jsonl"
        n = 1 + sum(1 for line in path.read_text().splitlines() if line.strip()) if path.exists() else 1
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"invocation": n, "started": time.time()}) + "\n")
        return n

    def wall_time(self, records: dict[str, dict[str, Any]], now: float) -> float:
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
        return round(sum(max(0.0, (now if k == last else ends.get(k, start)) - start)
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

    def append_lines(self, lines: list[bytes]) -> None:
        """Append whole lines in one write under an exclusive ``flock``, fsynced before returning."""
        with _append_lock, open(self.results_file, "ab") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file is closed
            fh.write(b"".join(lines))
            fh.flush()
            os.fsync(fh.fileno())


#: Record fields the runner and the reports compute with: numbers, and texts (or null).
RECORD_NUMBERS = ("llm_calls", "input_tokens", "output_tokens", "llm_seconds", "latency_s", "retrievals",
                  "retrieval_errors", "attempts", "invocation", "finished_at")
RECORD_TEXTS = ("method", "model", "question", "answer", "stop_reason", "error")


def record_problem(rec: Any) -> str:
    """Why a ``results.jsonl`` value is not a record the runner and the reports can use (``""`` when it is)."""
    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__}, not an object"
    if not isinstance(rec.get("id"), str):
        return "no string id"
    for k in RECORD_NUMBERS:
        if k in rec and (isinstance(rec[k], bool) or not isinstance(rec[k], (int, float))):
            return f"{k} is {json.dumps(rec[k])[:40]}, not a number"
    for k in RECORD_TEXTS:
        if rec.get(k) is not None and not isinstance(rec[k], str):
            return f"{k} is {json.dumps(rec[k])[:40]}, not a text"
    return ""


def record_line(record: dict[str, Any]) -> bytes:
    """A record as one ``results.jsonl`` line (UTF-8, ending in a newline), credentials redacted."""
    return (redact(json.dumps(record, ensure_ascii=False, default=str)) + "\n").encode("utf-8")


#: Record fields that measure time or count invocations of this folder; they differ between executions.
TIMING_FIELDS = frozenset({"latency_s", "llm_seconds", "finished_at", "invocation", "wall_time_s", "seconds",
                           "elapsed_s", "duration_s", "created", "started", "planner_latency_s"})


def replay_problem(run_dir: str | Path, cache_dir: str | Path) -> str:
    """Why a replay of the run from ``cache_dir`` would fail (``""`` when it would not): the run kept no
    ``llm_cache.json``, or some entries it used are missing, unreadable or altered there (:meth:`LLMCache.check`)."""
    path = Path(run_dir) / "llm_cache.json"
    if not path.exists():
        return (f"{run_dir} was recorded without --llm-cache (it has no llm_cache.json): there are no recorded "
                "responses to replay; re-run it against an endpoint without --replay")
    digests = [d for d in read_json(path, FileFormatError, object_only=True).get("digests") or [] if isinstance(d, str)]
    bad = [p for p in map(LLMCache(cache_dir, replay=True).check, digests) if p]
    return "" if not bad else (f"the LLM cache {cache_dir} lacks or cannot serve {len(bad)} of the {len(digests)} "
                               f"responses {run_dir} used (its llm_cache.json), the replay would fail on them: "
                               + "; ".join(bad[:5]) + (" …" if len(bad) > 5 else ""))


_DURATION = re.compile(r"\b\d+\.\d+ m?s\b")


def _untimed(value: Any) -> Any:
    """``value`` without its timing fields and with durations in text masked, at any depth."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items()
                if k not in TIMING_FIELDS and not k.endswith(("_s", "_ms", "_seconds"))}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    if isinstance(value, str):
        return _DURATION.sub("(time)", value)
    return value


def record_differences(old_dir: str | Path, new_dir: str | Path) -> tuple[int, dict[str, list[str]]]:
    """``(compared, {id: differing fields})`` between two run folders' records (``(missing)``: in one only)."""
    old, new = RunFolder(old_dir).load_records(), RunFolder(new_dir).load_records()
    diffs: dict[str, list[str]] = {}
    for qid in sorted(set(old) | set(new)):
        if qid not in old or qid not in new:
            diffs[qid] = ["(missing)"]
            continue
        a, b = _untimed(old[qid]), _untimed(new[qid])
        if fields := sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)):
            diffs[qid] = fields
    return len(set(old) | set(new)), diffs
