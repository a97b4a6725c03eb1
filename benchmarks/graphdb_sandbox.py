"""Benchmark what the query sandbox costs: worker start-up and per-query overhead against in-process.

Builds the synthetic DQA-locating-size graph of ``benchmarks/graphdb_load.py`` once, loads it into
kglite here (in-process, as a reference) and in an embedded store (queries in a worker process), and
times, over ``--repeat`` rounds:

* ``store open``: spawning the first worker and waiting until it has loaded the script;
* a trivial query (``RETURN 1``) and a typical PlanRAG query, in-process (kglite directly) and in
  the worker through ``GraphStore.query`` (statement check included); the difference of the p50s is
  the per-query overhead of the check and the pipe round trip;
* ``restart after a crash``: a query that crashes the engine (sent past the check) and the next
  normal query, which waits for the replacement worker.

It prints p50 / p95 per step and, with ``--baseline FILE.json`` (written earlier with ``--save``),
the ratio of each p50 to the saved one. It is a measurement, not a test: nothing is asserted.

With ``--attacks`` it instead runs the resource-attack corpus of ``tests/test_graphdb_resources.py``
against that file's graph and prints, per attack, the wall time, the worker's peak resident size and
the start of the observation the LLM would see.

    python benchmarks/graphdb_sandbox.py [--repeat 3] [--query-runs 200] [--baseline FILE.json] [--save FILE.json]
    python benchmarks/graphdb_sandbox.py --attacks [--timeout 2]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import kglite

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from graphdb_load import percentile, synthetic_script  # noqa: E402

from ragplan.tools.graphdb import EmbeddedGraphStore, QueryError, run_graph_query, split_statements  # noqa: E402

QUERIES = {
    "trivial (RETURN 1)": "RETURN 1 AS x",
    "typical (countries at a node)": (
        "MATCH (c:Country)-[r:NodeCountry]->(t:Trade_node {name: 'node_0'}) "
        "RETURN c.name AS country, r.base_trading_power AS power ORDER BY power DESC LIMIT 10"
    ),
}
CRASH = " UNION ".join(f"RETURN {i} AS x" for i in range(600))  # segfaults kglite 0.21 (the check refuses it)


def run(args: argparse.Namespace) -> dict:
    samples: dict[str, list[float]] = {}
    text = synthetic_script(80, 665, 1600)
    graph = kglite.KnowledgeGraph()
    for st in split_statements(text):
        graph.cypher(st.text)
    in_process = graph.freeze()
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        store = EmbeddedGraphStore.from_text(text, source="bench.cql")
        samples.setdefault("store open (spawn + load script)", []).append((time.perf_counter() - t0) * 1000)
        for name, cypher in QUERIES.items():
            for label, run_query in (("in-process", lambda c: list(in_process.cypher(c, row_limit=100))),
                                     ("worker", lambda c: store.query(c, row_cap=100))):
                for _ in range(args.query_runs):
                    t0 = time.perf_counter()
                    run_query(cypher)
                    samples.setdefault(f"{name}, {label}", []).append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        try:
            store.sandbox.run(CRASH, row_cap=10, timeout_s=5)
        except QueryError:
            pass
        store.query("RETURN 1 AS x")
        samples.setdefault("restart after a crash (crash + next query)", []).append((time.perf_counter() - t0) * 1000)
        store.close()
    results = {
        step: {"n": len(v), "p50_ms": round(percentile(v, 50), 3), "p95_ms": round(percentile(v, 95), 3),
               "mean_ms": round(statistics.fmean(v), 3)}
        for step, v in samples.items()
    }
    overhead = {
        name: round(results[f"{name}, worker"]["p50_ms"] - results[f"{name}, in-process"]["p50_ms"], 3) for name in QUERIES
    }
    return {
        "config": {"repeat": args.repeat, "query_runs": args.query_runs},
        "environment": {"python": platform.python_version(), "kglite": getattr(kglite, "__version__", "?"),
                        "machine": platform.machine()},
        "results": results,
        "overhead_p50_ms": overhead,
    }


def run_attacks(timeout_s: float) -> None:
    """Run the test corpus of resource attacks and print what each cost."""
    sys.path.insert(0, str(ROOT))
    from tests.test_graphdb_resources import ATTACKS, PeakSampler, graph_script

    store = EmbeddedGraphStore.from_text(graph_script(), source="attack.cql")
    pool = store.sandbox
    pool.warm_up()
    print(f"{'attack':30} {'s':>5} {'peak MB':>8}  observation")
    worst_s, worst_mb = 0.0, 0
    for name, query, _ in ATTACKS:
        before = list(pool.exits)
        with PeakSampler(pool) as sampler:
            t0 = time.monotonic()
            out = run_graph_query(store, query, row_cap=100, timeout_s=timeout_s)
            elapsed = time.monotonic() - t0
        ended = [e for e in pool.exits if all(e is not b for b in before)]
        peak = max([sampler.peak] + [e.peak_rss_bytes for e in ended]) >> 20
        worst_s, worst_mb = max(worst_s, elapsed), max(worst_mb, peak)
        print(f"{name:30} {elapsed:5.2f} {peak:8d}  {out.observation.splitlines()[0][:90]}")
    print(f"worst: {worst_s:.2f} s (budget {timeout_s:g} s + 1 s grace), {worst_mb} MB peak worker memory")
    store.close()


def print_table(report: dict, baseline: dict | None) -> None:
    env = report["environment"]
    print(f"kglite {env['kglite']}, Python {env['python']}, {env['machine']}")
    base = (baseline or {}).get("results", {})
    header = f"{'step':46} {'n':>5} {'p50 ms':>9} {'p95 ms':>9}"
    if baseline is not None:
        header += f" {'base p50':>9} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for step, r in report["results"].items():
        line = f"{step:46} {r['n']:>5} {r['p50_ms']:>9.3f} {r['p95_ms']:>9.3f}"
        if baseline is not None:
            b = base.get(step)
            line += f" {b['p50_ms']:>9.3f} {r['p50_ms'] / b['p50_ms']:>6.2f}x" if b and b.get("p50_ms") else f" {'-':>9} {'-':>7}"
        print(line)
    for name, ms in report["overhead_p50_ms"].items():
        print(f"per-query overhead of the worker, {name}: {ms:+.3f} ms (p50)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="rounds (a fresh store and worker each; default 3)")
    ap.add_argument("--query-runs", type=int, default=200, help="runs of each query per round and mode (default 200)")
    ap.add_argument("--baseline", type=Path, help="a JSON report saved earlier with --save: print ratios against it")
    ap.add_argument("--save", type=Path, help="write this run's report as JSON")
    ap.add_argument("--attacks", action="store_true", help="run the resource-attack corpus instead and print its costs")
    ap.add_argument("--timeout", type=float, default=2.0, help="query time budget for --attacks (default 2 s)")
    args = ap.parse_args(argv)
    if min(args.repeat, args.query_runs) < 1:
        ap.error("--repeat and --query-runs must be at least 1")
    if args.attacks:
        run_attacks(args.timeout)
        return 0
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    report = run(args)
    print_table(report, baseline)
    if args.save:
        args.save.write_text(json.dumps(report, indent=2) + "\n")
        print(f"saved {args.save}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
