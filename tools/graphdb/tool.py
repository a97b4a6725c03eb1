"""Opening stores (cached per process) and the ``graph_db`` LangChain tool; every failure becomes the observation."""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ragplan.tools.graphdb.embedded import EmbeddedGraphStore
from ragplan.tools.graphdb.readonly import QueryRefused
from ragplan.tools.graphdb.schema import format_rows
from ragplan.tools.graphdb.script import ScriptError, read_script
from ragplan.tools.graphdb.store import GraphStore, QueryError, QueryTimeout

if TYPE_CHECKING:  # (LangChain is imported when a graph makes the tool; `ragplan cypher` runs without it)
    from langchain_core.tools import StructuredTool

__all__ = ["StoreSpec", "QueryOutcome", "open_store", "run_graph_query", "make_graph_db_tool", "GRAPH_DB_DESCRIPTION"]

#: How many stores stay loaded at once (DQA has one script per question).
STORE_CACHE_SIZE = 8
#: Longest observation handed to the LLM, in characters (100 rows of full nodes stay well below it).
OBSERVATION_CHARS = 100_000


@dataclass(frozen=True)
class StoreSpec:
    """Where a run's graph lives: a script for the embedded engine, or a Neo4j server."""

    graph_path: str = ""
    """A Neo4j-dialect ``.cql`` script; loaded into the embedded engine (or into Neo4j with a URI)."""
    neo4j_uri: str = ""
    """``bolt://host:7687`` / ``neo4j://…``: use a Neo4j server instead of the embedded engine."""
    neo4j_user: str = ""
    """Neo4j user (default ``NEO4J_USER`` or ``neo4j``); the password comes from ``NEO4J_PASSWORD``."""
    neo4j_database: str = ""
    """Neo4j database name (default: the server's default database)."""
    neo4j_replace: bool = False
    """When loading ``graph_path`` into Neo4j, clear a non-empty database first."""

    @classmethod
    def from_env(cls, **overrides: Any) -> "StoreSpec":
        """A spec from ``NEO4J_URI`` / ``NEO4J_USER`` / ``NEO4J_DATABASE`` with explicit overrides winning."""
        base = {f"neo4j_{k}": os.environ.get(f"NEO4J_{k.upper()}", "") for k in ("uri", "user", "database")}
        return cls(**{**base, **{k: v for k, v in overrides.items() if v not in (None, "")}})


_cache: "OrderedDict[tuple, GraphStore]" = OrderedDict()
_cache_lock = threading.Lock()
_loading: dict[tuple, threading.Lock] = {}


def open_store(spec: StoreSpec) -> GraphStore:
    """The store for ``spec``, loaded once per process (an edited script is reloaded) and kept in a small LRU
    cache; different scripts load concurrently. :class:`ScriptError` for a bad script, ``ValueError`` for none."""
    if spec.neo4j_uri:
        key: tuple = ("neo4j", spec.neo4j_uri, spec.neo4j_user, spec.neo4j_database, spec.graph_path)
    elif spec.graph_path:
        p = Path(spec.graph_path).expanduser().resolve()
        try:
            st = p.stat()
        except OSError as exc:
            raise ScriptError(str(p), 0, f"cannot read the file: {exc.strerror or exc}") from exc
        key = ("embedded", str(p), st.st_size, st.st_mtime_ns)
    else:
        raise ValueError("no graph store configured: give a .cql script (graph_path / --graph) or a Neo4j URI")
    with _cache_lock:
        loading = _loading.setdefault(key, threading.Lock())
    try:
        with loading:
            with _cache_lock:
                if key in _cache:
                    _cache.move_to_end(key)
                    return _cache[key]
            store = _build(spec)
            with _cache_lock:
                if (have := _cache.get(key)) is not None:  # built meanwhile under a newer lock (after a failed load)
                    if isinstance(store, EmbeddedGraphStore):
                        store.sandbox.release()
                    return have
                _cache[key] = store
                while len(_cache) > STORE_CACHE_SIZE:
                    _, evicted = _cache.popitem(last=False)
                    if isinstance(evicted, EmbeddedGraphStore):  # its workers go; a run holding it starts one per query
                        evicted.sandbox.release()
            return store
    finally:  # the key's lock goes once used, whether the store loaded, was cached or failed to load
        with _cache_lock:
            if _loading.get(key) is loading:  # (not a newer thread's lock for the same key)
                del _loading[key]


def _build(spec: StoreSpec) -> GraphStore:
    if spec.neo4j_uri:
        from ragplan.tools.graphdb.neo4j_store import Neo4jGraphStore

        store = Neo4jGraphStore(spec.neo4j_uri, spec.neo4j_user or None, None, spec.neo4j_database or None)
        if spec.graph_path:
            store.load_statements(read_script(spec.graph_path), source=spec.graph_path, replace=spec.neo4j_replace)
        return store
    return EmbeddedGraphStore.from_script(Path(spec.graph_path).expanduser())


class QueryOutcome(BaseModel):
    """What one graph-DB call returned, as the LLM sees it and as the trace records it."""

    ok: bool = Field(description="Whether the query ran.")
    observation: str = Field(description="Rows as compact text, or the error message.")
    error_kind: str | None = Field(default=None, description="refused | timeout | error, when not ok.")
    row_count: int = Field(default=0, description="Rows returned after the cap.")
    total_rows: int = Field(default=0, description="Rows the query produced before the cap.")
    elapsed_ms: float = Field(default=0.0, description="Query wall time in milliseconds.")


def run_graph_query(store: GraphStore, query: str, *, row_cap: int, timeout_s: float) -> QueryOutcome:
    """Run an untrusted query; every outcome (rows, refusal, timeout, any error) becomes a :class:`QueryOutcome`."""
    try:
        res = store.query(query, row_cap=row_cap, timeout_s=timeout_s)
        text = format_rows(res.columns, res.rows, res.total_rows, res.total_exact, OBSERVATION_CHARS)
        if res.warnings:
            text += "\n" + "\n".join(f"(warning: {w})" for w in res.warnings)
    except (QueryRefused, QueryError) as exc:  # a QueryTimeout is a QueryError
        kind, what = (("refused", "refused") if isinstance(exc, QueryRefused) else
                      ("timeout", "timed out") if isinstance(exc, QueryTimeout) else ("error", "error"))
        return _failed(kind, f"Query {what}: {exc}")
    except RecursionError:
        return _failed("error", "Query error: the result nests values too deeply to show: return something flatter")
    except Exception as exc:  # whatever else happened, the LLM gets an observation and the run goes on
        return _failed("error", f"Query error: {type(exc).__name__}: {exc}")
    return QueryOutcome(ok=True, observation=_cut(text), row_count=len(res.rows), total_rows=res.total_rows,
                        elapsed_ms=round(res.elapsed_ms, 2))


def _failed(kind: str, message: str) -> QueryOutcome:
    return QueryOutcome(ok=False, observation=_cut(message), error_kind=kind)


def _cut(text: str) -> str:
    if len(text) <= OBSERVATION_CHARS:
        return text
    return text[:OBSERVATION_CHARS] + (f"\n(observation cut at {OBSERVATION_CHARS:,} characters: "
                                       "return fewer or shorter values)")


GRAPH_DB_DESCRIPTION = (
    "Graph DB: runs one read-only Cypher query (Neo4j dialect) against the property graph described "
    "by the schema and returns the result rows. Use it whenever you need data from the graph. Write "
    "clauses are refused; results are capped, so aggregate, filter or ORDER BY … LIMIT on the server."
)


class _GraphDBArgs(BaseModel):
    query: str = Field(description="One syntactically correct, read-only Cypher statement.")


#: Per store, its tools by (row cap, timeout); a tool holds its store weakly, so this never keeps a store alive.
_tools: weakref.WeakKeyDictionary[GraphStore, dict[tuple[int, float], StructuredTool]] = weakref.WeakKeyDictionary()
_tools_lock = threading.Lock()


def make_graph_db_tool(store: GraphStore, *, row_cap: int = 100, timeout_s: float = 10.0) -> StructuredTool:
    """The ``graph_db`` tool over ``store`` (text content, :class:`QueryOutcome` artifact), made once per (store, row
    cap, timeout): a new tool inspects its function's signature on its first call, which costs more than the query."""
    from langchain_core.tools import StructuredTool

    key = (int(row_cap), float(timeout_s))
    with _tools_lock:
        tools = _tools.setdefault(store, {})
        if key in tools:
            return tools[key]
    ref = weakref.ref(store)

    def graph_db(query: str) -> tuple[str, QueryOutcome]:
        current = ref()  # None: the caller dropped the store between making the tool and calling it
        outcome = (run_graph_query(current, query, row_cap=row_cap, timeout_s=timeout_s) if current is not None
                   else _failed("error", "Query error: the graph store is closed"))
        return outcome.observation, outcome

    tool = StructuredTool.from_function(graph_db, name="graph_db", description=GRAPH_DB_DESCRIPTION,
                                        args_schema=_GraphDBArgs, response_format="content_and_artifact")
    with _tools_lock:
        return tools.setdefault(key, tool)
