"""``OpenAICompatibleChat`` (ragplan.llm_openai) against LangChain's ``ChatOpenAI``, through the local stub: the same
request on the wire, the same message read from the reply, the same errors, retries and malformed-reply handling.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

import ragplan.llm_retry as llm_retry
from ragplan.llm import decide, load_chat_model, request_failed, structured_model
from ragplan.llm_openai import OpenAICompatibleChat
from ragplan.nodes.planrag.answer import FinalAnswer
from ragplan.nodes.planrag.retrieve import RetrievalAction
from tests.openai_server import Fault, OpenAIStub, ToolReply
from tests.test_llm_retry import BODIES

pytestmark = pytest.mark.usefixtures("local_endpoint")

CLASSES = [ChatOpenAI, OpenAICompatibleChat]
MESSAGES = [SystemMessage("You pick one query."), HumanMessage("Which building is cheapest? ünïcode ✓")]
ACTION = RetrievalAction(thought="prices", action="graph_db", action_input="MATCH (b:Building) RETURN b.id LIMIT 5")


@pytest.fixture(autouse=True)
def _fast(monkeypatch):
    monkeypatch.setattr(llm_retry, "BACKOFF_S", 0.01)


def _model(cls: type, stub: OpenAIStub, retries: int = 0, **kw) -> ChatOpenAI:
    return cls(model="m", base_url=stub.base_url, api_key="sk-test", max_retries=retries, **kw)


def _call(cls: type, replies: list, **kw) -> tuple[AIMessage, dict, dict]:
    """One tool-forcing call (as ``decide`` makes it): the message read, the JSON body sent and its headers."""
    with OpenAIStub(replies=replies) as stub:
        bound = structured_model(_model(cls, stub, **kw), RetrievalAction, "function_calling")
        msg = bound.invoke(MESSAGES)
        return msg, stub.requests[0].body, stub.requests[0].headers


def test_load_chat_model_builds_the_direct_model():
    assert type(load_chat_model("openai:m", base_url="http://127.0.0.1:9/v1")) is OpenAICompatibleChat


def test_the_same_request_goes_on_the_wire():
    _, base_body, base_headers = _call(ChatOpenAI, [ACTION], temperature=0.0, stop_sequences=["\n\nEND"], seed=7)
    msg, body, headers = _call(OpenAICompatibleChat, [ACTION], temperature=0.0, stop_sequences=["\n\nEND"], seed=7)
    assert body == base_body  # messages, tools, tool_choice, model, temperature, stop, seed, stream flag …
    assert body["tool_choice"]["function"]["name"] == "RetrievalAction" and body["seed"] == 7
    assert headers.get("authorization") == base_headers.get("authorization") == "Bearer sk-test"
    assert headers.get("content-type") == "application/json"


def test_the_reply_reads_as_the_same_message():
    base, _, _ = _call(ChatOpenAI, [ACTION])
    msg, _, _ = _call(OpenAICompatibleChat, [ACTION])
    assert msg.tool_calls[0]["name"] == base.tool_calls[0]["name"] == "RetrievalAction"
    assert msg.tool_calls[0]["args"] == base.tool_calls[0]["args"] == ACTION.model_dump()
    assert msg.usage_metadata == base.usage_metadata and msg.usage_metadata["input_tokens"] > 0
    for key in ("model_name", "finish_reason"):
        assert msg.response_metadata.get(key) == base.response_metadata.get(key), key
    counts = {k: v for k, v in base.response_metadata["token_usage"].items() if v is not None}  # (the SDK's
    assert msg.response_metadata["token_usage"] == counts  # models add its absent detail fields as None)


def test_extra_body_headers_and_timeout_are_request_options_not_body_fields():
    with OpenAIStub(replies=["ok"]) as stub:
        m = _model(OpenAICompatibleChat, stub, extra_body={"top_k": 3}, default_headers={"x-team": "r"})
        out = m.invoke(MESSAGES, extra_headers={"x-call": "1"}, timeout=5)
    assert out.content == "ok"
    sent = stub.requests[0]
    assert sent.body["top_k"] == 3 and "extra_body" not in sent.body and "timeout" not in sent.body
    assert sent.headers.get("x-team") == "r" and sent.headers.get("x-call") == "1"


def test_async_calls_take_the_direct_way_too():
    with OpenAIStub(replies=[ACTION]) as stub:
        bound = structured_model(_model(OpenAICompatibleChat, stub), RetrievalAction, "function_calling")
        msg = asyncio.run(bound.ainvoke(MESSAGES))
    assert msg.tool_calls[0]["args"] == ACTION.model_dump()
    assert stub.requests[0].headers.get("authorization") == "Bearer sk-test"


def test_streaming_and_json_schema_calls_keep_chat_openai_s_own_path():
    with OpenAIStub(replies=["streamed text", FinalAnswer(answer="a")]) as stub:
        m = _model(OpenAICompatibleChat, stub)
        text = "".join(str(c.content) for c in m.stream(MESSAGES))
        d = decide(m, MESSAGES, FinalAnswer, method="json_schema")
    assert text == "streamed text" and stub.requests[0].body.get("stream") is True
    assert d.ok and d.value.answer == "a" and "response_format" in stub.requests[1].body


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("kind", sorted(BODIES))
def test_malformed_replies_are_recognised_and_retried_alike(cls, kind):
    body, reason = BODIES[kind]
    with OpenAIStub(replies=[Fault(body=body), ToolReply("FinalAnswer", {"answer": "a"})]) as stub:
        d = decide(_model(cls, stub, retries=2), [HumanMessage("q")], FinalAnswer)
    assert d.ok and d.value.answer == "a" and len(stub.requests) == 2
    with OpenAIStub(replies=[Fault(body=body)]) as stub, pytest.raises(Exception) as err:
        _model(cls, stub).invoke([HumanMessage("q")])
    assert reason in llm_retry.malformed_reply(err.value)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_an_html_page_labelled_as_html_is_a_malformed_reply(cls):
    page = Fault(body="<html><body>502 Bad Gateway</body></html>", content_type="text/html")
    with OpenAIStub(replies=[page, page]) as stub:
        d = decide(_model(cls, stub, retries=1), [HumanMessage("q")], FinalAnswer)
    assert not d.ok and d.error.startswith("LLM request failed: malformed reply (2 attempts)") and len(stub.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 429, 500])
def test_errors_raise_the_same_langchain_types(status):
    raised = []
    for cls in CLASSES:
        with OpenAIStub(replies=[Fault(status=status)]) as stub, pytest.raises(Exception) as err:
            _model(cls, stub).invoke([HumanMessage("q")])
        raised.append(err.value)
    assert type(raised[0]) is type(raised[1]) and str(raised[0]) == str(raised[1])
    assert request_failed(raised[1], 1) == request_failed(raised[0], 1)


def test_the_client_s_retries_and_retry_after_still_apply():
    with OpenAIStub(replies=[Fault(status=429), Fault(status=503), "fine"]) as stub:
        out = _model(OpenAICompatibleChat, stub, retries=2).invoke([HumanMessage("q")])
    assert out.content == "fine" and len(stub.requests) == 3


def test_an_unreachable_endpoint_is_a_connection_error_naming_it():
    m = OpenAICompatibleChat(model="m", base_url="http://127.0.0.1:9/v1", api_key="x", max_retries=0)  # type: ignore[arg-type]
    with pytest.raises(Exception) as err:
        m.invoke([HumanMessage("q")])
    assert "Connection" in type(err.value).__name__ or "connection" in str(err.value).lower()
    assert "127.0.0.1:9" in request_failed(err.value, 1, model=m)


def test_a_json_reply_labelled_as_text_is_still_read():
    completion = {"id": "c", "object": "chat.completion", "model": "m",
                  "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}]}
    with OpenAIStub(replies=[Fault(body=json.dumps(completion), content_type="text/plain")]) as stub:
        out = _model(OpenAICompatibleChat, stub).invoke([HumanMessage("q")])
    assert out.content == "hi"
