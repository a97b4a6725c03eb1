"""``ragplan resume ID``: continue a checkpointed ``ragplan ask`` run.

    ragplan resume ID [--checkpoint-db FILE] [--json] [--quiet] [setting flags]
    ragplan resume --list [--checkpoint-db FILE]

The run's method, question, inputs and settings come from the checkpoint file (:mod:`ragplan.checkpoints`);
the context is rebuilt from them (secrets such as API keys come from the environment again), with the
setting flags given (``--base-url``, ``--max-steps`` …, :mod:`ragplan.cli.settings`) on top. Then:

* a run paused for plan review shows the plan and asks ``approve / edit / reject [a/e/r]``;
* a run that was interrupted or killed continues from its last finished node: the LLM calls of
  finished nodes are not made again;
* a finished run prints its answer and says it is finished (nothing runs).

An unknown ID is exit 2. Exit codes otherwise as ``ragplan ask``: 0 with an answer, 1 without.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sqlite3
import sys
from typing import Any

from ragplan.checkpoints import RunStore, UnknownThread, checkpoint_db
from ragplan.cli.ask import add_checkpoint_db, print_result, resume_hint
from ragplan.cli.review import TerminalReview
from ragplan.state.review import AWAITING_REVIEW

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, settings: Any = None) -> argparse.ArgumentParser:
    """The ``resume`` sub-command; ``settings(parser)`` adds the generated setting flags."""
    p = sub.add_parser("resume", help="continue a checkpointed `ragplan ask` run (paused for review, interrupted or killed)",
                       description="Continue the run of thread ID from its last finished node (or answer the plan "
                                   "review it is paused at). A finished run prints its answer.")
    p.add_argument("thread_id", nargs="?", metavar="ID", help="the thread id `ragplan ask` printed")
    p.add_argument("--list", action="store_true", help="list the runs in the checkpoint file, newest first")
    add_checkpoint_db(p)
    p.add_argument("--json", action="store_true", help="print the whole result as one JSON object")
    p.add_argument("--quiet", action="store_true", help="print only the answer and the totals")
    if settings is not None:
        settings(p)
    return p


def _list(db: str | None) -> int:
    with RunStore(db) as store:
        runs = store.recent(50)
    if not runs:
        print(f"no runs in {checkpoint_db(db)}")
        return 0
    for r in runs:
        when = dt.datetime.fromtimestamp(r.updated).strftime("%Y-%m-%d %H:%M")
        q = r.question if len(r.question) <= 60 else r.question[:57] + "…"
        print(f"{r.thread_id}  {r.status:<8}  {when}  {r.method:<18}  {q}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run ``ragplan resume``."""
    from ragplan.cli.settings import settings_from_args
    from ragplan.llm import endpoint_problem
    from ragplan.registry import family_of
    from ragplan.runs import rebuild_context, resume_run, thread_status

    if not args.list and not args.thread_id:
        print("error: name the thread to resume (ragplan resume ID), or list them with --list", file=sys.stderr)
        return 2
    db = checkpoint_db(args.checkpoint_db)
    if not db.is_file():  # reading must not create an empty checkpoint file
        print(f"error: no checkpoint file at {db} (runs are kept there by `ragplan ask`; see --checkpoint-db)",
              file=sys.stderr)
        return 2
    try:
        if args.list:
            return _list(args.checkpoint_db)
        info, status, _, _ = thread_status(args.thread_id, args.checkpoint_db)
    except UnknownThread as exc:
        print(f"error: {exc} (see `ragplan resume --list`)", file=sys.stderr)
        return 2
    except sqlite3.Error as exc:  # not a SQLite file, a folder without rights
        print(f"error: the checkpoint file {checkpoint_db(args.checkpoint_db)} cannot be used: {exc}", file=sys.stderr)
        return 2
    family = family_of(info.method)
    out = sys.stderr if args.json else sys.stdout
    if not args.quiet:
        print(f"Method: {info.method}   Model: {info.settings.get('model', '-')}"
              f"{'  @ ' + info.settings['base_url'] if info.settings.get('base_url') else ''}", file=out)
        print(f"Question: {info.question}", file=out)
    if status == "finished":
        print(f"Thread {args.thread_id} is finished; nothing to run.", file=out)
        return print_result(resume_run(args.thread_id, checkpoint_db=args.checkpoint_db), args.json)
    overrides = settings_from_args(args, family, info.method)
    if isinstance(overrides, str):
        print(f"error: {overrides}", file=sys.stderr)
        return 2
    try:
        ctx = rebuild_context(info, **overrides)
    except (TypeError, ValueError) as exc:
        print(f"error: the run's settings do not make a context: {exc}", file=sys.stderr)
        return 2
    problem = endpoint_problem(ctx.model, ctx.base_url, bool(getattr(ctx, "llm_replay", False))) or \
        family.prepare(info.method, ctx)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    what = {"paused": "paused for plan review", "unfinished": "continuing from its last finished node",
            "not_started": "starting (no node had finished)"}[status]
    print(f"Thread: {args.thread_id}  ({what})", file=out, flush=True)
    printer = None if args.quiet else (lambda node, update: family.trace(node, update, lambda ln: print(ln, file=out, flush=True)))
    try:
        res = resume_run(args.thread_id, checkpoint_db=args.checkpoint_db, ctx=ctx, review=TerminalReview(out),
                         on_update=printer)
    except KeyboardInterrupt:
        print(f"\nstopped; continue with: {resume_hint(args.thread_id, args.checkpoint_db)}", file=sys.stderr)
        raise
    if res.stop_reason == AWAITING_REVIEW:
        print(f"\nThe run is paused for plan review; continue with: {resume_hint(args.thread_id, args.checkpoint_db)}",
              file=sys.stderr)
    return print_result(res, args.json)
