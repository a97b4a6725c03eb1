"""``ragplan cypher``: load a script (or connect to Neo4j) and print the rows of one read-only query."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from typing import Any, get_type_hints

from ragplan.cli.errors import fail

__all__ = ["add_parser", "run"]

#: The store settings of the property-graph context that ``cypher`` takes, with its own bounds for a person reading.
STORE = ("graph_path", "neo4j_uri", "neo4j_user", "neo4j_database", "neo4j_replace", "row_cap", "query_timeout_s")
DEFAULTS = {"row_cap": 1000, "query_timeout_s": 30.0}


def add_parser(sub: Any) -> None:
    """Register ``ragplan cypher``; its store flags are generated from the property-graph context."""
    from ragplan.cli.settings import add_field_flag
    from ragplan.state.context import GraphDBContext

    cy = sub.add_parser("cypher", help="run one read-only Cypher query against a script's graph (or Neo4j)",
                        description="Load a Neo4j-dialect script into the embedded store and print the rows of a "
                                    "read-only query. Write queries are refused (exit 2) and change nothing.")
    hints, ctx = get_type_hints(GraphDBContext), GraphDBContext()
    for f in (f for f in fields(GraphDBContext) if f.name in STORE):  # numbers typed by argparse here
        kind = hints[f.name]
        add_field_flag(cy, f, kind, DEFAULTS.get(f.name, getattr(ctx, f.name)),
                       **({"type": kind} if kind in (int, float) else {}))
    cy.add_argument("--json", action="store_true", help="print one JSON object per row instead of a table")
    cy.add_argument("--schema", action="store_true",
                    help="print the graph schema (labels, relationships, example values)")
    cy.add_argument("query", nargs="?", help="the Cypher query")


def run(args: argparse.Namespace) -> int:
    """Run ``ragplan cypher``: 0 rows printed, 1 the query failed or timed out, 2 bad input or a refused write."""
    from ragplan.cli.settings import given_settings
    from ragplan.eval.figures import format_table
    from ragplan.state.context import GraphDBContext
    from ragplan.tools.graphdb import QueryError, QueryRefused, QueryTimeout, ScriptError, StoreSpec, open_store
    from ragplan.tools.graphdb.schema import format_value

    if not args.query and not args.schema:
        return fail("give a QUERY (or --schema)")
    ctx = GraphDBContext(**{**DEFAULTS, **given_settings(args)})  # the environment fills the Neo4j settings not given
    if not ctx.graph_path and not ctx.neo4j_uri:
        return fail("give --graph FILE.cql (or --neo4j-uri / NEO4J_URI for a Neo4j server)")
    try:
        store = open_store(StoreSpec.from_env(**{k: getattr(ctx, k) for k in STORE[:5]}))
    except ScriptError as exc:
        return fail(f"the graph script does not load: {exc}")
    except Exception as exc:  # driver / connection errors
        return fail(f"the graph store could not be opened: {type(exc).__name__}: {exc}")
    if args.schema:
        print(json.dumps(store.schema().to_dict(), default=str) if args.json else store.schema().to_prompt())
        if not args.query:
            return 0
    try:
        res = store.query(args.query, row_cap=ctx.row_cap, timeout_s=ctx.query_timeout_s)
    except QueryRefused as exc:
        return fail(f"{exc}. The store was not changed.", 2, "refused")
    except QueryTimeout as exc:
        return fail(f"{exc}", 1, "timeout")
    except QueryError as exc:
        return fail(f"{exc}", 1, "query error")
    if args.json:
        for row in res.rows:
            print(json.dumps(row, ensure_ascii=False, default=str))
    else:
        print(format_table(res.columns, [[format_value(r.get(c)) for c in res.columns] for r in res.rows], style="grid")
              if res.columns else "(no columns)")
        print(f"({len(res.rows)} row{'s' if len(res.rows) != 1 else ''}, {res.elapsed_ms:.1f} ms)")
    if res.truncated:
        print(f"note: {res.total_rows} rows in all, {len(res.rows)} shown (raise --row-cap to see more)",
              file=sys.stderr)
    for w in res.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0
