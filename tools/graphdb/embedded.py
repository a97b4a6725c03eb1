"""The embedded backend: an in-process Cypher engine (kglite) loaded from a Neo4j-dialect script.

Why kglite: it is a pip-installable Rust engine that runs the Neo4j dialect of DQA's scripts
unchanged (``CREATE``, ``MATCH … CREATE`` with inline property maps, booleans, floats), loads a
2,300-statement locating script in well under a second, and has a per-query ``timeout_ms``, a
``row_limit`` that reports the pre-cap row count, and ``freeze()`` — an immutable snapshot that
refuses mutations and can be read from many threads at once (the evaluation runner's concurrency).

Its read-only mode is not a sandbox: ``LOAD CSV FROM "file:///…"`` and ``CALL`` procedures still
run there. The statement check in :mod:`ragplan.tools.graphdb.readonly` refuses those before the
engine sees them; the frozen snapshot refuses every mutation clause as a second wall.

Divergences from Neo4j that matter here, and how they are handled:

* kglite keeps ``id``, ``title`` and ``type`` as structural keys on every node (``id`` is auto-
  assigned when a script does not set one). The store hides ``title``/``type`` in results and in the
  schema, and shows ``id`` only for labels whose script sets it (DQA's ``Building {id: …}``).
* ``n.id`` on a label without a script-set id returns the engine's number rather than null.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

import kglite

from ragplan.tools.graphdb.readonly import QueryRefused
from ragplan.tools.graphdb.script import ScriptError, Statement, read_script, split_statements
from ragplan.tools.graphdb.store import GraphStore, QueryError, QueryResult, QueryTimeout

__all__ = ["EmbeddedGraphStore"]

# Warnings go into QueryResult.warnings (and so to the LLM), not to stderr.
kglite.set_query_warning_policy("silent")

_STRUCTURAL = ("title", "type")
_ID_IN_CREATE = re.compile(r"\(\s*\w*\s*:\s*(\w+)\s*\{[^}]*?\bid\s*:", re.S)


class EmbeddedGraphStore(GraphStore):
    """A kglite graph loaded from a script, then frozen: read-only, thread-safe, time-boxed."""

    backend = "embedded"

    def __init__(self, graph: "kglite.KnowledgeGraph", *, source: str = "<memory>", labels_with_id: Iterable[str] = ()) -> None:
        """Wrap an already-loaded kglite graph; it is switched to read-only and frozen."""
        super().__init__()
        self.source = source
        self._labels_with_id = set(labels_with_id)
        graph.read_only(True)
        self._graph = graph
        self._frozen = graph.freeze()

    @classmethod
    def from_statements(cls, statements: list[Statement], *, source: str = "<script>") -> "EmbeddedGraphStore":
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
        return cls(g, source=source, labels_with_id=labels_with_id)

    @classmethod
    def from_script(cls, path: str | Path) -> "EmbeddedGraphStore":
        """Load a ``.cql`` script file (messy DQA lines included)."""
        return cls.from_statements(read_script(path), source=str(path))

    @classmethod
    def from_text(cls, text: str, *, source: str = "<script>") -> "EmbeddedGraphStore":
        """Load a script given as a string."""
        return cls.from_statements(split_statements(text, source), source=source)

    def _run_read(self, cypher: str, *, row_cap: int, timeout_s: float) -> QueryResult:
        try:
            rv = self._frozen.cypher(cypher, timeout_ms=max(1, int(timeout_s * 1000)), row_limit=row_cap)
        except kglite.CypherTimeoutError as exc:
            raise QueryTimeout(f"the query ran past {timeout_s:g} s and was stopped: {_first_line(exc)}") from exc
        except kglite.ReadOnlyError as exc:
            raise QueryRefused(f"the store is read-only: {_first_line(exc)}") from exc
        except Exception as exc:
            raise QueryError(str(exc).strip()) from exc
        if isinstance(rv, str):  # `… FORMAT CSV` makes kglite return text instead of rows
            raise QueryError("FORMAT CSV is not supported here: return columns (RETURN a, b …) instead")
        columns = list(getattr(rv, "columns", []) or [])
        rows = [{k: self._clean_value(v) for k, v in row.items()} for row in rv]
        if not columns and rows:
            columns = list(rows[0].keys())
        diag = getattr(rv, "diagnostics", None) or {}
        total = diag.get("total_rows") if isinstance(diag, dict) else None
        warnings = [w for w in (getattr(rv, "warnings", None) or []) if not w.startswith("Result truncated by row_limit")]
        return QueryResult(columns, rows, int(total) if total is not None else len(rows), 0.0, warnings)

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
        """Drop the engine's references so the memory can be freed."""
        self._frozen = None  # type: ignore[assignment]
        self._graph = None  # type: ignore[assignment]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
