"""Every graph of langgraph.json through every entry point: ``ragplan ask``, ``ragplan.api.ask``, ``ragplan eval``.

The graphs come from langgraph.json (what Studio serves), their families from the registry; each family
names its test data below. The LLM is the local OpenAI-compatible stub answering each request from the
schema it forces (:mod:`tests.auto_reply`), reached through the real ``langchain-openai`` client. A
family that is not wired into an entry point, or has no test data here, fails.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from ragplan.api import ask
from ragplan.cli import main
from ragplan.registry import family_of, families, langgraph_graphs
from tests.auto_reply import auto_responder
from tests.openai_server import OpenAIStub

ROOT = Path(__file__).resolve().parents[1]
LANGGRAPH = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
MODEL = "openai:stub-model"


def _count_query(req: Any) -> dict[str, Any]:
    """PlanRAG / IterRAG: one real query, then finish."""
    if "\nObservation" in req.prompt_text:
        return {"thought": "enough", "action": "finish", "action_input": ""}
    return {"thought": "count them", "action": "graph_db", "action_input": "MATCH (t:Trade_node) RETURN count(t) AS n"}


def _agent_call(req: Any) -> dict[str, Any]:
    """REAPER's agent baseline: one help-centre call, then done."""
    if "Evidence: none" not in req.prompt_text:
        return {"thought": "enough", "done": True, "tool": "", "args": {}}
    return {"thought": "ask the help centre", "done": False, "tool": "customer_support", "args": {"question": "returns"}}


@dataclass
class FamilyData:
    """What one family's graphs need in the tests: data flags, API settings, a benchmark, the stub's steering."""

    cli: Callable[[str], list[str]]
    api: Callable[[str], dict[str, Any]]
    eval: Callable[[str], list[str]]
    question: str
    overrides: dict[str, Any] = field(default_factory=dict)
    text: str = "No retrieval needed."


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, FamilyData]:
    """Test data of every family, made here (a DQA clone, a local index, a HotpotQA file, a retail shop …)."""
    from ragplan.dqa.generate import generate
    from ragplan.eval.benchmarks.reaper_goldset import generate_goldset
    from ragplan.tools.retail import generate_shop
    from ragplan.tools.textindex import build_index
    from ragplan.training.reaper.classifier import train_classifier
    from tests.test_datasets import HOTPOT, write_json

    root = tmp_path_factory.mktemp("entry")
    cql = str(ROOT / "examples" / "trade_network.cql")
    clone = root / "dqa"
    generate(clone, "locating", 1, seed=0)
    passages = root / "passages.jsonl"
    passages.write_text("".join(json.dumps({"id": str(i), "title": t, "text": x}) + "\n" for i, (t, x) in enumerate([
        ("Ed Wood", "Edward Davis Wood Jr. was an American filmmaker."),
        ("Scott Derrickson", "Scott Derrickson is an American director."),
        ("Alien (film)", "Alien is a 1979 film directed by Ridley Scott.")])))
    index = root / "index"
    build_index(passages, index)
    hotpot = write_json(root / "hotpot.json", HOTPOT[:1])
    shop = root / "shop"
    generate_shop(shop, seed=0, n_products=60, n_orders=30)
    classifier = root / "classifier"
    train_classifier(generate_goldset(shop, n=200), seed=0, out_dir=classifier)
    reaper_sets = lambda m: ["--set", f"classifier_dir={classifier}"] if m == "classifier_planner" else []  # noqa: E731
    return {
        "planrag": FamilyData(
            cli=lambda m: ["--graph", cql], api=lambda m: {"store": cql},
            eval=lambda m: ["--benchmark", "dqa-locating", "--data", str(clone)],
            question="Which trade node should Sweden's merchant go to?",
            overrides={"Plan": {"steps": ["Count the trade nodes"]}, "RetrievalAction": _count_query,
                       "ReplanDecision": {"replan": False, "reason": "fine"}, "FinalAnswer": {"answer": "lubeck"}}),
        "think_then_act": FamilyData(
            cli=lambda m: ["--retriever", "local", "--index", str(index)],
            api=lambda m: {"retriever": "local", "index_dir": str(index)},
            eval=lambda m: ["--benchmark", "hotpotqa", "--data", str(hotpot), "--context-only"],
            question="Who directed Alien?",
            overrides={"Confidence": {"probability": 0.1}, "ShortAnswer": {"answer": "Ridley Scott"},
                       "ChainOfThought": {"answer": "Ridley Scott"}},
            text="Ridley Scott directed it."),
        "reaper": FamilyData(
            cli=lambda m: ["--shop", str(shop)] + (["--classifier", str(classifier)] if m == "classifier_planner" else []),
            api=lambda m: {"shop_dir": str(shop), **({"classifier_dir": str(classifier)} if m == "classifier_planner" else {})},
            eval=lambda m: ["--benchmark", "reaper-retail", "--data", str(shop), "--benchmark-option",
                            "split=all", "--set", f"shop_dir={shop}", *reaper_sets(m)],
            question="how do I return a blender I bought?",
            overrides={"Response": {"answer": "You can return it within 30 days."}, "AgentAction": _agent_call,
                       "FilledArguments": {"steps": {"1": {"question": "how do I return an item"}}}},
            text='Step 1: Ask the help centre - #E1 = customer_support("how do I return an item")'),
    }


def _family_data(data: dict[str, FamilyData], method: str) -> tuple[Any, FamilyData]:
    fam = family_of(method)
    if fam.name not in data:
        pytest.fail(f"family {fam.name!r} has no entry-point test data: add it to tests/test_entry_points.py")
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
