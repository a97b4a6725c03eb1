"""``ragplan eval``: run a method over a benchmark into a run folder (resumable); ``eval report | sweep | retrieval``
compare runs, sweep one setting, score retrieval without an LLM (docs/evaluation.md)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from ragplan.cli.errors import BadInput, fail

__all__ = ["add_parser", "run", "add_run_flags", "new_settings", "reason", "stamped"]

BENCHMARKS = ("dqa-locating | dqa-building | hotpotqa | 2wikimultihopqa | musique | strategyqa | fever | flashrag | "
              "reaper-retail")


def add_run_flags(p: argparse.ArgumentParser, settings: Any, *, required: bool = False, out: str = "") -> None:
    """The flags of a batch run (``eval``, ``eval sweep``, ``compare``; given ``out``, ``eval retrieval``'s)."""
    p.add_argument("--benchmark", required=required, help=BENCHMARKS)
    p.add_argument("--data", required=required, metavar="PATH",
                   help="the benchmark's data (for DQA: a clone of the repository)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N questions")
    p.add_argument("--benchmark-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the benchmark itself, e.g. fmt=kilt or embedding_model=DIR (repeatable)")
    p.add_argument("--context-only", action="store_true",
                   help="HotpotQA/2Wiki/MuSiQue/StrategyQA data: a local index of the questions' own context "
                        "paragraphs (keeping the dataset's sentences), fully offline")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    if out:
        p.add_argument("--out", metavar="FILE.json", default=None, help=out)
        return
    p.add_argument("--out", metavar="DIR", default=None, help="the run folder (default under runs/)")
    p.add_argument("--year", type=int, default=None, help="only questions of this year (DQA)")
    p.add_argument("--concurrency", type=int, default=None, metavar="C", help="LLM requests in flight at once, and "
                   "questions (up to twice as many while all of them wait on the endpoint; default 4; with --resume the "
                   "run's own unless given)")
    p.add_argument("--item-timeout", type=float, default=None, metavar="SEC", help="wall-time budget of one question")
    p.add_argument("--server", metavar="URL", default=None, help="run each question on this LangGraph server "
                   "(langgraph dev / a deployment of langgraph.json; docs/deploy.md) instead of in this process")
    if settings is not None:
        settings(p)


def add_parser(sub: Any, settings: Any = None) -> None:
    """Register ``ragplan eval`` and its sub-commands on the top-level subparsers."""
    ev = sub.add_parser("eval", help="run a method over a benchmark (resumable run folder); `eval report | sweep | "
                                     "retrieval` compare runs, sweep a setting, score retrieval",
                        description="Run a method graph over a benchmark with bounded concurrency, grade every "
                                    "question, and write a run folder (settings.json, results.jsonl, summary.md/json, "
                                    "plot.png).")
    ev.add_argument("--method", help="graph name (see `ragplan graphs`)")
    ev.add_argument("--resume", metavar="RUN_DIR", default=None, help="finish an interrupted run folder")
    ev.add_argument("--rerun", metavar="RUN_DIR", default=None, help="execute a finished run again into --out with its "
                    "settings (offline with --llm-cache DIR --replay) and check the records are the same")
    ev.add_argument("--checkpoint-db", metavar="URL", default=None, help="keep the per-question checkpoints in "
                    "PostgreSQL (postgresql://USER@HOST:PORT/DB; docs/deploy.md) instead of the run folder")
    ev.add_argument("--no-checkpoints", action="store_true",
                    help="no per-question checkpoints (a question in flight at a kill restarts from scratch on "
                         "--resume)")
    add_run_flags(ev, settings)
    es = ev.add_subparsers(dest="eval_command", metavar="{report,sweep,retrieval}")
    r = es.add_parser("report", help="compare run folders in one table", description="Print one table comparing runs.")
    r.add_argument("runs", nargs="+", metavar="RUN_DIR")
    r.add_argument("--plot", metavar="OUT.png", default=None,
                   help="also draw accuracy on SR and MR questions per method")
    r.add_argument("--html", metavar="OUT.html", default=None,
                   help="also write one self-contained HTML page (table, plots, every question's trace, filters)")
    s = es.add_parser("sweep", help="one run per value of a setting, then the sweep's table and figure",
                      description="One run folder per value of a context setting under --out (default "
                                  "runs/sweep-<method>-<benchmark>-<setting>); the same command again finishes "
                                  "unfinished runs.")
    s.add_argument("--method", help="graph name (see `ragplan graphs`)")
    s.add_argument("--sweep", metavar="SETTING=V1,V2,…", default=None,
                   help="the setting to sweep and its values, e.g. beta_threshold=0,0.25,0.5,0.75,1")
    add_run_flags(s, settings)
    t = es.add_parser("retrieval", help="score retrieval against a dataset's gold support (no LLM)",
                      description="Recall@k, all-supporting@k and MRR of the passages an index returns for the "
                                  "questions (or for the queries a run executed), against the data's gold supporting "
                                  "facts.")
    add_run_flags(t, None, out="default runs/retrieval-<benchmark>-<time>.json")
    t.add_argument("--index", metavar="DIR", default=None, help="the index to search (ragplan index build)")
    t.add_argument("--queries", metavar="RUN_DIR", default=None,
                   help="score the queries a method executed (a run folder or its results.jsonl) instead of the "
                        "questions")
    t.add_argument("-k", "--ks", default="1,2,5,10", metavar="K,K,…", help="the cut-offs (default 1,2,5,10)")
    t.add_argument("--passages", type=int, default=None, metavar="N",
                   help="passages searched per query and ranked into sentences (default: the largest k)")


def _given(args: argparse.Namespace, method: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The context settings and the benchmark options the command line gives a run of ``method``."""
    from ragplan.cli.settings import parse_assignments, settings_from_args
    from ragplan.registry import family_of

    try:
        context = settings_from_args(args, family_of(method), method)
        options = parse_assignments(args.benchmark_option)
    except (KeyError, ValueError) as exc:
        raise BadInput(str(exc.args[0]) if exc.args else str(exc)) from None
    return context, {**options, **({"context_only": True} if args.context_only else {})}


def new_settings(args: argparse.Namespace, methods: list[str]) -> Any:
    """The run settings of a new run of ``methods[0]`` from the command line, every setting checked against each
    method's family (``compare`` runs several); BadInput when one does not apply or does not validate."""
    from ragplan.eval.runfolder import RunSettings
    from ragplan.state.context import LLMContext

    context, options = [_given(args, m) for m in methods][-1]
    default, cache = LLMContext(), context.pop("llm_cache_dir", "")
    return RunSettings(method=methods[0], benchmark=args.benchmark, data=str(Path(args.data).resolve()),
                       model=context.pop("model", "") or default.model,
                       base_url=context.pop("base_url", "") or default.base_url, limit=args.limit, year=args.year,
                       context=context, benchmark_options=options,
                       concurrency=RunSettings.concurrency if args.concurrency is None else args.concurrency,
                       item_timeout_s=args.item_timeout or RunSettings.item_timeout_s,
                       llm_cache_dir=str(Path(cache).resolve()) if cache else "",
                       llm_replay=context.pop("llm_replay", False), server=args.server or "")


def _resume_overrides(settings: Any, args: argparse.Namespace) -> None:
    """Apply ``--resume`` / ``--rerun``'s flags to the saved settings; BadInput for one changing what is measured."""
    from ragplan.redact import REDACTED

    for name, key in (("concurrency", "concurrency"), ("item_timeout", "item_timeout_s"), ("limit", "limit"),
                      ("server", "server")):
        if getattr(args, name) is not None:
            setattr(settings, key, getattr(args, name))
    if args.data is not None:
        settings.data = str(Path(args.data).resolve())
    given, options = _given(args, settings.method)
    settings.base_url = given.pop("base_url", settings.base_url)
    for what, flag, kept in (("base URL", "--base-url URL", settings.base_url), ("checkpoint database",
                             "--checkpoint-db URL (or use PGPASSWORD)", args.checkpoint_db or settings.checkpoint_db)):
        if REDACTED in kept:
            raise BadInput(f"{args.resume or args.rerun}: the run's settings.json keeps its {what} without the password "
                           f"({kept}); give it again with {flag}")
    if given.get("llm_cache_dir"):
        settings.llm_cache_dir = str(Path(given.pop("llm_cache_dir")).resolve())
    settings.llm_replay = given.pop("llm_replay", None) or settings.llm_replay
    in_set = {p.split("=", 1)[0].strip() for p in args.set}
    fixed = [("--method", args.method, settings.method), ("--benchmark", args.benchmark, settings.benchmark),
             ("--model", given.pop("model", None), settings.model), ("--year", args.year, settings.year)]
    fixed += [(f"--set {k}" if k in in_set else "--" + k.replace("_", "-"), v, settings.context.get(k))
              for k, v in given.items()]
    fixed += [(f"--benchmark-option {k}", v, settings.benchmark_options.get(k)) for k, v in options.items()]
    changed = [f"{flag} {new!r} (the run has {saved!r})" for flag, new, saved in fixed
               if new is not None and new != saved]
    if changed:
        raise BadInput(f"{'--resume ' + args.resume if args.resume else '--rerun ' + args.rerun}: " + "; ".join(changed)
                       + " would change what the run measures; resume without it, or start a new run with --out")


def _missing(args: argparse.Namespace, *names: str) -> str:
    """The required flags the command line lacks, as ``--a, --b``."""
    return ", ".join(f"--{n}" for n in names if not getattr(args, n, None))


def run(args: argparse.Namespace) -> int:
    """Run ``ragplan eval`` or one of its sub-commands."""
    if args.eval_command:
        return {"report": _report, "retrieval": _retrieval, "sweep": _sweep}[args.eval_command](args)
    from ragplan.cli.settings import check_llm
    from ragplan.eval.report import every_question_failed, summary_markdown
    from ragplan.eval.runfolder import RunSettings, record_differences, replay_problem
    from ragplan.eval.runner import RunRefused, run_evaluation
    from ragplan.registry import family_of

    if args.rerun or args.resume:  # (a folder without readable settings: FileFormatError naming the file, exit 2)
        settings = RunSettings.load(Path(args.rerun or args.resume) / "settings.json")
        settings.created = "" if args.rerun else settings.created  # a rerun is a new run
        _resume_overrides(settings, args)
    elif missing := _missing(args, "method", "benchmark", "data"):
        return fail(f"missing {missing} (or give --resume RUN_DIR)")
    else:
        settings = new_settings(args, [args.method])
    run_dir = Path(args.resume) if args.resume else Path(args.out or stamped(settings.method, settings.benchmark))
    if args.rerun and (run_dir.resolve() == Path(args.rerun).resolve() or (run_dir / "results.jsonl").exists()):
        return fail(f"--rerun writes a new run folder: {run_dir} already holds a run (give --out NEW_DIR)")
    try:  # a saved run's values converted to their settings' types (a wrong one is refused here, not in every question)
        settings.context = family_of(settings.method).check_settings(settings.method, settings.context)
    except ValueError as exc:  # (an unknown method was refused with the command line's settings)
        return fail(f"--set {exc}")
    settings.checkpoints = settings.checkpoints and not args.no_checkpoints
    if args.checkpoint_db:
        from ragplan.checkpoints import checkpoint_db

        try:
            if not isinstance(checkpoint_db(args.checkpoint_db), str):
                return fail(f"--checkpoint-db {args.checkpoint_db}: eval takes a postgresql:// URL (its checkpoints "
                            "are otherwise kept in the run folder)")
        except ValueError as exc:
            return fail(str(exc))
        settings.checkpoint_db = args.checkpoint_db
    check_llm(settings)
    if args.rerun and settings.llm_replay and (problem := replay_problem(args.rerun, settings.llm_cache_dir)):
        return fail(problem)
    try:
        summary = run_evaluation(settings, run_dir, progress=not args.no_progress)
    except Exception as exc:  # an unknown benchmark, a refused run (furepa without an assessor), unreadable data
        return fail(reason(exc, RunRefused))
    print(summary_markdown(summary))
    print(f"run folder: {run_dir}")
    if (summary.get("overall") or {}).get("retrieval_errors") and not settings.benchmark_options.get("context_only"):
        fam = family_of(settings.method)  # (the run's retriever as its context reads it, the environment's default too)
        ctx = fam.context(**{k: v for k, v in settings.context.items() if k in fam.context_fields()})
        if getattr(ctx, "retriever", "") == "wiki":
            print("note: retrievals from Wikipedia failed (retrieval_error in results.jsonl); without a network, "
                  "--context-only retrieves from the questions' own paragraphs and --retriever local --index DIR from "
                  "a local index", file=sys.stderr)
    if c := summary.get("llm_cache"):
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
    failure = every_question_failed(summary, run_dir)
    return fail(failure, 1) if failure else 0


def reason(exc: Exception, *plain: type) -> str:
    """What a failed step says: a KeyError's or a ``plain`` type's message, else ``Type: msg``."""
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc) if isinstance(exc, plain) else \
        f"{type(exc).__name__}: {exc}"


def stamped(*parts: str) -> str:
    """The default output of a new run or report: ``runs/<parts>-<time>``."""
    return "runs/" + "-".join([*parts, f"{datetime.now():%Y%m%d-%H%M%S}"])


def _report(args: argparse.Namespace) -> int:
    """``ragplan eval report RUN_DIR…``: one table (and optionally the SR/MR figure and the HTML page); exit 1 when the
    benchmark's own comparison fails (the rest is still printed and written)."""
    from ragplan.eval.html_report import write_html_report
    from ragplan.eval.report import compare_runs, comparison, plot_comparison

    try:
        text, failed = compare_runs(args.runs, c := comparison(args.runs))
        print(text)
        code = fail(failed, 1) if failed else 0
        if args.plot:
            written = plot_comparison(args.runs, args.plot, c)
            print(f"written: {written}" if written is not None else "no SR/MR figure: none of the runs retrieved")
        if args.html:
            print(f"written: {write_html_report(args.runs, args.html, c=c)}")
    except FileNotFoundError as exc:  # a folder without settings.json, a figure into a missing folder
        return fail(str(exc))
    return code


def _sweep(args: argparse.Namespace) -> int:
    """``ragplan eval sweep``: one run per value of the setting, then the sweep's table, JSON and figure."""
    from ragplan.cli.settings import check_llm
    from ragplan.eval.report import every_question_failed
    from ragplan.eval.sweep import SweepError, parse_sweep, run_sweep, sweep_markdown, write_sweep

    if missing := _missing(args, "method", "benchmark", "data", "sweep"):
        return fail(f"missing {missing}: use `ragplan eval sweep --method M --benchmark B --data FILE "
                    "--sweep SETTING=V1,V2,…`")
    try:
        key, values = parse_sweep(args.sweep)
    except ValueError as exc:
        return fail(str(exc))
    base = new_settings(args, [args.method])
    if key in base.context:
        return fail(f"--set {key} and --sweep {key} both set {key}; leave out the --set")
    check_llm(base)
    out = Path(args.out or f"runs/sweep-{base.method}-{base.benchmark}-{key}")

    def started(value: Any, run_dir: Path, done: int) -> None:
        how = f"resuming ({done} question(s) finished)" if done else "starting"
        print(f"{key}={value}: {how} in {run_dir}", file=sys.stderr, flush=True)

    try:
        result = run_sweep(base, key, values, out, progress=not args.no_progress, on_start=started)
    except Exception as exc:  # data that cannot be read: the runs so far are kept, the rest is not started
        return fail(reason(exc, SweepError))
    paths = write_sweep(out, result)
    print(sweep_markdown(result))
    print(f"sweep folder: {out}")
    print(f"written: {paths['md']}, {paths['json']}, {paths['png']}")
    failed = [f"{r['run_dir']}: {why}" for r in result.rows if (why := every_question_failed(r, r["run_dir"]))]
    for line in failed:
        print(f"error: {line}", file=sys.stderr)
    return 1 if failed else 0


def _retrieval(args: argparse.Namespace) -> int:
    """``ragplan eval retrieval``: print the table and write the JSON (``--out``, default runs/retrieval-…json)."""
    from ragplan.cli.settings import parse_assignments
    from ragplan.eval.retrieval import evaluate_retrieval, retrieval_table, write_result

    if missing := _missing(args, "benchmark", "data"):
        return fail("use `ragplan eval retrieval --benchmark B --data FILE --index DIR|--context-only "
                    f"[--queries RUN_DIR] [-k 1,2,5,10]` (missing {missing})")
    ks = [int(k) if k.strip().isdecimal() else 0 for k in args.ks.split(",") if k.strip()]
    if not ks or min(ks) < 1:
        return fail(f"-k takes positive integers separated by commas, got {args.ks!r}")
    out = Path(args.out or stamped("retrieval", args.benchmark) + ".json")
    try:
        result = evaluate_retrieval(args.benchmark, str(Path(args.data).resolve()), index_dir=args.index,
                                    context_only=args.context_only, queries=args.queries, ks=ks, limit=args.limit,
                                    passages=args.passages, options=parse_assignments(args.benchmark_option),
                                    work_dir=out.parent)
    except Exception as exc:  # bad options, an unknown benchmark, a file that cannot be read, an index not opened …
        return fail(reason(exc, ValueError))
    print(retrieval_table(result))
    print(f"written: {write_result(result, out)}")
    return 0
