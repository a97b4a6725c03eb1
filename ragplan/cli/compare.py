"""``ragplan compare``: several methods on the same benchmark items with the same model and settings, one run folder
per method under ``--out``, then one table and ``report.html``; the same command again resumes (docs/evaluation.md)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragplan.cli.errors import fail
from ragplan.cli.eval import add_run_flags, new_settings, reason, stamped

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, settings: Any = None) -> None:
    """Register ``ragplan compare`` on the top-level subparsers; ``settings(parser)`` adds the setting flags."""
    p = sub.add_parser(
        "compare", help="run several methods on the same benchmark items with the same model; one HTML report",
        description="Run each method of --methods over the same benchmark items with the same model and settings, one "
                    "run folder per method under --out (default runs/compare-<benchmark>-<time>), then write "
                    "--out/report.html and print the comparison table. The same command with the same --out resumes "
                    "unfinished runs.")
    p.add_argument("--methods", required=True, metavar="A,B,C",
                   help="graph names, comma-separated (see `ragplan graphs`)")
    add_run_flags(p, settings, required=True)


def run(args: argparse.Namespace) -> int:
    """Run ``ragplan compare`` (exit 0: every method ran; 1: a method's run failed as a whole, or the benchmark's own
    comparison could not be made; 2: bad input)."""
    from ragplan.cli.settings import check_llm
    from ragplan.eval.html_report import write_html_report
    from ragplan.eval.registry import get_benchmark
    from ragplan.eval.report import compare_runs, comparison, every_question_failed
    from ragplan.eval.runfolder import RunSettings, saved_settings
    from ragplan.eval.runner import run_evaluation
    from ragplan.registry import family_of

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    twice = sorted({m for m in methods if methods.count(m) > 1})
    if not methods or twice:
        return fail(f"--methods names {', '.join(twice)} twice" if twice else "--methods names no method")
    base = new_settings(args, methods)
    check_llm(base)
    try:  # the benchmark and its data are checked once, before any LLM call
        n_items = len(get_benchmark(args.benchmark, base.data, limit=args.limit, year=args.year,
                                    **base.benchmark_options).items())
    except Exception as exc:  # an unknown benchmark, unreadable data, an option the benchmark does not take …
        return fail(reason(exc))
    out = Path(args.out or stamped("compare", args.benchmark))
    plan: dict[str, RunSettings] = {}
    for m in methods:
        st = plan[m] = replace(base, method=m, context=dict(base.context),
                               benchmark_options=dict(base.benchmark_options))
        try:
            saved = saved_settings(out / m, st)
        except ValueError as exc:
            return fail(str(exc))
        st.created = saved.created if saved is not None else st.created
    print(f"compare folder: {out}  ({len(methods)} methods x {n_items} questions; the same command with --out {out} "
          "resumes)", flush=True)
    failed: list[str] = []
    for i, (m, st) in enumerate(plan.items(), 1):
        print(f"[{i}/{len(plan)}] {m} ({family_of(m).title})", flush=True)
        try:
            failure = every_question_failed(run_evaluation(st, out / m, progress=not args.no_progress), out / m)
        except Exception as exc:  # this method's run failed as a whole (a store that cannot be opened …): go on
            failure = f"{type(exc).__name__}: {exc}"
        if failure:  # its rows stay in the report (as wrong); the command says so
            failed.append(m)
            print(f"error: {m}: {failure}", file=sys.stderr, flush=True)
    runs: list[str | Path] = [out / m for m in plan  # a run with a row to report
                              if (done := out / m / "results.jsonl").is_file() and done.stat().st_size > 0]
    code = 0
    if runs:
        text, no_table = compare_runs(runs, c := comparison(runs))
        print(text)
        code = fail(no_table, 1) if no_table else 0
        title = f"ragplan compare: {', '.join(methods)} on {args.benchmark} ({base.model})"
        print(f"report: {write_html_report(runs, out / 'report.html', title=title, c=c)}")
    if failed:
        print(f"error: {len(failed)} method(s) did not run or failed on every question: {', '.join(failed)}",
              file=sys.stderr)
        return 1
    return code
