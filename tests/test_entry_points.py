"""Every graph of langgraph.json through every entry point: ``ragplan ask``, ``ragplan.api.ask``, ``ragplan eval``.

The graphs come from langgraph.json (what Studio serves), their families from the registry; each family
names its test data in ``tests/family_data/<family>.py``. The LLM is the local OpenAI-compatible stub answering each request from the
schema it forces (:mod:`tests.auto_reply`), reached through the real ``langchain-openai`` client. A
family that is not wired into an entry point, or has no test data, fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragplan.api import ask
from ragplan.cli import main
from ragplan.registry import family_of, families, langgraph_graphs
from tests.auto_reply import auto_responder
from tests.family_data import FamilyData
from tests.openai_server import OpenAIStub

ROOT = Path(__file__).resolve().parents[1]
LANGGRAPH = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
MODEL = "openai:stub-model"


@pytest.fixture(scope="module")
def data(every_family_data) -> dict[str, FamilyData]:
    """Test data of every family (tests/family_data/<family>.py; a missing one fails its graphs)."""
    return every_family_data


def _family_data(data: dict[str, FamilyData], method: str) -> tuple[Any, FamilyData]:
    fam = family_of(method)
    if fam.name not in data:
        pytest.fail(f"family {fam.name!r} has no entry-point test data: add tests/family_data/{fam.name}.py")
    return fam, data[fam.name]


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def endpoint(module_stub: OpenAIStub, data: dict[str, FamilyData]) -> Any:
    """``endpoint(d)``: the module's stub answering from family data ``d`` (requests of this call only)."""

    def steer(d: FamilyData) -> OpenAIStub:
        return module_stub.script(responder=auto_responder(d.overrides, d.text))

    return steer


def test_langgraph_json_serves_every_registered_graph():
    """langgraph.json is what the registry says (regenerate with `ragplan graphs --langgraph-json`)."""
    assert LANGGRAPH == langgraph_graphs()
    assert [f.name for f in families()][:3] == ["planrag", "think_then_act", "reaper"]


@pytest.mark.parametrize("method", sorted(LANGGRAPH))
def test_cli_ask(method, data, endpoint, capsys):
    fam, d = _family_data(data, method)
    stub = endpoint(d)
    code = main(["ask", "--method", method, "--question", d.question, *d.cli(method),
                 "--model", MODEL, "--base-url", stub.base_url])
    out = capsys.readouterr()
    assert code == 0, out.err
    lines = out.out.splitlines()
    assert lines[0].startswith(f"Method: {method}") and lines[1] == f"Question: {d.question}"
    answer = [ln for ln in lines if ln.startswith("Answer: ")]
    assert len(answer) == 1 and answer[0] != "Answer: (none)"
    assert any(ln.startswith("LLM calls: ") for ln in lines)
    stub = endpoint(d)
    code = main(["ask", "--method", method, "--question", d.question, *d.cli(method),
                 "--model", MODEL, "--base-url", stub.base_url, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert set(fam.result.model_fields) <= set(result) and result["method"] == method and result["answer"]
    assert out.err.startswith(f"Method: {method}")  # the trace goes to stderr with --json


@pytest.mark.parametrize("method", sorted(LANGGRAPH))
def test_api_ask(method, data, endpoint):
    fam, d = _family_data(data, method)
    stub = endpoint(d)
    res = ask(d.question, method, model=MODEL, base_url=stub.base_url, **d.api(method))
    assert type(res) is fam.result and res.method == method
    assert res.answer and not res.error, (res.stop_reason, res.error)
    assert res.usage.llm_calls == len(stub.requests) > 0 and res.wall_time_s > 0
    if fam.graph(method).uses_data and method != "flare":  # every retrieving graph was steered to retrieve
        assert res.retrievals() >= 1 and res.retrieval_errors() == 0, res.record()


@pytest.mark.parametrize("method", sorted(LANGGRAPH))
def test_eval(method, data, endpoint, tmp_path):
    fam, d = _family_data(data, method)
    run = tmp_path / "run"
    stub = endpoint(d)
    code = main(["eval", "--method", method, *d.eval(method), "--limit", "1", "--model", MODEL,
                 "--base-url", stub.base_url, "--out", str(run), "--no-progress"])
    assert code == 0
    (rec,) = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert rec["method"] == method and rec["answer"] and rec["error"] == "" and rec["attempts"] == 1
    res = fam.result.from_state(rec)
    assert set(res.record()) <= set(rec), "the record keeps the family's fields"
    assert rec["retrievals"] == res.retrievals() and rec["retrieval_errors"] == res.retrieval_errors()
    assert rec["llm_calls"] == len(stub.requests)


@pytest.mark.parametrize("method", sorted(LANGGRAPH))
def test_each_graph_uses_its_familys_context(method):
    """One typed context per family: the graph's context_schema (Studio's form) is the family's context."""
    fam = family_of(method)
    assert fam.graph(method).build().context_schema is fam.context




@pytest.mark.parametrize("method", sorted(LANGGRAPH))
def test_langgraph_dev_and_the_registry_share_one_module_object(method):
    """langgraph.json names each graph by module (``ragplan.graphs.<family>:<name>``), which ``langgraph dev`` loads
    with ``importlib.import_module``: the graph it serves is the very object the registry's family module holds, so
    every graph and family is built once per process (a ``./graphs/<f>.py`` path would load a second copy)."""
    import importlib
    import sys

    module_name, attr = LANGGRAPH[method].split(":")
    assert "/" not in module_name, "a file path makes langgraph dev load the module a second time"
    fam = family_of(method)
    served = importlib.import_module(module_name).__dict__[attr]  # what langgraph_api's loader does for module syntax
    assert sys.modules[module_name].FAMILY is fam
    assert served is getattr(sys.modules[f"ragplan.graphs.{fam.name}"], method)
    assert served.name == method  # (the module's graphs are unpacked from FAMILY.graphs: each name its own graph)
    assert not [m for m in sys.modules if m.endswith(f"graphs__{fam.name}")], "a by-path copy of the module was loaded"
