"""Unit tests of each PlanRAG-family node with a scripted model and the real embedded store."""

from __future__ import annotations

from langchain_core.messages import AIMessage
from langgraph.runtime import Runtime

from ragplan.nodes.planrag.answer import FinalAnswer, answer
from ragplan.nodes.planrag.plan import Plan, plan
from ragplan.nodes.planrag.read_schema import read_schema
from ragplan.nodes.planrag.replan import ReplanDecision, advance_plan, replan
from ragplan.nodes.planrag.retrieve import RetrievalAction, make_retrieve
from ragplan.state.context import PlanRAGContext
from ragplan.state.planrag import ReplanVerdict, RetrievalStep
from tests.scripted import ScriptedChatModel


def rt(store, *replies, **settings):
    model = ScriptedChatModel(replies=list(replies))
    return Runtime(context=PlanRAGContext(model="-", chat_model=model, graph_store=store, **settings)), model


def state(question, **kw):
    return {"question": question, "schema_text": "(:Trade_node {name: \"x\"})", **kw}


def test_read_schema_puts_schema_text(trade_store, question):
    runtime, _ = rt(trade_store)
    out = read_schema({"question": question}, runtime)
    text = out["schema_text"]
    assert "(:Country)-[:NodeCountry {" in text and "-- 3 nodes" in text
    assert 'has_has_merchant: "True"' in text  # DQA's misspelt key is kept as data has it


def test_plan_records_version_zero(trade_store, question):
    runtime, model = rt(trade_store, Plan(steps=[" a ", "b", "  "], reason="why"))
    out = plan(state(question), runtime)
    assert out["plan"] == ["a", "b"] and out["current_step"] == 0
    assert out["plan_history"][0].version == 0 and out["plan_history"][0].reason == "why"
    assert out["usage"].llm_calls == 1
    assert question in model.prompts[0][1].content


def test_plan_failure_is_recorded(trade_store, question):
    runtime, _ = rt(trade_store, "no json here", "still none", "nope")
    out = plan(state(question), runtime)
    assert out["stop_reason"] == "llm_unparseable" and "no valid Plan after 3 attempts" in out["error"]
    assert out["usage"].llm_calls == 3


def test_retrieve_runs_query_and_sets_next(trade_store, question):
    act = RetrievalAction(thought="t", action="graph_db", action_input="MATCH (c:Country) RETURN c.name AS n ORDER BY n")
    runtime, _ = rt(trade_store, act)
    out = make_retrieve("plan")(state(question, plan=["list countries", "b"], current_step=0), runtime)
    step = out["steps"][0]
    assert step.ok and step.observation == "n\nDAN\nNOV\nSWE" and step.row_count == 3
    assert step.plan_step == 1 and step.plan_step_text == "list countries"
    assert out["next"] == "continue" and out["repairs"] == 0


def test_retrieve_row_cap_and_repair_counter(trade_store, question):
    act = RetrievalAction(thought="t", action="graph_db", action_input="MATCH (c:Country) RETURN c.name AS n")
    runtime, _ = rt(trade_store, act, row_cap=1)
    out = make_retrieve("react")(state(question), runtime)
    assert out["steps"][0].row_count == 1 and out["steps"][0].total_rows == 3
    assert "1 of 3 rows shown" in out["steps"][0].observation
    bad = RetrievalAction(thought="t", action="graph_db", action_input="MATCH (c:Country RETURN c")
    runtime, _ = rt(trade_store, bad, max_query_repairs=1)
    failed = RetrievalStep(index=1, action="graph_db", ok=False, observation="Query error: x")
    out = make_retrieve("plan")(state(question, plan=["a"], steps=[failed], repairs=1), runtime)
    assert out["repairs"] == 2 and out["next"] == "continue"  # repairs exhausted: move on


def test_single_retrieve_goes_to_answer(trade_store, question):
    runtime, _ = rt(trade_store, RetrievalAction(thought="t", action="self_thinking", action_input="hmm"))
    out = make_retrieve("single")(state(question), runtime)
    assert out["next"] == "answer" and out["stop_reason"] == "single_retrieval"


def test_replan_keep_and_revise(trade_store, question):
    steps = [RetrievalStep(index=1, action="graph_db", observation="rows")]
    runtime, _ = rt(trade_store, ReplanDecision(replan=False, reason="fine"))
    out = replan(state(question, plan=["a", "b"], current_step=0, steps=steps), runtime)
    assert out["current_step"] == 1 and "stop_reason" not in out and not out["replans"][0].replan
    runtime, _ = rt(trade_store, ReplanDecision(replan=True, reason="need c", new_steps=["c"]))
    out = replan(state(question, plan=["a", "b"], current_step=0, steps=steps, plan_history=[object()]), runtime)
    assert out["plan"] == ["a", "c"] and out["current_step"] == 1
    assert out["plan_history"][0].version == 1 and out["replans"][0].new_steps == ["c"]
    runtime, _ = rt(trade_store, ReplanDecision(replan=True, reason="enough data", new_steps=[]))
    out = replan(state(question, plan=["a", "b"], current_step=0, steps=steps), runtime)
    assert out["plan"] == ["a"] and out["stop_reason"] == "plan_done"


def test_replan_bound_skips_llm(trade_store, question):
    runtime, model = rt(trade_store, max_replans=1)
    done = [ReplanVerdict(after_step=1, replan=True, reason="x")]
    out = replan(state(question, plan=["a", "b"], current_step=1, replans=done), runtime)
    assert model.prompts == [] and out["stop_reason"] == "plan_done"


def test_advance_plan():
    assert advance_plan({"plan": ["a", "b"], "current_step": 0}) == {"current_step": 1, "repairs": 0}
    assert advance_plan({"plan": ["a", "b"], "current_step": 1})["stop_reason"] == "plan_done"


def test_answer_mentions_early_stop_and_returns_decision(trade_store, question):
    runtime, model = rt(trade_store, FinalAnswer(answer=" lubeck ", rationale="r"))
    out = answer(state(question, stop_reason="max_steps"), runtime)
    assert out["answer"] == "lubeck" and out["rationale"] == "r"
    assert "step limit" in model.prompts[0][1].content


def test_answer_text_mode_for_endpoints_without_tools(trade_store, question):
    reply = AIMessage(content='Sure:\n```json\n{"answer": "novgorod", "rationale": "flows"}\n```')
    runtime, model = rt(trade_store, reply, structured_output="text")
    out = answer(state(question), runtime)
    assert out["answer"] == "novgorod"  # a JSON reply is read; the prompt asks for plain text ending "Answer: …"
    assert any("Answer: <" in m.content for m in model.prompts[0])
