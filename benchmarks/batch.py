"""Batch throughput of the evaluation runner against an endpoint with a fixed latency.

A local OpenAI-compatible server (the tests' stub, in a process of its own as a real endpoint would
be) answers every request after ``--latency`` seconds; ``single_rag`` runs over ``--n`` generated DQA
building questions (two LLM calls each: the query and the answer) at each concurrency. Efficiency is
the ideal wall time (calls × latency / concurrency) divided by the measured one: 1.0 means the runner
kept ``concurrency`` requests in flight all the time. ``wall_s`` is the whole ``evaluate()`` call
(settings, questions, summary and plot); ``run_s`` is the run's own wall time as its summary reports it
(from the start of the run to its last finished question), and ``run_efficiency`` the efficiency over it:
the summary and the plot are written once per run whatever its concurrency (about 0.1-0.2 s here), which
weighs on a 64-question run at concurrency 32 (ideal 0.8 s) and not on a real one.

Imports and script loading happen before the timed part: a first pass over every question (the
``cold`` row, which loads each of the questions' distinct scripts once and starts their query
query workers) warms the process, and the store cache is made large enough to keep every script of the
run, so the timed rows measure the runner, not loading.

    .venv/bin/python benchmarks/batch.py [--n 64] [--latency 0.2] [--concurrency 1,4,16,32] [--repeat N]
                                         [--no-checkpoints] [--save FILE.json] [--baseline FILE.json]

A pass at concurrency 32 lasts about a second, and two passes of the same code differ by a few hundredths
of efficiency on a shared 2-core machine; ``--repeat N`` runs each concurrency N times and reports the
pass with the median efficiency (``passes`` shows all of them).

Targets (issue 13): efficiency ≥ 0.8 at 16 and ≥ 0.7 at 32.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
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


def serve(latency: float, ready: Any) -> None:
    """The endpoint process: the stub answering every request after ``latency`` seconds (until killed)."""
    from tests.openai_server import OpenAIStub

    stub = OpenAIStub(responder=_responder(latency), keep_alive=True).start()
    ready.put(stub.base_url)
    while True:
        time.sleep(3600)


@contextmanager
def latency_endpoint(latency: float, scripts: int) -> Iterator[str]:
    """The endpoint process (:func:`serve`) for the duration of a benchmark; yields its base URL.

    Also keeps ``scripts`` stores loaded at once (``RAGPLAN_STORE_CACHE_SIZE``, which the runner's worker
    processes read too), so every script of the run is loaded once, in the cold pass.
    """
    import multiprocessing

    import ragplan.tools.graphdb.tool as graph_tools

    os.environ.pop("OPENAI_API_KEY", None)
    spawn = multiprocessing.get_context("spawn")
    ready = spawn.Queue()
    endpoint = spawn.Process(target=serve, args=(latency, ready), daemon=True)
    endpoint.start()
    try:
        base_url = ready.get(timeout=120)
        os.environ["RAGPLAN_STORE_CACHE_SIZE"] = str(max(graph_tools.STORE_CACHE_SIZE, scripts))
        yield base_url
    finally:
        endpoint.kill()


def measure(n: int, latency: float, concurrency: int, clone: Path, work: Path, base_url: str,
            label: str = "", checkpoints: bool = True) -> dict[str, Any]:
    """One runner pass at ``concurrency``: wall time, calls, efficiency and the runner's CPU."""
    from ragplan.eval.runner import RunSettings, evaluate

    settings = RunSettings(method="single_rag", benchmark="dqa-building", data=str(clone), model="openai:stub",
                           base_url=base_url, limit=n, concurrency=concurrency, context={"llm_max_retries": 0},
                           checkpoints=checkpoints)
    t0, c0 = time.perf_counter(), time.process_time()
    summary = asyncio.run(evaluate(settings, work / f"run-c{concurrency}{label}"))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    calls = int(summary["cost"]["llm_calls"])
    run_s = float(summary["cost"].get("wall_time_s") or wall)  # the run's own wall time: first start to last answer
    errors = int(summary["overall"].get("errors", 0))
    ideal = calls * latency / concurrency
    return {"concurrency": f"{concurrency}{label}", "questions": summary["overall"]["n"], "errors": errors,
            "calls": calls, "wall_s": round(wall, 3), "ideal_s": round(ideal, 3), "efficiency": round(ideal / wall, 3),
            "run_s": round(run_s, 3), "run_efficiency": round(ideal / run_s, 3) if run_s else 0.0,
            "cpu_ms_per_q": round(cpu / max(1, n) * 1000, 2)}


def main(argv: list[str] | None = None) -> int:
    """Run the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=64, help="questions (default 64)")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per LLM request (default 0.2)")
    ap.add_argument("--concurrency", default="1,4,16,32", help="comma-separated concurrencies")
    ap.add_argument("--repeat", type=int, default=1,
                    help="passes per concurrency; the row is the pass with the median efficiency (default 1)")
    ap.add_argument("--no-checkpoints", action="store_true",
                    help="run without per-question checkpoints (ragplan eval --no-checkpoints)")
    ap.add_argument("--save", type=Path, help="write this run's rows as JSON")
    ap.add_argument("--baseline", type=Path, help="a report saved with --save: show its efficiency and the ratio")
    args = ap.parse_args(argv)
    from ragplan.methods.planrag.generate import generate_clone

    with latency_endpoint(args.latency, args.n) as base_url, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        generate_clone(work / "clone", "building", args.n, seed=0)
        concurrencies = [int(c) for c in args.concurrency.split(",")]
        ck = not args.no_checkpoints
        rows = [{**measure(args.n, args.latency, max(concurrencies), work / "clone", work, base_url, " (cold)", ck), "passes": ""}]
        for c in concurrencies:
            passes = [measure(args.n, args.latency, c, work / "clone", work, base_url, f"#{k}" if k else "", ck)
                      for k in range(max(1, args.repeat))]
            row = sorted(passes, key=lambda r: r["efficiency"])[len(passes) // 2]  # the median pass
            rows.append({**row, "concurrency": str(c), "passes": " ".join(f"{r['efficiency']:.2f}" for r in passes)})
    print(f"single_rag, {args.n} questions, {args.latency:g} s per request (endpoint in its own process), "
          f"checkpoints {'off' if args.no_checkpoints else 'on'}")
    print_rows(rows, [("concurrency", "s"), ("questions", "d"), ("errors", "d"), ("calls", "d"), ("wall_s", ".2f"),
                      ("ideal_s", ".2f"), ("efficiency", ".2f"), ("run_s", ".2f"), ("run_efficiency", ".2f"),
                      ("cpu_ms_per_q", ".1f"), ("passes", "s")], key="concurrency",
               baseline=load_baseline(args.baseline), compare="efficiency")
    save_report(args.save, "batch", rows, n=args.n, latency=args.latency)
    return 0


if __name__ == "__main__":
    sys.exit(main())
