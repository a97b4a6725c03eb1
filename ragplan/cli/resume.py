"""``ragplan resume ID``: continue a checkpointed ``ragplan ask`` run (answer its plan review, continue it from its
last finished node, or print a finished run's answer); ``--list`` lists the runs. Exit codes as ``ask``."""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from ragplan.cli.ask import (
    add_shared_flags, print_header, print_result, resume_hint, run_traced, store_errors, store_problem,
)
from ragplan.cli.errors import fail

__all__ = ["add_parser", "run"]

#: What ``resume`` does for a thread of each status.
_DOING = {"paused": "paused for plan review", "unfinished": "continuing from its last finished node",
          "not_started": "starting (no node had finished)"}


def add_parser(sub: Any, settings: Any = None) -> None:
    """The ``resume`` sub-command; ``settings(parser)`` adds the generated setting flags."""
    p = sub.add_parser("resume", help="continue a checkpointed `ragplan ask` run (paused for review, interrupted or "
                       "killed)", description="Continue the run of thread ID from its last finished node (or answer "
                       "the plan review it is paused at). A finished run prints its answer.")
    p.add_argument("thread_id", nargs="?", metavar="ID", help="the thread id `ragplan ask` printed")
    p.add_argument("--list", action="store_true", help="list the runs in the checkpoint file, newest first")
    add_shared_flags(p, settings)


def run(args: argparse.Namespace) -> int:
    """Run ``ragplan resume``."""
    from ragplan.checkpoints import RunStore, UnknownThread, checkpoint_db
    from ragplan.cli.settings import check_llm, settings_from_args
    from ragplan.registry import family_of
    from ragplan.runs import rebuild_context, resume_run, thread_status

    if not args.list and not args.thread_id:
        return fail("name the thread to resume (ragplan resume ID), or list them with --list")
    try:
        db = checkpoint_db(args.checkpoint_db)
    except ValueError as exc:
        return fail(str(exc))
    if not isinstance(db, str) and not db.is_file():  # reading must not create an empty checkpoint file
        return fail(f"no checkpoint file at {db} (runs are kept there by `ragplan ask`; see --checkpoint-db)")
    try:
        if args.list:  # newest first
            with RunStore(args.checkpoint_db) as store:
                runs = store.recent(50)
            if not runs:
                print(f"no runs in {store.path}")
            for r in runs:
                q = r.question if len(r.question) <= 60 else r.question[:57] + "…"
                print(f"{r.thread_id}  {r.status:<8}  {dt.datetime.fromtimestamp(r.updated):%Y-%m-%d %H:%M}  "
                      f"{r.method:<18}  {q}")
            return 0
        info, status, _, _ = thread_status(args.thread_id, args.checkpoint_db)
    except UnknownThread as exc:
        return fail(f"{exc} (see `ragplan resume --list`)")
    except store_errors() as exc:  # (as ask)
        return fail(store_problem(db, exc))
    family = family_of(info.method)
    out = print_header(args, info.method, info.settings.get("model", "-"), info.settings.get("base_url") or "",
                       info.question)
    if status == "finished":
        print(f"Thread {args.thread_id} is finished; nothing to run.", file=out)
        return print_result(resume_run(args.thread_id, checkpoint_db=args.checkpoint_db), args.json)
    try:
        ctx = rebuild_context(info, **settings_from_args(args, family, info.method))
    except (TypeError, ValueError) as exc:
        return fail(f"the run's settings do not make a context: {exc}")
    check_llm(ctx)
    if problem := family.prepare(info.method, ctx):
        return fail(problem)
    print(f"Thread: {args.thread_id}  ({_DOING[status]})", file=out, flush=True)
    res = run_traced(lambda review, on_update: resume_run(args.thread_id, checkpoint_db=args.checkpoint_db, context=ctx,
                                                          review=review, on_update=on_update),
                     family, out, args, resume_hint(args.thread_id, args.checkpoint_db))
    return print_result(res, args.json)
