"""``ragplan eval sweep``: one run folder per value of a context setting, then the sweep's table and figure.

    ragplan eval sweep --method think_then_act --benchmark hotpotqa --data FILE --sweep beta_threshold=0,0.25,0.5,0.75,1
                       [--limit N] [--model …] [--base-url …] [--concurrency C] [--set K=V]
                       [--benchmark-option K=V] [--context-only] [--item-timeout SEC] [--out DIR]
                       [--llm-cache DIR [--replay]]

The runs go into ``--out`` (default ``runs/sweep-<method>-<benchmark>-<setting>``, the same for the same
command, so running it again finishes what is unfinished); see :mod:`ragplan.eval.sweep` for the files.
Exit codes: 0 done; 2 bad input (a missing flag, an unknown setting or value, a folder of another sweep,
no LLM endpoint).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["run_eval_sweep"]


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def run_eval_sweep(args: argparse.Namespace) -> int:
    """Run ``ragplan eval sweep`` from the parsed ``eval`` arguments; returns the exit code."""
    from ragplan.cli.ask import cache_problem, parse_assignments
    from ragplan.eval.runfolder import RunSettings
    from ragplan.eval.report import every_question_failed
    from ragplan.eval.runner import run_evaluation
    from ragplan.eval.sweep import SweepError, parse_sweep, run_sweep, sweep_markdown, write_sweep
    from ragplan.llm import endpoint_problem
    from ragplan.state.context import LLMContext

    if len(args.report) > 1:
        return _fail(f"`eval sweep` takes no positional arguments (got {' '.join(args.report[1:])})")
    missing = [f"--{n}" for n in ("method", "benchmark", "data", "sweep") if not getattr(args, n, None)]
    if missing:
        return _fail(f"missing {', '.join(missing)}: use `ragplan eval sweep --method M --benchmark B --data FILE "
                     "--sweep SETTING=V1,V2,…`")
    try:
        key, values = parse_sweep(args.sweep)
        extra = parse_assignments(args.set)
        bench_opts = parse_assignments(args.benchmark_option)
    except ValueError as exc:
        return _fail(str(exc))
    if key in extra:
        return _fail(f"--set {key} and --sweep {key} both set {key}; leave out the --set")
    from ragplan.registry import family_of

    try:
        extra = family_of(args.method).check_settings(args.method, extra)
    except KeyError:
        return _fail(f"unknown method {args.method!r}; see `ragplan graphs`")
    except ValueError as exc:
        return _fail(f"--set {exc}")
    default = LLMContext()
    base = RunSettings(method=args.method, benchmark=args.benchmark, data=str(Path(args.data).resolve()),
                       model=args.model or default.model, base_url=args.base_url or default.base_url,
                       limit=args.limit, year=args.year, concurrency=args.concurrency, context=extra,
                       benchmark_options={**bench_opts, **({"context_only": True} if args.context_only else {})})
    if args.item_timeout:
        base.item_timeout_s = args.item_timeout
    if args.llm_cache:
        base.llm_cache_dir, base.llm_replay = str(Path(args.llm_cache).resolve()), bool(args.replay)
    problem = (cache_problem(base.llm_cache_dir, bool(args.replay))
               or endpoint_problem(base.model, base.base_url, base.llm_replay))
    if problem:
        return _fail(problem)
    out = Path(args.out or f"runs/sweep-{base.method}-{base.benchmark}-{key}")

    def started(value: Any, run_dir: Path, done: int) -> None:
        how = f"resuming ({done} question(s) finished)" if done else "starting"
        print(f"{key}={value}: {how} in {run_dir}", file=sys.stderr, flush=True)

    all_failed: list[str] = []

    def evaluate_run(settings: RunSettings, run_dir: Path) -> dict[str, Any]:
        summary = run_evaluation(settings, run_dir, progress=not args.no_progress)
        failure = every_question_failed(summary, run_dir)
        if failure:
            all_failed.append(f"{run_dir}: {failure}")
        return summary

    try:
        result = run_sweep(base, key, values, out, evaluate_run=evaluate_run, on_start=started)
    except SweepError as exc:
        return _fail(str(exc))
    except KeyError as exc:  # unknown benchmark
        return _fail(str(exc.args[0]))
    except Exception as exc:  # data that cannot be read: the runs so far are kept, the rest is not started
        return _fail(f"{type(exc).__name__}: {exc}")
    paths = write_sweep(out, result)
    print(sweep_markdown(result))
    print(f"sweep folder: {out}")
    print(f"written: {paths['md']}, {paths['json']}, {paths['png']}")
    for line in all_failed:
        print(f"error: {line}", file=sys.stderr)
    return 1 if all_failed else 0
