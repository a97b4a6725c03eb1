"""Benchmark the embedded graph store on a synthetic DQA-locating-size script: p50 / p95 of reading and loading it,
the schema, typical PlanRAG queries in-process and in the query worker, the restart after a crash; ``--batch N``: peak
memory of ``ragplan eval --concurrency N``. Usage: python benchmarks/graphdb.py [--batch 32] [--help]."""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from importlib.metadata import version
from pathlib import Path
from typing import Any, Callable

import kglite
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.common import add_report_flags, print_rows, save_report  # noqa: E402
from ragplan.methods.planrag.generate import Size, generate_clone, locating_script  # noqa: E402
from ragplan.tools.graphdb import EmbeddedGraphStore, QueryError, read_script, split_statements  # noqa: E402
from ragplan.tools.graphdb.sandbox import WORKERS  # noqa: E402
from ragplan.tools.graphdb.sandbox_worker import proc_status  # noqa: E402

QUERIES = {
    "q: trivial (RETURN 1)": "RETURN 1 AS x",
    "q: countries at a node": (
        "MATCH (c:Country)-[r:NodeCountry]->(t:Trade_node {name: 'node_00'}) "
        "RETURN c.name AS country, r.base_trading_power AS power ORDER BY power DESC LIMIT 10"
    ),
    "q: downstream nodes": "MATCH (:Trade_node {name: 'node_00'})-[r:source]->(b) RETURN b.name AS node, r.flow AS f",
    "q: power per node (agg)": (
        "MATCH (:Country)-[r:NodeCountry]->(t:Trade_node) "
        "RETURN t.name AS node, sum(r.calculated_trading_power) AS power ORDER BY power DESC LIMIT 5"
    ),
    "q: paths up to 3 hops": "MATCH p = (:Trade_node {name: 'node_00'})-[:source*1..3]->(b) RETURN count(p) AS paths",
    "q: all countries (capped)": "MATCH (c:Country) RETURN c.name AS name, c.development AS dev",
}
CRASH = " UNION ".join(f"RETURN {i} AS x" for i in range(600))  # segfaults kglite 0.21 (the check refuses it)
SIZE = (80, 665, 1600)  # trade nodes, countries, relationships: DQA locating's size
REPEAT, QUERY_RUNS = 3, 50  # rounds of load + schema + queries; runs of each query per round and mode
HUNGRY = "MATCH (a:Country), (b:Country) RETURN size(collect([a, b])) AS n"  # every pair of countries


def synthetic_script(nodes: int, countries: int, relationships: int, seed: int = 1445) -> str:
    """A messy DQA-locating-style script (``ragplan dqa generate``'s) with about ``relationships`` relationships."""
    per_country = max(0.1, (relationships - 2 * nodes) / countries - 1)  # besides each country's home record
    return locating_script(random.Random(seed), Size(nodes, countries, per_country, 0, 0, 1, 1))[0]


def timed(samples: dict[str, list[float]], step: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn``, add its wall time in ms to ``samples[step]`` and return its value."""
    t0 = time.perf_counter()
    value = fn()
    samples.setdefault(step, []).append((time.perf_counter() - t0) * 1000)
    return value


def crash_and_query(store: EmbeddedGraphStore) -> None:
    """Crash the engine past the check, then run a normal query (which waits for the new worker)."""
    with suppress(QueryError):
        store.sandbox.run(CRASH, row_cap=10, timeout_s=5)
    store.query("RETURN 1 AS x")


def run() -> tuple[list[dict], dict[str, object]]:
    """Time every step over :data:`REPEAT` rounds (a fresh store and worker each); the rows and what the script and
    graph hold."""
    samples: dict[str, list[float]] = {}
    info: dict[str, object] = {}
    text = synthetic_script(*SIZE)
    graph = kglite.KnowledgeGraph()
    for st in split_statements(text):
        graph.cypher(st.text)
    in_process = graph.freeze()
    with tempfile.TemporaryDirectory(prefix="graphdb-bench-") as tmp:
        path = Path(tmp) / "q1.cql"
        path.write_text(text)
        info["script_kb"] = round(path.stat().st_size / 1024, 1)
        for _ in range(REPEAT):
            stmts = timed(samples, "read_script", lambda: read_script(path))
            store = timed(samples, "from_script (read + worker start + load + freeze)",
                          lambda: EmbeddedGraphStore.from_script(path))
            schema = timed(samples, "schema introspection", store.schema)
            for name, cypher in QUERIES.items():
                for label, run_query in (("in-process", lambda: list(in_process.cypher(cypher, row_limit=100))),
                                         ("worker", lambda: store.query(cypher, row_cap=100))):
                    for _ in range(QUERY_RUNS):
                        timed(samples, f"{name}, {label}", run_query)
            timed(samples, "restart after a crash (crash + next query)", lambda: crash_and_query(store))
            info.update(statements=len(stmts), nodes=store.node_count(),
                        relationships=store.query("MATCH ()-[r]->() RETURN count(r) AS c").rows[0]["c"],
                        schema_chars=len(schema.to_prompt()))
            store.close()
    rows = [{"step": step, "n": len(v), "p50_ms": round(float(np.percentile(v, 50)), 3),
             "p95_ms": round(float(np.percentile(v, 95)), 3), "mean_ms": round(float(np.mean(v)), 3)}
            for step, v in samples.items()]
    return rows, info


def tree(pid: int) -> tuple[int, int]:
    """Resident bytes of process ``pid`` and its descendants together, and how many query workers are among them."""
    total, workers, todo = 0, 0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += proc_status(p, "VmRSS")[0]
            workers += b"sandbox_worker" in Path(f"/proc/{p}/cmdline").read_bytes()
            todo += [int(c) for t in os.listdir(f"/proc/{p}/task")
                     for c in Path(f"/proc/{p}/task/{t}/children").read_text().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total, workers


def run_batch(n: int, timeout_s: float) -> None:
    """``ragplan eval --method single_rag --concurrency n`` over ``n`` DQA locating questions (official size, one
    script each) whose LLM writes :data:`HUNGRY`: the peak memory of the eval's process tree, sampled every 10 ms."""
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
    ap.add_argument("--batch", type=int, metavar="N", help="run a memory-hungry query from N questions at once instead")
    ap.add_argument("--timeout", type=float, default=2.0, help="query time budget for --batch (default 2 s)")
    add_report_flags(ap, "p50_ms")
    args = ap.parse_args(argv)
    if args.batch:
        run_batch(args.batch, args.timeout)
        return 0
    rows, info = run()
    print(f"script {info['script_kb']} KB, {info['statements']} statements -> {info['nodes']} nodes, "
          f"{info['relationships']} relationships; schema prompt {info['schema_chars']} chars; "
          f"kglite {version('kglite')}")
    print_rows(rows, [("step", "s"), ("n", "d"), ("p50_ms", ".3f"), ("p95_ms", ".3f")], key="step",
               baseline=args.baseline, compare="p50_ms")
    p50 = {r["step"]: r["p50_ms"] for r in rows}
    for name in QUERIES:  # the check and the pipe round trip
        print(f"per-query overhead of the worker, {name}: {p50[f'{name}, worker'] - p50[f'{name}, in-process']:+.3f} ms")
    save_report(args.save, "graphdb", rows, info=info, kglite=version("kglite"),
                config={"size": SIZE, "repeat": REPEAT, "query_runs": QUERY_RUNS})
    return 0


if __name__ == "__main__":
    sys.exit(main())
