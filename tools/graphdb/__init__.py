"""The graph-DB tool: one read-only Cypher store interface with an embedded and a Neo4j backend.

* :class:`GraphStore` — the interface (``query``, ``schema``), :class:`QueryResult` its rows.
* :class:`EmbeddedGraphStore` — kglite, loaded from a Neo4j-dialect script (default) in worker processes that
  run every query with time and memory budgets (:class:`SandboxSettings`); this process never imports kglite.
* :class:`Neo4jGraphStore` — a Neo4j server over Bolt, read transactions.
* :func:`check_read_only` — the statement check every query passes first, with size caps (:class:`QueryCaps`).
* :func:`open_store` — a cached store for a script path or a Neo4j URI (each script loads once per process).
* :func:`make_graph_db_tool` — the LangChain tool the retrieve node calls.
"""

from ragplan.tools.graphdb.embedded import EmbeddedGraphStore
from ragplan.tools.graphdb.neo4j_store import Neo4jGraphStore
from ragplan.tools.graphdb.readonly import QueryCaps, QueryRefused, check_read_only
from ragplan.tools.graphdb.sandbox import SandboxSettings
from ragplan.tools.graphdb.schema import GraphSchema, format_rows
from ragplan.tools.graphdb.script import ScriptError, Statement, read_script, split_statements
from ragplan.tools.graphdb.store import GraphStore, QueryError, QueryResult, QueryTimeout
from ragplan.tools.graphdb.tool import StoreSpec, make_graph_db_tool, open_store, run_graph_query

__all__ = [
    "EmbeddedGraphStore", "GraphSchema", "GraphStore", "Neo4jGraphStore", "QueryCaps", "QueryError", "QueryRefused",
    "QueryResult", "QueryTimeout", "SandboxSettings", "ScriptError", "Statement", "StoreSpec", "check_read_only", "format_rows",
    "make_graph_db_tool", "open_store", "read_script", "run_graph_query", "split_statements",
]
