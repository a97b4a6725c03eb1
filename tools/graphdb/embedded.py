"""The embedded backend: a Cypher engine (kglite) loaded from a Neo4j-dialect script, in worker processes.

Why kglite: it is a pip-installable Rust engine that runs the Neo4j dialect of DQA's scripts
unchanged (``CREATE``, ``MATCH … CREATE`` with inline property maps, booleans, floats), loads a
2,300-statement locating script in well under a second, and has a per-query ``timeout_ms``, a
``row_limit`` that reports the pre-cap row count, and ``freeze()`` — an immutable snapshot that
refuses mutations.

Why in worker processes: its guards do not hold against hostile queries (they crash the process,
grow to gigabytes or outrun ``timeout_ms``), and its native library, torch's and faiss's together
need more of glibc's static TLS than a plain Python process reserves. So this process never imports
kglite: the store is a handle on a small pool of workers (:mod:`ragplan.tools.graphdb.sandbox`,
budgets :class:`SandboxSettings`) that load the script, answer the schema queries and run every
query, each with a time and a memory budget.

Its read-only mode is not a sandbox either: ``LOAD CSV FROM "file:///…"`` and ``CALL`` procedures
still run there. The statement check in :mod:`ragplan.tools.graphdb.readonly` refuses those before
the engine sees them; the frozen snapshot refuses every mutation clause as a second wall.

Divergences from Neo4j that matter here, and how they are handled:

* kglite keeps ``id``, ``title`` and ``type`` as structural keys on every node (``id`` is auto-
  assigned when a script does not set one). The store hides ``title``/``type`` in results and in the
  schema, and shows ``id`` only for labels whose script sets it (DQA's ``Building {id: …}``).
* ``n.id`` on a label without a script-set id returns the engine's number rather than null.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ragplan.tools.graphdb.sandbox import DEFAULT_SANDBOX, QuerySandbox, SandboxSettings
from ragplan.tools.graphdb.script import Statement, read_script, split_statements
from ragplan.tools.graphdb.store import GraphStore, QueryResult

__all__ = ["EmbeddedGraphStore"]

_STRUCTURAL = ("title", "type")
_ID_IN_CREATE = re.compile(r"\(\s*\w*\s*:\s*(\w+)\s*\{[^}]*?\bid\s*:", re.S)


class EmbeddedGraphStore(GraphStore):
    """A script's graph, loaded and frozen in worker processes: read-only, thread-safe, time- and memory-boxed."""

    backend = "embedded"

    def __init__(self, statements: list[Statement], *, source: str = "<script>",
                 sandbox: SandboxSettings = DEFAULT_SANDBOX) -> None:
        """Load ``statements`` in order in a first worker; a failing one raises :class:`ScriptError` with its line."""
        super().__init__()
        self.source = source
        self._labels_with_id = {m.group(1) for st in statements if "id" in st.text for m in _ID_IN_CREATE.finditer(st.text)}
        self.sandbox = QuerySandbox(statements, settings=sandbox, source=source)
        """The worker pool that holds the graph and runs this store's queries."""

    @classmethod
    def from_script(cls, path: str | Path, *, sandbox: SandboxSettings = DEFAULT_SANDBOX) -> "EmbeddedGraphStore":
        """Load a ``.cql`` script file (messy DQA lines included)."""
        return cls(read_script(path), source=str(path), sandbox=sandbox)

    @classmethod
    def from_text(cls, text: str, *, source: str = "<script>", sandbox: SandboxSettings = DEFAULT_SANDBOX) -> "EmbeddedGraphStore":
        """Load a script given as a string."""
        return cls(split_statements(text, source), source=source, sandbox=sandbox)

    def _run_read(self, cypher: str, *, row_cap: int, timeout_s: float) -> QueryResult:
        columns, rows, total, warnings = self.sandbox.run(cypher, row_cap=row_cap, timeout_s=timeout_s)
        rows = [{k: self._clean_value(v) for k, v in row.items()} for row in rows]
        warnings = [w for w in warnings if not w.startswith("Result truncated by row_limit")]
        return QueryResult(columns or (list(rows[0]) if rows else []), rows, total, 0.0, warnings)

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
        return int(self.query("MATCH (n) RETURN count(n) AS c").rows[0]["c"])

    def close(self) -> None:
        """Stop the query workers (a busy one when its query ends); later queries fail as closed."""
        self.sandbox.close()
