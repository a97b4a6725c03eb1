"""The graph-store interface every backend implements: the statement check, then the backend's read-only path;
``query`` ends in rows or in :class:`QueryRefused`, :class:`QueryTimeout` or :class:`QueryError`."""

from __future__ import annotations

import time
from abc import abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from ragplan.tools.graphdb.readonly import DEFAULT_CAPS, QueryCaps, QueryRefused, check_read_only
from ragplan.tools.graphdb.schema import GraphSchema, LabelInfo, RelInfo, merge_examples

__all__ = ["GraphStore", "QueryResult", "QueryError", "QueryTimeout", "QueryRefused"]


class QueryError(RuntimeError):
    """The store rejected or failed a query (syntax error, unknown function, type error, …)."""


class QueryTimeout(QueryError):
    """The query ran past its time budget and was stopped."""


@dataclass
class QueryResult:
    """Rows of one read query, capped."""

    columns: list[str]
    """Column names in RETURN order."""
    rows: list[dict[str, Any]]
    """At most ``row_cap`` rows, each a mapping column -> plain Python value."""
    total_rows: int
    """Rows the query produced before the cap (a lower bound ``row_cap + 1`` where the backend stops early)."""
    elapsed_ms: float
    """Wall time of the query in milliseconds."""
    warnings: list[str] = field(default_factory=list)
    """Advisories from the engine (unknown label, truncation, …), useful to the LLM."""
    total_exact: bool = True
    """False when the backend stopped counting at ``row_cap + 1`` (then ``total_rows`` is a lower bound)."""

    @property
    def truncated(self) -> bool:
        """Whether rows were dropped by the cap."""
        return self.total_rows > len(self.rows)


class GraphStore(AbstractContextManager["GraphStore"]):
    """A read-only Cypher store with schema introspection."""

    #: How many nodes / relationships per label or type are sampled for example values.
    schema_sample: int = 50
    #: Size caps of the statement check (query length, nesting, UNION arms).
    caps: QueryCaps = DEFAULT_CAPS

    def __init__(self) -> None:
        self._schema: GraphSchema | None = None

    def query(self, cypher: str, *, row_cap: int = 100, timeout_s: float = 10.0) -> QueryResult:
        """Run one untrusted read-only statement: checked, capped to ``row_cap`` rows, time-boxed."""
        try:
            text = check_read_only(cypher, self.caps)
        except QueryRefused:
            raise
        except Exception as exc:  # the check itself failed (it should not): never run the query unchecked
            raise QueryError(f"the statement check could not read this query ({type(exc).__name__}): rewrite it") from exc
        t0 = time.perf_counter()
        try:
            result = self._run_read(text, row_cap=max(0, int(row_cap)), timeout_s=max(0.001, float(timeout_s)))
        except (QueryRefused, QueryError):
            raise
        except RecursionError as exc:
            raise QueryError("the result nests values too deeply to read: return something flatter") from exc
        except Exception as exc:  # any other backend failure is this query's error, not the caller's crash
            raise QueryError(f"the store failed on this query: {type(exc).__name__}: {exc}") from exc
        result.elapsed_ms = (time.perf_counter() - t0) * 1000
        return result

    @abstractmethod
    def _run_read(self, cypher: str, *, row_cap: int, timeout_s: float) -> QueryResult:
        """Run a checked statement in the backend's read-only mode."""

    def schema(self) -> GraphSchema:
        """The labels, relationship types and property keys (with example values), computed once."""
        if self._schema is None:
            self._schema = self._introspect()
        return self._schema

    def _introspect(self) -> GraphSchema:
        """Sample the store with read queries (nodes and relationships come back as the backend shows them)."""
        q = lambda c: self.query(c, row_cap=100_000, timeout_s=60).rows  # noqa: E731 - the store's own queries, bounded

        def count_and_sample(pattern: str, var: str, extra: str = "") -> tuple[int, list[dict[str, Any]]]:
            count = q(f"MATCH {pattern} RETURN count({var}) AS c")[0]["c"]
            return int(count), q(f"MATCH {pattern} RETURN {extra}{var} LIMIT {self.schema_sample}")

        labels: list[LabelInfo] = []
        for row in q("CALL db.labels() YIELD label RETURN label"):
            count, sample = count_and_sample(f"(n:`{row['label'].replace('`', '``')}`)", "n")
            labels.append(LabelInfo(row["label"], count, merge_examples([r["n"]["properties"] for r in sample])))
        rels: list[RelInfo] = []
        for row in q("CALL db.relationshipTypes() YIELD relationshipType RETURN relationshipType AS t"):
            pattern = f"(a)-[r:`{row['t'].replace('`', '``')}`]->(b)"
            count, sample = count_and_sample(pattern, "r", "labels(a) AS la, labels(b) AS lb, ")
            ends = sorted({((r["la"] or ["?"])[0], (r["lb"] or ["?"])[0]) for r in sample}) or [("?", "?")]
            rel_props = merge_examples([r["r"]["properties"] for r in sample])
            rels += [RelInfo(row["t"], src, dst, count, rel_props) for src, dst in ends]
        return GraphSchema(labels=labels, relationships=rels)

    def close(self) -> None:
        """Release connections or memory held by the store."""

    def __exit__(self, *exc: object) -> None:
        self.close()
