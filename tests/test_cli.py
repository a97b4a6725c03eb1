"""The ``ragplan`` command line: graphs, cypher (table, JSON, refusals, bad scripts), ask."""

from __future__ import annotations

import base64
import json
from pathlib import Path
import subprocess
import sys

import pytest

from ragplan.cli import main
from ragplan.registry import graph_registry, langgraph_graphs


def test_graphs_lists_every_graph(capsys):
    assert main(["graphs"]) == 0
    out = capsys.readouterr().out
    for name in graph_registry():
        assert name in out
    assert len(out.strip().splitlines()) == len(graph_registry())
    assert "PlanRAG: plan analyses from the schema, retrieve step by step with Cypher, re-plan after" in out


def test_graph_summary_is_the_builders_docstring_unless_given():
    from ragplan.family import GraphSpec

    def build():
        """First line of the docstring.

        Details that stay out of the listing."""

    assert GraphSpec("x", build).summary == "First line of the docstring."
    assert GraphSpec("x", build, "Given.").summary == "Given."
    for name, (_, summary) in graph_registry().items():  # every graph has a line in ``ragplan graphs``
        assert len(summary) > 20, name


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "graphs" in out and "cypher" in out and "ask" in out


def test_eval_help_states_the_run_settings_defaults(capsys):
    """The help text names ``RunSettings``' defaults (written there, since the parser is built without importing it)."""
    from ragplan.eval.runfolder import RunSettings

    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert f"default {RunSettings.concurrency};" in " ".join(capsys.readouterr().out.split())


def test_cypher_table_and_json(trade_cql, capsys):
    q = "MATCH (c:Country) RETURN c.name AS name, c.development AS dev ORDER BY name"
    assert main(["cypher", "--graph", str(trade_cql), q]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["name", "|", "dev"]
    assert out[2].startswith("DAN") and "90.0" in out[2]
    assert out[-1].startswith("(3 rows")
    assert main(["cypher", "--graph", str(trade_cql), "--json", q]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == {"name": "DAN", "dev": 90.0} and len(rows) == 3


@pytest.mark.parametrize("query", [
    'CREATE (x:Country {name:"EVIL"})',
    "MATCH (n) DETACH DELETE n",
    'MATCH (c:Country) SET c.name = "X"',
    'LOAD CSV FROM "file:///etc/passwd" AS row RETURN row',
    "MATCH (c:Country) RETURN c; CREATE (n:X)",
])
def test_cypher_refuses_writes_and_store_is_unchanged(trade_cql, capsys, query):
    assert main(["cypher", "--graph", str(trade_cql), query]) == 2
    err = capsys.readouterr().err
    assert err.startswith("refused:") and "not changed" in err
    assert main(["cypher", "--graph", str(trade_cql), "--json", "MATCH (c:Country) RETURN c.name AS n ORDER BY n"]) == 0
    assert [json.loads(x)["n"] for x in capsys.readouterr().out.splitlines()] == ["DAN", "NOV", "SWE"]


def test_cypher_query_error_and_bad_script(tmp_path, trade_cql, capsys):
    assert main(["cypher", "--graph", str(trade_cql), "MATCH (c:Country RETURN c"]) == 1
    assert "query error" in capsys.readouterr().err
    bad = tmp_path / "bad.cql"
    bad.write_text('CREATE (a:X {name:"a"});\n\nCREATE (b:X {name: });\n')
    assert main(["cypher", "--graph", str(bad), "MATCH (n) RETURN n"]) == 2
    assert f"{bad}:3" in capsys.readouterr().err
    assert main(["cypher", "--graph", str(tmp_path / "missing.cql"), "RETURN 1"]) == 2


def test_cypher_schema(trade_cql, capsys):
    assert main(["cypher", "--graph", str(trade_cql), "--schema"]) == 0
    assert "(:Trade_node {" in capsys.readouterr().out


def test_the_collector_is_off_for_start_up_only(trade_cql, monkeypatch, capsys):
    """main() turns garbage collection off while it imports and parses, on again for the command's own work (a batch
    must collect its cycles) and when it returns, and leaves it off where the caller had it off."""
    import gc

    import ragplan.cli.cypher as cypher

    seen = []
    monkeypatch.setattr(cypher, "run", lambda args: seen.append(gc.isenabled()) or 0)
    assert gc.isenabled()
    assert main(["cypher", "--graph", str(trade_cql), "MATCH (n) RETURN count(n)"]) == 0 and seen == [True]
    assert main(["graphs"]) == 0 and gc.isenabled()
    with pytest.raises(SystemExit):
        main(["graphs", "--no-such-flag"])
    assert gc.isenabled()
    gc.disable()
    try:
        assert main(["cypher", "--graph", str(trade_cql), "MATCH (n) RETURN count(n)"]) == 0 and seen == [True, False]
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_ask_without_endpoint_stops_at_once(trade_cql):
    """A fresh process without an endpoint exits 2 saying what to set, instead of waiting on a connection (a hang is
    caught by the generous bound; nothing here times the run)."""
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("OPENAI_API_KEY", "RAGPLAN_BASE_URL", "OPENAI_BASE_URL", "RAGPLAN_MODEL")}
    p = subprocess.run([sys.executable, "-m", "ragplan", "ask", "--method", "planrag", "--graph", str(trade_cql),
                        "--question", "Which node?"], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2
    assert "OPENAI_API_KEY" in p.stderr and "--base-url" in p.stderr and "Ollama" in p.stderr


def test_ask_rejects_unknown_method_and_empty_question(trade_cql, tmp_path, capsys):
    assert main(["ask", "--method", "nope", "--graph", str(trade_cql), "--question", "q"]) == 2
    assert "unknown method" in capsys.readouterr().err
    empty = tmp_path / "q.txt"
    empty.write_text("  \n")
    assert main(["ask", "--graph", str(trade_cql), "--question-file", str(empty), "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "empty" in capsys.readouterr().err


def test_ask_refuses_a_question_file_too_large_to_send(trade_cql, tmp_path, capsys):
    """A huge --question-file (it would go into every prompt) is refused before anything is sent, naming the file."""
    from tests.openai_server import OpenAIStub

    big = tmp_path / "q.txt"
    big.write_text("Which node? " * 25_000)
    with OpenAIStub(replies=[]) as stub:
        assert main(["ask", "--graph", str(trade_cql), "--question-file", str(big), "--base-url", stub.base_url]) == 2
    err = capsys.readouterr().err
    assert str(big) in err and "longer than 100,000 characters" in err and "Traceback" not in err
    assert stub.requests == []


def test_ask_prints_trace_verdict_and_totals_through_local_endpoint(tmp_path, capsys, monkeypatch):
    from ragplan.methods.planrag.generate import generate_clone
    from tests.openai_server import OpenAIStub
    from tests.test_eval_runner import agent

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    clone = tmp_path / "clone"
    generate_clone(clone, "locating", 2, seed=1)
    with OpenAIStub(responder=agent(clone, "locating")) as stub:
        code = main(["ask", "--method", "planrag", "--dqa", str(clone), "--scenario", "locating", "--question-num", "2",
                     "--model", "openai:stub-model", "--base-url", stub.base_url])
        assert code == 0
        out = capsys.readouterr().out
        assert "Plan:\n  Step 1: step 1" in out
        assert "Query: MATCH (t:Trade_node) RETURN t.name AS n" in out and "Observation:" in out
        assert "Re-plan: N — fine" in out
        assert "Decision check (simulator):" in out and "vs best" in out  # question 2 is answered wrong
        assert "LLM calls: 4" in out and "Tokens:" in out and "Wall time:" in out
        assert main(["ask", "--method", "single_rag", "--dqa", str(clone), "--scenario", "locating", "--question-num", "1",
                     "--model", "openai:stub-model", "--base-url", stub.base_url, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["decision_check"]["correct"] is True and res["method"] == "single_rag"
    assert main(["ask", "--dqa", str(clone), "--scenario", "locating", "--question-num", "99",
                 "--base-url", "http://127.0.0.1:9/v1"]) == 2


def test_langgraph_json_serves_every_registered_graph():
    from pathlib import Path

    spec = json.loads((Path(__file__).resolve().parents[1] / "langgraph.json").read_text())
    assert set(spec["graphs"]) == set(graph_registry())
    for name, target in spec["graphs"].items():
        path, attr = target.split(":")
        assert path.startswith("ragplan.graphs.") and attr == name


def test_studio_outside_the_project_folder_serves_the_installed_graphs(tmp_path, monkeypatch, capsys):
    """From any folder (here one with another project's langgraph.json), `ragplan studio` runs `langgraph dev` on the
    registry's graphs from ragplan's state folder, the user's folder left untouched."""
    import os

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "langgraph.json").write_text(json.dumps({"graphs": {"agent": "./agent.py:graph"}}))
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    ran: list = []
    monkeypatch.setattr(os, "execv", lambda exe, argv: ran.append((os.getcwd(), argv[1:])))
    main(["studio", "--no-browser", "--port", "2025"])
    home = tmp_path / "state" / "ragplan" / "studio"
    assert ran == [(str(home), ["dev", "--config", "langgraph.json", "--no-browser", "--port", "2025"])]
    assert json.loads((home / "langgraph.json").read_text())["graphs"] == langgraph_graphs()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["langgraph.json"]
    assert str(home) in capsys.readouterr().err


def test_studio_refuses_a_stale_langgraph_json(tmp_path, monkeypatch, capsys):
    """`ragplan studio` reads the registry: a langgraph.json that misses a graph is named, with the fix."""
    spec = json.loads((Path(__file__).resolve().parents[1] / "langgraph.json").read_text())
    del spec["graphs"]["flare"]
    spec["graphs"]["gone"] = "ragplan.graphs.gone:gone"
    (tmp_path / "langgraph.json").write_text(json.dumps(spec))
    monkeypatch.chdir(tmp_path)
    assert main(["studio", "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert "missing flare" in err and "unknown gone" in err and "ragplan graphs --langgraph-json" in err


def test_graphs_prints_families_and_the_langgraph_json(capsys):
    assert main(["graphs", "--families"]) == 0
    out = capsys.readouterr().out
    assert "REAPER (Joshi et al., CIKM 2024)  [reaper]  data: --shop DIR" in out
    assert main(["graphs", "--langgraph-json"]) == 0
    assert json.loads(capsys.readouterr().out)["graphs"] == json.loads(
        (Path(__file__).resolve().parents[1] / "langgraph.json").read_text())["graphs"]


def test_ask_refuses_a_flag_of_another_family(trade_cql, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    assert main(["ask", "--method", "planrag", "--graph", str(trade_cql), "--shop", "somewhere", "--question", "q"]) == 2
    assert "--shop does not apply to planrag" in capsys.readouterr().err


def test_ask_reaper_without_a_shop_says_how_to_make_one(capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.delenv("RAGPLAN_SHOP_DIR", raising=False)
    assert main(["ask", "--method", "reaper", "--question", "where is my order?"]) == 2
    assert "ragplan reaper make-shop" in capsys.readouterr().err


def test_ask_checks_settings_and_inputs_before_any_call(trade_cql, tmp_path, capsys, monkeypatch):
    """--set values are checked against the setting's type (not a traceback mid-run), Python-only fields and negative
    bounds are refused, a --input that starts like JSON must be JSON, and --dqa needs a method that reads the
    question's graph."""
    from ragplan.methods.planrag.generate import generate_clone

    monkeypatch.setenv("OPENAI_API_KEY", "x")
    base = ["ask", "--method", "planrag", "--graph", str(trade_cql), "--question", "q", "--base-url", "http://127.0.0.1:9/v1"]
    for setting, why in [("max_replans=abc", "valid integer"), ("max_steps=-1", "must not be negative"),
                         ("chat_model=x", "Python-only"), ("structured_output=xml", "'function_calling'"),
                         ("nope=1", "not a setting of planrag")]:
        assert main([*base, "--set", setting]) == 2
        err = capsys.readouterr().err
        assert why in err and "Traceback" not in err, (setting, err)
    assert main(["ask", "--method", "reaper", "--shop", str(tmp_path), "--question", "q",
                 "--input", "page_context={bad json"]) == 2
    assert "page_context: not valid JSON" in capsys.readouterr().err
    clone = tmp_path / "clone"
    generate_clone(clone, "locating", 1, seed=0)
    assert main(["ask", "--method", "think_then_act", "--dqa", str(clone), "--scenario", "locating", "--question-num", "1"]) == 2
    assert "think_then_act cannot run this question" in capsys.readouterr().err


def test_graphs_families_lists_the_settings(capsys):
    assert main(["graphs", "--families"]) == 0
    out = capsys.readouterr().out
    assert "  settings: " in out and "beta_threshold=0.5" in out and "max_replans=3" in out and "chat_model" not in out


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b1m"  # retitle the terminal, ring, clear the screen, a C1 CSI


def test_ask_escapes_control_characters_of_the_answer(capsys, monkeypatch):
    from ragplan.nodes.think_then_act.direct_answer import ChainOfThought
    from tests.openai_server import OpenAIStub

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with OpenAIStub(replies=[ChainOfThought(reasoning=f"think {HOSTILE}", answer=f"Paris{HOSTILE}")] * 2) as stub:
        assert main(["ask", "--method", "cot", "--question", "Capital of France?", "--model", "openai:m",
                     "--base-url", stub.base_url]) == 0
        cap = capsys.readouterr()
        assert main(["ask", "--method", "cot", "--question", "Capital of France?", "--model", "openai:m",
                     "--base-url", stub.base_url, "--json"]) == 0
        as_json = capsys.readouterr()
    for text in (cap.out, cap.err, as_json.out, as_json.err):
        assert not any(c in text for c in "\x1b\x07\x9b")
    assert "Answer: Paris\\u001b]0;pwned\\u0007\\u001b[2J\\u009b1m" in cap.out
    assert json.loads(as_json.out)["answer"] == f"Paris{HOSTILE}"  # the JSON still holds the answer as it was


def test_cypher_escapes_control_characters_of_results(tmp_path, capsys):
    graph = tmp_path / "g.cql"
    graph.write_text(f'CREATE (:Country {{name: "X{HOSTILE}"}});\n')
    assert main(["cypher", "--graph", str(graph), "MATCH (c:Country) RETURN c.name AS name"]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\x9b") and "X\\u001b]0;pwned" in out


PASSWORD, KEY = "S3cretPass99", "sk-test-Secret-123456"


def _files_bytes(*paths: Path) -> bytes:
    """Every byte of the files (and of the files under the folders) given, e.g. a SQLite file with its WAL."""
    found = [p for path in paths for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file()]
    return b"".join(p.read_bytes() for p in found)


def test_ask_prints_and_keeps_no_password_of_the_url_nor_a_key_the_endpoint_echoes(tmp_path, capsys, monkeypatch):
    from ragplan.nodes.think_then_act.direct_answer import ChainOfThought
    from tests.openai_server import Fault, OpenAIStub

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    db = tmp_path / "ck" / "runs.sqlite"

    def echo_401(req):  # an endpoint whose 401 body echoes the Authorization header
        return Fault(status=401, message=f"Incorrect API key provided: {req.headers.get('authorization')}")

    basic = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
    with OpenAIStub(replies=[ChainOfThought(reasoning="r", answer="Paris")]) as ok, OpenAIStub(responder=echo_401) as bad:
        for stub, password, code in ((ok, True, 0), (bad, True, 1), (bad, False, 1)):
            url = stub.base_url.replace("http://", f"http://user:{PASSWORD}@") if password else stub.base_url
            assert main(["ask", "--method", "cot", "--question", "Capital of France?", "--model", "openai:m",
                         "--base-url", url, "--checkpoint-db", str(db), "--set", "llm_max_retries=0"]) == code
            cap = capsys.readouterr()
            assert ("user:***@127.0.0.1" in cap.out) == password
            assert all(s not in cap.out + cap.err for s in (PASSWORD, KEY, basic))
            if code:  # the endpoint got the real credentials; what it echoed is masked
                assert f"Incorrect API key provided: {'Basic' if password else 'Bearer'} ***" in cap.err
    assert bad.requests[0].headers["authorization"] == f"Basic {basic}"
    assert bad.requests[1].headers["authorization"] == f"Bearer {KEY}"
    kept = _files_bytes(db.parent)
    assert b"Incorrect API key provided" in kept and b"user:***@" in kept
    assert all(s.encode() not in kept for s in (PASSWORD, KEY, basic))
    from ragplan.checkpoints import RunInfo
    from ragplan.runs import rebuild_context

    info = RunInfo(thread_id="t", method="cot", question="q", settings={"base_url": "http://u:***@h/v1"})
    with pytest.raises(ValueError, match="without its credentials .*--base-url"):  # a resume is given them again
        rebuild_context(info)
    assert rebuild_context(info, base_url="http://u:p@h/v1").base_url == "http://u:p@h/v1"


def test_redact_masks_url_passwords_query_secrets_and_configured_keys(monkeypatch):
    from ragplan.checkpoints import StateSerializer, redact
    from ragplan.state.failure import failure

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    text = f"http://u:{PASSWORD}@h:80/v1?x=1&api-key=abcdef123&amp;token=zz9 Bearer {KEY} http://h:8080/v1 a=b"
    assert redact(text) == "http://u:***@h:80/v1?x=1&api-key=***&amp;token=*** Bearer *** http://h:8080/v1 a=b"
    serde = StateSerializer()
    state = {"error": f"to http://u:{PASSWORD}@h/v1", "failure": failure("auth", "n", f"Bearer {KEY}"), "n": [1, 2]}
    kind, data = serde.dumps_typed(state)
    assert PASSWORD.encode() not in data and KEY.encode() not in data
    assert serde.loads_typed((kind, data)) == {"error": "to http://u:***@h/v1",
                                               "failure": failure("auth", "n", "Bearer ***"), "n": [1, 2]}
