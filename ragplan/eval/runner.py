"""Run a method graph over a benchmark into a run folder, resumable (docs/evaluation.md, "A run")."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from ragplan.eval.benchmark import Benchmark
from ragplan.eval.question_runner import data_keys, run_questions
from ragplan.eval.registry import get_benchmark
from ragplan.eval.report import summarise, write_summary
from ragplan.eval.runfolder import RunFolder, RunSettings
from ragplan.llm import chat_model_for
from ragplan.llm_cache import track_cache_usage
from ragplan.registry import family_of
from ragplan.state.review import REVIEW_OFF

__all__ = ["RunSettings", "RunFolder", "RunRefused", "evaluate", "run_evaluation"]


class RunRefused(ValueError):
    """The run cannot start: the method's family refused it (:meth:`~ragplan.family.MethodFamily.check_run`)."""


async def evaluate(settings: RunSettings, run_dir: str | Path, *, chat_model: Any = None,
                   on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run (or resume) ``settings`` into ``run_dir``; returns the summary. ``chat_model`` is for Python callers."""
    if settings.server and settings.llm_cache_dir:  # the server makes the calls: this process would cache none
        raise RunRefused("--llm-cache cannot record or replay a run on a LangGraph server (--server): the server "
                         "makes the LLM calls; run in-process to cache them")
    folder = RunFolder(run_dir)
    bench: Benchmark = get_benchmark(settings.benchmark, settings.data, limit=settings.limit, year=settings.year,
                                     **settings.benchmark_options)
    items = bench.items()
    for pos, it in enumerate(items):  # each record keeps its question's place, so reports list them in this order
        it.meta["position"] = pos
    done = folder.load_records(repair=True, ids={it.id for it in items})
    if settings.server:  # questions the LangGraph server could not run (it was down) run again
        from ragplan.eval.server import server_failed

        again = {k for k, rec in done.items() if server_failed(rec)}
        folder.drop(again)
        done = {k: rec for k, rec in done.items() if k not in again}
    # items that share their settings (a DQA script …) run next to each other, so each store is loaded once per run
    pending = sorted((it for it in items if it.id not in done), key=lambda it: json.dumps(it.context, sort_keys=True, default=str))
    family = family_of(settings.method)
    ctx_fields = family.context_fields()
    base = {k: v for k, v in {**settings.context, **REVIEW_OFF}.items() if k in ctx_fields}  # a batch never pauses
    given = {"model": settings.model, "base_url": settings.base_url, "llm_cache_dir": settings.llm_cache_dir,
             "chat_model": chat_model, "llm_replay": settings.llm_replay if settings.llm_cache_dir else None}
    base.update({k: v for k, v in given.items() if v is not None and v != ""})
    if hasattr(bench, "prepare"):  # e.g. build a local index from the dataset's own contexts
        base.update({k: v for k, v in bench.prepare(folder.path, settings.context).items() if k in ctx_fields})
    if pending:  # the family's run-wide check (a trained model, the index …), before any LLM call
        first_ctx = family.context(**(base | {k: v for k, v in pending[0].context.items() if k in ctx_fields}))
        if problem := family.check_run(settings.method, first_ctx):
            raise RunRefused(problem)
        try:  # build the run's chat model once now, not inside the first questions' nodes while the others wait
            chat_model_for(first_ctx)
        except Exception:  # noqa: BLE001  (a model that cannot be built is each question's recorded failure)
            pass
    if not settings.created:  # saved once the run is not refused: a refused run leaves no settings.json
        settings.created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    folder.save_settings(settings)
    finished = len(items) - len(pending)
    if on_progress:
        on_progress(finished, len(items))

    def one_more() -> None:
        nonlocal finished
        finished += 1
        if on_progress:
            on_progress(finished, len(items))

    with track_cache_usage() as cache_usage:  # the LLM cache entries this run reads or writes
        prepared = await run_questions(family, settings, folder, pending, base, bench, one_more)
    digests = cache_usage.digests()
    records = folder.load_records()
    ordered = [records[it.id] for it in items if it.id in records]
    summary = summarise(ordered, list(bench.group_by), settings, list(getattr(bench, "metrics", ())),
                        run_metrics=family.result.run_metrics)  # and the family's figures (FuRePA's iterations …)
    summary["cost"]["wall_time_s"] = folder.wall_time(records, now=time.time())
    summary["plot_metrics"] = list(getattr(bench, "plot_metrics", ()) or ())  # what plot.png draws (EM/F1 …)
    # how the run ran: its distinct data (scripts …) and how often data was opened (once per distinct data)
    summary["runner"] = {"data": len(set(data_keys(family, pending))), "data_prepared": prepared}
    if settings.llm_cache_dir:
        summary["llm_cache"] = folder.record_llm_cache(settings.llm_cache_dir, settings.llm_replay, digests)
    if hasattr(bench, "report"):  # a benchmark's own tables (e.g. REAPER's per-tool precision/recall/F1)
        summary["benchmark_report"] = bench.report(ordered)
    write_summary(folder.path, summary)
    return summary


def run_evaluation(settings: RunSettings, run_dir: str | Path, *, chat_model: Any = None, progress: bool = True) -> dict[str, Any]:
    """Synchronous wrapper with a progress bar (tqdm) for the CLI."""
    from tqdm import tqdm

    bar = tqdm(total=0, unit="q", desc=f"{settings.method} on {settings.benchmark}", dynamic_ncols=True,
               disable=not progress)

    def on_progress(done: int, total: int) -> None:
        bar.total, bar.n = total, done
        bar.refresh()

    try:
        return asyncio.run(evaluate(settings, run_dir, chat_model=chat_model, on_progress=on_progress))
    finally:
        bar.close()
