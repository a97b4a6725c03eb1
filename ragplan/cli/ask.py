"""``ragplan ask``: answer one question with any method graph, printing its family's trace as it runs.

Every family contributes its own flags (``--graph`` for PlanRAG, ``--retriever``/``--index`` for text
methods, ``--shop``/``--classifier`` for REAPER …); a flag that the chosen method's settings do not
have is an error, not silently ignored. ``--set KEY=VALUE`` sets any other field of the method's
context and ``--input KEY=JSON`` any extra graph input (REAPER's ``page_context``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from ragplan.cli.checkpointing import add_run_options, apply_run_options, ask_checkpointed
from ragplan.family import MethodFamily, Option

__all__ = ["add_ask_parser", "run_ask", "print_result", "TracePrinter", "parse_assignments", "add_cache_options", "cache_problem"]

#: Flags every family shares, and the LLM context fields they set.
COMMON_FIELDS = [("model", "model"), ("base_url", "base_url"), ("temperature", "temperature"),
                 ("structured_output", "structured_output"), ("llm_cache", "llm_cache_dir"), ("replay", "llm_replay")]


def add_ask_parser(sub: Any, *, with_family_options: bool = True) -> argparse.ArgumentParser:
    """The ``ask`` sub-command, with the flags of every method family when ``with_family_options``."""
    ask = sub.add_parser("ask", help="answer a question with any method graph and print its trace",
                         description="Run a method graph and print its trace as it goes (the plan, every query or tool "
                                     "call and what came back, every decision), then the answer, LLM calls, tokens and "
                                     "wall time. Each method family adds the flags that name its data.")
    ask.add_argument("--method", default="planrag", help="graph name (see `ragplan graphs`), default planrag")
    q = ask.add_mutually_exclusive_group(required=True)
    q.add_argument("--question", help="the question text")
    q.add_argument("--question-file", metavar="FILE", help="read the question from a text file")
    q.add_argument("--dqa", metavar="CLONE", help="ask a DQA question of a clone (with --scenario and --question-num): "
                   "its prompt and script are used and the answer is checked by simulation")
    ask.add_argument("--scenario", choices=["locating", "building"], help="with --dqa")
    ask.add_argument("--question-num", type=int, metavar="N", help="with --dqa")
    ask.add_argument("--model", default=None, help="chat model provider:name, e.g. openai:gpt-4o-mini [env RAGPLAN_MODEL]")
    ask.add_argument("--base-url", default=None,
                     help="OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, LM Studio) [env RAGPLAN_BASE_URL]")
    ask.add_argument("--temperature", type=float, default=None)
    ask.add_argument("--structured-output", choices=["function_calling", "json_schema", "text"], default=None,
                     help="how LLM decisions are parsed (text for endpoints without tool calling)")
    add_cache_options(ask)
    ask.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="any other setting of the method's context (repeatable; VALUE is JSON or text)")
    ask.add_argument("--input", action="append", default=[], metavar="KEY=JSON",
                     help="an extra graph input, e.g. --input page_context='{\"product_id\": \"…\"}' for REAPER")
    ask.add_argument("--json", action="store_true", help="print the whole result as one JSON object")
    ask.add_argument("--quiet", action="store_true", help="print only the answer and the totals")
    add_run_options(ask)
    if with_family_options:
        from ragplan.registry import families

        add_family_options(ask, families())
    return ask


def add_cache_options(parser: argparse.ArgumentParser) -> None:
    """``--llm-cache DIR`` and ``--replay`` (the LLM record/replay cache, :mod:`ragplan.llm_cache`)."""
    parser.add_argument("--llm-cache", metavar="DIR", default=None,
                        help="record every LLM request and its response in DIR (an identical request is answered "
                             "from it); see 'Record and replay' in the README")
    parser.add_argument("--replay", action="store_true", default=None,
                        help="with --llm-cache: serve every LLM call from the cache only (offline, no endpoint); "
                             "a request that was not recorded fails with llm_error")


def cache_problem(cache_dir: str, replay: bool) -> str | None:
    """Why ``--llm-cache`` / ``--replay`` cannot work as given, or None."""
    if replay and not cache_dir:
        return "--replay needs --llm-cache DIR (the cache to replay from)"
    if replay and not Path(cache_dir).is_dir():
        return f"--llm-cache {cache_dir}: no such folder, nothing to replay"
    if cache_dir and Path(cache_dir).exists() and not Path(cache_dir).is_dir():
        return f"--llm-cache {cache_dir}: not a folder"
    return None


def add_family_options(parser: argparse.ArgumentParser, fams: list[MethodFamily]) -> None:
    """One argument group per family with its flags; a flag two families share is added once (same field)."""
    seen: dict[str, Option] = {}
    for fam in fams:
        group = parser.add_argument_group(f"{fam.title} ({', '.join(g.name for g in fam.graphs)})")
        for opt in fam.options:
            if opt.flag in seen:
                if seen[opt.flag].field != opt.field:
                    raise RuntimeError(f"{opt.flag} sets {seen[opt.flag].field} in one family and {opt.field} in {fam.name}")
                continue
            seen[opt.flag] = opt
            kw: dict[str, Any] = {"dest": _dest(opt.flag), "default": None, "help": opt.help}
            if opt.action:
                kw["action"] = opt.action
            else:
                kw.update(type=opt.type, metavar=opt.metavar)
                if opt.choices:
                    kw["choices"] = list(opt.choices)
            group.add_argument(opt.flag, **kw)


def _dest(flag: str) -> str:
    return "opt_" + flag.lstrip("-").replace("-", "_")


def parse_assignments(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs with JSON values where they parse (``max_steps=8``, ``page_context={…}``), text otherwise.

    A value that starts like a JSON object or list (``{`` or ``[``) must be one: ``page_context='{bad json'`` is a
    ValueError naming the key, not a string passed on.
    """
    out: dict[str, Any] = {}
    for p in pairs:
        if "=" not in p:
            raise ValueError(f"expected KEY=VALUE, got {p!r}")
        k, v = p.split("=", 1)
        try:
            out[k.strip()] = json.loads(v)
        except json.JSONDecodeError as exc:
            if v.lstrip().startswith(("{", "[")):
                raise ValueError(f"{k.strip()}: not valid JSON ({exc.msg} at column {exc.colno}): {v[:80]!r}") from None
            out[k.strip()] = v
    return out


class TracePrinter:
    """Prints each node's update with the method family's trace printer."""

    def __init__(self, family: MethodFamily, out: TextIO = sys.stdout) -> None:
        self.family = family
        self.out = out

    def __call__(self, node: str, update: dict[str, Any]) -> None:
        self.family.trace(node, update, lambda line: print(line, file=self.out, flush=True))


def _dqa_item(args: argparse.Namespace) -> Any:
    """The DQA benchmark item named by --dqa/--scenario/--question-num, or an exit code after a message."""
    from ragplan.methods.planrag.data import DQAError
    from ragplan.eval.registry import get_benchmark

    if not args.scenario or args.question_num is None:
        print("error: --dqa needs --scenario locating|building and --question-num N", file=sys.stderr)
        return 2
    try:
        items = get_benchmark(f"dqa-{args.scenario}", args.dqa).items()
    except (DQAError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    found = [it for it in items if it.meta.get("question_num") == args.question_num]
    if not found:
        print(f"error: no {args.scenario} question number {args.question_num} in {args.dqa}", file=sys.stderr)
        return 2
    return found[0]


def _question(args: argparse.Namespace) -> tuple[str, Any] | int:
    """The question text and the benchmark item it came from (or None), or an exit code after a message."""
    item = None
    if args.dqa:
        item = _dqa_item(args)
        if isinstance(item, int):
            return item
        question = item.question
    elif args.question_file:
        try:
            question = Path(args.question_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            print(f"error: cannot read the question file: {exc}", file=sys.stderr)
            return 2
    else:
        question = (args.question or "").strip()
    if not question:
        print("error: the question is empty", file=sys.stderr)
        return 2
    return question, item


def _context(args: argparse.Namespace, family: MethodFamily, item: Any) -> Any:
    """The method's context from the flags (an error message string when a flag does not apply)."""
    from ragplan.registry import families

    names = family.context_fields()
    kw: dict[str, Any] = {fld: getattr(args, flag) for flag, fld in COMMON_FIELDS if getattr(args, flag, None) is not None}
    all_options = {o.flag: o for f in families() for o in f.options}
    for flag, opt in all_options.items():
        value = getattr(args, _dest(flag), None)
        if value is None:
            continue
        if opt.field not in names:
            return f"{flag} does not apply to {args.method} ({family.title}); its data: {family.data_help or '-'}"
        kw[opt.field] = value
    try:
        extra = family.check_settings(args.method, parse_assignments(args.set))
    except ValueError as exc:
        return f"--set {exc}"
    kw.update(extra)
    if item is not None:  # a benchmark item's own settings (a DQA question's script and simulator check)
        foreign = sorted(set(item.context) - names)
        if foreign:
            return (f"--dqa: {args.method} cannot run this question: it has no setting for its data "
                    f"({', '.join(foreign)}); use a method whose data is a property graph (see `ragplan graphs --families`)")
        kw.update(item.context)
    try:
        return family.context(**kw)
    except (TypeError, ValueError) as exc:
        return f"bad setting: {exc}"


def run_ask(args: argparse.Namespace) -> int:
    """Run ``ragplan ask``: check the LLM configuration and the method's data at once, run and print."""
    from ragplan.llm import endpoint_problem
    from ragplan.llm_cache import track_cache_usage
    from ragplan.registry import family_of

    try:
        family = family_of(args.method)
    except KeyError:
        print(f"error: unknown method {args.method!r}; see `ragplan graphs`", file=sys.stderr)
        return 2
    got = _question(args)
    if isinstance(got, int):
        return got
    question, item = got
    ctx = _context(args, family, item)
    if isinstance(ctx, str):
        print(f"error: {ctx}", file=sys.stderr)
        return 2
    try:
        inputs = {**(item.inputs if item is not None else {}), **parse_assignments(args.input)}
    except ValueError as exc:
        print(f"error: --input: {exc}", file=sys.stderr)
        return 2
    unknown = sorted(set(inputs) - set(family.input_keys))
    if unknown:
        print(f"error: --input {', '.join(unknown)}: {args.method} takes {', '.join(family.input_keys)}", file=sys.stderr)
        return 2
    problem = cache_problem(ctx.llm_cache_dir, ctx.llm_replay) or endpoint_problem(ctx.model, ctx.base_url, ctx.llm_replay)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    problem = family.prepare(args.method, ctx)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    problem = apply_run_options(args, family, ctx)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    out = sys.stderr if args.json else sys.stdout
    printer = None if args.quiet else TracePrinter(family, out)
    if printer:
        where = family.data_line(ctx) if family.graph(args.method).uses_data else ""
        print(f"Method: {args.method}   Model: {ctx.model}{'  @ ' + ctx.base_url if ctx.base_url else ''}"
              f"{'   ' + where if where else ''}", file=out)
        print(f"Question: {question}", file=out)
    with track_cache_usage() as cache_usage:
        res = ask_checkpointed(args, question, ctx, inputs, printer, out)
    cache_line = ""
    if ctx.llm_cache_dir:
        c = cache_usage.summary()
        cache_line = (f"LLM cache: {ctx.llm_cache_dir}{' (replay)' if ctx.llm_replay else ''}   entries used: {c['entries']} "
                      f"({c['replayed']} replayed, {c['recorded']} recorded)   fingerprint: {c['fingerprint'][:16]}")
    return print_result(res, args.json, extra=[cache_line] if cache_line else [])


def print_result(res: Any, as_json: bool, extra: list[str] | None = None) -> int:
    """Print a finished run as ``ask`` and ``resume`` do (the whole result as JSON, or ``Answer: …``, the family's
    lines and the totals); the exit code: 0 for an answer without error, else 1."""
    if as_json:
        print(json.dumps(res.model_dump(mode="json"), ensure_ascii=False))
    else:
        u = res.usage
        print(f"\nAnswer: {res.answer or '(none)'}")
        for line in res.summary_lines():
            print(line)
        print(f"LLM calls: {u.llm_calls}   Tokens: {u.input_tokens} in / {u.output_tokens} out   "
              f"Wall time: {res.wall_time_s:.2f} s (LLM {u.llm_seconds:.2f} s)")
        for line in extra or []:
            print(line)
        if res.error:
            print(f"error: {res.error}", file=sys.stderr)
    return 0 if res.answer and not res.error else 1
