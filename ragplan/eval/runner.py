"""Run a method graph over a benchmark: bounded async concurrency, rate-limit backoff, resumable.

A run folder holds:

* ``settings.json`` — what was run (method, benchmark, data, model, context settings, filters);
* ``results.jsonl`` — one JSON line per finished question, appended and fsynced one at a time, so a
  killed run loses at most the questions in flight; a torn last line is cut off on resume;
* ``summary.json`` / ``summary.md`` — accuracy overall, per group (scenario, year …), split into
  single- vs multi-retrieval questions (PlanRAG's Figure 5), LLM calls, tokens and latency;
* ``plot.png`` — accuracy per group and per retrieval class.

``--resume RUN_DIR`` reads the folder's settings, skips every question already in ``results.jsonl``
and runs the rest. Errors of one question (endpoint down, a bad script, a timeout) are recorded in its
line; they never stop the run.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from ragplan.eval.benchmark import Benchmark, Item
from ragplan.eval.registry import get_benchmark
from ragplan.eval.report import summarise, write_summary
from ragplan.eval.runfolder import RunFolder, RunSettings, previous_wall_time
from ragplan.registry import graph_registry
from ragplan.state.context import recursion_limit_for

__all__ = ["RunSettings", "RunFolder", "evaluate", "run_evaluation", "is_rate_limited"]


def is_rate_limited(error: str | None) -> bool:
    """Whether a recorded LLM error is a rate limit (worth waiting for) rather than a real failure."""
    e = (error or "").lower()
    return "429" in e or "ratelimit" in e or "rate limit" in e or "rate_limit" in e


def _record(item: Item, out: dict[str, Any], graded: dict[str, Any], settings: RunSettings, latency: float, attempts: int) -> dict[str, Any]:
    usage = out.get("usage") or {}
    usage = usage if isinstance(usage, dict) else usage.model_dump()
    steps = [s if isinstance(s, dict) else s.model_dump() for s in out.get("steps") or []]
    dump = lambda xs: [x if isinstance(x, dict) else x.model_dump() for x in xs or []]  # noqa: E731
    return {
        "id": item.id, "method": settings.method, "model": settings.model,
        **{k: v for k, v in item.meta.items() if not k.startswith("_")},
        "question": item.question, "answer": out.get("answer", ""), "gold": item.gold, **graded,
        "retrievals": (int(out["retrieval_count"]) if isinstance(out.get("retrieval_count"), int)
                       else sum(1 for s in steps if s.get("action") == "graph_db")),
        "plan": out.get("plan") or [], "plan_history": dump(out.get("plan_history")), "steps": steps,
        "plan_text": out.get("plan_text", ""), "evidence": out.get("evidence") or [],
        "planner_latency_s": out.get("planner_latency_s"),
        "replans": dump(out.get("replans")), "decision_check": out.get("decision_check") or {},
        "assessment": out.get("assessment", ""), "queries": dump(out.get("queries")),
        "llm_calls": usage.get("llm_calls", 0), "input_tokens": usage.get("input_tokens", 0),
        "output_tokens": usage.get("output_tokens", 0), "llm_seconds": usage.get("llm_seconds", 0.0),
        "latency_s": round(latency, 3), "stop_reason": out.get("stop_reason", ""), "error": out.get("error", ""),
        "attempts": attempts,
    }


async def evaluate(settings: RunSettings, run_dir: str | Path, *, chat_model: Any = None,
                   on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run (or resume) ``settings`` into ``run_dir``; returns the summary. ``chat_model`` is for Python callers."""
    folder = RunFolder(run_dir)
    bench: Benchmark = get_benchmark(settings.benchmark, settings.data, limit=settings.limit, year=settings.year,
                                     **settings.benchmark_options)
    items = bench.items()
    if not settings.created:
        settings.created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    folder.save_settings(settings)
    done = folder.load_records(repair=True)
    # items that share a graph run next to each other, so each script is loaded once per run
    pending = sorted((it for it in items if it.id not in done), key=lambda it: str(it.context.get("graph_path", "")))
    started = time.perf_counter()
    previous_wall = previous_wall_time(folder.path)
    builder = graph_registry()[settings.method][0]
    sg = builder()
    ctx_cls = sg.context_schema
    graph = sg.compile(name=settings.method)
    ctx_fields = {f.name for f in fields(ctx_cls)}
    base = {k: v for k, v in settings.context.items() if k in ctx_fields}
    if settings.model:
        base["model"] = settings.model
    if settings.base_url:
        base["base_url"] = settings.base_url
    if chat_model is not None:
        base["chat_model"] = chat_model
    if hasattr(bench, "prepare"):  # e.g. build a local index from the dataset's own contexts
        base.update({k: v for k, v in bench.prepare(folder.path, settings.context).items() if k in ctx_fields})
    sem = asyncio.Semaphore(max(1, settings.concurrency))
    finished = len(items) - len(pending)
    if on_progress:
        on_progress(finished, len(items))

    async def one(item: Item) -> None:
        nonlocal finished
        async with sem:
            ctx = ctx_cls(**{**base, **{k: v for k, v in item.context.items() if k in ctx_fields}})
            limit = recursion_limit_for(ctx)
            out: dict[str, Any] = {}
            attempts = 0
            t0 = time.perf_counter()
            while True:
                attempts += 1
                t0 = time.perf_counter()
                try:
                    out = await asyncio.wait_for(
                        graph.ainvoke({"question": item.question, **item.inputs}, context=ctx,
                                      config={"recursion_limit": limit}),
                        timeout=settings.item_timeout_s)
                except asyncio.TimeoutError:
                    out = {"answer": "", "error": f"the question ran past item_timeout_s={settings.item_timeout_s:g}",
                           "stop_reason": "item_timeout"}
                except Exception as exc:  # a crash of one question is that question's recorded failure
                    out = {"answer": "", "error": f"{type(exc).__name__}: {exc}", "stop_reason": "crash"}
                if is_rate_limited(out.get("error")) and attempts <= settings.rate_limit_retries:
                    delay = settings.backoff_s * 2 ** (attempts - 1) * (1 + random.random() / 2)
                    await asyncio.sleep(delay)
                    continue
                break
            latency = time.perf_counter() - t0
            try:
                graded = bench.grade(item, out)
            except Exception as exc:  # counted as wrong (0 on every metric), with the reason
                graded = {"correct": False, "grade_error": f"{type(exc).__name__}: {exc}",
                          **{m: 0.0 for m in getattr(bench, "metrics", ())}}
            folder.append(_record(item, out, graded, settings, latency, attempts))
            finished += 1
            if on_progress:
                on_progress(finished, len(items))

    await asyncio.gather(*(one(it) for it in pending))
    records = folder.load_records()
    ordered = [records[it.id] for it in items if it.id in records]
    summary = summarise(ordered, list(bench.group_by), settings, list(getattr(bench, "metrics", ())))
    summary["cost"]["wall_time_s"] = round(previous_wall + time.perf_counter() - started, 3)
    if hasattr(bench, "report"):  # a benchmark's own tables (e.g. REAPER's per-tool precision/recall/F1)
        summary["benchmark_report"] = bench.report(ordered)
    write_summary(folder.path, summary)
    return summary


def run_evaluation(settings: RunSettings, run_dir: str | Path, *, chat_model: Any = None, progress: bool = True) -> dict[str, Any]:
    """Synchronous wrapper with a progress bar (tqdm) for the CLI."""
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=0, unit="q", desc=f"{settings.method} on {settings.benchmark}", dynamic_ncols=True)

    def on_progress(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.n = done
            bar.refresh()

    try:
        return asyncio.run(evaluate(settings, run_dir, chat_model=chat_model, on_progress=on_progress))
    finally:
        if bar is not None:
            bar.close()
