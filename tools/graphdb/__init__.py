"""The graph-DB tool: one read-only Cypher store interface, embedded (kglite) and Neo4j (docs/reliability.md).

The backends and the tool are imported on first use, so reading a script (``ragplan dqa``) loads no pydantic or store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ragplan.tools.graphdb.readonly import QueryCaps, QueryRefused, check_read_only
from ragplan.tools.graphdb.schema import GraphSchema, format_rows
from ragplan.tools.graphdb.script import ScriptError, Statement, read_script, split_statements
from ragplan.tools.graphdb.store import GraphStore, QueryError, QueryResult, QueryTimeout

if TYPE_CHECKING:
    from ragplan.tools.graphdb.embedded import EmbeddedGraphStore
    from ragplan.tools.graphdb.neo4j_store import Neo4jGraphStore
    from ragplan.tools.graphdb.sandbox import SandboxSettings
    from ragplan.tools.graphdb.tool import StoreSpec, make_graph_db_tool, open_store, run_graph_query

_MODULE = {"EmbeddedGraphStore": "embedded", "Neo4jGraphStore": "neo4j_store", "SandboxSettings": "sandbox",
           **dict.fromkeys(["StoreSpec", "make_graph_db_tool", "open_store", "run_graph_query"], "tool")}
__all__ = [
    "EmbeddedGraphStore", "GraphSchema", "GraphStore", "Neo4jGraphStore", "QueryCaps", "QueryError", "QueryRefused",
    "QueryResult", "QueryTimeout", "SandboxSettings", "ScriptError", "Statement", "StoreSpec", "check_read_only", "format_rows",
    "make_graph_db_tool", "open_store", "read_script", "run_graph_query", "split_statements",
]


def __getattr__(name: str) -> Any:
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULE[name]}"), name)
