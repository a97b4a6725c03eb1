"""The embedded backend: kglite loaded from a Neo4j-dialect script, only ever in worker processes. kglite keeps
``id``, ``title`` and ``type`` on every node: ``title``/``type`` are hidden, ``id`` shown only for labels whose
script sets it."""

from __future__ import annotations

import re
from pathlib import Path

from ragplan.tools.graphdb.sandbox import QuerySandbox, SandboxSettings
from ragplan.tools.graphdb.script import Statement, read_script, split_statements
from ragplan.tools.graphdb.store import GraphStore, QueryResult

__all__ = ["EmbeddedGraphStore"]

_ID_IN_CREATE = re.compile(r"\(\s*\w*\s*:\s*(\w+)\s*\{[^}]*?\bid\s*:", re.S)


class EmbeddedGraphStore(GraphStore):
    """A script's graph, loaded and frozen in worker processes: read-only, thread-safe, time- and memory-boxed."""

    def __init__(self, statements: list[Statement], *, source: str = "<script>",
                 sandbox: SandboxSettings = SandboxSettings()) -> None:
        """Load ``statements`` in order in a first worker; a failing one raises :class:`ScriptError` with its line."""
        super().__init__()
        self.source = source
        keep_id = {m.group(1) for st in statements if "id" in st.text for m in _ID_IN_CREATE.finditer(st.text)}
        self.sandbox = QuerySandbox(statements, settings=sandbox, source=source, keep_id=keep_id)
        """The worker pool that holds the graph and runs this store's queries."""

    @classmethod
    def from_script(cls, path: str | Path, *, sandbox: SandboxSettings = SandboxSettings()) -> "EmbeddedGraphStore":
        """Load a ``.cql`` script file (messy DQA lines included)."""
        return cls(read_script(path), source=str(path), sandbox=sandbox)

    @classmethod
    def from_text(cls, text: str, *, source: str = "<script>",
                  sandbox: SandboxSettings = SandboxSettings()) -> "EmbeddedGraphStore":
        """Load a script given as a string."""
        return cls(split_statements(text, source), source=source, sandbox=sandbox)

    def _run_read(self, cypher: str, *, row_cap: int, timeout_s: float) -> QueryResult:
        columns, rows, total, warnings = self.sandbox.run(cypher, row_cap=row_cap, timeout_s=timeout_s)
        warnings = [w for w in warnings if not w.startswith("Result truncated by row_limit")]
        return QueryResult(columns or (list(rows[0]) if rows else []), rows, total, 0.0, warnings)

    def node_count(self) -> int:
        """Number of nodes in the graph."""
        return int(self.query("MATCH (n) RETURN count(n) AS c").rows[0]["c"])

    def close(self) -> None:
        """Stop the query workers (a busy one when its query ends); later queries fail as closed."""
        self.sandbox.close()
