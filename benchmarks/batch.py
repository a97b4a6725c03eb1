"""Batch throughput of the evaluation runner against an endpoint with a fixed latency.

A local OpenAI-compatible server (the tests' stub) answers every request after ``--latency`` seconds;
``single_rag`` runs over ``--n`` generated DQA building questions (two LLM calls each: the query and the
answer) at each concurrency. Efficiency is the ideal wall time (calls × latency / concurrency) divided
by the measured one: 1.0 means the runner kept ``concurrency`` requests in flight all the time.

    .venv/bin/python benchmarks/batch.py [--n 64] [--latency 0.2] [--concurrency 1,4,16,32]
                                         [--save FILE.json] [--baseline FILE.json]

Targets (issue 13): efficiency ≥ 0.8 at 16 and ≥ 0.7 at 32.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.common import load_baseline, print_rows, save_report  # noqa: E402


def _responder(latency: float) -> Any:
    from ragplan.nodes.planrag.answer import FinalAnswer
    from ragplan.nodes.planrag.retrieve import RetrievalAction
    from tests.openai_server import Fault

    def respond(req: Any) -> Any:
        if req.forced_tool == "RetrievalAction":
            reply: Any = RetrievalAction(thought="prices", action="graph_db",
                                         action_input="MATCH (b:Building) RETURN b.id AS id LIMIT 5")
        else:
            reply = FinalAnswer(answer="1", rationale="r")
        return Fault(delay_s=latency, reply=reply)

    return respond


def measure(n: int, latency: float, concurrency: int, clone: Path, work: Path) -> dict[str, Any]:
    """One runner pass at ``concurrency``: wall time, calls and efficiency."""
    from ragplan.eval.runner import RunSettings, evaluate
    from tests.openai_server import OpenAIStub

    with OpenAIStub(responder=_responder(latency)) as stub:
        settings = RunSettings(method="single_rag", benchmark="dqa-building", data=str(clone), model="openai:stub",
                               base_url=stub.base_url, limit=n, concurrency=concurrency,
                               context={"llm_max_retries": 0})
        t0 = time.perf_counter()
        summary = asyncio.run(evaluate(settings, work / f"run-c{concurrency}"))
        wall = time.perf_counter() - t0
        calls = len(stub.requests)
    ideal = calls * latency / concurrency
    return {"concurrency": concurrency, "questions": summary["overall"]["n"], "calls": calls,
            "wall_s": round(wall, 3), "ideal_s": round(ideal, 3), "efficiency": round(ideal / wall, 3)}


def main(argv: list[str] | None = None) -> int:
    """Run the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=64, help="questions (default 64)")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per LLM request (default 0.2)")
    ap.add_argument("--concurrency", default="1,4,16,32", help="comma-separated concurrencies")
    ap.add_argument("--save", type=Path, help="write this run's rows as JSON")
    ap.add_argument("--baseline", type=Path, help="a report saved with --save: show its efficiency and the ratio")
    args = ap.parse_args(argv)
    os.environ.pop("OPENAI_API_KEY", None)
    from ragplan.dqa.generate import generate

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        generate(work / "clone", "building", args.n, seed=0)
        measure(min(4, args.n), args.latency, 4, work / "clone", work / "warm")  # imports, first store load
        rows = [measure(args.n, args.latency, int(c), work / "clone", work) for c in args.concurrency.split(",")]
    print(f"single_rag, {args.n} questions, {args.latency:g} s per request")
    print_rows(rows, [("concurrency", "d"), ("questions", "d"), ("calls", "d"), ("wall_s", ".2f"), ("ideal_s", ".2f"),
                      ("efficiency", ".2f")], key="concurrency", baseline=load_baseline(args.baseline), compare="efficiency")
    save_report(args.save, "batch", rows, n=args.n, latency=args.latency)
    return 0


if __name__ == "__main__":
    sys.exit(main())
