"""``ragplan eval --rerun RUN_DIR``: re-execute a run into a new folder and compare the records, leaving out
what measures time (:data:`TIMING_FIELDS`, fields named ``*_s``/``*_ms``/``*_seconds``, durations in text)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ragplan.eval.runfolder import RunFolder
from ragplan.llm_cache import LLMCache

__all__ = ["bad_entries", "record_differences", "TIMING_FIELDS"]

#: Record fields that measure time or count invocations of this folder; they differ between executions.
TIMING_FIELDS = frozenset({"latency_s", "llm_seconds", "finished_at", "invocation", "wall_time_s", "seconds",
                           "elapsed_s", "duration_s", "created", "started", "planner_latency_s"})


def bad_entries(run_dir: str | Path, cache_dir: str | Path) -> tuple[list[str], int]:
    """``(problems, used)``: why each of the LLM cache entries the run used (its ``llm_cache.json``) cannot be
    replayed from ``cache_dir`` (missing, unreadable, altered: :meth:`LLMCache.check`), and how many it used."""
    path = Path(run_dir) / "llm_cache.json"
    digests = [d for d in json.loads(path.read_text(encoding="utf-8")).get("digests") or [] if isinstance(d, str)]
    cache = LLMCache(cache_dir, replay=True)
    return [p for p in map(cache.check, digests) if p], len(digests)


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
        fields = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        if fields:
            diffs[qid] = fields
    return len(set(old) | set(new)), diffs
