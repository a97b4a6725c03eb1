"""The graph store: reading messy DQA scripts, schema introspection, caps, timeouts and the LangChain tool.

The conformance class at the end runs the same queries and schema checks on every backend: the
embedded engine always, Neo4j when ``NEO4J_URI`` names a test database (it is cleared and loaded).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from ragplan.tools.graphdb import (
    EmbeddedGraphStore, GraphStore, QueryError, QueryRefused, QueryTimeout, ScriptError, StoreSpec,
    format_rows, make_graph_db_tool, open_store, read_script, run_graph_query, split_statements,
)
from ragplan.tools.graphdb.tool import QueryOutcome
from tests.data import TRADE_NETWORK

NEO4J_URI = os.environ.get("NEO4J_URI", "")

MESSY = """\
// DQA-style script with the usual mess
CREATE (kongo:Trade_node {name:"kongo", local_value:2.875, is_inland:true, total_power:606.73, outgoing:0.35, ingoing:0.11});
CREATE (benin:Trade_node {name:"benin", local_value:1.5, is_inland:false, total_power:100.0, outgoing:0.1, ingoing:0.0})

CREATE (SWE:Country {name:"SWE", home_node:"kongo", development:107.373});
MATCH (a:Trade_node {name:"kongo"}), (b:Trade_node {name:"benin"}) CREATE (a)-[r:source{flow:0.105}]->(b);
MATCH (t:Trade_node {name:"kongo"}), (SWE:Country {name:"SWE"}) CREATE (SWE)-[r:NodeCountry{is_home: true, has_merchant: "False",base_trading_power: 4.0,calculated_trading_power: 4.0}]->(t);
MATCH (t:Trade_node {name:"benin"}), (SWE:Country {name:"SWE"}) CREATE (SWE)-[r:NodeCountry{is_home: false, has_has_merchant: "True",base_trading_power: 2.0,calculated_trading_power: 2.0}]->(t)
CREATE (n: Goods {name:"furniture", code: 9, base_price:30, current_price:24.1, pop_demand:120.0});
CREATE (n:Goods{name:"wood", code: 14, base_price:20, current_price:18.0, pop_demand:50.0});
CREATE (n: Building {id: 1485, name:"building_furniture_manufacturieslevel", level:3});
CREATE (n: Building {id: 1430,
   name:"building_lumber_mill", level:2});
MATCH (g: Goods{code: 14}), (b: Building{id:1485}) CREATE (g)-[r:Demand{max_demand: 55.9, current_input: 10.19, level: 3}]->(b);
MATCH (g: Goods{code: 9}), (b: Building{id:1485})
CREATE (b)-[r:Supply{max_supply: 89.64, current_output: 91.43,level: 3}]->(g);
// a comment line; with a semicolon
MATCH (g: Goods{code: 14}), (b: Building{id:1430}) CREATE (b)-[r:Supply{max_supply: 40.0, current_output: 38.5,level: 2}]->(g); // note
"""
MESSY_LINES = [2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 18]

SEMICOLON_MODE = """\
// toy network, written by hand
CREATE (a:Trade_node {name: "a"}),
       (b:Trade_node {name: "b"}),
       (c:Trade_node {name: "c"});

// edges
MATCH (a:Trade_node {name: "a"}),
      (b:Trade_node {name: "b"})
CREATE (a)-[:source {flow: 0.5}]->(b);
MATCH (b:Trade_node {name: "b"}), (c:Trade_node {name: "c"})
CREATE (b)-[:source {flow: 0.25}]->(c)
;
"""


@pytest.fixture(scope="module")
def messy() -> EmbeddedGraphStore:
    return EmbeddedGraphStore.from_text(MESSY, source="messy.cql")


class TestScriptLoader:
    """Splitting and loading messy Neo4j-dialect scripts, with the line of every statement."""

    def test_messy_dqa_lines(self) -> None:
        stmts = split_statements(MESSY, "messy.cql")
        assert [s.line for s in stmts] == MESSY_LINES
        assert not any(s.text.endswith(";") or s.text.startswith("//") for s in stmts)
        assert stmts[9].text == 'CREATE (n: Building {id: 1430,\n   name:"building_lumber_mill", level:2})'
        assert stmts[11].text.startswith('MATCH (g: Goods{code: 9})') and "\nCREATE (b)-[r:Supply" in stmts[11].text
        assert stmts[12].text.endswith("]->(g)")  # "; // note": the comment after the ';' is no statement

    def test_messages_quoting_a_huge_script_are_clipped(self, tmp_path: Path) -> None:
        """A statement or value of a megabyte is quoted in a few hundred characters, with its length."""
        from ragplan.methods.planrag.data import load_scenario

        big = "x" * 1_000_000
        cases = [(f"CREATE (n:X {{s: {big}}});\n", lambda p: EmbeddedGraphStore.from_script(p)),  # kglite quotes it
                 (f'CREATE (a:Trade_node {{name:"a", local_value:"{big}"}});\n', lambda p: load_scenario(p, "locating"))]
        for i, (text, load) in enumerate(cases):
            path = tmp_path / f"big{i}.cql"
            path.write_text(text)
            with pytest.raises(ScriptError) as err:
                load(path)
            assert str(err.value).startswith(f"{path.resolve() if i else path}:1: ")
            assert len(str(err.value)) < 800 and "characters)" in str(err.value), len(str(err.value))

    def test_messy_script_loads(self, messy: EmbeddedGraphStore) -> None:
        counts = {r["l"]: r["c"] for r in messy.query("MATCH (n) RETURN labels(n)[0] AS l, count(n) AS c").rows}
        assert counts == {"Trade_node": 2, "Country": 1, "Goods": 2, "Building": 2}
        rels = {r["t"]: r["c"] for r in messy.query("MATCH ()-[r]->() RETURN type(r) AS t, count(r) AS c").rows}
        assert rels == {"source": 1, "NodeCountry": 2, "Demand": 1, "Supply": 2}
        row = messy.query('MATCH (:Country)-[r:NodeCountry]->(:Trade_node {name: "benin"}) RETURN r.has_has_merchant AS hh, r.has_merchant AS h').rows
        assert row == [{"hh": "True", "h": None}]

    def test_several_statements_on_one_line(self) -> None:
        stmts = split_statements("CREATE (a:X {i: 1}); CREATE (b:X {i: 2});\nCREATE (c:X {i: 3});\n")
        assert [(s.line, s.text) for s in stmts] == [
            (1, "CREATE (a:X {i: 1})"), (1, "CREATE (b:X {i: 2})"), (2, "CREATE (c:X {i: 3})"),
        ]

    def test_no_semicolons_at_all(self) -> None:
        stmts = split_statements("CREATE (a:X)\n\nCREATE (b:X)\nMATCH (a:X), (b:X)\n  CREATE (a)-[:R]->(b)\n")
        assert [s.line for s in stmts] == [1, 3, 4]

    def test_semicolon_mode_multi_line_statements(self) -> None:
        stmts = split_statements(SEMICOLON_MODE, "hand.cql")
        assert [s.line for s in stmts] == [2, 7, 10]
        assert stmts[1].text.startswith("MATCH") and stmts[2].text.endswith("->(c)")
        store = EmbeddedGraphStore.from_text(SEMICOLON_MODE)
        assert store.query("MATCH ()-[r:source]->() RETURN count(r) AS c").rows == [{"c": 2}]

    def test_strings_keep_semicolons_and_comment_markers(self) -> None:
        text = 'CREATE (a:X {s: "x; y // z"});\nCREATE (b:X {s: \'it\\\'s\'});\n'
        assert [s.text for s in split_statements(text)] == ['CREATE (a:X {s: "x; y // z"})', "CREATE (b:X {s: 'it\\'s'})"]

    @pytest.mark.parametrize(
        ("script", "line", "reason"),
        [
            ('CREATE (a:X {i: 1});\n\nCREATE (b:X {i: });\nCREATE (c:X);\n', 3, "syntax"),
            ('CREATE (a:X);\n// c\nCREATE (b:X);\nCREATE (c:X {v: nosuchfn(1)});\n', 4, "nosuchfn"),
            ('CREATE (a:X);\nCREATE (b:X {s: "open);\nCREATE (c:X);\n', 2, "unterminated"),
        ],
        ids=["syntax-error", "runtime-error", "unterminated"],
    )
    def test_failing_statement_names_file_and_line(self, tmp_path: Path, script: str, line: int, reason: str) -> None:
        path = tmp_path / "bad.cql"
        path.write_text(script)
        with pytest.raises(ScriptError) as err:
            EmbeddedGraphStore.from_script(path)
        assert (err.value.path, err.value.line) == (str(path), line)
        assert str(err.value).startswith(f"{path}:{line}: ") and reason in str(err.value).lower()

    def test_not_utf8(self, tmp_path: Path) -> None:
        path = tmp_path / "latin1.cql"
        path.write_bytes(b'CREATE (a:X {name: "a"});\nCREATE (b:X {name: "caf\xe9"});\n')
        with pytest.raises(ScriptError, match=r"latin1\.cql:2: the file is not UTF-8"):
            read_script(path)

    @pytest.mark.parametrize("text", ["", "\n\n", "// nothing but a comment\n"])
    def test_empty_file(self, tmp_path: Path, text: str) -> None:
        """An empty script is refused with its file and line (issue 13: it used to load as an empty graph)."""
        path = tmp_path / "empty.cql"
        path.write_text(text)
        with pytest.raises(ScriptError, match=r"empty\.cql:1: the script holds no statements"):
            read_script(path)
        with pytest.raises(ScriptError, match=r"empty\.cql:1:"):
            EmbeddedGraphStore.from_script(path)
        store = EmbeddedGraphStore.from_text(text)  # a script given as text may still be empty (an empty graph)
        assert store.node_count() == 0 and "(the graph is empty)" in store.schema().to_prompt()

    def test_missing_file(self, tmp_path: Path) -> None:
        with pytest.raises(ScriptError, match="cannot read the file"):
            read_script(tmp_path / "nope.cql")


class TestSchemaAndResults:
    """Schema introspection, kglite's structural keys, row cap and timeout on the embedded engine."""

    def test_schema(self, messy: EmbeddedGraphStore) -> None:
        schema = messy.schema()
        assert messy.schema() is schema
        labels = {lab.label: lab for lab in schema.labels}
        assert {k: v.count for k, v in labels.items()} == {"Building": 2, "Country": 1, "Goods": 2, "Trade_node": 2}
        assert set(labels["Goods"].properties) == {"name", "code", "base_price", "current_price", "pop_demand"}
        assert set(labels["Building"].properties) == {"id", "name", "level"}  # the script sets Building ids
        assert isinstance(labels["Building"].properties["id"], int)
        assert isinstance(labels["Trade_node"].properties["is_inland"], bool)
        for lab in labels.values():
            assert not {"title", "type"} & set(lab.properties)
        rels = {(r.type, r.source, r.target): r for r in schema.relationships}
        assert set(rels) == {
            ("source", "Trade_node", "Trade_node"), ("NodeCountry", "Country", "Trade_node"),
            ("Demand", "Goods", "Building"), ("Supply", "Building", "Goods"),
        }
        nc = rels[("NodeCountry", "Country", "Trade_node")]
        assert nc.count == 2 and nc.properties["has_merchant"] == "False" and isinstance(nc.properties["is_home"], bool)
        assert "has_has_merchant" in nc.properties and "type" not in nc.properties
        prompt = schema.to_prompt()
        assert '(:Building {id: 1485, level: 3, name: "building_furniture_manufacturieslevel"})  -- 2 nodes' in prompt
        assert "(:Building)-[:Supply {current_output: 91.43, level: 3, max_supply: 89.64}]->(:Goods)  -- 2 relationships" in prompt

    def test_returned_nodes_hide_structural_keys(self, messy: EmbeddedGraphStore) -> None:
        rows = messy.query("MATCH (g:Goods {code: 9})<-[r:Supply]-(b:Building) RETURN g, r, b").rows
        assert rows[0]["g"] == {"labels": ["Goods"], "properties": {
            "base_price": 30, "code": 9, "current_price": 24.1, "name": "furniture", "pop_demand": 120.0}}
        assert rows[0]["b"]["properties"] == {"id": 1485, "level": 3, "name": "building_furniture_manufacturieslevel"}
        assert rows[0]["r"]["type"] == "Supply" and "type" not in rows[0]["r"]["properties"]

    def test_row_cap(self, trade_store: EmbeddedGraphStore) -> None:
        res = trade_store.query("MATCH (n) RETURN n.name AS name ORDER BY name", row_cap=2)
        assert res.columns == ["name"] and [r["name"] for r in res.rows] == ["DAN", "NOV"]
        assert (res.total_rows, res.truncated) == (6, True)
        text = format_rows(res.columns, res.rows, res.total_rows)
        assert text.splitlines()[:3] == ["name", "DAN", "NOV"] and "(2 of 6 rows shown: the row cap was reached" in text
        full = trade_store.query("MATCH (n) RETURN n.name AS name", row_cap=6)
        assert not full.truncated and "rows shown" not in format_rows(full.columns, full.rows, full.total_rows)

    def test_timeout(self, trade_store: EmbeddedGraphStore) -> None:
        slow = "MATCH (a), (b), (c), (d), (e), (f), (g), (h), (i), (j) RETURN count(*) AS c"  # 6^10 rows
        with pytest.raises(QueryTimeout):
            trade_store.query(slow, timeout_s=0.05)
        out = run_graph_query(trade_store, slow, row_cap=10, timeout_s=0.05)
        assert (out.ok, out.error_kind) == (False, "timeout") and out.observation.startswith("Query timed out:")

    @pytest.mark.parametrize(
        ("query", "kind", "prefix"),
        [
            ("CREATE (n:X)", "refused", "Query refused:"),
            ("MATCH (n) RETURN nosuchfn(n)", "error", "Query error:"),
            ("MATCH (n RETURN n", "error", "Query error:"),
        ],
    )
    def test_run_graph_query_failures(self, trade_store: EmbeddedGraphStore, query: str, kind: str, prefix: str) -> None:
        out = run_graph_query(trade_store, query, row_cap=10, timeout_s=5)
        assert (out.ok, out.error_kind, out.row_count) == (False, kind, 0) and out.observation.startswith(prefix)

    def test_run_graph_query_ok(self, trade_store: EmbeddedGraphStore) -> None:
        out = run_graph_query(trade_store, "MATCH (c:Country) RETURN c.name AS name ORDER BY name", row_cap=2, timeout_s=5)
        assert (out.ok, out.error_kind, out.row_count, out.total_rows) == (True, None, 2, 3)
        assert out.observation.startswith("name\nDAN\nNOV\n(2 of 3 rows shown") and out.elapsed_ms >= 0


class TestOpenStoreAndTool:
    """The per-process store cache and the ``graph_db`` LangChain tool."""

    def test_same_file_loaded_once(self, trade_cql: Path) -> None:
        first = open_store(StoreSpec(graph_path=str(trade_cql)))
        assert open_store(StoreSpec(graph_path=str(trade_cql))) is first
        assert first.node_count() == 6

    def test_edited_file_is_reloaded(self, trade_cql: Path) -> None:
        first = open_store(StoreSpec(graph_path=str(trade_cql)))
        trade_cql.write_text(TRADE_NETWORK + 'CREATE (x:Country {name:"XXX", home_node:"lubeck", development:1.0});\n')
        second = open_store(StoreSpec(graph_path=str(trade_cql)))
        assert second is not first and second.node_count() == 7

    def test_distinct_scripts_load_at_the_same_time(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Each script loads in its own worker: two loads run at once (one lock per script, not one for all)."""
        import threading
        from concurrent.futures import ThreadPoolExecutor

        import ragplan.tools.graphdb.tool as tool_mod

        both_loading, real = threading.Barrier(2, timeout=10), tool_mod._build

        def build(spec: StoreSpec) -> GraphStore:
            both_loading.wait()  # fails (BrokenBarrierError) if the second load waits for the first
            return real(spec)

        monkeypatch.setattr(tool_mod, "_build", build)
        paths = [tmp_path / "a.cql", tmp_path / "b.cql"]
        for p in paths:
            p.write_text(TRADE_NETWORK)
        with ThreadPoolExecutor(2) as pool:
            stores = list(pool.map(lambda p: open_store(StoreSpec(graph_path=str(p))), paths))
        assert stores[0] is not stores[1] and [s.node_count() for s in stores] == [6, 6]

    def test_loading_locks_do_not_pile_up(self, trade_cql: Path, tmp_path: Path) -> None:
        """A script's loading lock goes once the store is loaded, found in the cache, or failed to load."""
        import ragplan.tools.graphdb.tool as tool_mod

        bad = tmp_path / "bad.cql"
        bad.write_text("CREATE (a:A {name: 'x'});\nTHIS IS NOT CYPHER;\n")
        for _ in range(2):
            open_store(StoreSpec(graph_path=str(trade_cql)))
            with pytest.raises(ScriptError):
                open_store(StoreSpec(graph_path=str(bad)))
        assert tool_mod._loading == {}

    def test_a_store_loaded_meanwhile_under_a_newer_lock_is_kept_once(self, tmp_path: Path, monkeypatch) -> None:
        """After a failed load frees its lock, a waiting thread and a newcomer may both load: the first store cached is
        returned to both, the other's worker released, and neither removes the other's loading lock."""
        import ragplan.tools.graphdb.tool as tool_mod

        p = tmp_path / "t.cql"
        p.write_text(TRADE_NETWORK)
        spec, real = StoreSpec(graph_path=str(p)), tool_mod._build
        other, released = real(spec), []

        def build(s: StoreSpec) -> GraphStore:
            store = real(s)
            monkeypatch.setattr(store.sandbox, "release", lambda: released.append(store))
            key = next(k for k in tool_mod._loading)
            tool_mod._cache[key] = other  # the newcomer's load finished first
            tool_mod._loading[key] = newer = object()  # and its lock is the key's lock now
            build.newer = newer  # type: ignore[attr-defined]
            return store

        monkeypatch.setattr(tool_mod, "_build", build)
        assert open_store(spec) is other and len(released) == 1
        assert tool_mod._loading.pop(next(iter(tool_mod._loading))) is build.newer  # type: ignore[attr-defined]

    def test_bad_specs(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="no graph store configured"):
            open_store(StoreSpec())
        with pytest.raises(ScriptError):
            open_store(StoreSpec(graph_path=str(tmp_path / "missing.cql")))

    def test_tool(self, trade_store: EmbeddedGraphStore) -> None:
        tool = make_graph_db_tool(trade_store, row_cap=2, timeout_s=5)
        assert tool.name == "graph_db" and "read-only Cypher" in tool.description
        assert tool.args_schema.model_json_schema()["required"] == ["query"] and list(tool.args) == ["query"]
        call = {"name": "graph_db", "args": {"query": "MATCH (c:Country) RETURN c.name AS name ORDER BY name"}, "id": "c1", "type": "tool_call"}
        msg = tool.invoke(call)
        assert isinstance(msg, ToolMessage) and msg.tool_call_id == "c1"
        assert isinstance(msg.artifact, QueryOutcome) and msg.artifact.ok and msg.artifact.total_rows == 3
        assert msg.content == msg.artifact.observation and msg.content.startswith("name\nDAN\nNOV")
        refused = tool.invoke({**call, "id": "c2", "args": {"query": "MATCH (n) DETACH DELETE n"}})
        assert refused.artifact.error_kind == "refused" and refused.content.startswith("Query refused:")
        assert trade_store.node_count() == 6


@pytest.fixture(scope="module", params=["embedded", pytest.param("neo4j", marks=[
    pytest.mark.neo4j, pytest.mark.skipif(not NEO4J_URI, reason="no Neo4j server: set NEO4J_URI to a test database")])])
def backend(request: pytest.FixtureRequest):
    """The toy trade network in each backend (Neo4j: the test database is cleared and loaded)."""
    if request.param == "embedded":
        yield EmbeddedGraphStore.from_text(TRADE_NETWORK, source="trade.cql")
        return
    from ragplan.tools.graphdb import Neo4jGraphStore

    store = Neo4jGraphStore(NEO4J_URI)
    store.load_statements(split_statements(TRADE_NETWORK, "trade.cql"), source="trade.cql", replace=True)
    yield store
    store.close()


class TestConformance:
    """Both backends answer the same queries the same way and describe the same schema."""

    def test_rows(self, backend: GraphStore) -> None:
        q = lambda c: backend.query(c).rows  # noqa: E731
        assert q("MATCH (c:Country) RETURN c.name AS name ORDER BY name") == [{"name": "DAN"}, {"name": "NOV"}, {"name": "SWE"}]
        assert q("MATCH (a:Trade_node)-[r:source]->(b) RETURN a.name AS a, b.name AS b, r.flow AS flow ORDER BY flow") == [
            {"a": "baltic_sea", "b": "lubeck", "flow": 0.5}, {"a": "novgorod", "b": "baltic_sea", "flow": 0.9}]
        assert q('MATCH (:Country)-[r:NodeCountry]->(t:Trade_node) RETURN t.name AS t, sum(r.base_trading_power) AS p ORDER BY t') == [
            {"t": "baltic_sea", "p": 30.0}, {"t": "lubeck", "p": 100.0}, {"t": "novgorod", "p": 40.0}]
        assert q('MATCH (:Country {name: "DAN"})-[r:NodeCountry]->() RETURN r.is_home AS h, r.has_merchant AS m, r.has_has_merchant AS hh') == [
            {"h": True, "m": None, "hh": "True"}]
        assert q('MATCH (n:Country {name: "SWE"}) RETURN n') == [{"n": {"labels": ["Country"], "properties": {
            "name": "SWE", "home_node": "baltic_sea", "development": 107.373}}}]

    def test_schema(self, backend: GraphStore) -> None:
        schema = backend.schema()
        # (a Neo4j database may still know labels / types of deleted data: they count 0 and are skipped)
        labels = {lab.label: (lab.count, set(lab.properties)) for lab in schema.labels if lab.count}
        assert labels == {
            "Country": (3, {"name", "home_node", "development"}),
            "Trade_node": (3, {"name", "local_value", "is_inland", "total_power", "outgoing", "ingoing"}),
        }
        rels = {(r.type, r.source, r.target): (r.count, set(r.properties)) for r in schema.relationships if r.count}
        assert rels == {
            ("source", "Trade_node", "Trade_node"): (2, {"flow"}),
            ("NodeCountry", "Country", "Trade_node"): (
                5, {"is_home", "has_merchant", "has_has_merchant", "base_trading_power", "calculated_trading_power"}),
        }

    def test_cap_refusal_and_errors(self, backend: GraphStore) -> None:
        res = backend.query("MATCH (n) RETURN n.name AS name", row_cap=2)
        assert len(res.rows) == 2 and res.truncated and res.total_rows >= 3  # Neo4j stops counting at cap + 1
        with pytest.raises(QueryRefused):
            backend.query("MATCH (n) SET n.name = 'x'")
        with pytest.raises(QueryError) as err:
            backend.query("MATCH (n RETURN n")
        assert not isinstance(err.value, QueryTimeout)
