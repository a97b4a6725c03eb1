"""The supervised fine-tuning set of a REAPER planner: the primary task and TTG's seven secondary tasks,
``per_example`` TEvo variants each, as chat records (byte-identical for a seed)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Sequence

from ragplan.tools.registry import ToolRegistry
from ragplan.tools.retail.shop import jsonl_text
from ragplan.methods.reaper.datagen import SeedExample
from ragplan.methods.reaper.ttg import TASKS

__all__ = ["generate_dataset", "write_dataset", "SECONDARY_TASKS", "parse_ttg_tasks"]

SECONDARY_TASKS: tuple[str, ...] = tuple(t for t in TASKS if t != "plan")
"""TTG's seven secondary tasks in the paper's order (§4.2.2: task 1 is ``query_from_plan`` … task 7
``use_provided_tools``); the primary ``plan`` task is always generated."""


def parse_ttg_tasks(spec: str | None) -> list[str]:
    """The secondary tasks a ``--ttg-tasks`` value names (names or numbers 1–7, comma-separated; ``all`` or None,
    ``none`` or ``0`` for Table 3's "TTG (0-task)"), in the paper's order; ValueError for an unknown one."""
    if spec is None or spec.strip().lower() == "all":
        return list(SECONDARY_TASKS)
    if spec.strip().lower() in ("none", "0", ""):
        return []
    chosen: set[str] = set()
    for part in (p.strip() for p in spec.split(",")):
        if part.isdigit() and 1 <= int(part) <= len(SECONDARY_TASKS):
            chosen.add(SECONDARY_TASKS[int(part) - 1])
        elif part in SECONDARY_TASKS:
            chosen.add(part)
        else:
            known = ", ".join(f"{k} {t}" for k, t in enumerate(SECONDARY_TASKS, 1))
            raise ValueError(f"unknown TTG task {part!r}; the tasks (name or number): {known}, or all / none")
    return [t for t in SECONDARY_TASKS if t in chosen]


def generate_dataset(seeds: Sequence[SeedExample], registry: ToolRegistry, *, seed: int = 0, per_example: int = 2,
                     extra: Sequence[SeedExample] = (), ttg_tasks: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Chat-format records (what common trainers read) of the plan task and ``ttg_tasks`` (default all seven) for the
    seeds then ``extra`` (DQS picks), ``per_example`` variants each; every task draws from its own seeded stream."""
    chosen = {"plan", *(SECONDARY_TASKS if ttg_tasks is None else ttg_tasks)}
    unknown = sorted(chosen - set(TASKS))
    if unknown:
        raise ValueError(f"unknown TTG task(s) {', '.join(unknown)}; tasks: {', '.join(SECONDARY_TASKS)}")
    records = []
    for ex in [*seeds, *extra]:
        for k in range(per_example):
            for task, fn in TASKS.items():
                if task not in chosen:
                    continue
                rng = random.Random(f"{seed}|{ex.source_id}|{task}|{k}")
                made = fn(ex, seeds, registry, rng)
                if made is not None:
                    system, user, target = made
                    records.append({"messages": [{"role": "system", "content": system}, {"role": "user", "content": user},
                                                 {"role": "assistant", "content": target}],
                                    "task": task, "source_id": ex.source_id, "variant": k})
    return records


def write_dataset(records: Sequence[dict[str, Any]], out_dir: str | Path, *, seed: int = 0,
                  extra_stats: dict[str, Any] | None = None, ttg_tasks: Sequence[str] | None = None) -> dict[str, Any]:
    """``{task}.jsonl`` per generated task (the primary ``plan`` and ``ttg_tasks``, default all seven),
    ``train.jsonl`` (all, shuffled by ``seed``) and ``stats.json``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    chosen = {"plan", *(SECONDARY_TASKS if ttg_tasks is None else ttg_tasks)}
    by_task = {t: [r for r in records if r["task"] == t] for t in TASKS if t in chosen}
    for t, rows in by_task.items():
        (out / f"{t}.jsonl").write_text(jsonl_text(rows), encoding="utf-8")
    train = list(records)
    random.Random(f"{seed}|train").shuffle(train)
    (out / "train.jsonl").write_text(jsonl_text(train), encoding="utf-8")
    stats = {"seed": seed, "total": len(train), "tasks": {t: len(rows) for t, rows in by_task.items()},
             "sources": len(dict.fromkeys(r["source_id"] for r in records)), **(extra_stats or {})}
    (out / "stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return stats
