"""Every graph of langgraph.json through every entry point: ``ragplan ask``, ``ragplan.api.ask``, ``ragplan eval``.

The graphs come from langgraph.json (what Studio serves), their families from the registry; each family
names its test data in ``tests/family_data/<family>.py``. The LLM is the local OpenAI-compatible stub answering each request from the
schema it forces (:mod:`tests.auto_reply`), reached through the real ``langchain-openai`` client. A
family that is not wired into an entry point, or has no test data, fails.
"""

from __future__ import annotations

import importlib
import importlib.util
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
def data(tmp_path_factory) -> dict[str, FamilyData]:
    """Test data of every family that has a module under tests/family_data/ (a missing one fails its graphs)."""
    root = tmp_path_factory.mktemp("entry")
    out = {}
    for fam in families():
        if importlib.util.find_spec(f"tests.family_data.{fam.name}") is not None:
            out[fam.name] = importlib.import_module(f"tests.family_data.{fam.name}").make(root)
    return out


def _family_data(data: dict[str, FamilyData], method: str) -> tuple[Any, FamilyData]:
    fam = family_of(method)
    if fam.name not in data:
        pytest.fail(f"family {fam.name!r} has no entry-point test data: add tests/family_data/{fam.name}.py")
    return fam, data[fam.name]


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_langgraph_json_serves_every_registered_graph():
    """langgraph.json is what the registry says (regenerate with `ragplan graphs --langgraph-json`)."""
    assert LANGGRAPH == langgraph_graphs()
    assert [f.name for f in families()][:3] == ["planrag", "think_then_act", "reaper"]


@pytest.mark.parametrize("method", sorted(LANGGRAPH))
def test_cli_ask(method, data, capsys):
    fam, d = _family_data(data, method)
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
        code = main(["ask", "--method", method, "--question", d.question, *d.cli(method),
                     "--model", MODEL, "--base-url", stub.base_url])
    out = capsys.readouterr()
    assert code == 0, out.err
    lines = out.out.splitlines()
    assert lines[0].startswith(f"Method: {method}") and lines[1] == f"Question: {d.question}"
    answer = [ln for ln in lines if ln.startswith("Answer: ")]
    assert len(answer) == 1 and answer[0] != "Answer: (none)"
    assert any(ln.startswith("LLM calls: ") for ln in lines)
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
        code = main(["ask", "--method", method, "--question", d.question, *d.cli(method),
                     "--model", MODEL, "--base-url", stub.base_url, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert set(fam.result.model_fields) <= set(result) and result["method"] == method and result["answer"]
    assert out.err.startswith(f"Method: {method}")  # the trace goes to stderr with --json


@pytest.mark.parametrize("method", sorted(LANGGRAPH))
def test_api_ask(method, data):
    fam, d = _family_data(data, method)
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
        res = ask(d.question, method, model=MODEL, base_url=stub.base_url, **d.api(method))
    assert type(res) is fam.result and res.method == method
    assert res.answer and not res.error, (res.stop_reason, res.error)
    assert res.usage.llm_calls == len(stub.requests) > 0 and res.wall_time_s > 0
    if fam.graph(method).uses_data and method != "flare":  # every retrieving graph was steered to retrieve
        assert res.retrievals() >= 1 and res.retrieval_errors() == 0, res.record()


@pytest.mark.parametrize("method", sorted(LANGGRAPH))
def test_eval(method, data, tmp_path):
    fam, d = _family_data(data, method)
    run = tmp_path / "run"
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
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


def test_route_runs_a_router_on_the_graphs_own_thread():
    """Under ``ainvoke`` a plain router runs in LangGraph's thread pool; one wrapped by :func:`route` runs on the
    event loop's thread (no hand-off), and both route the same way under ``invoke`` and ``ainvoke``."""
    import asyncio
    import threading
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    from ragplan.family import route

    class S(TypedDict, total=False):
        n: int

    def build(wrap: Any, seen: list[int]) -> Any:
        def go_on(state):  # type: ignore[no-untyped-def]  (no hints: LangGraph reads them, S is local)
            seen.append(threading.get_ident())
            return "more" if state.get("n", 0) < 3 else END

        g = StateGraph(S)
        g.add_node("step", lambda s: {"n": s.get("n", 0) + 1})
        g.add_edge(START, "step")
        g.add_conditional_edges("step", wrap(go_on), {"more": "step", END: END})
        return g.compile()

    async def loop_thread(graph: Any) -> tuple[int, dict[str, Any]]:
        return threading.get_ident(), await graph.ainvoke({"n": 0})

    for wrap, inline in ((route, True), (lambda f: f, False)):
        seen: list[int] = []
        graph = build(wrap, seen)
        assert graph.invoke({"n": 0}) == {"n": 3} and set(seen) == {threading.get_ident()}
        seen.clear()
        loop_id, out = asyncio.run(loop_thread(graph))
        assert out == {"n": 3} and len(seen) == 3
        assert (set(seen) == {loop_id}) is inline, (wrap, seen, loop_id)


@pytest.mark.parametrize("method", sorted(LANGGRAPH))
def test_every_router_of_every_graph_runs_inline(method):
    """Every conditional edge of every graph is wired through :func:`ragplan.family.route` (a router added as a
    plain function would cost a thread hand-off per step under ``ainvoke``); graphs without one pass."""
    from langgraph._internal._runnable import RunnableCallable

    builder = family_of(method).graph(method).build()
    paths = [(src, name, spec.path) for src, branches in builder.branches.items() for name, spec in branches.items()]
    for src, name, path in paths:
        assert isinstance(path, RunnableCallable) and path.afunc is None and path.func is not None, (src, name, path)
