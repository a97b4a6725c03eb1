"""``ragplan compare``: several methods on the same benchmark items with the same model, then one report.

    ragplan compare --benchmark B --data FILE --methods a,b,c [--limit N] [--model M --base-url URL]
                    [--concurrency C] [--set KEY=VALUE …] [--benchmark-option KEY=VALUE …]
                    [--context-only] [--out DIR] [--llm-cache DIR [--replay]]

Each method runs through the evaluation runner (:func:`ragplan.eval.runner.run_evaluation`) into its own run
folder ``DIR/<method>``, one method after the other, on the same items (same benchmark, data, limit and
year) with the same model and settings. Then ``DIR/report.html`` (:mod:`ragplan.eval.html_report`) is
written and the comparison table printed. Running the same command again with the same ``--out`` resumes:
questions already in a run folder are not asked again. A run folder made with other settings is refused
(exit 2) rather than mixed. A ``--set`` key that is not a setting of one of the methods is an error naming
that method (exit 2), as for ``ragplan eval``.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from ragplan.cli.ask import add_cache_options

__all__ = ["add_parser", "run"]

#: Settings that must match for a run folder to be resumed (the endpoint, concurrency and time budget may change).
_SAME = ("method", "benchmark", "data", "model", "limit", "year", "context", "benchmark_options")


def add_parser(sub: Any) -> None:
    """Register ``ragplan compare`` on the top-level subparsers."""
    p = sub.add_parser(
        "compare", help="run several methods on the same benchmark items with the same model; one HTML report",
        description="Run each method of --methods over the same benchmark items with the same model and settings, one run "
                    "folder per method under --out, then write --out/report.html and print the comparison table. "
                    "The same command with the same --out resumes unfinished runs.")
    p.add_argument("--benchmark", required=True, help="dqa-locating | dqa-building | hotpotqa | 2wikimultihopqa | musique | "
                                                      "strategyqa | fever | flashrag | reaper-retail")
    p.add_argument("--data", required=True, metavar="PATH", help="the benchmark's data (for DQA: a clone of the repository)")
    p.add_argument("--methods", required=True, metavar="A,B,C", help="graph names, comma-separated (see `ragplan graphs`)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N questions")
    p.add_argument("--year", type=int, default=None, help="only questions of this year (DQA)")
    p.add_argument("--model", default=None, help="chat model provider:name for every method [env RAGPLAN_MODEL]")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint [env RAGPLAN_BASE_URL]")
    p.add_argument("--concurrency", type=int, default=4, metavar="C", help="questions in flight at once (per method)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a context setting for every method and question (repeatable); it must be a setting of every method")
    p.add_argument("--benchmark-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the benchmark itself (repeatable)")
    p.add_argument("--context-only", action="store_true",
                   help="text benchmarks: retrieve from a local index of the questions' own context paragraphs (offline)")
    p.add_argument("--item-timeout", type=float, default=None, metavar="SEC", help="wall-time budget of one question")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="folder of the runs and the report (default runs/compare-<benchmark>-<time>); give the same "
                        "folder again to resume")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_cache_options(p)


def _err(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """Run ``ragplan compare`` (exit 0: every method ran; 1: a method's run failed as a whole; 2: bad input)."""
    from ragplan.cli.ask import cache_problem, parse_assignments
    from ragplan.eval.html_report import write_html_report
    from ragplan.eval.registry import get_benchmark
    from ragplan.eval.report import compare_runs, every_question_failed
    from ragplan.eval.runfolder import RunSettings
    from ragplan.eval.runner import run_evaluation
    from ragplan.llm import endpoint_problem
    from ragplan.registry import family_of
    from ragplan.state.context import LLMContext

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    if not methods:
        return _err("--methods names no method")
    twice = sorted({m for m in methods if methods.count(m) > 1})
    if twice:
        return _err(f"--methods names {', '.join(twice)} twice")
    try:
        extra = parse_assignments(args.set)
        bench_opts = {**parse_assignments(args.benchmark_option), **({"context_only": True} if args.context_only else {})}
        families = {m: family_of(m) for m in methods}
    except (ValueError, KeyError) as exc:
        return _err(str(exc.args[0]) if exc.args else str(exc))
    for m, fam in families.items():
        try:
            fam.check_settings(m, extra)
        except ValueError as exc:
            return _err(f"--set {exc}")
    default = LLMContext()
    model, base_url = args.model or default.model, args.base_url or default.base_url
    cache_dir, replay = str(Path(args.llm_cache).resolve()) if args.llm_cache else "", bool(args.replay)
    problem = cache_problem(cache_dir, replay) or endpoint_problem(model, base_url, replay)
    if problem:
        return _err(problem)
    data = str(Path(args.data).resolve())
    try:  # the benchmark and its data are checked once, before any LLM call
        n_items = len(get_benchmark(args.benchmark, data, limit=args.limit, year=args.year, **bench_opts).items())
    except KeyError as exc:
        return _err(str(exc.args[0]))
    except Exception as exc:  # a file that cannot be read, an option the benchmark does not take …
        return _err(f"{type(exc).__name__}: {exc}")
    out = Path(args.out or f"runs/compare-{args.benchmark}-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
    plan: list[tuple[str, RunSettings]] = []
    for m in methods:
        st = RunSettings(method=m, benchmark=args.benchmark, data=data, model=model, base_url=base_url, limit=args.limit,
                         year=args.year, concurrency=args.concurrency, context=dict(extra),
                         benchmark_options=dict(bench_opts),
                         llm_cache_dir=cache_dir, llm_replay=replay)
        if args.item_timeout:
            st.item_timeout_s = args.item_timeout
        saved_file = out / m / "settings.json"
        if saved_file.exists():
            try:
                saved = RunSettings.load(saved_file)
            except (OSError, ValueError, TypeError) as exc:
                return _err(f"{out / m} is not a run folder: {exc}")
            diff = [k for k in _SAME if getattr(saved, k) != getattr(st, k)]
            if diff:
                what = "; ".join(f"{k}: {getattr(saved, k)!r} there, {getattr(st, k)!r} now" for k in diff)
                return _err(f"{out / m} was run with other settings ({what}); give another --out")
            st.created = saved.created
        plan.append((m, st))
    print(f"compare folder: {out}  ({len(methods)} methods x {n_items} questions; the same command with --out {out} resumes)",
          flush=True)
    failed: dict[str, str] = {}
    for i, (m, st) in enumerate(plan, 1):
        print(f"[{i}/{len(plan)}] {m} ({families[m].title})", flush=True)
        try:
            summary = run_evaluation(st, out / m, progress=not args.no_progress)
            failure = every_question_failed(summary, out / m)
            if failure:  # its rows stay in the report (as wrong); the command says so
                failed[m] = failure
                print(f"error: {m}: {failure}", file=sys.stderr, flush=True)
        except Exception as exc:  # this method's run failed as a whole (its store cannot be opened …): the others go on
            failed[m] = f"{type(exc).__name__}: {exc}"
            print(f"error: {m}: {failed[m]}", file=sys.stderr, flush=True)
    # the report covers the methods that answered something (a method refused before its first question has
    # a settings.json but no results: no row of zeros for it)
    runs: list[str | Path] = [out / m for m, _ in plan if (out / m / "results.jsonl").is_file()
                              and (out / m / "results.jsonl").stat().st_size > 0]
    if runs:
        print(compare_runs(runs))
        report = write_html_report(runs, out / "report.html",
                                   title=f"ragplan compare: {', '.join(methods)} on {args.benchmark} ({model})")
        print(f"report: {report}")
    if failed:
        print(f"error: {len(failed)} method(s) did not run or failed on every question: {', '.join(failed)}",
              file=sys.stderr)
        return 1
    return 0
