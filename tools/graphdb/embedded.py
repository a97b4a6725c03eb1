"""The embedded backend: an in-process Cypher engine (kglite) loaded from a Neo4j-dialect script.

Why kglite: it is a pip-installable Rust engine that runs the Neo4j dialect of DQA's scripts
unchanged (``CREATE``, ``MATCH … CREATE`` with inline property maps, booleans, floats), loads a
2,300-statement locating script in well under a second, and has a per-query ``timeout_ms``, a
``row_limit`` that reports the pre-cap row count, and ``freeze()`` — an immutable snapshot that
refuses mutations and can be read from many threads at once (the evaluation runner's concurrency).

Its read-only mode is not a sandbox: ``LOAD CSV FROM "file:///…"`` and ``CALL`` procedures still
run there. The statement check in :mod:`ragplan.tools.graphdb.readonly` refuses those before the
engine sees them; the frozen snapshot refuses every mutation clause as a second wall.

Nor are its resource guards: hostile queries crash the process, grow to gigabytes or outrun
``timeout_ms``. So the store loads and reads its schema in-process (trusted, fast), but every query
through :meth:`~ragplan.tools.graphdb.GraphStore.query` runs in a worker process with a time and a
memory budget (:mod:`ragplan.tools.graphdb.sandbox`, settings :class:`SandboxSettings`, passed as
``sandbox=``). ``sandbox=None`` runs queries in-process instead — only for trusted queries and
benchmarks.

Divergences from Neo4j that matter here, and how they are handled:

* kglite keeps ``id``, ``title`` and ``type`` as structural keys on every node (``id`` is auto-
  assigned when a script does not set one). The store hides ``title``/``type`` in results and in the
  schema, and shows ``id`` only for labels whose script sets it (DQA's ``Building {id: …}``).
* ``n.id`` on a label without a script-set id returns the engine's number rather than null.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any, Iterable

import kglite

from ragplan.tools.graphdb.readonly import QueryRefused, check_read_only
from ragplan.tools.graphdb.sandbox import DEFAULT_SANDBOX, QuerySandbox, SandboxSettings, timeout_message
from ragplan.tools.graphdb.script import ScriptError, Statement, read_script, split_statements
from ragplan.tools.graphdb.store import GraphStore, QueryError, QueryResult, QueryTimeout

__all__ = ["EmbeddedGraphStore"]

# Warnings go into QueryResult.warnings (and so to the LLM), not to stderr.
kglite.set_query_warning_policy("silent")

_STRUCTURAL = ("title", "type")
_ID_IN_CREATE = re.compile(r"\(\s*\w*\s*:\s*(\w+)\s*\{[^}]*?\bid\s*:", re.S)


class EmbeddedGraphStore(GraphStore):
    """A kglite graph loaded from a script, then frozen: read-only, thread-safe, time- and memory-boxed."""

    backend = "embedded"

    def __init__(
        self,
        graph: "kglite.KnowledgeGraph",
        *,
        source: str = "<memory>",
        labels_with_id: Iterable[str] = (),
        sandbox: SandboxSettings | None = DEFAULT_SANDBOX,
    ) -> None:
        """Wrap an already-loaded kglite graph; it is switched to read-only and frozen.

        ``sandbox`` sets the budgets of the worker processes that run queries (``None``: in-process).
        """
        super().__init__()
        self.source = source
        self._labels_with_id = set(labels_with_id)
        graph.read_only(True)
        self._graph = graph
        self._frozen = graph.freeze()
        self.sandbox_settings = sandbox
        self._sandbox: QuerySandbox | None = None
        self._sandbox_lock = threading.Lock()

    @classmethod
    def from_statements(
        cls, statements: list[Statement], *, source: str = "<script>", sandbox: SandboxSettings | None = DEFAULT_SANDBOX
    ) -> "EmbeddedGraphStore":
        """Load statements in order into a fresh graph; a failing one raises :class:`ScriptError` with its line."""
        g = kglite.KnowledgeGraph()
        labels_with_id: set[str] = set()
        for st in statements:
            try:
                g.cypher(st.text)
            except Exception as exc:  # kglite raises several classes; all mean "this statement failed"
                raise ScriptError(source, st.line, _first_line(exc), st.text) from exc
            if "id" in st.text:
                labels_with_id.update(m.group(1) for m in _ID_IN_CREATE.finditer(st.text))
        return cls(g, source=source, labels_with_id=labels_with_id, sandbox=sandbox)

    @classmethod
    def from_script(cls, path: str | Path, *, sandbox: SandboxSettings | None = DEFAULT_SANDBOX) -> "EmbeddedGraphStore":
        """Load a ``.cql`` script file (messy DQA lines included)."""
        return cls.from_statements(read_script(path), source=str(path), sandbox=sandbox)

    @classmethod
    def from_text(
        cls, text: str, *, source: str = "<script>", sandbox: SandboxSettings | None = DEFAULT_SANDBOX
    ) -> "EmbeddedGraphStore":
        """Load a script given as a string."""
        return cls.from_statements(split_statements(text, source), source=source, sandbox=sandbox)

    @property
    def sandbox(self) -> QuerySandbox | None:
        """The worker pool that runs this store's queries (created on first use; ``None`` when in-process)."""
        if self.sandbox_settings is None:
            return None
        with self._sandbox_lock:
            if self._sandbox is None:
                if self._graph is None:
                    raise QueryError("the graph store is closed")
                self._sandbox = QuerySandbox(self._graph.to_bytes(), settings=self.sandbox_settings, source=self.source)
            return self._sandbox

    def _run_read(self, cypher: str, *, row_cap: int, timeout_s: float) -> QueryResult:
        pool = self.sandbox
        if pool is None:
            return self._run_in_process(cypher, row_cap=row_cap, timeout_s=timeout_s)
        columns, rows, total, warnings = pool.run(cypher, row_cap=row_cap, timeout_s=timeout_s)
        return self._result(columns, rows, total, warnings)

    def _query_trusted(self, cypher: str, *, row_cap: int, timeout_s: float) -> QueryResult:
        """The store's own schema queries run in-process: no worker is started just to read the schema."""
        return self._run_in_process(check_read_only(cypher, self.caps), row_cap=row_cap, timeout_s=timeout_s)

    def _run_in_process(self, cypher: str, *, row_cap: int, timeout_s: float) -> QueryResult:
        if self._frozen is None:
            raise QueryError("the graph store is closed")
        try:
            rv = self._frozen.cypher(cypher, timeout_ms=max(1, int(timeout_s * 1000)), row_limit=row_cap)
        except kglite.CypherTimeoutError as exc:
            raise QueryTimeout(timeout_message(timeout_s, _first_line(exc))) from exc
        except kglite.ReadOnlyError as exc:
            raise QueryRefused(f"the store is read-only: {_first_line(exc)}") from exc
        except Exception as exc:
            raise QueryError(str(exc).strip()) from exc
        if isinstance(rv, str):  # `… FORMAT CSV` makes kglite return text instead of rows
            raise QueryError("FORMAT CSV is not supported here: return columns (RETURN a, b …) instead")
        columns = list(getattr(rv, "columns", []) or [])
        rows = [dict(row.items()) for row in rv]
        diag = getattr(rv, "diagnostics", None) or {}
        total = diag.get("total_rows") if isinstance(diag, dict) else None
        warnings = list(getattr(rv, "warnings", None) or [])
        return self._result(columns, rows, int(total) if total is not None else len(rows), warnings)

    def _result(self, columns: list[str], rows: list[dict[str, Any]], total: int, warnings: list[str]) -> QueryResult:
        rows = [{k: self._clean_value(v) for k, v in row.items()} for row in rows]
        if not columns and rows:
            columns = list(rows[0].keys())
        warnings = [w for w in warnings if not w.startswith("Result truncated by row_limit")]
        return QueryResult(columns, rows, total, 0.0, warnings)

    def _clean_value(self, value: Any) -> Any:
        """Hide kglite's structural keys inside returned nodes and relationships."""
        if isinstance(value, dict):
            if "labels" in value and "properties" in value:
                label = (value.get("labels") or [""])[0]
                return {"labels": value["labels"], "properties": self._clean_props(label, value["properties"])}
            if "properties" in value and "type" in value:
                return {**value, "properties": self._clean_rel_props(value["properties"])}
            return {k: self._clean_value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._clean_value(v) for v in value]
        return value

    def _clean_props(self, label: str, props: dict[str, Any]) -> dict[str, Any]:
        drop = set(_STRUCTURAL) | ({"id"} if label not in self._labels_with_id else set())
        return {k: v for k, v in (props or {}).items() if k not in drop}

    def _clean_rel_props(self, props: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in (props or {}).items() if k != "type"}

    def node_count(self) -> int:
        """Number of nodes in the graph."""
        return int(self._frozen.node_count())

    def close(self) -> None:
        """Stop the query workers and drop the engine's references so the memory can be freed."""
        with self._sandbox_lock:
            if self._sandbox is not None:
                self._sandbox.close()
        self._frozen = None  # type: ignore[assignment]
        self._graph = None  # type: ignore[assignment]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
