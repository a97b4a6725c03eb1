"""Run a method graph over a benchmark: bounded async concurrency, rate-limit backoff, resumable.

A run folder holds:

* ``settings.json`` — what was run (method, benchmark, data, model, context settings, filters);
* ``results.jsonl`` — one JSON line per finished question, appended and fsynced one at a time, so a
  killed run loses at most the questions in flight; a torn last line is cut off on resume;
* ``summary.json`` / ``summary.md`` — accuracy overall, per group (scenario, year …), split into
  single- vs multi-retrieval questions (PlanRAG's Figure 5), LLM calls, tokens and latency;
* ``plot.png`` — accuracy per group and per retrieval class.

``--resume RUN_DIR`` reads the folder's settings, skips every question already in ``results.jsonl``
and runs the rest; a question that was in flight at a kill continues from its last finished node
(``checkpoints.sqlite``, :mod:`ragplan.eval.item_checkpoints`). Plan review is always off in a batch. Errors of one question (endpoint down, a bad script, a timeout) are recorded in its
line; they never stop the run.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
import random
import re
import time
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from ragplan.eval.benchmark import Benchmark, Item
from ragplan.eval.item_checkpoints import CHECKPOINT_FILE, ItemCheckpoints
from ragplan.eval.registry import get_benchmark
from ragplan.eval.report import summarise, write_summary
from ragplan.eval.runfolder import RunFolder, RunSettings
from ragplan.eval.item_contexts import ItemContexts
from ragplan.family import MethodFamily
from ragplan.llm_cache import track_cache_usage
from ragplan.registry import family_of
from ragplan.state.result import GraphResult
from ragplan.state.review import REVIEW_OFF
from ragplan.state.usage import Usage

__all__ = ["RunSettings", "RunFolder", "RunRefused", "evaluate", "run_evaluation", "is_rate_limited"]


class RunRefused(ValueError):
    """The method's family refused the run before any question (its :meth:`~ragplan.family.MethodFamily.check_run`)."""


def is_rate_limited(error: str | None) -> bool:
    """Whether a recorded LLM error is a rate limit (worth waiting for) rather than a real failure."""
    e = (error or "").lower()
    return re.search(r"\b429\b", e) is not None or "ratelimit" in e or "rate limit" in e or "rate_limit" in e


def _record(item: Item, res: GraphResult, graded: dict[str, Any], settings: RunSettings, latency: float,
            attempts: int) -> dict[str, Any]:
    """One results.jsonl line: the item, the grade, what every family has, then the family's own fields."""
    u = res.usage
    return {
        "id": item.id, "method": settings.method, "model": settings.model,
        **{k: v for k, v in item.meta.items() if not k.startswith("_")},
        "question": item.question, "answer": res.answer, "gold": item.gold, **graded,
        "retrievals": res.retrievals(), "retrieval_errors": res.retrieval_errors(),
        "executed_queries": res.executed_queries(),
        "llm_calls": u.llm_calls, "input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
        "llm_seconds": u.llm_seconds, "latency_s": round(latency, 3), "stop_reason": res.stop_reason,
        "error": res.error, "attempts": attempts,
        **{k: v for k, v in res.record().items() if k not in graded},
    }


def _usage(out: dict[str, Any]) -> Usage:
    """The usage an attempt's output reports (an object, or a dict from a checkpoint)."""
    u = out.get("usage")
    return u if isinstance(u, Usage) else Usage.model_validate(u) if isinstance(u, dict) else Usage()


def _typed(family: MethodFamily, out: dict[str, Any]) -> GraphResult:
    """The family's typed result of a run's output; an output that does not fit it is a recorded failure."""
    try:
        return family.result.from_state(out)
    except Exception as exc:  # a graph returned something its own result cannot read: a bug, recorded as a failure
        return family.result(answer="", stop_reason="crash",
                             error=f"the output does not fit {family.result.__name__}: {type(exc).__name__}: {exc}")


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
    # items that share their settings (a DQA script …) run next to each other, so each store is loaded once per run
    pending = sorted((it for it in items if it.id not in done), key=lambda it: json.dumps(it.context, sort_keys=True, default=str))
    invocation = folder.start_invocation()
    family = family_of(settings.method)
    ctx_cls = family.context
    checkpoints = ItemCheckpoints(folder.path / CHECKPOINT_FILE, enabled=settings.checkpoints)
    graph = family.graph(settings.method).build().compile(name=settings.method, checkpointer=await checkpoints.open())
    ctx_fields = family.context_fields()
    base = {k: v for k, v in {**settings.context, **REVIEW_OFF}.items() if k in ctx_fields}  # a batch never pauses
    if settings.model:
        base["model"] = settings.model
    if settings.base_url:
        base["base_url"] = settings.base_url
    if chat_model is not None:
        base["chat_model"] = chat_model
    if settings.llm_cache_dir:
        base.update(llm_cache_dir=settings.llm_cache_dir, llm_replay=settings.llm_replay)
    if hasattr(bench, "prepare"):  # e.g. build a local index from the dataset's own contexts
        base.update({k: v for k, v in bench.prepare(folder.path, settings.context).items() if k in ctx_fields})
    if pending:  # the family's run-wide check (a trained model, the index …), before any LLM call
        first = {k: v for k, v in pending[0].context.items() if k in ctx_fields}
        problem = family.check_run(settings.method, ctx_cls(**{**base, **first}))
        if problem:
            raise RunRefused(problem)
    sem = asyncio.Semaphore(max(1, settings.concurrency))
    contexts = ItemContexts(family, settings.method, base, pending)  # each distinct script / index opened once per run
    # synchronous nodes run in the loop's default thread pool: size it to the concurrency (asyncio's own
    # default, min(32, cores + 4), would cap a run at 6 questions in flight on 2 cores)
    pool = ThreadPoolExecutor(max_workers=max(8, 2 * settings.concurrency + 4), thread_name_prefix="ragplan-node")
    asyncio.get_running_loop().set_default_executor(pool)
    finished = len(items) - len(pending)
    if on_progress:
        on_progress(finished, len(items))

    async def one(item: Item) -> None:
        nonlocal finished
        async with sem:
            ctx = await contexts.get(item)
            limit = family.recursion_limit(ctx)
            graph_input = family.graph_input(item.question, item.inputs)
            out: dict[str, Any] = {}
            attempts = 0
            spent = Usage()  # every attempt's LLM work counts (a rate-limited attempt cost calls and tokens too)
            t0 = time.perf_counter()
            while True:
                attempts += 1
                try:
                    out = await asyncio.wait_for(checkpoints.run(graph, item.id, attempts, graph_input, ctx, limit),
                                                 timeout=settings.item_timeout_s)
                except asyncio.TimeoutError:
                    out = {"answer": "", "error": f"the question ran past item_timeout_s={settings.item_timeout_s:g}",
                           "stop_reason": "item_timeout"}
                except Exception as exc:  # a crash of one question is that question's recorded failure
                    out = {"answer": "", "error": f"{type(exc).__name__}: {exc}", "stop_reason": "crash"}
                spent = spent + _usage(out)
                if is_rate_limited(out.get("error")) and attempts <= settings.rate_limit_retries:
                    delay = settings.backoff_s * 2 ** (attempts - 1) * (1 + random.random() / 2)
                    await asyncio.sleep(delay)
                    continue
                break
            latency = time.perf_counter() - t0  # every attempt and its backoff
            contexts.release(item)
            res = _typed(family, {**out, "usage": spent})
            if res.error and not out.get("error"):
                out = {**out, "answer": "", "error": res.error, "stop_reason": res.stop_reason}
            try:
                graded = bench.grade(item, {**out, "executed_queries": res.executed_queries()})  # (retrieval-only figures)
            except Exception as exc:  # counted as wrong (0 on every metric), with the reason
                graded = {"correct": False, "grade_error": f"{type(exc).__name__}: {exc}",
                          **{m: 0.0 for m in getattr(bench, "metrics", ())}}
            await asyncio.to_thread(folder.append, {**_record(item, res, graded, settings, latency, attempts),
                                                    "invocation": invocation, "finished_at": round(time.time(), 3)})
            await checkpoints.forget(item.id)
            finished += 1
            if on_progress:
                on_progress(finished, len(items))

    try:
        with track_cache_usage() as cache_usage:  # the LLM cache entries this run reads or writes
            await asyncio.gather(*(one(it) for it in pending))  # the loop shuts its default executor down when it closes
    finally:
        await checkpoints.close()
    records = folder.load_records()
    ordered = [records[it.id] for it in items if it.id in records]
    summary = summarise(ordered, list(bench.group_by), settings, list(getattr(bench, "metrics", ())),
                        run_metrics=family.result.run_metrics)  # and the family's figures (FuRePA's iterations …)
    summary["cost"]["wall_time_s"] = folder.wall_time(records, now=time.time())
    summary["plot_metrics"] = list(getattr(bench, "plot_metrics", ()) or ())  # what plot.png draws (EM/F1 …)
    if settings.llm_cache_dir:
        summary["llm_cache"] = folder.record_llm_cache(settings.llm_cache_dir, settings.llm_replay, cache_usage.digests())
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
