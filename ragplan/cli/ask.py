"""``ragplan ask``: answer one question with any method graph, printing its family's trace as it runs (a plan review
asked in the terminal); every ask is a checkpointed thread that ``ragplan resume ID`` continues (docs/settings.md lists
the setting flags)."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shlex
import subprocess
import sys
import tempfile
from typing import TYPE_CHECKING, Any, Callable, Sequence, TextIO

from ragplan.cli.errors import BadInput

if TYPE_CHECKING:  # (langgraph is imported by the commands that run graphs, not by --help)
    from ragplan.family import MethodFamily

__all__ = ["add_parser", "run", "print_result", "resume_hint", "add_shared_flags", "print_header", "run_traced",
           "MAX_QUESTION_CHARS", "terminal_review", "PROMPT", "store_problem", "store_errors"]

MAX_QUESTION_CHARS = 100_000
"""Longest question ``ask`` sends (it goes into every prompt of the run); a longer one is refused, exit 2."""


def add_shared_flags(p: argparse.ArgumentParser, settings: Any) -> None:
    """The flags ``ask`` and ``resume`` share: ``--json``, ``--quiet``, ``--checkpoint-db FILE`` and the settings'."""
    p.add_argument("--json", action="store_true", help="print the whole result as one JSON object")
    p.add_argument("--quiet", action="store_true", help="print only the answer and the totals")
    p.add_argument("--checkpoint-db", metavar="FILE|URL", default=None,
                   help="the SQLite checkpoint file, or a postgresql://USER@HOST:PORT/DB URL (docs/deploy.md) [env "
                        "RAGPLAN_CHECKPOINT_DB, default ${XDG_STATE_HOME:-~/.local/state}/ragplan/checkpoints.sqlite]")
    if settings is not None:
        settings(p)


def add_parser(sub: Any, settings: Any = None) -> None:
    """The ``ask`` sub-command; ``settings(parser)`` adds the generated setting flags."""
    ask = sub.add_parser("ask", help="answer a question with any method graph and print its trace",
                         description="Run a method graph and print its trace as it goes (the plan, every query or tool "
                                     "call and what came back, every decision), then the answer, LLM calls, tokens and "
                                     "wall time. `ragplan ask --method M --help` lists M's settings.")
    ask.add_argument("--method", default="planrag", help="graph name (see `ragplan graphs`), default planrag")
    q = ask.add_mutually_exclusive_group(required=True)
    q.add_argument("--question", help="the question text")
    q.add_argument("--question-file", metavar="FILE", help="read the question from a text file")
    q.add_argument("--dqa", metavar="CLONE", help="ask a DQA question of a clone (with --scenario and --question-num): "
                   "its prompt and script are used and the answer is checked by simulation")
    ask.add_argument("--scenario", choices=["locating", "building"], help="with --dqa")
    ask.add_argument("--question-num", type=int, metavar="N", help="with --dqa")
    ask.add_argument("--input", action="append", default=[], metavar="KEY=JSON",
                     help="an extra graph input, e.g. --input page_context='{\"product_id\": \"…\"}' for REAPER")
    ask.add_argument("--thread", metavar="ID", default=None,
                     help="the run's thread id in the checkpoint file (default: a fresh one, printed at the start)")
    add_shared_flags(ask, settings)


def _question(args: argparse.Namespace) -> tuple[str, Any]:
    """The question text and the benchmark item it came from (or None)."""
    from ragplan.eval.registry import get_benchmark
    from ragplan.methods.planrag.data import DQAError

    item = None
    if args.dqa:
        if not args.scenario or args.question_num is None:
            raise BadInput("--dqa needs --scenario locating|building and --question-num N")
        try:
            items = get_benchmark(f"dqa-{args.scenario}", args.dqa).items()
        except (DQAError, OSError, ValueError) as exc:
            raise BadInput(str(exc)) from None
        item = next((it for it in items if it.meta.get("question_num") == args.question_num), None)
        if item is None:
            raise BadInput(f"no {args.scenario} question number {args.question_num} in {args.dqa}")
        question = item.question
    elif args.question_file:
        try:
            with open(args.question_file, encoding="utf-8") as fh:  # read no more than a question may hold
                question = fh.read(MAX_QUESTION_CHARS + 1).strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"cannot read the question file {args.question_file}: {exc}") from None
    else:
        question = args.question.strip()
    if not question:
        raise BadInput("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:  # it would go into every prompt of the run
        where = f"{args.question_file}: " if args.question_file else ""
        raise BadInput(f"{where}the question is longer than {MAX_QUESTION_CHARS:,} characters; nothing was sent")
    return question, item


def _context(args: argparse.Namespace, family: MethodFamily, item: Any) -> Any:
    """The method's context from the flags and the benchmark item's own settings."""
    from ragplan.cli.settings import settings_from_args

    reviewed = "review_plan" in family.graph(args.method).build().nodes
    if (args.set_review_plan or args.set_review_replans) and not reviewed:
        raise BadInput(f"{'--review' if args.set_review_plan else '--review-replans'}: {args.method} writes no plan "
                       "to review (plan review: planrag, planrag_no_replan, reaper, furepa, instructrag …)")
    kw = settings_from_args(args, family, args.method)
    if item is not None:  # a DQA question's script and simulator check
        if foreign := sorted(set(item.context) - family.context_fields()):
            raise BadInput(f"--dqa: {args.method} cannot run this question: it has no setting for its data "
                           f"({', '.join(foreign)}); use a method whose data is a property graph (see `ragplan graphs "
                           "--families`)")
        kw.update(item.context)
    try:
        return family.context(**kw)
    except (TypeError, ValueError) as exc:
        raise BadInput(f"bad setting: {exc}") from None


def store_problem(db: Any, exc: Exception) -> str:
    """What ``ask`` and ``resume`` say about a checkpoint store that cannot be used (a ConnectionError names it)."""
    from ragplan.redact import redact

    return str(exc) if isinstance(exc, ConnectionError) else \
        f"the checkpoint {'database' if isinstance(db, str) else 'file'} {redact(str(db))} cannot be used: {exc}"


def store_errors() -> tuple[type[Exception], ...]:
    """What a bad checkpoint store raises when opened or read (a bug raises none of these)."""
    import sqlite3

    psycopg = sys.modules.get("psycopg")  # (imported for a PostgreSQL URL only: else none of its errors was raised)
    return sqlite3.Error, OSError, ValueError, KeyError, *([psycopg.Error] if psycopg else [])


def _checkpoint_problem(args: argparse.Namespace) -> str | None:
    """Why ``--thread`` / ``--checkpoint-db`` cannot be used (the file must work before the run starts)."""
    from ragplan.checkpoints import RunStore, UnknownThread, checkpoint_db

    if args.thread is not None and (not args.thread.strip() or any(c.isspace() for c in args.thread)):
        return "--thread: a thread id has no spaces"
    try:
        db = checkpoint_db(args.checkpoint_db)
    except ValueError as exc:  # neither a path nor a PostgreSQL URL
        return str(exc)
    try:
        with RunStore(db) as store:
            store.get(args.thread or "")  # a thread holds one run ("" is never one: a fresh id)
            return f"thread {args.thread} already exists in {store.path}; continue it with " \
                   f"`ragplan resume {args.thread}` or choose another --thread"
    except UnknownThread:
        return None
    except store_errors() as exc:
        return store_problem(db, exc)


def resume_hint(thread_id: str, db: str | None) -> str:
    """The command that continues ``thread_id``."""
    from ragplan.redact import redact

    return f"ragplan resume {thread_id}" + (f" --checkpoint-db {redact(db)}" if db else "")


def _prepare(args: argparse.Namespace) -> tuple[MethodFamily, str, Any, dict[str, Any]]:
    """The family, question, context and inputs of the ask, every check done before any LLM call."""
    from ragplan.cli.settings import check_llm, parse_assignments
    from ragplan.registry import family_of

    try:
        family = family_of(args.method)
    except KeyError:
        raise BadInput(f"unknown method {args.method!r}; see `ragplan graphs`") from None
    question, item = _question(args)
    ctx = _context(args, family, item)
    try:
        inputs = {**(item.inputs if item is not None else {}), **parse_assignments(args.input)}
    except ValueError as exc:
        raise BadInput(f"--input: {exc}") from None
    if unknown := sorted(set(inputs) - set(family.input_keys)):
        raise BadInput(f"--input {', '.join(unknown)}: {args.method} takes {', '.join(family.input_keys)}")
    check_llm(ctx)
    if problem := family.prepare(args.method, ctx) or _checkpoint_problem(args):
        raise BadInput(problem)
    return family, question, ctx, inputs


def print_header(args: argparse.Namespace, method: str, model: str, url: str, question: str, where: str = "") -> Any:
    """Print the ``Method: … Model: …`` and ``Question: …`` lines (none with ``--quiet``); the trace's stream."""
    out = sys.stderr if args.json else sys.stdout
    if not args.quiet:
        where = f"   {where}" if where else ""
        print(f"Method: {method}   Model: {model}{'  @ ' + url if url else ''}{where}", file=out)
        print(f"Question: {question}", file=out)
    return out


PROMPT = "approve / edit / reject [a/e/r]: "
"""The question asked for each review."""

_TRIES = 5


def terminal_review(out: TextIO) -> Callable[[dict[str, Any]], Any]:
    """A ``review`` callback (:mod:`ragplan.runs`) that shows the plan on ``out`` and reads ``approve / edit / reject``
    from standard input (``e`` opens ``$EDITOR`` or reads lines up to an empty one; ReviewDeferred when input ends)."""
    from ragplan.runs import ReviewDeferred

    def say(text: str = "", end: str = "\n") -> None:
        print(text, end=end, file=out, flush=True)

    def line() -> str | None:
        got = sys.stdin.readline()
        return None if got == "" else got.rstrip("\n")

    def edit(payload: dict[str, Any]) -> str:
        """The new plan from ``$EDITOR`` (or from standard input until an empty line)."""
        fmt = payload.get("format") or "the plan"
        editor = os.environ.get("EDITOR", "").strip()
        if not editor:
            say(f"Write the new plan ({fmt}); end with an empty line:")
            return "\n".join(itertools.takewhile(str.strip, iter(line, None))).strip()
        steps = "\n".join(str(s) for s in payload.get("steps") or [])
        fd, path = tempfile.mkstemp(prefix="ragplan-plan-", suffix=".txt")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(f"# Edit the plan below: {fmt}.\n# Lines starting with \"# \" are ignored. Save and quit to "
                         f"continue; an empty plan keeps the one shown.\n{steps}\n")
            try:
                code = subprocess.run([*shlex.split(editor), path]).returncode
            except OSError as exc:
                say(f"cannot run EDITOR={editor!r}: {exc}")
                return ""
            if code != 0:
                say(f"the editor exited with {code}; the plan is unchanged")
                return ""
            with open(path, encoding="utf-8") as fh:
                kept = [ln for ln in fh.read().splitlines() if not (ln.lstrip().startswith("# ") or ln.strip() == "#")]
            return "\n".join(kept).strip()
        finally:
            os.unlink(path)

    def review(payload: dict[str, Any]) -> Any:
        kind = "re-plan" if payload.get("kind") == "replan" else "plan"
        rnd, most = payload.get("round", 1), payload.get("max_rounds", 1)
        say(f"\nReview the {kind} ({payload.get('method', '-')}){f', answer {rnd} of {most}' if rnd > 1 else ''}:")
        if payload.get("error"):
            say(f"  refused: {payload['error']}")
        for text in str(payload.get("plan", "")).splitlines() or ["(empty)"]:
            say(f"  {text}")
        for _ in range(_TRIES):
            say(PROMPT, end="")
            answer = line()
            if answer is None:
                say()
                raise ReviewDeferred("no answer: standard input ended")
            word = answer.strip().lower()
            if word in ("a", "approve"):
                return {"action": "approve"}
            if word in ("r", "reject"):
                say("reason (optional): ", end="")
                return {"action": "reject", "reason": (line() or "").strip()}
            if word in ("e", "edit"):
                if text := edit(payload):
                    return {"action": "edit", "plan": text}
                say("no plan written; the plan is unchanged")
                continue
            say("answer a (approve), e (edit) or r (reject)")
        raise ReviewDeferred(f"no answer after {_TRIES} prompts")

    return review


def run_traced(start: Callable[..., Any], family: MethodFamily, out: Any, args: argparse.Namespace, hint: str) -> Any:
    """``start(review, on_update)`` with a terminal plan review and the family's trace on ``out`` (none with
    ``--quiet``); a kill or a pause for review prints the command that continues (``hint``)."""
    from ragplan.state.review import AWAITING_REVIEW

    emit = lambda ln: print(ln, file=out, flush=True)  # noqa: E731
    try:
        res = start(terminal_review(out), None if args.quiet else lambda node, upd: family.trace(node, upd, emit))
    except KeyboardInterrupt:
        print(f"\nstopped; continue with: {hint}", file=sys.stderr)
        raise
    if res.stop_reason == AWAITING_REVIEW:
        print(f"\nThe run is paused for plan review; continue with: {hint}", file=sys.stderr)
    return res


def run(args: argparse.Namespace) -> int:
    """Run ``ragplan ask``: check the LLM configuration and the method's data at once, run and print."""
    from ragplan.checkpoints import new_thread_id
    from ragplan.llm_cache import track_cache_usage
    from ragplan.runs import start_run

    family, question, ctx, inputs = _prepare(args)
    out = print_header(args, args.method, ctx.model, ctx.base_url, question,
                       family.data_line(ctx) if family.graph(args.method).uses_data else "")
    thread = args.thread or new_thread_id()
    hint = resume_hint(thread, args.checkpoint_db)
    print(f"Thread: {thread}  (resume with: {hint})", file=sys.stderr if args.quiet else out, flush=True)
    with track_cache_usage() as cache_usage:
        res = run_traced(lambda review, on_update: start_run(
            args.method, question, ctx, inputs=inputs, thread_id=thread, checkpoint_db=args.checkpoint_db,
            review=review, on_update=on_update), family, out, args, hint)
    extra = []
    if ctx.llm_cache_dir:
        c = cache_usage.summary()
        extra.append(f"LLM cache: {ctx.llm_cache_dir}{' (replay)' if ctx.llm_replay else ''}   entries used: "
                     f"{c['entries']} ({c['replayed']} replayed, {c['recorded']} recorded)   fingerprint: "
                     f"{c['fingerprint'][:16]}")
    return print_result(res, args.json, extra)


def print_result(res: Any, as_json: bool, extra: Sequence[str] = ()) -> int:
    """Print a finished run (the whole result as JSON, or ``Answer: …``, the family's lines and the totals); the exit
    code: 0 for an answer without error, else 1."""
    if as_json:
        print(json.dumps(res.model_dump(mode="json"), ensure_ascii=False))
    else:
        u = res.usage
        print(f"\nAnswer: {res.answer or '(none)'}")
        for line in [*res.summary_lines(), f"LLM calls: {u.llm_calls}   Tokens: {u.input_tokens} in / "
                     f"{u.output_tokens} out   Wall time: {res.wall_time_s:.2f} s (LLM {u.llm_seconds:.2f} s)", *extra]:
            print(line)
        if res.error:
            print(f"error: {res.error}", file=sys.stderr)
    return 0 if res.answer and not res.error else 1
