"""What checkpoints cost: the evaluation runner with and without per-question checkpoints, and one `ask` run.

1. The runner (as benchmarks/batch.py: ``single_rag`` over generated DQA building questions, the local
   stub in a process of its own answering each request after ``--latency`` seconds) at each concurrency,
   with ``checkpoints`` on and off, alternated and repeated ``--repeats`` times after a warm-up pass; the
   table shows medians of wall time, efficiency (ideal / measured wall time) and the runner's CPU time
   per question.
2. One ``planrag`` question through :func:`ragplan.runs.start_run` (SQLite checkpoint after every node, as
   ``ragplan ask`` does) against the same run without a checkpointer, with a scripted model (no network):
   the median wall time per run.

    .venv/bin/python benchmarks/checkpoints.py [--n 64] [--latency 0.2] [--concurrency 1,16]
                                               [--repeats 3] [--save FILE.json] [--baseline FILE.json]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.batch import latency_endpoint  # noqa: E402
from benchmarks.common import load_baseline, print_rows, save_report  # noqa: E402


def runner_pass(n: int, concurrency: int, checkpoints: bool, clone: Path, out: Path, base_url: str) -> dict[str, float]:
    """One runner pass: wall time, CPU time and LLM calls."""
    from ragplan.eval.runner import RunSettings, evaluate

    settings = RunSettings(method="single_rag", benchmark="dqa-building", data=str(clone), model="openai:stub",
                           base_url=base_url, limit=n, concurrency=concurrency, checkpoints=checkpoints,
                           context={"llm_max_retries": 0})
    c0, t0 = time.process_time(), time.perf_counter()
    summary = asyncio.run(evaluate(settings, out))
    return {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, "calls": int(summary["cost"]["llm_calls"])}


def ask_runs(repeats: int, work: Path) -> list[dict[str, Any]]:
    """Median wall time of one scripted planrag run, checkpointed (SQLite) and not."""
    from ragplan.api import ask
    from ragplan.nodes.planrag.answer import FinalAnswer
    from ragplan.nodes.planrag.plan import Plan
    from ragplan.nodes.planrag.replan import ReplanDecision
    from ragplan.nodes.planrag.retrieve import RetrievalAction
    from tests.data import QUESTION, TRADE_NETWORK
    from tests.scripted import ScriptedChatModel

    cql = work / "trade.cql"
    cql.write_text(TRADE_NETWORK)
    q = "MATCH (t:Trade_node) RETURN t.name AS name"

    def model() -> ScriptedChatModel:
        return ScriptedChatModel(replies=[Plan(steps=["a", "b"]), RetrievalAction(thought="t", action="graph_db", action_input=q),
                                          ReplanDecision(replan=False, reason="r"),
                                          RetrievalAction(thought="t", action="graph_db", action_input=q),
                                          ReplanDecision(replan=False, reason="r"), FinalAnswer(answer="x")])

    times: dict[bool, list[float]] = {False: [], True: []}
    db = str(work / "ask.sqlite")
    for i in range(repeats + 1):
        for kept in (False, True):
            t0 = time.perf_counter()
            extra: dict[str, Any] = {"checkpoint_db": db} if kept else {}
            ask(QUESTION, "planrag", model=model(), store=str(cql), **extra)
            if i:  # the first round warms imports and caches
                times[kept].append(time.perf_counter() - t0)
    off, on = statistics.median(times[False]), statistics.median(times[True])
    return [{"run": "planrag ask", "plain_ms": round(off * 1000, 1), "checkpointed_ms": round(on * 1000, 1),
             "overhead_ms": round((on - off) * 1000, 1)}]


def main(argv: list[str] | None = None) -> int:
    """Run both tables."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=64, help="questions per runner pass (default 64)")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per LLM request (default 0.2)")
    ap.add_argument("--concurrency", default="1,16", help="comma-separated concurrencies (default 1,16)")
    ap.add_argument("--repeats", type=int, default=3, help="passes per setting (medians are shown)")
    ap.add_argument("--save", type=Path, help="write this run's rows as JSON")
    ap.add_argument("--baseline", type=Path, help="a report saved with --save: its figures and the ratio")
    args = ap.parse_args(argv)
    from ragplan.methods.planrag.generate import generate_clone

    with latency_endpoint(args.latency, args.n) as base_url, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ["RAGPLAN_CHECKPOINT_DB"] = str(work / "ask-default.sqlite")
        generate_clone(work / "clone", "building", args.n, seed=0)
        runner_pass(args.n, 16, True, work / "clone", work / "warm", base_url)  # imports, every script loaded once
        rows = _runner_rows(args, work, base_url)
        ask_rows = ask_runs(max(5, args.repeats * 3), work)
    print(f"runner: single_rag, {args.n} questions, {args.latency:g} s per request (endpoint in its own process), "
          f"median of {args.repeats}")
    print_rows(rows, [("concurrency", "d"), ("checkpoints", "s"), ("wall_s", ".2f"), ("efficiency", ".2f"),
                      ("cpu_ms_per_q", ".1f")], key="setting", baseline=load_baseline(args.baseline), compare="efficiency")
    print("\none question, scripted model (6 LLM decisions, 9 nodes)")
    print_rows(ask_rows, [("run", "s"), ("plain_ms", ".1f"), ("checkpointed_ms", ".1f"), ("overhead_ms", ".1f")], key="run")
    save_report(args.save, "checkpoints", rows + ask_rows, n=args.n, latency=args.latency, repeats=args.repeats)
    return 0


def _runner_rows(args: argparse.Namespace, work: Path, base_url: str) -> list[dict[str, Any]]:
    """Alternated passes with checkpoints off and on at each concurrency; medians."""
    rows: list[dict[str, Any]] = []
    for c in (int(x) for x in args.concurrency.split(",")):
        seen: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        for r in range(args.repeats):
            for on in (False, True):
                seen[on].append(runner_pass(args.n, c, on, work / "clone", work / f"c{c}-{on}-{r}", base_url))
        for on in (False, True):
            wall = statistics.median(p["wall"] for p in seen[on])
            calls = seen[on][0]["calls"]
            rows.append({"setting": f"c{c}-{'on' if on else 'off'}", "concurrency": c, "checkpoints": "on" if on else "off",
                         "wall_s": round(wall, 3), "efficiency": round(calls * args.latency / c / wall, 3),
                         "cpu_ms_per_q": round(1000 * statistics.median(p["cpu"] for p in seen[on]) / args.n, 2)})
    return rows


if __name__ == "__main__":
    sys.exit(main())
