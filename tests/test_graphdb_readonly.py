"""The read-only wall of the graph-DB tool: writes and escapes are refused, reads pass.

Every attempt below must be refused by :func:`check_read_only` and by ``GraphStore.query`` (with
:class:`QueryRefused`) and must leave the store exactly as it was. The Neo4j section runs the same
list against a real server (``NEO4J_URI``, password from ``NEO4J_PASSWORD``), once through the
statement check and once straight into the server's read transaction (``_run_read``) to show the
second wall holds on its own for every data write.
"""

from __future__ import annotations

import os

import pytest

from ragplan.tools.graphdb import EmbeddedGraphStore, GraphStore, Neo4jGraphStore, QueryError, QueryRefused
from ragplan.tools.graphdb import check_read_only, split_statements
from tests.data import TRADE_NETWORK

NEO4J_URI = os.environ.get("NEO4J_URI", "")
needs_neo4j = [
    pytest.mark.neo4j,
    pytest.mark.skipif(not NEO4J_URI, reason="no Neo4j server: set NEO4J_URI (and NEO4J_PASSWORD) to a test database"),
]

# kind: "write" — a data/schema write the server's read transaction must refuse on its own;
#       "escape" — no write the server must refuse by itself (file reads, procedures, a plan only),
#                  harmless to send to a test server past the check, which may run it;
#       "admin" — refused by the check, never sent to a server past it (passwords, databases, network).
ATTEMPTS = [
    ("write", "CREATE (x:Hacked {name: 'x'})"),
    ("write", "MATCH (n:Trade_node) CREATE (n)-[:OWNS]->(:Hacked)"),
    ("write", "MERGE (x:Hacked {name: 'x'})"),
    ("write", "MATCH (n:Country) MERGE (n)-[:R]->(n)"),
    ("write", "MATCH (n) SET n.name = 'pwned'"),
    ("write", "MATCH (n) SET n += {x: 1}"),
    ("write", "MATCH (n) SET n:Hacked"),
    ("write", "MATCH ()-[r]->() DELETE r"),
    ("write", "MATCH (n) DETACH DELETE n"),
    ("write", "MATCH (n) REMOVE n.name"),
    ("write", "MATCH (n:Country) REMOVE n:Country"),
    ("write", "DROP INDEX trade_name IF EXISTS"),
    ("write", "DROP CONSTRAINT country_name IF EXISTS"),
    ("write", "CREATE INDEX trade_name FOR (n:Trade_node) ON (n.name)"),
    ("write", "CREATE CONSTRAINT country_name FOR (n:Country) REQUIRE n.name IS UNIQUE"),
    ("write", "MATCH (n) FOREACH (x IN [1] | SET n.hit = x)"),
    ("write", "FOREACH (x IN range(1, 3) | CREATE (:Hacked {i: x}))"),
    ("write", "USING PERIODIC COMMIT 500 LOAD CSV FROM 'file:///x.csv' AS l CREATE (:Hacked)"),
    ("write", "MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10 ROWS"),
    ("write", "MATCH (n) CALL { WITH n DETACH DELETE n } IN TRANSACTIONS"),
    ("write", "UNWIND [1] AS x CALL { MATCH (n) RETURN n } IN 2 CONCURRENT TRANSACTIONS RETURN x"),
    ("write", "CALL apoc.create.node(['Hacked'], {name: 'x'}) YIELD node RETURN node"),
    ("write", "MATCH (n) RETURN n; CREATE (x)"),
    ("write", "MATCH (n) RETURN n ; MATCH (m) DETACH DELETE m ;"),
    ("write", "MATCH (n) CALL { CREATE (m:Hacked) } RETURN n"),
    ("write", "MATCH (n) CALL (n) { SET n.x = 1 } RETURN n"),
    ("write", "MATCH (n) /* x */ CREATE (m)"),
    ("write", "MATCH (n) // harmless\nCREATE (m:Hacked) RETURN n"),
    ("write", "MATCH (n) //\rCREATE (m:Hacked) RETURN n"),  # Neo4j ends a // comment at a lone \r
    ("write", "MATCH (n) //\u2028CREATE (m:Hacked) RETURN n"),
    ("write", "mAtCh (n) cReAtE (m:Hacked)"),
    ("write", "match (n) detach delete n"),
    ("write", "MATCH (n)\n\tSET\tn.x = 1"),
    ("write", "MATCH\t(n)\r\nWITH n\n  DETACH\n  DELETE n"),
    ("write", "MATCH (n) DETACH\nDELETE n"),
    ("escape", "EXPLAIN CREATE (x:Hacked)"),  # plans the write without running it
    ("write", "PROFILE MERGE (x:Hacked)"),
    ("write", "CYPHER 5 CREATE (x:Hacked)"),
    ("write", "MATCH (n) RETURN n.name AS x UNION CREATE (m:Hacked) RETURN m.name AS x"),
    ("write", "MATCH (n) WITH n LIMIT 1 SET n.name = 'x' RETURN n"),
    ("write", r"MATCH (n) WHERE n.name = 'it\'s' CREATE (m:Hacked)"),
    ("write", r"MATCH (n) WHERE n.name = 'a\\' CREATE (m:Hacked) //'"),
    ("write", "MATCH (n) WHERE n.name = `x` CREATE (m:Hacked) RETURN 1"),
    ("write", "MATCH (n) RETURN 'unterminated"),
    ("write", "MATCH (n) WITH n AS x$ CREATE (m:Hacked) RETURN 1"),  # Neo4j: x$ is a variable name
    ("write", "INSERT (:Hacked {name: 'x'})"),
    ("write", "CALL table.upsert({})"),  # kglite write procedures
    ("write", "CALL db.node_embeddings.drop({})"),
    ("escape", 'LOAD CSV FROM "file:///etc/passwd" AS line RETURN line'),
    ("escape", "load csv from 'file:///etc/passwd' as line return line"),
    ("escape", "WITH 1 AS x LOAD CSV FROM 'file:///etc/hostname' AS l RETURN l"),
    ("escape", "CALL apoc.load.json('file:///etc/passwd') YIELD value RETURN value"),
    ("escape", "MATCH (n) WITH n LIMIT 1 CALL apoc.load.json('file:///etc/passwd') YIELD value RETURN value"),
    ("escape", "WITH 1 AS x$ LOAD CSV FROM 'file:///etc/passwd' AS l RETURN l"),
    ("escape", "CALL db.clearQueryCaches()"),
    ("escape", "CALL db.labels$x() YIELD label RETURN label"),
    ("escape", "CALL pagerank() YIELD node, score RETURN node, score"),
    ("escape", "RETURN apoc.cypher.runFirstColumnSingle('LOAD CSV FROM \"file:///etc/passwd\" AS l RETURN l', {}) AS x"),
    ("escape", "RETURN apoc.cypher.runFirstColumnSingle('MATCH (n) DETACH DELETE n', {}) AS x"),
    ("escape", "RETURN `apoc`.cypher.runFirstColumnSingle('MATCH (n) DETACH DELETE n', {}) AS x"),
    ("escape", "CALL `apoc.create.node`(['Hacked'], {}) YIELD node RETURN node"),
    ("escape", "RETURN `apoc.cypher.runFirstColumnSingle` ('MATCH (n) DETACH DELETE n', {}) AS x"),
    ("escape", "SHOW USERS"),
    ("escape", "SHOW SETTINGS YIELD name, value RETURN name, value"),
    ("admin", "LOAD CSV WITH HEADERS FROM 'https://example.com/x.csv' AS row RETURN row"),
    ("admin", "CALL dbms.security.createUser('eve', 'secret', false)"),
    ("admin", "CREATE USER eve SET PASSWORD 'secret'"),
    ("admin", "ALTER USER neo4j SET PASSWORD 'secret'"),
    ("admin", "GRANT ROLE admin TO eve"),
    ("admin", "RENAME ROLE reader TO writer"),
    ("admin", "START DATABASE neo4j"),
    ("admin", "STOP DATABASE neo4j"),
    ("admin", "EXPLAIN STOP DATABASE neo4j"),
    ("admin", "USE system CREATE USER eve SET PASSWORD 'secret'"),
    ("admin", "SHOW TRANSACTIONS YIELD transactionId AS t TERMINATE TRANSACTIONS t"),
]
ATTEMPT_PARAMS = [pytest.param(q, id=f"{i:02d}-{kind}") for i, (kind, q) in enumerate(ATTEMPTS)]
SERVER_PARAMS = [pytest.param(kind, q, id=f"{i:02d}-{kind}") for i, (kind, q) in enumerate(ATTEMPTS) if kind != "admin"]

# (query, runs on the embedded engine): reads with traps for a naive keyword check
READS = [
    ('MATCH (n) WHERE n.name = "CREATE" RETURN n.name', True),
    ("MATCH (n) WHERE n.name = '; DROP' RETURN n.name", True),
    ("MATCH (n) WHERE n.name <> 'x; DETACH DELETE n' RETURN count(n) AS c", True),
    (r"RETURN 'a\'; CREATE (x)' AS s", True),
    (r'RETURN "say \"DELETE\"" AS s', True),
    ("WITH 'LOAD CSV FROM file:///etc/passwd' AS text RETURN text", True),
    ("MATCH (n) RETURN n.set, n.create, n.delete, n.merge", True),
    ("MATCH (n) RETURN n {.name, delete: 1, set: 2} AS m", True),
    ("RETURN {delete: 1, merge: 2, remove: 3, load: 4} AS m", True),
    ("MATCH (n:Trade_node) RETURN n.`create` AS c", True),
    ("MATCH (`create`:Trade_node) RETURN `create`.name AS name", True),
    ("MATCH (n:`Trade_node`)-[r:`source`]->(m) RETURN n.name, m.name", True),
    ("MATCH (n:Set) RETURN n", True),
    ("MATCH (n)-[:DELETE]->(m) RETURN m", True),
    ("MATCH (n) RETURN $set AS p", False),
    ("OPTIONAL MATCH (n:Country)-[r:NodeCountry]->(t) RETURN n.name, t.name", True),
    ("MATCH (n:Trade_node) WITH collect(n.name) AS names UNWIND names AS name RETURN name", True),
    ("CALL db.labels()", True),
    ("CALL db.labels() YIELD label RETURN label", True),
    ("CALL db.relationshipTypes() YIELD relationshipType RETURN relationshipType", True),
    ("call DB.propertyKeys()", True),
    ("CALL db.schema.visualization()", True),
    ("CALL { MATCH (n:Country) RETURN n } RETURN count(n) AS c", True),
    ("MATCH (t:Trade_node) CALL (t) { MATCH (c:Country)-[:NodeCountry]->(t) RETURN count(c) AS k } RETURN t.name, k", True),
    ("MATCH (t:Trade_node) CALL { WITH t MATCH (c)-[:NodeCountry]->(t) RETURN count(c) AS k } RETURN t.name, k", True),
    ("EXPLAIN MATCH (n) RETURN n", True),
    ("PROFILE MATCH (n) RETURN count(n) AS c", True),
    ("CYPHER 5 MATCH (n) RETURN count(n) AS c", True),
    ("MATCH (n) RETURN count(n) AS c;", True),
    ("MATCH (n) RETURN count(n) AS c ;  // a comment after the semicolon", True),
    ("MATCH (n) // a comment naming CREATE and DELETE\nRETURN count(n) AS c", True),
    ("MATCH (n)\r\nRETURN count(n) AS c", True),
    ("MATCH (start:Trade_node {name: 'novgorod'})-[:source*1..3]->(stop) RETURN start.name, stop.name", True),
    ("MATCH (n:Trade_node) RETURN n.name AS start, n.total_power AS stop", True),
    ("MATCH p = (a:Trade_node)-[:source*]->(b) RETURN length(p) AS hops, b.name", True),
    ("MATCH (n) WHERE exists { (n)-[:NodeCountry]->() } RETURN n.name", True),
    ("MATCH (n) RETURN n.name AS x UNION MATCH (m) RETURN m.name AS x", True),
    ("MATCH (c:Country)-[r:NodeCountry]->(t) WHERE r.has_merchant = 'False' AND NOT r.is_home RETURN c.name, t.name", True),
    ("MATCH (n:Country) RETURN n.name AS name ORDER BY name DESC SKIP 1 LIMIT 2", True),
    ("SHOW INDEXES", True),
    ("SHOW FUNCTIONS YIELD name RETURN name LIMIT 3", True),
    ("RETURN point.distance(point({x: 0, y: 0}), point({x: 3, y: 4})) AS d", False),
]
READ_PARAMS = [pytest.param(q, id=f"{i:02d}") for i, (q, _) in enumerate(READS)]
ENGINE_READ_PARAMS = [pytest.param(q, id=f"{i:02d}") for i, (q, runs) in enumerate(READS) if runs]


def snapshot(store: GraphStore) -> dict:
    """Counts and a full dump of nodes, relationships and indexes, to compare before / after."""
    q = lambda c: store.query(c, row_cap=100_000, timeout_s=30).rows  # noqa: E731
    nodes = sorted(repr((sorted(r["l"]), sorted(r["p"].items()))) for r in q("MATCH (n) RETURN labels(n) AS l, properties(n) AS p"))
    rels = sorted(
        repr((r["t"], sorted(r["p"].items()), sorted(r["a"].items()), sorted(r["b"].items())))
        for r in q("MATCH (a)-[r]->(b) RETURN type(r) AS t, properties(r) AS p, properties(a) AS a, properties(b) AS b")
    )
    return {
        "nodes": q("MATCH (n) RETURN count(n) AS c")[0]["c"],
        "relationships": q("MATCH ()-[r]->() RETURN count(r) AS c")[0]["c"],
        "properties": q("MATCH (n) RETURN sum(size(keys(n))) AS c")[0]["c"]
        + q("MATCH ()-[r]->() RETURN sum(size(keys(r))) AS c")[0]["c"],
        "dump": (nodes, rels),
        "indexes": sorted(r["name"] for r in q("SHOW INDEXES YIELD name RETURN name")),
        "constraints": sorted(r["name"] for r in q("SHOW CONSTRAINTS YIELD name RETURN name")),
    }


@pytest.fixture(scope="module")
def store() -> EmbeddedGraphStore:
    """One embedded store shared by every attempt: any successful write would show in later snapshots too."""
    return EmbeddedGraphStore.from_text(TRADE_NETWORK, source="trade.cql")


@pytest.fixture(scope="module")
def baseline(store: EmbeddedGraphStore) -> dict:
    snap = snapshot(store)
    assert snap["nodes"] == 6 and snap["relationships"] == 7
    return snap


class TestStatementCheck:
    """``check_read_only`` on its own: refusals, passes, and the text it hands to the engine."""

    @pytest.mark.parametrize("query", ATTEMPT_PARAMS)
    def test_refuses(self, query: str) -> None:
        with pytest.raises(QueryRefused):
            check_read_only(query)

    @pytest.mark.parametrize("query", READ_PARAMS)
    def test_passes(self, query: str) -> None:
        assert check_read_only(query)

    def test_returns_the_statement_to_run(self) -> None:
        assert check_read_only("  MATCH (n) RETURN n ;  ") == "MATCH (n) RETURN n"
        assert check_read_only("MATCH (n) RETURN n; // done") == "MATCH (n) RETURN n"
        assert check_read_only("MATCH (n)\r\nRETURN n") == "MATCH (n)\nRETURN n"
        assert check_read_only("MATCH (n) //\rRETURN n") == "MATCH (n) //\nRETURN n"

    @pytest.mark.parametrize("query", ["", "   ", ";", "// only a comment", "MATCH (n) RETURN n;;", "EXPLAIN"])
    def test_refuses_empty_or_odd(self, query: str) -> None:
        with pytest.raises(QueryRefused):
            check_read_only(query)

    @pytest.mark.parametrize("query", ["UNWIND [1, 2] AS remove RETURN remove", "MATCH (n) RETURN n AS set"])
    def test_write_keyword_as_variable_is_refused(self, query: str) -> None:
        """The check errs on the safe side: a clause keyword used as a bare variable name is refused."""
        with pytest.raises(QueryRefused):
            check_read_only(query)


class TestEmbeddedStore:
    """The same lists through ``EmbeddedGraphStore.query``, and the frozen snapshot as second wall."""

    @pytest.mark.parametrize("query", ATTEMPT_PARAMS)
    def test_refused_and_unchanged(self, store: EmbeddedGraphStore, baseline: dict, query: str) -> None:
        with pytest.raises(QueryRefused):
            store.query(query)
        assert snapshot(store) == baseline

    @pytest.mark.parametrize("query", ENGINE_READ_PARAMS)
    def test_reads_run(self, store: EmbeddedGraphStore, baseline: dict, query: str) -> None:
        store.query(query, row_cap=5)
        assert snapshot(store) == baseline

    # (kglite reads "//\r…" to the end of the line as a comment, so those attempts are no writes to it)
    @pytest.mark.parametrize("query", [q for kind, q in ATTEMPTS if kind == "write" and "//" not in q])
    def test_frozen_engine_refuses_writes_past_the_check(self, store: EmbeddedGraphStore, baseline: dict, query: str) -> None:
        with pytest.raises((QueryRefused, QueryError)):
            store._run_read(query, row_cap=5, timeout_s=5)
        assert snapshot(store) == baseline

    def test_frozen_engine_alone_would_load_files(self, store: EmbeddedGraphStore, tmp_path) -> None:
        """Why the statement check exists: kglite's frozen snapshot still runs LOAD CSV."""
        secret = tmp_path / "secret.csv"
        secret.write_text("top-secret\n")
        rows = store._run_read(f"LOAD CSV FROM 'file://{secret}' AS l RETURN l", row_cap=5, timeout_s=5).rows
        assert rows == [{"l": ["top-secret"]}]
        with pytest.raises(QueryRefused):
            store.query(f"LOAD CSV FROM 'file://{secret}' AS l RETURN l")


def test_neo4j_store_checks_before_connecting() -> None:
    """The check runs before the driver is used: an unreachable server still refuses with QueryRefused."""
    neo = Neo4jGraphStore("bolt://127.0.0.1:9", "neo4j", "unused", connection_timeout_s=0.5)
    try:
        for _, query in ATTEMPTS:
            with pytest.raises(QueryRefused):
                neo.query(query)
    finally:
        neo.close()


@pytest.fixture(scope="module")
def neo4j_store():
    """The toy trade network loaded into the Neo4j test database named by NEO4J_URI (cleared first)."""
    neo = Neo4jGraphStore(NEO4J_URI)
    neo.load_statements(split_statements(TRADE_NETWORK, "trade.cql"), source="trade.cql", replace=True)
    yield neo
    neo.close()


class TestNeo4jServer:
    """The attempt list against a real Neo4j server: statement check, then the read transaction alone."""

    pytestmark = needs_neo4j

    @pytest.mark.parametrize("query", ATTEMPT_PARAMS)
    def test_check_refuses_and_unchanged(self, neo4j_store: Neo4jGraphStore, query: str) -> None:
        before = snapshot(neo4j_store)
        with pytest.raises(QueryRefused):
            neo4j_store.query(query)
        assert snapshot(neo4j_store) == before

    @pytest.mark.parametrize(("kind", "query"), SERVER_PARAMS)
    def test_read_transaction_alone(self, neo4j_store: Neo4jGraphStore, kind: str, query: str) -> None:
        """Past the check: every data write fails in the read transaction; escapes may run, nothing changes."""
        before = snapshot(neo4j_store)
        try:
            neo4j_store._run_read(query, row_cap=5, timeout_s=10)
            refused = False
        except (QueryRefused, QueryError):
            refused = True
        assert snapshot(neo4j_store) == before
        if kind == "write":
            assert refused, f"the read transaction ran a write: {query}"
