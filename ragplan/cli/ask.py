"""``ragplan ask``: answer one question with a method graph, printing its trace as it runs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from dataclasses import fields

from ragplan.api import RunResult, ask, context_class
from ragplan.cli.cypher import open_store_or_exit, store_spec_from_args
from ragplan.llm import endpoint_problem
from ragplan.registry import graph_registry
from ragplan.state.context import GraphDBContext

__all__ = ["run_ask", "TracePrinter"]

OBS_LINES = 12


class TracePrinter:
    """Prints each node's update as a readable trace line block."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out

    def __call__(self, node: str, update: dict[str, Any]) -> None:
        p = lambda s="": print(s, file=self.out, flush=True)  # noqa: E731
        if node == "read_schema" and update.get("schema_text"):
            p(f"Schema read ({update['schema_text'].count(chr(10)) - 1} lines).")
        if node == "plan" and update.get("plan"):
            p("Plan:")
            for i, s in enumerate(update["plan"], 1):
                p(f"  Step {i}: {s}")
        for step in update.get("steps") or []:
            where = f" (plan step {step.plan_step}: {step.plan_step_text})" if step.plan_step else ""
            p(f"\n[{step.index}]{where}")
            if step.thought:
                p(f"  Thought: {step.thought}")
            if step.action == "finish":
                p("  Action: finish (enough data to answer)")
                continue
            p(f"  Action: {'Graph DB' if step.action == 'graph_db' else 'Self-thinking'}")
            p(f"  {'Query' if step.action == 'graph_db' else 'Input'}: {step.query}")
            lines = step.observation.splitlines() or [""]
            shown = lines[:OBS_LINES] + ([f"… ({len(lines) - OBS_LINES} more lines)"] if len(lines) > OBS_LINES else [])
            status = "" if step.ok else f" [{step.error_kind}]"
            p(f"  Observation{status}:" + ("" if len(shown) > 1 else f" {shown[0]}"))
            if len(shown) > 1:
                for ln in shown:
                    p(f"    {ln}")
        for v in update.get("replans") or []:
            p(f"  Re-plan: {'Y' if v.replan else 'N'} — {v.reason}")
            if v.replan and v.new_steps:
                p("  New remaining steps:")
                for s in v.new_steps:
                    p(f"    - {s}")
        if update.get("assessment"):
            p(f"Assessment: {update['assessment']}" + (f" — {update['assessment_reason']}" if update.get("assessment_reason") else ""))
            for q in update.get("queries") or []:
                p(f"  ({q.index}) {q.text}")
        if node in ("solve_subquery", "answer_subquery", "direct_answer", "cot_answer", "flare_draft"):
            for q in update.get("queries") or []:
                if not q.done and node != "flare_draft":
                    continue
                p(f"\n[{q.index}] {q.resolved or q.text}")
                if q.decision:
                    p(f"  Gate: {q.decision}")
                for e in q.evidence:
                    p(f"  Evidence ({e.get('score', 0):.2f}, {e.get('title', '')}): {e.get('sentence', '')}")
                if q.retrieval_error:
                    p(f"  Retrieval failed: {q.retrieval_error}")
                if q.answer:
                    p(f"  Answer: {q.answer}")
        check = update.get("decision_check")
        if check:
            p(f"\nDecision check (simulator): {check.get('text') or check.get('error')}")
        if update.get("error"):
            p(f"\nerror: {update['error']}")


def _dqa_question(args: argparse.Namespace) -> Any:
    """The DQA question named by --dqa/--scenario/--question-num, or an exit code after a message."""
    from ragplan.dqa.data import DQAError, load_questions

    if not args.scenario or args.question_num is None:
        print("error: --dqa needs --scenario locating|building and --question-num N", file=sys.stderr)
        return 2
    try:
        found = [q for q in load_questions(args.dqa, args.scenario) if q.num == args.question_num]
    except DQAError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not found:
        print(f"error: no {args.scenario} question number {args.question_num} in {args.dqa}", file=sys.stderr)
        return 2
    return found[0]


#: ``ask`` flags and the context fields they set (a method only takes the fields its context has).
FLAG_FIELDS = [("model", "model"), ("base_url", "base_url"), ("temperature", "temperature"),
               ("max_steps", "max_steps"), ("max_replans", "max_replans"), ("max_query_repairs", "max_query_repairs"),
               ("structured_output", "structured_output"), ("row_cap", "row_cap"), ("query_timeout", "query_timeout_s"),
               ("retriever", "retriever"), ("index", "index_dir"), ("beta", "beta_threshold"), ("gate_mode", "gate_mode"),
               ("top_sentences", "top_sentences"), ("wiki_cache", "wiki_cache_dir")]


def _context_from_args(args: argparse.Namespace) -> Any:
    cls = context_class(args.method)
    names = {f.name for f in fields(cls)}
    kw = {fld: getattr(args, flag) for flag, fld in FLAG_FIELDS if getattr(args, flag, None) is not None and fld in names}
    return cls(**kw)


def run_ask(args: argparse.Namespace) -> int:
    """Run ``ragplan ask``: check the LLM configuration at once, open the store, run and print."""
    if args.method not in graph_registry():
        print(f"error: unknown method {args.method!r}; see `ragplan graphs`", file=sys.stderr)
        return 2
    dqa = None
    if args.dqa:
        dqa = _dqa_question(args)
        if isinstance(dqa, int):
            return dqa
        question, args.graph = dqa.prompt, str(dqa.script)
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
    ctx = _context_from_args(args)
    if dqa is not None:  # the answer gets the simulator's verdict (check_decision)
        ctx.graph_path = str(dqa.script)
        ctx.dqa_scenario, ctx.dqa_country, ctx.dqa_home, ctx.dqa_goods = dqa.scenario, dqa.country, dqa.home, dqa.goods
    problem = endpoint_problem(ctx.model, ctx.base_url)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if isinstance(ctx, GraphDBContext):
        store = open_store_or_exit(store_spec_from_args(args))
        if store is None:
            return 2
        ctx.graph_store = store
        where = f"Graph: {getattr(store, 'source', '?')}"
    else:
        if ctx.retriever == "local" and not ctx.index_dir and getattr(ctx, "beta_threshold", 0.5) > 0 and args.method not in ("standard", "cot"):
            print("error: --retriever local needs --index DIR (build one with `ragplan index build`)", file=sys.stderr)
            return 2
        where = f"Retriever: {ctx.retriever}{' ' + ctx.index_dir if ctx.retriever == 'local' else ''}"
    out = sys.stderr if args.json else sys.stdout
    printer = None if args.quiet else TracePrinter(out)
    if printer:
        print(f"Method: {args.method}   Model: {ctx.model}{'  @ ' + ctx.base_url if ctx.base_url else ''}   {where}", file=out)
        print(f"Question: {question}", file=out)
    res = ask(question, args.method, context=ctx, on_update=printer)
    if args.json:
        print(json.dumps(res.model_dump(mode="json"), ensure_ascii=False))
    else:
        u = res.usage
        print(f"\nAnswer: {res.answer or '(none)'}")
        if isinstance(res, RunResult):
            if res.rationale:
                print(f"Rationale: {res.rationale}")
            print(f"Stopped: {res.stop_reason or '-'}   Retrieval steps: {len(res.steps)}   "
                  f"Re-plans: {sum(1 for v in res.replans if v.replan and v.applied)}")
        else:
            if res.reasoning:
                print(f"Reasoning: {res.reasoning}")
            print(f"Stopped: {res.stop_reason or '-'}   Queries: {len(res.queries)}   "
                  f"Retrieval ratio: {res.retrieval_ratio:.2f} ({res.retrieval_count} retrieved)"
                  + (f"   Confidence source: {res.confidence_source}" if res.confidence_source else ""))
        print(f"LLM calls: {u.llm_calls}   Tokens: {u.input_tokens} in / {u.output_tokens} out   "
              f"Wall time: {res.wall_time_s:.2f} s (LLM {u.llm_seconds:.2f} s)")
        if res.error:
            print(f"error: {res.error}", file=sys.stderr)
    return 0 if res.answer and not res.error else 1

