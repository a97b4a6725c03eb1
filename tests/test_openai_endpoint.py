"""The planrag graph through the real langchain-openai client against a scripted OpenAI-compatible server.

Unlike ``test_planrag_graphs`` (a scripted LangChain model object), these runs name the model as a
user would (``openai:stub-model`` + ``base_url``), so ``load_chat_model`` builds a real ``ChatOpenAI``
and every decision goes over HTTP: tool calling, token usage, client retries, timeouts, the ``text``
structured-output mode and SSE streaming are exercised end to end.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from ragplan.graphs.planrag import build_planrag
from ragplan.nodes.planrag.answer import FinalAnswer
from ragplan.nodes.planrag.plan import Plan
from ragplan.nodes.planrag.replan import ReplanDecision
from ragplan.nodes.planrag.retrieve import RetrievalAction
from ragplan.state.context import PlanRAGContext
from ragplan.state.planrag import PlanRAGResult
from tests.openai_server import Fault, OpenAIStub

Q_POWER = 'MATCH (c:Country {name:"SWE"})-[r:NodeCountry]->(t:Trade_node) RETURN t.name AS node, r.calculated_trading_power AS power ORDER BY node'
Q_FLOW = "MATCH (a:Trade_node)-[s:source]->(b:Trade_node) RETURN a.name AS up, b.name AS down, s.flow AS flow ORDER BY up"

#: A two-step PlanRAG run: plan, retrieve + verdict per step, answer (6 LLM decisions).
SCRIPT = [
    Plan(steps=["Get SWE's trading power per node", "Get the trade flows"], reason="power and flows"),
    RetrievalAction(thought="SWE's powers", action="graph_db", action_input=Q_POWER),
    ReplanDecision(replan=False, reason="plan holds"),
    RetrievalAction(thought="flows", action="graph_db", action_input=Q_FLOW),
    ReplanDecision(replan=False, reason="done"),
    FinalAnswer(answer="novgorod", rationale="novgorod feeds baltic_sea (flow 0.9)"),
]
TOOLS = ["Plan", "RetrievalAction", "ReplanDecision", "RetrievalAction", "ReplanDecision", "FinalAnswer"]


pytestmark = pytest.mark.usefixtures("local_endpoint")  # no proxy for 127.0.0.1, no real key (tests/conftest.py)


@pytest.fixture(scope="module")
def trade_store():
    """The toy trade network in the embedded engine (tests/conftest.py's), loaded once for the module: the runs only
    read it."""
    from ragplan.tools.graphdb import EmbeddedGraphStore
    from tests.data import TRADE_NETWORK

    store = EmbeddedGraphStore.from_text(TRADE_NETWORK, source="trade.cql")
    yield store
    store.close()


def run(stub: OpenAIStub, store, question: str, **ctx) -> PlanRAGResult:
    """Invoke the compiled planrag graph with the model named by URL (no chat_model object)."""
    context = PlanRAGContext(model="openai:stub-model", base_url=stub.base_url, graph_store=store, **ctx)
    out = build_planrag().compile().invoke({"question": question}, context=context, config={"recursion_limit": 60})
    return PlanRAGResult.from_state(out)


def test_planrag_over_http_answers_counts_usage_and_forces_tools(trade_store, question, serve):
    with serve(SCRIPT) as stub:
        res = run(stub, trade_store, question)
    assert res.error == "" and res.answer == "novgorod" and res.stop_reason == "plan_done"
    assert "lubeck | 12" in res.steps[0].observation and "novgorod | baltic_sea | 0.9" in res.steps[1].observation
    assert stub.remaining == 0 and len(stub.requests) == 6
    # each decision offered exactly its schema as a tool and forced it
    assert [r.forced_tool for r in stub.requests] == TOOLS
    assert all(r.tools == [r.forced_tool] for r in stub.requests)
    assert all(r.body["model"] == "stub-model" and r.body["temperature"] == 0.0 for r in stub.requests)
    assert all(r.headers["authorization"] == "Bearer not-needed" for r in stub.requests)
    plan_params = stub.requests[0].body["tools"][0]["function"]["parameters"]
    assert plan_params["required"] == ["steps"]
    # the prompts carry the store's schema and the plan
    assert "(:Trade_node {" in stub.requests[0].prompt_text
    assert "<- current step" in stub.requests[1].prompt_text
    # usage in state is the sum of what the server reported
    assert res.usage.llm_calls == 6
    assert res.usage.input_tokens == sum(r.usage["prompt_tokens"] for r in stub.requests) > 6
    assert res.usage.output_tokens == sum(r.usage["completion_tokens"] for r in stub.requests) > 6


def test_rate_limit_and_server_error_are_retried_by_the_client(trade_store, question, serve):
    replies = [Fault(status=429), Fault(status=500), *SCRIPT]
    with serve(replies) as stub:
        res = run(stub, trade_store, question, llm_max_retries=3)
    assert res.error == "" and res.answer == "novgorod"
    assert len(stub.requests) == 8 and stub.remaining == 0
    assert [r.answered for r in stub.requests[:3]] == ["fault 429", "fault 500", "tool_calls"]
    # the same planning request, sent three times by the client's own retry loop
    assert [r.headers.get("x-stainless-retry-count") for r in stub.requests[:3]] == ["0", "1", "2"]
    assert stub.requests[0].body == stub.requests[2].body
    assert res.usage.llm_calls == 6  # retries are inside one decision


def test_retries_exhausted_end_the_run_with_the_error(trade_store, question, serve):
    with serve([Fault(status=500, message="overloaded")] * 2) as stub:
        res = run(stub, trade_store, question, llm_max_retries=1)
    assert len(stub.requests) == 2
    assert res.stop_reason == "llm_error" and res.answer == ""
    assert "Error code: 500" in res.error and "overloaded" in res.error
    assert res.failure == {"kind": "server_error", "node": "plan", "message": res.error}


def test_endpoint_timeout_ends_with_llm_error_without_raising(trade_store, question, serve):
    with serve([Fault(delay_s=10)]) as stub:
        t0 = time.perf_counter()
        res = run(stub, trade_store, question, llm_timeout_s=0.5, llm_max_retries=0)
        elapsed = time.perf_counter() - t0
    assert elapsed < 5, f"the run should give up after the 0.5 s timeout, took {elapsed:.1f} s"
    assert len(stub.requests) == 1
    assert res.stop_reason == "llm_error" and res.answer == "" and res.steps == []
    assert res.error.startswith("plan: LLM request failed") and "Timeout" in res.error
    assert res.failure is not None and res.failure["kind"] == "timeout" and res.failure["node"] == "plan"
    assert res.usage.llm_calls == 1 and res.usage.input_tokens == 0


def test_text_structured_output_parses_plain_json_replies(trade_store, question, serve):
    def text(obj) -> str:
        return "Here you go:\n```json\n" + json.dumps(obj.model_dump()) + "\n```"

    with serve([text(x) for x in SCRIPT]) as stub:
        res = run(stub, trade_store, question, structured_output="text")
    assert res.error == "" and res.answer == "novgorod" and len(res.steps) == 2
    assert all("tools" not in r.body and "tool_choice" not in r.body for r in stub.requests)
    assert all(r.answered == "text" for r in stub.requests)
    assert "Reply with one JSON object only" in stub.requests[0].prompt_text
    assert "conforms to the JSON schema below" in stub.requests[0].prompt_text  # JsonOutputParser's instructions
    assert '"steps"' in stub.requests[0].prompt_text
    assert res.usage.input_tokens == sum(r.usage["prompt_tokens"] for r in stub.requests)
    for r in stub.requests:  # the format is asked for at the end of the user's message: one leading system message
        roles = [m["role"] for m in r.body["messages"]]  # and alternating turns, as open models' chat templates need
        assert roles[0] == "system" and "system" not in roles[1:] and roles[-1] == "user", roles
        assert all(a != b for a, b in zip(roles[1:], roles[2:])), roles
        assert re.search(r"Reply (with one JSON object only|in plain text)", r.body["messages"][-1]["content"])


def test_json_schema_structured_output_sends_response_format(trade_store, question, serve):
    with serve(SCRIPT) as stub:
        res = run(stub, trade_store, question, structured_output="json_schema")
    assert res.error == "" and res.answer == "novgorod"
    formats = [r.body.get("response_format") or {} for r in stub.requests]
    assert [f.get("json_schema", {}).get("name") for f in formats] == TOOLS
    assert all("tools" not in r.body and r.answered == "text" for r in stub.requests)


def test_text_mode_repairs_a_reply_without_json(trade_store, question, serve):
    replies = ["I would rather chat.", json.dumps(SCRIPT[0].model_dump()),
               *[json.dumps(x.model_dump()) for x in SCRIPT[1:]]]
    with serve(replies) as stub:
        res = run(stub, trade_store, question, structured_output="text")
    assert res.answer == "novgorod" and res.usage.llm_calls == 7
    assert "could not be used: the reply holds no JSON object (Invalid json output" in stub.requests[1].prompt_text


def test_streaming_requests_are_answered_with_sse(trade_store, question, serve):
    """With stream_mode="messages" LangGraph makes ChatOpenAI stream; usage comes from the last chunk."""
    with serve(SCRIPT) as stub:
        context = PlanRAGContext(model="openai:stub-model", base_url=stub.base_url, graph_store=trade_store)
        final, tokens = {}, 0
        for mode, chunk in build_planrag().compile().stream(
            {"question": question}, context=context, stream_mode=["messages", "values"]
        ):
            if mode == "values":
                final = chunk
            else:
                tokens += 1
    res = PlanRAGResult.from_state(final)
    assert res.answer == "novgorod" and res.error == ""
    assert tokens > 6
    assert all(r.body["stream"] is True and r.body["stream_options"] == {"include_usage": True} for r in stub.requests)
    assert all(r.answered == "tool_calls (stream)" for r in stub.requests)
    assert res.usage.input_tokens == sum(r.usage["prompt_tokens"] for r in stub.requests) > 0


def test_a_kept_alive_stub_answers_plain_and_streamed_requests():
    """The benchmarks' endpoint (HTTP/1.1, connections kept): plain replies reuse one connection, a streamed reply
    ends its connection, and the next request still gets its own answer."""
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI

    with OpenAIStub(replies=["one", "two", "three", "four"], keep_alive=True) as stub:
        model = ChatOpenAI(model="m", base_url=stub.base_url, api_key="x", max_retries=0, timeout=10)
        assert model.invoke([HumanMessage("a")]).content == "one"
        assert model.invoke([HumanMessage("b")]).content == "two"
        assert "".join(c.content for c in model.stream([HumanMessage("c")])) == "three"
        assert model.invoke([HumanMessage("d")]).content == "four"
        assert [r.answered for r in stub.requests] == ["text", "text", "text (stream)", "text"]
