"""``ragplan ask``'s checkpoint and review flags, and how an ask runs as a checkpointed thread.

    --review              pause after planning: approve / edit / reject the plan (sets review_plan)
    --review-replans      pause after each re-plan that changed the plan (sets review_replans)
    --thread ID           the run's thread id (default: a fresh one); printed at the start
    --checkpoint-db FILE  the checkpoint file [env RAGPLAN_CHECKPOINT_DB,
                          default ${XDG_STATE_HOME:-~/.local/state}/ragplan/checkpoints.sqlite]

Every ``ragplan ask`` keeps a SQLite checkpoint per run (:mod:`ragplan.checkpoints`), so a run that was
interrupted, killed or left paused for review continues with ``ragplan resume ID``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from ragplan.checkpoints import RunStore, UnknownThread, checkpoint_db, new_thread_id
from ragplan.cli.review import TerminalReview
from ragplan.family import MethodFamily
from ragplan.runs import OnUpdate, start_run
from ragplan.state.result import GraphResult
from ragplan.state.review import AWAITING_REVIEW

__all__ = ["add_run_options", "apply_run_options", "ask_checkpointed", "resume_hint", "has_plan_review"]


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """``--review``, ``--review-replans``, ``--thread``, ``--checkpoint-db``."""
    g = parser.add_argument_group("checkpoints and plan review")
    g.add_argument("--review", action="store_true",
                   help="pause after planning and ask approve / edit (in $EDITOR) / reject [a/e/r] (methods that write a plan)")
    g.add_argument("--review-replans", action="store_true",
                   help="also pause after each re-plan that changed the plan (PlanRAG's revisions, FuRePA's later picks)")
    g.add_argument("--thread", metavar="ID", default=None,
                   help="the run's thread id in the checkpoint file (default: a fresh one, printed at the start)")
    g.add_argument("--checkpoint-db", metavar="FILE", default=None,
                   help="the SQLite checkpoint file [env RAGPLAN_CHECKPOINT_DB, default "
                        "${XDG_STATE_HOME:-~/.local/state}/ragplan/checkpoints.sqlite]")


def has_plan_review(family: MethodFamily, method: str) -> bool:
    """Whether graph ``method`` has the plan review node (it writes a plan a person can review)."""
    return "review_plan" in family.graph(method).build().nodes


def apply_run_options(args: argparse.Namespace, family: MethodFamily, ctx: Any) -> str | None:
    """Put ``--review`` / ``--review-replans`` into the context; a message when a flag cannot apply."""
    for flag, name in (("--review", "review"), ("--review-replans", "review_replans")):
        if not getattr(args, name, False):
            continue
        field = "review_plan" if name == "review" else "review_replans"
        if field not in family.context_fields() or not has_plan_review(family, args.method):
            return f"{flag}: {args.method} writes no plan to review (plan review: planrag, planrag_no_replan, reaper, furepa, instructrag …)"
        setattr(ctx, field, True)
    if args.thread is not None and (not args.thread.strip() or any(c.isspace() for c in args.thread)):
        return "--thread: a thread id has no spaces"
    try:  # the file must be usable before the run starts, and a thread holds one run
        with RunStore(args.checkpoint_db) as store:
            if args.thread is not None:
                store.get(args.thread)
                return f"thread {args.thread} already exists in {store.path}; continue it with " \
                       f"`ragplan resume {args.thread}` or choose another --thread"
    except UnknownThread:
        return None
    except Exception as exc:  # a file that is not a SQLite database, a folder without rights
        return f"the checkpoint file {checkpoint_db(args.checkpoint_db)} cannot be used: {exc}"
    return None


def resume_hint(thread_id: str, db: str | None) -> str:
    """The command that continues ``thread_id``."""
    return f"ragplan resume {thread_id}" + (f" --checkpoint-db {db}" if db else "")


def ask_checkpointed(args: argparse.Namespace, question: str, ctx: Any, inputs: dict[str, Any],
                     on_update: OnUpdate | None, out: TextIO) -> GraphResult:
    """Run the ask as a checkpointed thread, printing ``Thread: ID`` first and asking at the terminal for reviews."""
    thread = args.thread or new_thread_id()
    hint = resume_hint(thread, args.checkpoint_db)
    print(f"Thread: {thread}  (resume with: {hint})", file=out if on_update is not None else sys.stderr, flush=True)
    try:
        res = start_run(args.method, question, ctx, inputs=inputs, thread_id=thread, checkpoint_db=args.checkpoint_db,
                        review=TerminalReview(out), on_update=on_update)
    except KeyboardInterrupt:
        print(f"\nstopped; continue with: {hint}", file=sys.stderr)
        raise
    if res.stop_reason == AWAITING_REVIEW:
        print(f"\nThe run is paused for plan review; continue with: {hint}", file=sys.stderr)
    return res
