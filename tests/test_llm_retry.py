"""Malformed 200 replies are retried like a 5xx, then recorded with their reason; real errors are not retried
(issue 13 §2). Through the real ``langchain-openai`` client and the local stub."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI

import ragplan.llm_retry as llm_retry
from ragplan.llm import decide, generate
from ragplan.nodes.planrag.answer import FinalAnswer
from tests.openai_server import Fault, OpenAIStub, ToolReply

BODIES = {
    "truncated JSON": ('{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "mess', "not JSON"),
    "no choices": ('{"id": "x", "object": "chat.completion", "model": "m"}', "no choices"),
    "null choices": ('{"id": "x", "object": "chat.completion", "choices": null}', "no choices"),
    "empty choices": ('{"id": "x", "object": "chat.completion", "choices": []}', "empty choices"),
    "a choice without a message": ('{"id": "x", "choices": [{"index": 0, "finish_reason": "stop"}]}', "not a chat completion"),
    "empty body": ("", "not JSON"),
    "HTML": ("<html><body>502 Bad Gateway</body></html>", "not JSON"),
}


@pytest.fixture(autouse=True)
def _fast(monkeypatch):
    monkeypatch.setattr(llm_retry, "BACKOFF_S", 0.01)


def _model(stub: OpenAIStub, retries: int) -> ChatOpenAI:
    return ChatOpenAI(model="m", base_url=stub.base_url, api_key="x", max_retries=retries)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", sorted(BODIES))
def test_a_malformed_reply_is_retried_then_the_decision_succeeds(kind):
    body, _ = BODIES[kind]
    with OpenAIStub(replies=[Fault(body=body), Fault(body=body), FinalAnswer(answer="a")]) as stub:
        d = decide(_model(stub, 2), [HumanMessage("q")], FinalAnswer)
    assert d.ok and d.value.answer == "a"
    assert d.usage.llm_calls == 3 and len(stub.requests) == 3  # every attempt is counted


@pytest.mark.parametrize("kind", sorted(BODIES))
def test_malformed_replies_past_the_bound_are_a_recorded_failure_with_the_reason(kind):
    body, reason = BODIES[kind]
    with OpenAIStub(replies=[Fault(body=body)] * 5) as stub:
        d = decide(_model(stub, 1), [HumanMessage("q")], FinalAnswer)
        msg, usage, err = generate(_model(stub, 1), [HumanMessage("q")])
    assert not d.ok and d.kind == "endpoint" and d.usage.llm_calls == 2
    assert d.error.startswith("LLM request failed: malformed reply (2 attempts)") and reason in d.error
    assert msg is None and usage.llm_calls == 2 and "malformed reply" in err and reason in err
    assert len(stub.requests) == 4  # the model's max_retries (1) more attempt each, no more


def test_a_free_text_call_is_retried_too():
    with OpenAIStub(replies=[Fault(body=""), "a plan"]) as stub:
        msg, usage, err = generate(_model(stub, 2), [HumanMessage("q")])
    assert msg is not None and msg.content == "a plan" and err == "" and usage.llm_calls == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_real_errors_are_not_retried(status):
    with OpenAIStub(replies=[Fault(status=status), FinalAnswer(answer="a")]) as stub:
        d = decide(_model(stub, 3), [HumanMessage("q")], FinalAnswer)
    assert not d.ok and d.kind == "endpoint" and str(status) in d.error and "malformed" not in d.error
    assert len(stub.requests) == 1


def test_an_unknown_request_option_is_not_taken_for_a_malformed_reply():
    with OpenAIStub(replies=["text"]) as stub:
        msg, usage, err = generate(_model(stub, 3), [HumanMessage("q")], options={"not_an_openai_option": 1})
    assert msg is not None and msg.content == "text" and len(stub.requests) == 1  # called again without the option


def test_tool_arguments_that_are_not_an_object_are_repaired_not_retried():
    with OpenAIStub(replies=[ToolReply("FinalAnswer", {}, raw='["a", "b"]'), FinalAnswer(answer="a")]) as stub:
        d = decide(_model(stub, 0), [HumanMessage("q")], FinalAnswer)
    assert d.ok and d.attempts == 2 and len(stub.requests) == 2
    assert "not a JSON object" in stub.requests[1].prompt_text  # the repair told the model what was wrong


def test_classification():
    import json

    assert llm_retry.malformed_reply(json.JSONDecodeError("Expecting value", "", 0))
    assert not llm_retry.malformed_reply(TypeError("create() got an unexpected keyword argument 'x'"))
    assert not llm_retry.malformed_reply(ValueError("bad"))
    assert not llm_retry.malformed_reply(RuntimeError("Error code: 500"))
    assert llm_retry.malformed_reply(TypeError("Received response with null value for 'choices'."))
