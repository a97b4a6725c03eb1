"""Benchmark the embedded graph store on a synthetic DQA-locating-size script: p50 / p95 per step of ``read_script``,
``from_script`` (worker start, load, freeze), schema introspection and typical PlanRAG queries (ratios with
``--baseline``). Usage: python benchmarks/graphdb_load.py [--help]."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import add_report_flags, load_baseline, print_rows, save_report  # noqa: E402

from ragplan.methods.planrag.generate import Size, locating_script  # noqa: E402
from ragplan.tools.graphdb import EmbeddedGraphStore, read_script  # noqa: E402

QUERIES = {
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


def step_rows(samples: dict[str, list[float]]) -> list[dict]:
    """One row per step: ``n``, ``p50_ms``, ``p95_ms`` and ``mean_ms`` of its samples."""
    return [{"step": step, "n": len(v), "p50_ms": round(float(np.percentile(v, 50)), 3),
             "p95_ms": round(float(np.percentile(v, 95)), 3), "mean_ms": round(float(np.mean(v)), 3)}
            for step, v in samples.items()]


def run(args: argparse.Namespace) -> tuple[list[dict], dict[str, object]]:
    """Time every step over ``args.repeat`` rounds; the rows and what the script and graph hold."""
    samples: dict[str, list[float]] = {}
    info: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="graphdb-bench-") as tmp:
        path = Path(tmp) / "q1.cql"
        path.write_text(synthetic_script(args.nodes, args.countries, args.relationships))
        info["script_kb"] = round(path.stat().st_size / 1024, 1)
        for _ in range(args.repeat):
            stmts = timed(samples, "read_script", lambda: read_script(path))
            store = timed(samples, "from_script (read+worker start+load+freeze)",
                          lambda: EmbeddedGraphStore.from_script(path))
            schema = timed(samples, "schema introspection", store.schema)
            for name, cypher in QUERIES.items():
                for _ in range(args.query_runs):
                    samples.setdefault(name, []).append(store.query(cypher, row_cap=100).elapsed_ms)
            info.update(statements=len(stmts), nodes=store.node_count(),
                        relationships=store.query("MATCH ()-[r]->() RETURN count(r) AS c").rows[0]["c"],
                        schema_chars=len(schema.to_prompt()))
            store.close()
    return step_rows(samples), info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=80, help="trade nodes (default 80)")
    ap.add_argument("--countries", type=int, default=665, help="countries (default 665)")
    ap.add_argument("--relationships", type=int, default=1600, help="relationships in all, about (default 1600)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of load + schema + queries (default 3)")
    ap.add_argument("--query-runs", type=int, default=10, help="runs of each query per round (default 10)")
    add_report_flags(ap, "p50_ms")
    args = ap.parse_args(argv)
    if min(args.nodes, args.countries, args.repeat, args.query_runs) < 1 or args.nodes < 2:
        ap.error("--nodes must be at least 2; --countries, --repeat and --query-runs at least 1")
    if args.relationships < 2 * (args.countries + args.nodes):
        ap.error("--relationships must cover two records per country plus the source edges (about two per node)")
    rows, info = run(args)
    print(f"script {info['script_kb']} KB, {info['statements']} statements -> {info['nodes']} nodes, "
          f"{info['relationships']} relationships; schema prompt {info['schema_chars']} chars; "
          f"kglite {version('kglite')}")
    print_rows(rows, [("step", "s"), ("n", "d"), ("p50_ms", ".3f"), ("p95_ms", ".3f")], key="step",
               baseline=load_baseline(args.baseline), compare="p50_ms")
    save_report(args.save, "graphdb_load", rows, info=info, kglite=version("kglite"),
                config={k: getattr(args, k) for k in ("nodes", "countries", "relationships", "repeat", "query_runs")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
