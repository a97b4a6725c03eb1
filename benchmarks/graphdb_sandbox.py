"""Benchmark the query sandbox (graphdb_load.py's synthetic graph): worker start-up, per-query overhead against
in-process, restart after a crash (p50/p95); ``--batch N``: peak memory of ``ragplan eval --concurrency N``.
Usage: python benchmarks/graphdb_sandbox.py [--batch 32] [--help]"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path

import kglite

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import add_report_flags, load_baseline, print_rows, save_report  # noqa: E402
from graphdb_load import step_rows, synthetic_script, timed  # noqa: E402

from ragplan.tools.graphdb import EmbeddedGraphStore, QueryError, split_statements  # noqa: E402
from ragplan.tools.graphdb.sandbox import WORKERS  # noqa: E402
from ragplan.tools.graphdb.sandbox_worker import proc_status  # noqa: E402

QUERIES = {
    "trivial (RETURN 1)": "RETURN 1 AS x",
    "typical (countries at a node)": (
        "MATCH (c:Country)-[r:NodeCountry]->(t:Trade_node {name: 'node_00'}) "
        "RETURN c.name AS country, r.base_trading_power AS power ORDER BY power DESC LIMIT 10"
    ),
}
CRASH = " UNION ".join(f"RETURN {i} AS x" for i in range(600))  # segfaults kglite 0.21 (the check refuses it)


def crash_and_query(store: EmbeddedGraphStore) -> None:
    """Crash the engine past the check, then run a normal query (which waits for the new worker)."""
    with suppress(QueryError):
        store.sandbox.run(CRASH, row_cap=10, timeout_s=5)
    store.query("RETURN 1 AS x")


def run(args: argparse.Namespace) -> list[dict]:
    """Time worker start-up, queries in-process and in the worker, and the restart after a crash."""
    samples: dict[str, list[float]] = {}
    text = synthetic_script(80, 665, 1600)
    graph = kglite.KnowledgeGraph()
    for st in split_statements(text):
        graph.cypher(st.text)
    in_process = graph.freeze()
    for _ in range(args.repeat):
        store = timed(samples, "store open (spawn + load script)",
                      lambda: EmbeddedGraphStore.from_text(text, source="bench.cql"))
        for name, cypher in QUERIES.items():
            for label, run_query in (("in-process", lambda: list(in_process.cypher(cypher, row_limit=100))),
                                     ("worker", lambda: store.query(cypher, row_cap=100))):
                for _ in range(args.query_runs):
                    timed(samples, f"{name}, {label}", run_query)
        timed(samples, "restart after a crash (crash + next query)", lambda: crash_and_query(store))
        store.close()
    return step_rows(samples)


HUNGRY = "MATCH (a:Country), (b:Country) RETURN size(collect([a, b])) AS n"  # every pair of countries


def tree(pid: int) -> tuple[int, int]:
    """Resident bytes of process ``pid`` and its descendants together, and how many query workers are among them."""
    total, workers, todo = 0, 0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += proc_status(p, "VmRSS")[0]
            workers += b"sandbox_worker" in Path(f"/proc/{p}/cmdline").read_bytes()
            todo += [int(c) for t in os.listdir(f"/proc/{p}/task") for c in Path(f"/proc/{p}/task/{t}/children").read_text().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total, workers


def run_batch(n: int, timeout_s: float) -> None:
    """``ragplan eval --method single_rag --concurrency n`` over ``n`` DQA locating questions (official size, one
    script each) whose LLM writes :data:`HUNGRY`: the peak memory of the eval's process tree, sampled every 10 ms."""
    import json
    import subprocess

    from ragplan.methods.planrag.generate import generate_clone
    from tests.auto_reply import auto_responder
    from tests.openai_server import OpenAIStub

    folder = Path(tempfile.mkdtemp(prefix="ragplan-batch-"))
    generate_clone(folder / "clone", "locating", n, seed=0, size="official")
    reply = auto_responder({"RetrievalAction": {"thought": "all pairs", "action": "graph_db", "action_input": HUNGRY},
                            "FinalAnswer": {"answer": "1"}})
    env = dict(os.environ, HF_HUB_OFFLINE="1", NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    env.pop("OPENAI_API_KEY", None)
    with OpenAIStub(responder=reply) as stub:
        cmd = [sys.executable, "-m", "ragplan", "eval", "--method", "single_rag", "--benchmark", "dqa-locating",
               "--data", str(folder / "clone"), "--concurrency", str(n), "--model", "openai:stub", "--base-url",
               stub.base_url, "--query-timeout", str(timeout_s), "--out", str(folder / "run"), "--no-progress"]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        peak, most, parent = 0, 0, 0
        while proc.poll() is None:
            rss, workers = tree(proc.pid)
            peak, most = max(peak, rss), max(most, workers)
            with suppress(OSError, ValueError, IndexError):
                parent = max(parent, proc_status(proc.pid, "VmRSS")[0])
            time.sleep(0.01)
        err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"ragplan eval failed (exit {proc.returncode}):\n{err[-3000:]}")
    steps = [json.loads(line) for line in (folder / "run" / "results.jsonl").read_text().splitlines()]
    print(f"ragplan eval, {n} DQA locating questions (official size) at concurrency {n}, every query {HUNGRY!r}, "
          f"query time budget {timeout_s:g} s; run-wide budget {WORKERS.max_workers} workers, {WORKERS.memory_mb} MB")
    print(f"peak resident memory of the process tree: {peak / (1 << 30):.2f} GB; most workers alive: {most}; "
          f"{len(steps)} questions answered; the eval process alone peaked at {parent >> 20} MB")
    print("(the run's records and trace are in", folder / "run", ")")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="rounds (a fresh store and worker each; default 3)")
    ap.add_argument("--query-runs", type=int, default=200, help="runs of each query per round and mode (default 200)")
    add_report_flags(ap, "p50_ms")
    ap.add_argument("--timeout", type=float, default=2.0, help="query time budget for --batch (default 2 s)")
    ap.add_argument("--batch", type=int, metavar="N", help="run a memory-hungry query from N threads, one script each")
    args = ap.parse_args(argv)
    if min(args.repeat, args.query_runs) < 1:
        ap.error("--repeat and --query-runs must be at least 1")
    if args.batch:
        run_batch(args.batch, args.timeout)
        return 0
    rows = run(args)
    print(f"kglite {getattr(kglite, '__version__', '?')}")
    print_rows(rows, [("step", "s"), ("n", "d"), ("p50_ms", ".3f"), ("p95_ms", ".3f")], key="step",
               baseline=load_baseline(args.baseline), compare="p50_ms")
    p50 = {r["step"]: r["p50_ms"] for r in rows}
    for name in QUERIES:  # the check and the pipe round trip
        overhead = p50[f"{name}, worker"] - p50[f"{name}, in-process"]
        print(f"per-query overhead of the worker, {name}: {overhead:+.3f} ms (p50)")
    save_report(args.save, "graphdb_sandbox", rows, kglite=getattr(kglite, "__version__", "?"),
                config={"repeat": args.repeat, "query_runs": args.query_runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
