"""Benchmark what the query sandbox costs: worker start-up and per-query overhead against in-process.

On the synthetic graph of ``benchmarks/graphdb_load.py``, over ``--repeat`` rounds: opening a store
(spawn the first worker, load the script); a trivial and a typical query in-process (kglite here) and
in the worker (statement check and pipe round trip included: the p50 difference is the overhead); the
restart after a query that crashes the engine. p50 / p95 per step, ratios with ``--baseline``.
``--attacks`` instead runs the resource-attack corpus of ``tests/test_graphdb_resources.py`` and prints
each attack's wall time, peak worker memory and observation. A measurement, not a test.

    python benchmarks/graphdb_sandbox.py [--repeat 3] [--query-runs 200] [--baseline FILE.json] [--save FILE.json]
    python benchmarks/graphdb_sandbox.py --attacks [--timeout 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import suppress
from pathlib import Path

import kglite

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import save_report  # noqa: E402
from graphdb_load import print_steps, step_rows, synthetic_script, timed  # noqa: E402

from ragplan.tools.graphdb import EmbeddedGraphStore, QueryError, run_graph_query, split_statements  # noqa: E402

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
    rows = run(args)
    print(f"kglite {getattr(kglite, '__version__', '?')}")
    print_steps(rows, args.baseline)
    p50 = {r["step"]: r["p50_ms"] for r in rows}
    for name in QUERIES:  # the check and the pipe round trip
        overhead = p50[f"{name}, worker"] - p50[f"{name}, in-process"]
        print(f"per-query overhead of the worker, {name}: {overhead:+.3f} ms (p50)")
    save_report(args.save, "graphdb_sandbox", rows, kglite=getattr(kglite, "__version__", "?"),
                config={"repeat": args.repeat, "query_runs": args.query_runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
