"""``ragplan cypher``: load a script (or connect to Neo4j) and print the rows of one read-only query."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ragplan.tools.graphdb import QueryError, QueryRefused, QueryTimeout, ScriptError, StoreSpec, open_store
from ragplan.tools.graphdb.schema import format_value

__all__ = ["run_cypher", "store_spec_from_args", "open_store_or_exit"]


def store_spec_from_args(args: argparse.Namespace) -> StoreSpec:
    """The store spec named by ``--graph`` / ``--neo4j-*`` flags, environment variables filling the gaps."""
    return StoreSpec.from_env(
        graph_path=args.graph or "", neo4j_uri=args.neo4j_uri, neo4j_user=args.neo4j_user,
        neo4j_database=args.neo4j_database, neo4j_replace=bool(args.neo4j_replace),
    )


def open_store_or_exit(spec: StoreSpec) -> Any:
    """Open the store, or print why not and return None (the caller exits 2)."""
    if not spec.graph_path and not spec.neo4j_uri:
        print("error: give --graph FILE.cql (or --neo4j-uri / NEO4J_URI for a Neo4j server)", file=sys.stderr)
        return None
    try:
        return open_store(spec)
    except ScriptError as exc:
        print(f"error: the graph script does not load: {exc}", file=sys.stderr)
    except Exception as exc:  # driver / connection errors
        print(f"error: the graph store could not be opened: {type(exc).__name__}: {exc}", file=sys.stderr)
    return None


def _table(columns: list[str], rows: list[dict[str, Any]]) -> str:
    cells = [[format_value(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    line = lambda vals: " | ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    out = [line(columns), "-+-".join("-" * w for w in widths)]
    out += [line(row) for row in cells]
    return "\n".join(out)


def run_cypher(args: argparse.Namespace) -> int:
    """Run ``ragplan cypher``; see the module docstring."""
    if not args.query and not args.schema:
        print("error: give a QUERY (or --schema)", file=sys.stderr)
        return 2
    store = open_store_or_exit(store_spec_from_args(args))
    if store is None:
        return 2
    if args.schema:
        print(json.dumps(store.schema().to_dict(), default=str) if args.json else store.schema().to_prompt())
        if not args.query:
            return 0
    row_cap = args.row_cap if args.row_cap is not None else 1000
    timeout = args.query_timeout if args.query_timeout is not None else 30.0
    try:
        res = store.query(args.query, row_cap=row_cap, timeout_s=timeout)
    except QueryRefused as exc:
        print(f"refused: {exc}. The store was not changed.", file=sys.stderr)
        return 2
    except QueryTimeout as exc:
        print(f"timeout: {exc}", file=sys.stderr)
        return 1
    except QueryError as exc:
        print(f"query error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        for row in res.rows:
            print(json.dumps(row, ensure_ascii=False, default=str))
    else:
        print(_table(res.columns, res.rows) if res.columns else "(no columns)")
        print(f"({len(res.rows)} row{'s' if len(res.rows) != 1 else ''}, {res.elapsed_ms:.1f} ms)")
    if res.truncated:
        print(f"note: {res.total_rows} rows in all, {len(res.rows)} shown (raise --row-cap to see more)", file=sys.stderr)
    for w in res.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0
