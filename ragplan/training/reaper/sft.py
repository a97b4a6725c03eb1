"""The supervised fine-tuning set of a REAPER planner: the primary task and TTG's seven secondary tasks.

Every seed example (and every DQS pick) gives ``per_example`` TEvo variants of each task
(:mod:`ragplan.training.reaper.ttg`) as chat-format records; :func:`write_dataset` writes one JSONL per
task, a shuffled ``train.jsonl`` and ``stats.json``, byte-identical for a seed.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Iterable, Sequence

from ragplan.tools.registry import ToolRegistry
from ragplan.training.reaper.datagen import SeedExample
from ragplan.training.reaper.ttg import TASKS

__all__ = ["chat_record", "generate_dataset", "write_dataset"]


def chat_record(system: str, user: str, assistant: str, task: str, source_id: str, **meta: Any) -> dict[str, Any]:
    """One SFT record in the chat format common trainers read."""
    return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user},
                         {"role": "assistant", "content": assistant}], "task": task, "source_id": source_id, **meta}


def generate_dataset(seeds: Sequence[SeedExample], registry: ToolRegistry, *, seed: int = 0, per_example: int = 2,
                     extra: Sequence[SeedExample] = ()) -> list[dict[str, Any]]:
    """The records for every example (seed pool then ``extra``, e.g. DQS picks): the primary plan task and the
    seven TTG tasks, ``per_example`` TEvo variants each (tasks that do not apply to a plan are skipped)."""
    records = []
    for ex in [*seeds, *extra]:
        for k in range(per_example):
            for task, fn in TASKS.items():
                rng = random.Random(f"{seed}|{ex.source_id}|{task}|{k}")
                made = fn(ex, seeds, registry, rng)
                if made is not None:
                    system, user, target = made
                    records.append(chat_record(system, user, target, task, ex.source_id, variant=k))
    return records


def write_dataset(records: Sequence[dict[str, Any]], out_dir: str | Path, *, seed: int = 0,
                  extra_stats: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{task}.jsonl`` per task, ``train.jsonl`` (all, shuffled by ``seed``) and ``stats.json``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    def dump(path: Path, rows: Iterable[dict[str, Any]]) -> None:
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")

    counts = {t: 0 for t in TASKS}
    for t in TASKS:
        rows = [r for r in records if r["task"] == t]
        counts[t] = len(rows)
        dump(out / f"{t}.jsonl", rows)
    train = list(records)
    random.Random(f"{seed}|train").shuffle(train)
    dump(out / "train.jsonl", train)
    stats = {"seed": seed, "total": len(train), "tasks": counts,
             "sources": len(dict.fromkeys(r["source_id"] for r in records)), **(extra_stats or {})}
    (out / "stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return stats
