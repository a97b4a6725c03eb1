"""End-to-end paths of the four PlanRAG-family graphs: scripted model, real embedded store."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from ragplan.registry import graph_registry
from ragplan.graphs.planrag import build_iter_rag, build_planrag, build_planrag_no_replan, build_single_rag
from ragplan.nodes.planrag.answer import FinalAnswer
from ragplan.nodes.planrag.plan import Plan
from ragplan.nodes.planrag.replan import ReplanDecision
from ragplan.nodes.planrag.retrieve import RetrievalAction
from ragplan.state.context import PlanRAGContext
from ragplan.state.planrag import PlanRAGResult
from tests.scripted import ScriptedChatModel

Q_POWER = 'MATCH (c:Country {name:"SWE"})-[r:NodeCountry]->(t:Trade_node) RETURN t.name AS node, r.calculated_trading_power AS power, t.total_power AS total ORDER BY node'
Q_FLOW = "MATCH (a:Trade_node)-[s:source]->(b:Trade_node) RETURN a.name AS up, b.name AS down, s.flow AS flow ORDER BY up"


def run(builder, replies, store, question, **ctx):
    model = ScriptedChatModel(replies=replies)
    graph = builder().compile()
    context = PlanRAGContext(model="-", chat_model=model, graph_store=store, **ctx)
    out = graph.invoke({"question": question}, context=context, config={"recursion_limit": 60})
    return PlanRAGResult.from_state(out), model


def test_planrag_plans_retrieves_replans_and_answers(trade_store, question):
    replies = [
        Plan(steps=["Get SWE's trading power per node", "Get the trade flows between nodes"], reason="need power and flows"),
        RetrievalAction(thought="step 1 needs SWE's records", action="graph_db", action_input=Q_POWER),
        ReplanDecision(replan=True, reason="also need each node's local value", new_steps=["Get local values of SWE's nodes", "Get the trade flows"]),
        RetrievalAction(thought="local values", action="graph_db", action_input="MATCH (t:Trade_node) RETURN t.name AS n, t.local_value AS v ORDER BY n"),
        ReplanDecision(replan=False, reason="plan holds"),
        RetrievalAction(thought="flows", action="graph_db", action_input=Q_FLOW),
        ReplanDecision(replan=False, reason="done"),
        FinalAnswer(answer="novgorod", rationale="novgorod feeds baltic_sea"),
    ]
    res, model = run(build_planrag, replies, trade_store, question)
    assert res.answer == "novgorod"
    assert res.stop_reason == "plan_done"
    assert [v.version for v in res.plan_history] == [0, 1]
    assert res.plan == ["Get SWE's trading power per node", "Get local values of SWE's nodes", "Get the trade flows"]
    assert [s.plan_step for s in res.steps] == [1, 2, 3]
    assert [v.replan for v in res.replans] == [True, False, False]
    # the observation holds the real rows from the store
    assert "lubeck | 12.0 | 200.0" in res.steps[0].observation
    assert "novgorod | baltic_sea | 0.9" in res.steps[2].observation
    assert res.usage.llm_calls == 8 and res.usage.input_tokens == 800 and res.usage.output_tokens == 160
    assert model.remaining == 0
    # the schema reached the planner's prompt, and the plan reached the retriever's
    assert "(:Trade_node {" in model.prompts[0][0].content
    assert "<- current step" in model.prompts[1][1].content


def test_planrag_repairs_a_failed_query(trade_store, question):
    replies = [
        Plan(steps=["Get SWE's powers"]),
        RetrievalAction(thought="try", action="graph_db", action_input="MATCH (c:Country RETURN c"),
        RetrievalAction(thought="fix syntax", action="graph_db", action_input=Q_POWER),
        ReplanDecision(replan=False, reason="ok"),
        FinalAnswer(answer="lubeck"),
    ]
    res, model = run(build_planrag, replies, trade_store, question)
    assert [s.ok for s in res.steps] == [False, True]
    assert res.steps[0].error_kind == "error" and "syntax" in res.steps[0].observation.lower()
    assert [s.plan_step for s in res.steps] == [1, 1]
    # the repair prompt showed the error back
    assert "Query error" in model.prompts[2][1].content and "Fix the query" in model.prompts[2][1].content
    assert res.answer == "lubeck"


def test_planrag_write_attempt_is_refused_and_store_unchanged(trade_store, question):
    replies = [
        Plan(steps=["Count countries"]),
        RetrievalAction(thought="sneaky", action="graph_db", action_input='CREATE (x:Country {name:"EVIL"})'),
        RetrievalAction(thought="read", action="graph_db", action_input="MATCH (c:Country) RETURN count(c) AS n"),
        ReplanDecision(replan=False, reason="ok"),
        FinalAnswer(answer="3"),
    ]
    res, _ = run(build_planrag, replies, trade_store, question)
    assert res.steps[0].error_kind == "refused"
    assert "n\n3" in res.steps[1].observation


def test_planrag_bound_hit_answers_gracefully(trade_store, question):
    bad = RetrievalAction(thought="again", action="graph_db", action_input="MATCH (n:Nope RETURN n")
    replies = [Plan(steps=["a", "b"]), bad, bad, bad, FinalAnswer(answer="unknown")]
    res, model = run(build_planrag, replies, trade_store, question, max_steps=3, max_query_repairs=5)
    assert res.stop_reason == "max_steps"
    assert len(res.steps) == 3 and not any(s.ok for s in res.steps)
    assert "step limit was reached" in model.prompts[-1][1].content
    assert res.answer == "unknown"


def test_planrag_max_replans_keeps_plan_without_asking(trade_store, question):
    replies = [
        Plan(steps=["a", "b", "c"]),
        RetrievalAction(thought="t", action="self_thinking", action_input="think a"),
        ReplanDecision(replan=True, reason="change", new_steps=["b2", "c2"]),
        RetrievalAction(thought="t", action="self_thinking", action_input="think b2"),
        # max_replans=1 reached: no LLM call for this verdict
        RetrievalAction(thought="t", action="self_thinking", action_input="think c2"),
        FinalAnswer(answer="x"),
    ]
    res, _ = run(build_planrag, replies, trade_store, question, max_replans=1)
    assert [v.replan for v in res.replans] == [True, False, False]
    assert "max_replans" in res.replans[1].reason
    assert res.steps[0].observation == "think a" and res.steps[0].action == "self_thinking"
    assert res.stop_reason == "plan_done"


def test_planrag_no_replan_never_asks_for_a_verdict(trade_store, question):
    replies = [
        Plan(steps=["powers", "flows"]),
        RetrievalAction(thought="1", action="graph_db", action_input=Q_POWER),
        RetrievalAction(thought="2", action="graph_db", action_input=Q_FLOW),
        FinalAnswer(answer="novgorod"),
    ]
    res, model = run(build_planrag_no_replan, replies, trade_store, question)
    assert res.replans == [] and res.stop_reason == "plan_done"
    assert [s.plan_step for s in res.steps] == [1, 2]
    assert res.usage.llm_calls == 4


def test_iter_rag_reacts_until_finish(trade_store, question):
    replies = [
        RetrievalAction(thought="need powers", action="graph_db", action_input=Q_POWER),
        RetrievalAction(thought="need flows", action="graph_db", action_input=Q_FLOW),
        RetrievalAction(thought="I now know the answer", action="finish"),
        FinalAnswer(answer="novgorod"),
    ]
    res, _ = run(build_iter_rag, replies, trade_store, question)
    assert res.plan == [] and res.stop_reason == "answered"
    assert [s.action for s in res.steps] == ["graph_db", "graph_db", "finish"]
    assert res.answer == "novgorod"


def test_single_rag_retrieves_once(trade_store, question):
    replies = [
        RetrievalAction(thought="all at once", action="graph_db", action_input=Q_POWER),
        FinalAnswer(answer="lubeck"),
    ]
    res, model = run(build_single_rag, replies, trade_store, question)
    assert len(res.steps) == 1 and res.stop_reason == "single_retrieval"
    assert "once" in model.prompts[0][1].content


def test_single_rag_failed_query_is_not_repaired_by_default(trade_store, question):
    """The paper's SingleRAG (and its official code) retrieves exactly once: a failed query is answered from."""
    replies = [RetrievalAction(thought="t", action="graph_db", action_input="MATCH (x:Nope RETURN x"),
               FinalAnswer(answer="lubeck")]
    res, model = run(build_single_rag, replies, trade_store, question)
    assert len(res.steps) == 1 and not res.steps[0].ok and res.stop_reason == "max_repairs"
    assert res.usage.llm_calls == 2 and res.answer == "lubeck"


def test_single_rag_repairs_are_a_setting(trade_store, question):
    replies = [RetrievalAction(thought="t", action="graph_db", action_input="MATCH (x:Nope RETURN x"),
               RetrievalAction(thought="fixed", action="graph_db", action_input=Q_POWER), FinalAnswer(answer="lubeck")]
    res, model = run(build_single_rag, replies, trade_store, question, single_rag_repairs=1)
    assert [s.ok for s in res.steps] == [False, True] and res.stop_reason == "single_retrieval"


def test_malformed_llm_output_is_repaired(trade_store, question):
    replies = [
        AIMessage(content="I think we should look at the data first."),  # no tool call, no JSON
        '{"thought": "ok", "action": "graph_db", "action_input": "MATCH (c:Country) RETURN count(c) AS n"}',
        FinalAnswer(answer="3"),
    ]
    res, model = run(build_single_rag, replies, trade_store, question)
    assert res.steps[0].ok and res.answer == "3"
    assert res.usage.llm_calls == 3
    assert "could not be used" in model.prompts[1][-1].content


def test_endpoint_failure_is_recorded_not_raised(trade_store, question):
    replies = [ConnectionError("endpoint down"), ConnectionError("still down")]
    res, _ = run(build_planrag, replies, trade_store, question)
    assert res.answer == "" and "endpoint down" in res.error
    assert res.stop_reason == "llm_error"


def test_bad_store_ends_with_reason(tmp_path: Path, question):
    bad = tmp_path / "bad.cql"
    bad.write_text('CREATE (a:X {name:"a"});\nCREATE (b:X {name: );\n')
    model = ScriptedChatModel(replies=[])
    out = build_planrag().compile().invoke(
        {"question": question}, context=PlanRAGContext(model="-", chat_model=model, graph_path=str(bad))
    )
    assert out["stop_reason"] == "store_error"
    assert "bad.cql:2" in out["error"]
    assert model.prompts == []


@pytest.mark.parametrize("name", sorted(graph_registry()))
def test_graph_shape_snapshot(name):
    builder, _ = graph_registry()[name]
    mermaid = builder().compile().get_graph(xray=1).draw_mermaid()
    snap = Path(__file__).parent / "snapshots" / f"{name}.mmd"
    if not snap.exists():  # first run writes the snapshot; commit it
        snap.parent.mkdir(exist_ok=True)
        snap.write_text(mermaid)
    assert mermaid == snap.read_text(), f"graph shape of {name} changed; update tests/snapshots/{name}.mmd if intended"


def test_python_api_returns_typed_result(trade_cql, question):
    from ragplan.api import ask
    from ragplan.state.planrag import PlanRAGResult

    model = ScriptedChatModel(replies=[
        RetrievalAction(thought="t", action="graph_db", action_input=Q_FLOW),
        FinalAnswer(answer="novgorod", rationale="upstream"),
    ])
    seen = []
    res = ask(question, method="single_rag", model=model, store=trade_cql, row_cap=5,
              on_update=lambda node, upd: seen.append(node))
    assert isinstance(res, PlanRAGResult) and res.method == "single_rag"
    assert res.answer == "novgorod" and res.wall_time_s > 0 and res.usage.llm_calls == 2
    assert seen == ["read_schema", "retrieve", "answer", "check_decision"]
    with pytest.raises(TypeError, match="unknown setting"):
        ask(question, model=model, store=trade_cql, max_stepz=3)


def test_endpoint_failure_mid_run_ends_without_calling_again(trade_store, question):
    replies = [Plan(steps=["a"]), ConnectionError("gone")]
    res, model = run(build_planrag, replies, trade_store, question)
    assert res.stop_reason == "llm_error" and res.answer == "" and res.error.startswith("retrieve: LLM request failed")
    assert len(model.prompts) == 2  # the answer step did not hit the dead endpoint again


def test_unparseable_retrieval_still_answers(trade_store, question):
    replies = [Plan(steps=["a"]), "junk", "junk", "junk", FinalAnswer(answer="lubeck")]
    res, model = run(build_planrag, replies, trade_store, question)
    assert res.stop_reason == "llm_unparseable" and res.answer == "lubeck"
    assert "could not be parsed" in model.prompts[-1][1].content


def test_wrong_chat_model_object_is_a_recorded_config_failure(trade_store, question):
    out = build_single_rag().compile().invoke(
        {"question": question}, context=PlanRAGContext(model="-", chat_model="gpt-4o", graph_store=trade_store))
    assert out["stop_reason"] == "llm_error" and "chat_model must be a LangChain chat model" in out["error"]
