"""The Neo4j backend over Bolt: read transactions with a server-side timeout, ``row_cap + 1`` records fetched;
``load_statements`` is the one trusted write path, refused on a non-empty database unless asked to clear it."""

from __future__ import annotations

import os
from typing import Any

from ragplan.tools.graphdb.readonly import QueryRefused
from ragplan.tools.graphdb.script import ScriptError, Statement
from ragplan.tools.graphdb.store import GraphStore, QueryError, QueryResult, QueryTimeout

__all__ = ["Neo4jGraphStore"]


class Neo4jGraphStore(GraphStore):
    """A read-only view of one Neo4j database."""

    def __init__(self, uri: str, user: str | None = None, password: str | None = None, database: str | None = None, *,
                 connection_timeout_s: float = 10.0) -> None:
        """Connect to ``uri`` (``bolt://`` or ``neo4j://``); password defaults to ``NEO4J_PASSWORD``."""
        super().__init__()
        import neo4j

        self._neo4j = neo4j
        user = user if user is not None else os.environ.get("NEO4J_USER", os.environ.get("NEO4J_USERNAME", "neo4j"))
        password = password if password is not None else os.environ.get("NEO4J_PASSWORD", "")
        self.uri, self.database = uri, database or os.environ.get("NEO4J_DATABASE") or None
        self._driver = neo4j.GraphDatabase.driver(uri, auth=(user, password), connection_timeout=connection_timeout_s,
                                                  max_transaction_retry_time=5.0)
        self.source = f"{uri}/{self.database or '(default database)'}"

    def _session(self, write: bool = False) -> Any:
        mode = self._neo4j.WRITE_ACCESS if write else self._neo4j.READ_ACCESS
        return self._driver.session(database=self.database, default_access_mode=mode)

    def _run_read(self, cypher: str, *, row_cap: int, timeout_s: float) -> QueryResult:
        neo4j = self._neo4j

        @neo4j.unit_of_work(timeout=timeout_s)
        def work(tx: Any) -> tuple[list[str], list[Any]]:
            result = tx.run(cypher)
            return list(result.keys()), result.fetch(row_cap + 1)

        try:
            with self._session() as session:
                keys, records = session.execute_read(work)
        except neo4j.exceptions.ClientError as exc:
            code = exc.code or ""
            if "Timeout" in code or "TransactionTimedOut" in code:
                raise QueryTimeout(f"the query ran past {timeout_s:g} s and was stopped") from exc
            if "AccessMode" in code or "Forbidden" in code or "WriteOnReadOnlyAccess" in code:
                raise QueryRefused(f"the server refused a write in a read transaction: {exc.message}") from exc
            raise QueryError(f"{code}: {exc.message}") from exc
        except neo4j.exceptions.Neo4jError as exc:
            raise QueryError(f"{exc.code}: {exc.message}") from exc
        except neo4j.exceptions.DriverError as exc:
            raise QueryError(f"the Neo4j server could not be reached or failed: {exc}") from exc
        rows = [{k: _plain(rec[k]) for k in keys} for rec in records[:row_cap]]
        return QueryResult(keys, rows, len(records), 0.0, total_exact=len(records) <= row_cap)

    def load_statements(self, statements: list[Statement], *, source: str, replace: bool = False) -> int:
        """Write a script in one write transaction (trusted path); refuses a non-empty database unless ``replace``."""
        if self.query("MATCH (n) RETURN n LIMIT 1", row_cap=1).rows:  # the database holds data
            if not replace:
                raise ScriptError(source, 0, f"the Neo4j database at {self.source} is not empty; use an empty database "
                                  "or pass --neo4j-replace to clear it first")
            with self._session(write=True) as session:
                session.run("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS").consume()
        with self._session(write=True) as session, session.begin_transaction() as tx:
            for st in statements:
                try:
                    tx.run(st.text).consume()
                except self._neo4j.exceptions.Neo4jError as exc:
                    tx.rollback()
                    raise ScriptError(source, st.line, exc.message or str(exc), st.text) from exc
            tx.commit()
        self._schema = None
        return len(statements)

    def close(self) -> None:
        """Close the driver and its connection pool."""
        self._driver.close()


def _plain(value: Any) -> Any:
    """Turn driver values (nodes, relationships, paths, temporal values) into plain Python."""
    from neo4j.graph import Node, Path, Relationship

    if isinstance(value, Node):
        return {"labels": sorted(value.labels), "properties": dict(value)}
    if isinstance(value, Relationship):
        return {"type": value.type, "properties": dict(value), "start": None, "end": None}
    if isinstance(value, Path):
        return [_plain(n) for n in value.nodes]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "iso_format"):
        return value.iso_format()
    return value
