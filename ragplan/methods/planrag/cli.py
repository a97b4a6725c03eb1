"""``ragplan dqa verify | solve | generate``: the DQA benchmark's simulators, without an LLM."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from typing import Any

from ragplan.cli.errors import fail

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """Register ``ragplan dqa …`` on the top-level subparsers."""
    dqa = sub.add_parser("dqa", help="DQA benchmark: verify gold answers, solve a question, generate scenarios",
                         description="Decision QA (PlanRAG's benchmark) with ragplan's exact simulators; no LLM involved.")
    dsub = dqa.add_subparsers(dest="dqa_command", metavar="SUBCOMMAND", required=True)
    clone = argparse.ArgumentParser(add_help=False)  # what verify and solve read
    clone.add_argument("--data", required=True, metavar="CLONE", help="a clone of the DQA repository (or its data/ folder)")
    clone.add_argument("--scenario", required=True, choices=["locating", "building"])
    v = dsub.add_parser("verify", parents=[clone], help="compare the simulator's best decision with every gold answer "
                                                        "of a clone (exit 2 when a question's script does not load)")
    v.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N questions")
    v.add_argument("--json", action="store_true", help="one JSON object per question (the last line stays `agree N/M`)")
    s = dsub.add_parser("solve", parents=[clone], help="the best decision and the ranking of all options of one question")
    s.add_argument("--question-num", required=True, type=int, metavar="N")
    s.add_argument("--json", action="store_true")
    g = dsub.add_parser("generate", help="write small synthetic DQA-style scenarios with simulated gold answers")
    g.add_argument("--scenario", required=True, choices=["locating", "building"])
    g.add_argument("--out", required=True, metavar="DIR")
    g.add_argument("--n", type=int, default=10, metavar="K",
                   help="number of questions (locating at size small: at most 42, one per country and home node; "
                        "more is refused with the maximum)")
    g.add_argument("--seed", type=int, default=0, metavar="S")
    g.add_argument("--size", choices=["small", "official"], default="small",
                   help="small (a handful of nodes) or official (DQA's sizes, for benchmarks)")


def run(args: argparse.Namespace) -> int:
    """Dispatch a ``ragplan dqa`` subcommand."""
    if "numpy" not in sys.modules:  # the simulators' products are small: more BLAS threads only wait on a busy machine
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from ragplan.methods.planrag.data import DQAError
    from ragplan.tools.graphdb.script import ScriptError

    if getattr(args, "limit", None) is not None and args.limit < 0:
        return fail("--limit must be 0 or more")
    try:
        return {"verify": _verify, "solve": _solve, "generate": _generate}[args.dqa_command](args)
    except (DQAError, ScriptError, ValueError) as exc:  # a clone, script or question that cannot be used
        return fail(str(exc))


def _verify_rows(questions: list[Any]) -> list[dict[str, Any]]:
    """One row per question: the simulator's best decision and whether it is the gold answer (or the error)."""
    from ragplan.methods.planrag.grade import solve_question

    rows = []
    for q in questions:
        row: dict[str, Any] = {"question_num": q.num, "subset": "-" if q.year is None else str(q.year), "gold": q.answer}
        try:
            found = solve_question(q).best
            best = None if found is None else str(found)
            gold = q.answer.strip().strip('"').lower()
            row.update(simulated=best, agree=best is not None and gold == best.strip().lower())
        except Exception as exc:  # a bad script is one recorded failure, never the end of the run
            row.update(simulated=None, agree=False, error=f"{type(exc).__name__}: {exc}")
        rows.append(row)
    return rows


#: From this many questions ``verify`` solves the second half in a forked process while it solves the first
#: (the questions are independent; below it the fork costs more than it saves).
SPLIT_FROM = 32


def _solve_all(questions: list[Any]) -> list[dict[str, Any]]:
    """:func:`_verify_rows` of every question, in order; on two cores or more in two halves, one in a forked worker."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import ragplan.methods.planrag.grade  # noqa: F401  (imported once, before the fork)

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1  # (Linux, where fork is safe)
    if len(questions) < SPLIT_FROM or cores < 2:
        return _verify_rows(questions)
    half = len(questions) // 2
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        later = pool.submit(_verify_rows, questions[half:])
        rows = _verify_rows(questions[:half])
        try:
            return rows + later.result()
        except Exception:  # the worker died: its half is solved here
            return rows + _verify_rows(questions[half:])


def _verify(args: argparse.Namespace) -> int:
    from ragplan.methods.planrag.data import load_questions

    questions = load_questions(args.data, args.scenario)[: args.limit]
    stats: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    rows = _solve_all(questions)
    for row in rows:
        st = stats[row["subset"]]
        st[:] = st[0] + 1, st[1] + row["agree"], st[2] + ("error" in row)
        if not args.json and not row["agree"]:
            print(f"q{row['question_num']}: gold {row['gold']!r}, simulator {row['simulated']!r}"
                  + (f"  ({row['error']})" if "error" in row else ""), file=sys.stderr)
    agree = sum(row["agree"] for row in rows)
    failed = sum(v[2] for v in stats.values())  # a script that does not load is an error of the clone: exit 2
    if args.json and rows:
        # one write: every write is checked for credentials
        print("\n".join(json.dumps(row, ensure_ascii=False) for row in rows))
    if not args.json:
        print(f"{args.scenario} — agreement of the simulator with the gold answers")
        print(f"{'year':<8} {'questions':>9} {'agree':>6} {'errors':>6} {'rate':>7}")
        for key in sorted(stats):
            n, a, e = stats[key]
            print(f"{key:<8} {n:>9} {a:>6} {e:>6} {a / n:>7.1%}")
        print(f"{'all':<8} {len(questions):>9} {agree:>6} {failed:>6} {agree / max(1, len(questions)):>7.1%}")
    print(f"agree {agree}/{len(questions)}")
    return fail(f"{failed} question(s) could not be simulated (their lines above name the file and line)") if failed else 0


def _solve(args: argparse.Namespace) -> int:
    from ragplan.methods.planrag.data import DQAError, load_questions
    from ragplan.methods.planrag.grade import solve_question
    from ragplan.methods.planrag.locating import LocatingSolution

    q = next((q for q in load_questions(args.data, args.scenario) if q.num == args.question_num), None)
    if q is None:
        raise DQAError(f"no {args.scenario} question number {args.question_num}")
    sol = solve_question(q)
    head: dict[str, Any] = {"question_num": q.num, "country": q.country}
    if isinstance(sol, LocatingSolution):
        ranked: list[dict[str, Any]] = [{"node": o.node, "profit": round(o.profit, 6), "change_pct": round(o.change_pct, 4),
                                         "has_presence": o.has_presence} for o in sol.ranked()]
        head.update(home=q.home, best=sol.best, gold=q.answer, profit_without_merchant=round(sol.baseline_profit, 6))
        table = [f"profit at {q.home} without the merchant: {sol.baseline_profit:.4f}",
                 f"{'rank':>4}  {'trade node':<28} {'profit':>10} {'change':>9}  presence"]
        table += [f"{i:>4}  {o['node']:<28} {o['profit']:>10.4f} {o['change_pct']:>+8.2f}%  "
                  f"{'yes' if o['has_presence'] else 'no'}" for i, o in enumerate(ranked, 1)]
    else:
        ranked = [{"building_id": o.building_id, "name": o.building_name, "price": round(o.price, 6),
                   "change_pct": round(o.change_pct, 4)} for o in sol.ranked()]
        head.update(goods=sol.goods, best=None if sol.best is None else str(sol.best), gold=q.answer,
                    price_in_script=round(sol.script_price, 6))
        table = [f"price of {sol.goods} in the script: {sol.script_price:.4f}",
                 f"{'rank':>4}  {'building id':>11}  {'name':<40} {'price':>10} {'change':>9}"]
        table += [f"{i:>4}  {o['building_id']:>11}  {o['name'][:40]:<40} {o['price']:>10.4f} {o['change_pct']:>+8.2f}%"
                  for i, o in enumerate(ranked, 1)]
    if args.json:
        print(json.dumps({**head, "options": ranked}, ensure_ascii=False))
        return 0
    print(f"{args.scenario} question {q.num} ({q.country}{', home ' + q.home if q.home else ', goods ' + q.goods})")
    print(f"best decision: {sol.best}   gold answer: {q.answer}")
    print("\n".join(table))
    return 0


def _generate(args: argparse.Namespace) -> int:
    from ragplan.methods.planrag.generate import generate_clone

    qs = generate_clone(args.out, args.scenario, args.n, seed=args.seed, size=args.size)
    scripts = len({q["target_gdb"] for q in qs})
    print(f"wrote {len(qs)} {args.scenario} questions and {scripts} scripts under {args.out}/data/{args.scenario}")
    return 0
