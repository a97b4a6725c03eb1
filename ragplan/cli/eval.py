"""``ragplan eval``: run a method over a benchmark into a run folder; ``ragplan eval report`` compares runs;
``ragplan eval retrieval`` scores retrieval against a dataset's gold support without an LLM."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from ragplan.cli.ask import add_cache_options

__all__ = ["add_eval_parser", "run_eval"]


def add_eval_parser(sub: Any) -> None:
    """Register ``ragplan eval …`` on the top-level subparsers."""
    ev = sub.add_parser(
        "eval", help="run a method over a benchmark (resumable run folder); `eval report RUN…` compares runs; "
                     "`eval retrieval` scores retrieval against gold support (no LLM)",
        description="Run a method graph over a benchmark with bounded concurrency, grade every question, and write a "
                    "run folder (settings.json, results.jsonl, summary.md/json, plot.png). `ragplan eval report RUN_DIR…` "
                    "prints one table comparing several runs. `ragplan eval retrieval --benchmark B --data FILE "
                    "--index DIR|--context-only [--queries RUN_DIR] [-k 1,2,5,10]` scores retrieval against the data's "
                    "gold supporting titles and sentences (recall@k, all-supporting@k, MRR) without an LLM.")
    ev.add_argument("report", nargs="*", metavar="report RUN_DIR | retrieval | sweep",
                    help="`report` followed by run folders to compare, `retrieval`, or `sweep` (with --sweep)")
    ev.add_argument("--sweep", metavar="SETTING=V1,V2,…", default=None,
                    help="eval sweep: the context setting to sweep and its values, e.g. beta_threshold=0,0.25,0.5,0.75,1 "
                         "(one run folder per value under --out, default runs/sweep-<method>-<benchmark>-<setting>; "
                         "running the same command again finishes unfinished runs)")
    ev.add_argument("--plot", metavar="OUT.png", default=None,
                    help="eval report: also draw accuracy on SR and MR questions per method (PlanRAG's Figure 5)")
    ev.add_argument("--method", help="graph name (see `ragplan graphs`)")
    ev.add_argument("--benchmark", help="dqa-locating | dqa-building | hotpotqa | 2wikimultihopqa | musique | strategyqa | "
                                        "fever | flashrag | reaper-retail")
    ev.add_argument("--data", metavar="PATH", help="the benchmark's data (for DQA: a clone of the repository)")
    ev.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N questions")
    ev.add_argument("--year", type=int, default=None, help="only questions of this year (DQA)")
    ev.add_argument("--model", default=None, help="chat model provider:name [env RAGPLAN_MODEL]")
    ev.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint [env RAGPLAN_BASE_URL]")
    ev.add_argument("--concurrency", type=int, default=None, metavar="C",
                    help="questions in flight at once (default 4; with --resume the run's own unless given)")
    ev.add_argument("--out", metavar="RUN_DIR", default=None,
                    help="run folder (default runs/<method>-<benchmark>-<time>); for `eval retrieval` the JSON file "
                         "(default runs/retrieval-<benchmark>-<time>.json)")
    ev.add_argument("--resume", metavar="RUN_DIR", default=None, help="finish an interrupted run folder")
    ev.add_argument("--rerun", metavar="RUN_DIR", default=None,
                    help="execute a finished run again into --out with its settings (with --llm-cache DIR --replay: "
                         "offline from the cache it recorded) and check the records are the same")
    add_cache_options(ev)
    ev.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a context setting for every question, e.g. --set max_steps=8 (repeatable)")
    ev.add_argument("--benchmark-option", action="append", default=[], metavar="KEY=VALUE",
                    help="an option of the benchmark itself, e.g. fmt=kilt or embedding_model=DIR (repeatable)")
    ev.add_argument("--context-only", action="store_true",
                    help="HotpotQA/2Wiki/MuSiQue/StrategyQA data: build a local index from the questions' own context "
                         "paragraphs (keeping the dataset's sentences) and retrieve from it (fully offline)")
    ev.add_argument("--item-timeout", type=float, default=None, metavar="SEC", help="wall-time budget of one question")
    ev.add_argument("--no-checkpoints", action="store_true",
                    help="keep no per-question checkpoints (a question in flight at a kill restarts from scratch on "
                         "--resume instead of from its last node; saves a SQLite write per node)")
    ev.add_argument("--index", metavar="DIR", default=None, help="eval retrieval: the index to search (ragplan index build)")
    ev.add_argument("--queries", metavar="RUN_DIR", default=None,
                    help="eval retrieval: score the queries a method executed (a run folder or its results.jsonl) "
                         "instead of the questions")
    ev.add_argument("-k", "--ks", default="1,2,5,10", metavar="K,K,…", help="eval retrieval: the cut-offs (default 1,2,5,10)")
    ev.add_argument("--passages", type=int, default=None, metavar="N",
                    help="eval retrieval: passages searched per query and ranked into sentences (default: the largest k)")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    ev.add_argument("--html", metavar="OUT.html", default=None,
                    help="eval report: also write one self-contained HTML page (table, plots, every question's trace, "
                         "filters by outcome and method)")


def run_eval(args: argparse.Namespace) -> int:
    """Run ``ragplan eval`` or ``ragplan eval report``."""
    from ragplan.eval.report import compare_runs
    from ragplan.eval.runner import RunSettings, run_evaluation
    from ragplan.llm import endpoint_problem
    from ragplan.cli.ask import cache_problem, parse_assignments
    from ragplan.eval.rerun import missing_entries, record_differences, rerun_settings
    from ragplan.registry import family_of

    if args.report and args.report[0] == "retrieval":
        return run_retrieval(args)
    if args.report and args.report[0] == "sweep":
        from ragplan.cli.eval_sweep import run_eval_sweep

        if args.concurrency is None:
            args.concurrency = DEFAULT_CONCURRENCY
        return run_eval_sweep(args)
    if args.sweep or (args.plot and not (args.report and args.report[0] == "report")):
        print("error: " + ("--sweep goes with `ragplan eval sweep --sweep SETTING=V1,V2,…`" if args.sweep else
                           "--plot goes with `ragplan eval report RUN_DIR… --plot OUT.png`"), file=sys.stderr)
        return 2
    if args.report:
        if args.report[0] != "report" or len(args.report) < 2:
            print("error: use `ragplan eval report RUN_DIR [RUN_DIR …]`", file=sys.stderr)
            return 2
        try:
            print(compare_runs(args.report[1:]))
            if args.plot:
                from ragplan.eval.report import plot_comparison

                print(f"written: {plot_comparison(args.report[1:], args.plot)}")
            if args.html:
                from ragplan.eval.html_report import write_html_report

                print(f"written: {write_html_report(args.report[1:], args.html)}")
        except (FileNotFoundError, json.JSONDecodeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.html:
        print("error: --html goes with `ragplan eval report RUN_DIR… --html OUT.html`", file=sys.stderr)
        return 2
    if args.rerun:
        try:
            settings = rerun_settings(args.rerun, data=args.data, concurrency=args.concurrency)
        except (OSError, json.JSONDecodeError, TypeError) as exc:
            print(f"error: {args.rerun} is not a run folder: {exc}", file=sys.stderr)
            return 2
        run_dir = Path(args.out or f"runs/{settings.method}-{settings.benchmark}-{datetime.now():%Y%m%d-%H%M%S}")
        if run_dir.resolve() == Path(args.rerun).resolve() or (run_dir / "results.jsonl").exists():
            print(f"error: --rerun writes a new run folder: {run_dir} already holds a run (give --out NEW_DIR)",
                  file=sys.stderr)
            return 2
    elif args.resume:
        run_dir = Path(args.resume)
        try:
            settings = RunSettings.load(run_dir / "settings.json")
        except (OSError, json.JSONDecodeError, TypeError) as exc:
            print(f"error: {run_dir} is not a run folder: {exc}", file=sys.stderr)
            return 2
        problem = _resume_overrides(settings, args)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    else:
        missing = [f"--{n}" for n in ("method", "benchmark", "data") if not getattr(args, n)]
        if missing:
            print(f"error: missing {', '.join(missing)} (or give --resume RUN_DIR)", file=sys.stderr)
            return 2
        try:
            extra = parse_assignments(args.set)
            bench_opts = parse_assignments(args.benchmark_option)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        from ragplan.state.context import LLMContext

        default = LLMContext()
        settings = RunSettings(method=args.method, benchmark=args.benchmark, data=str(Path(args.data).resolve()),
                               model=args.model or default.model, base_url=args.base_url or default.base_url,
                               limit=args.limit, year=args.year, context=extra,
                               concurrency=args.concurrency if args.concurrency is not None else DEFAULT_CONCURRENCY,
                               benchmark_options={**bench_opts, **({"context_only": True} if args.context_only else {})})
        if args.item_timeout:
            settings.item_timeout_s = args.item_timeout
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = Path(args.out or f"runs/{settings.method}-{settings.benchmark}-{stamp}")
    try:
        family = family_of(settings.method)
    except KeyError:
        print(f"error: unknown method {settings.method!r}; see `ragplan graphs`", file=sys.stderr)
        return 2
    try:  # each value converted to its setting's type (a wrong one is refused here, not in every question)
        settings.context = family.check_settings(settings.method, settings.context)
    except ValueError as exc:
        print(f"error: --set {exc}", file=sys.stderr)
        return 2
    if args.no_checkpoints:
        settings.checkpoints = False
    if args.llm_cache is not None:
        settings.llm_cache_dir = str(Path(args.llm_cache).resolve())
    if args.replay:
        settings.llm_replay = True
    problem = (cache_problem(settings.llm_cache_dir, settings.llm_replay)
               or endpoint_problem(settings.model, settings.base_url, settings.llm_replay))
    if not problem and args.rerun and settings.llm_replay:
        lacking, used = missing_entries(args.rerun, settings.llm_cache_dir)
        if not (Path(args.rerun) / "llm_cache.json").exists():
            problem = (f"{args.rerun} was recorded without --llm-cache (it has no llm_cache.json): there are no recorded "
                       "responses to replay; re-run it against an endpoint without --replay")
        elif lacking:
            problem = (f"the LLM cache {settings.llm_cache_dir} lacks {lacking} of the {used} responses {args.rerun} "
                       "used (its llm_cache.json): the replay would fail on them")
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    from ragplan.eval.runner import RunRefused

    try:
        summary = run_evaluation(settings, run_dir, progress=not args.no_progress)
    except KeyError as exc:  # unknown benchmark
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    except RunRefused as exc:  # the family's run-wide check (e.g. furepa without a trained assessor): nothing ran
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # e.g. a DQA clone that cannot be read: nothing ran
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    from ragplan.eval.report import every_question_failed, summary_markdown

    print(summary_markdown(summary))
    print(f"run folder: {run_dir}")
    unfinished = (summary.get("runner") or {}).get("unfinished") or []
    for line in unfinished:  # a worker process died: its questions in flight are still to do
        print(f"warning: {line}", file=sys.stderr)
    if "llm_cache" in summary:
        c = summary["llm_cache"]
        print(f"LLM cache: {c['dir']}{' (replay)' if c['replay'] else ''}   entries used: {c['entries']}   "
              f"fingerprint: {c['fingerprint'][:16]}")
    if args.rerun:
        compared, diffs = record_differences(args.rerun, run_dir)
        if not diffs:
            print(f"replay check: {compared} of {compared} records identical to {args.rerun} (timing fields aside)")
        else:
            shown = "; ".join(f"{q} ({', '.join(f[:6])})" for q, f in list(diffs.items())[:5])
            print(f"replay check: {len(diffs)} of {compared} records differ from {args.rerun}: {shown}")
            return 1 if settings.llm_replay else 0
    if unfinished:
        print(f"error: the run is not finished; `ragplan eval --resume {run_dir}` runs the questions left", file=sys.stderr)
        return 1
    failure = every_question_failed(summary, run_dir)
    if failure:
        print(f"error: {failure}", file=sys.stderr)
        return 1
    return 0


#: Questions in flight when ``--concurrency`` is not given (a new run; a resumed run keeps its own).
DEFAULT_CONCURRENCY = 4


def _resume_overrides(settings: Any, args: argparse.Namespace) -> str | None:
    """Apply the flags given with ``--resume`` to the saved settings; a message when one would change what the run measures.

    Only flags given on the command line count (their defaults are None), so a resumed run keeps its
    concurrency, endpoint, time budget and limit unless they are given again. The endpoint,
    concurrency, time budget, limit and the data's location may change; the method, benchmark, model, year, context
    settings and benchmark options may not (the finished answers would mix two runs).
    """
    from ragplan.cli.ask import parse_assignments

    if args.concurrency is not None:
        settings.concurrency = args.concurrency
    if args.base_url is not None:
        settings.base_url = args.base_url
    if args.item_timeout is not None:
        settings.item_timeout_s = args.item_timeout
    if args.limit is not None:
        settings.limit = args.limit
    if args.data is not None:
        settings.data = str(Path(args.data).resolve())
    try:
        context, options = parse_assignments(args.set), parse_assignments(args.benchmark_option)
    except ValueError as exc:
        return str(exc)
    if args.context_only:
        options["context_only"] = True
    fixed = [("--method", args.method, settings.method), ("--benchmark", args.benchmark, settings.benchmark),
             ("--model", args.model, settings.model), ("--year", args.year, settings.year)]
    fixed += [(f"--set {k}", v, settings.context.get(k)) for k, v in context.items()]
    fixed += [(f"--benchmark-option {k}", v, settings.benchmark_options.get(k)) for k, v in options.items()]
    changed = [f"{flag} {given!r} (the run has {saved!r})" for flag, given, saved in fixed
               if given is not None and given != saved]
    if changed:
        return (f"--resume {args.resume}: " + "; ".join(changed) + " would change what the run measures; "
                "resume without it, or start a new run with --out")
    return None


def run_retrieval(args: argparse.Namespace) -> int:
    """Run ``ragplan eval retrieval``: print the table and write the JSON (``--out``, default runs/retrieval-…json)."""
    from ragplan.cli.ask import parse_assignments
    from ragplan.eval.retrieval_run import evaluate_retrieval, retrieval_table, write_result

    if len(args.report) > 1:
        print(f"error: `eval retrieval` takes no positional arguments (got {' '.join(args.report[1:])})", file=sys.stderr)
        return 2
    missing = [f"--{n}" for n in ("benchmark", "data") if not getattr(args, n)]
    if missing or bool(args.index) == bool(args.context_only):
        print("error: use `ragplan eval retrieval --benchmark B --data FILE --index DIR|--context-only "
              "[--queries RUN_DIR] [-k 1,2,5,10]`" + (f" (missing {', '.join(missing)})" if missing else ""),
              file=sys.stderr)
        return 2
    try:
        ks = [int(k) for k in args.ks.split(",") if k.strip()]
        if not ks or min(ks) < 1:
            raise ValueError
    except ValueError:
        print(f"error: -k takes positive integers separated by commas, got {args.ks!r}", file=sys.stderr)
        return 2
    try:
        opts = parse_assignments(args.benchmark_option)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out or f"runs/retrieval-{args.benchmark}-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json")
    try:
        result = evaluate_retrieval(args.benchmark, str(Path(args.data).resolve()), index_dir=args.index,
                                    context_only=args.context_only, queries=args.queries, ks=ks, limit=args.limit,
                                    passages=args.passages, embedding_model=str(opts.get("embedding_model") or ""),
                                    fmt=opts.get("fmt"), work_dir=out.parent)
    except KeyError as exc:  # unknown benchmark
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    except Exception as exc:  # a file that cannot be read, an index that cannot be opened …
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(retrieval_table(result))
    print(f"written: {write_result(result, out)}")
    return 0


#: The sub-command interface of ragplan.cli (COMMAND_MODULES).
add_parser = add_eval_parser
run = run_eval
