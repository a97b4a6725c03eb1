"""Malformed 200 replies are retried by their exception type, then recorded with their reason and kind; real errors
are not retried. Through the real ``langchain-openai`` client (``ChatOpenAI`` as published) and the local stub."""

from __future__ import annotations


import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI

import ragplan.llm as llm
from ragplan.llm import decide, generate, load_chat_model
from ragplan.nodes.planrag.answer import FinalAnswer
from tests.openai_server import Fault, OpenAIStub, ToolReply

BODIES = {
    "truncated JSON": ('{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "mess', "not JSON"),
    "no choices": ('{"id": "x", "object": "chat.completion", "model": "m"}', "not a chat completion"),
    "null choices": ('{"id": "x", "object": "chat.completion", "choices": null}', "not a chat completion"),
    "empty choices": ('{"id": "x", "object": "chat.completion", "choices": []}', "not a chat completion"),
    "a choice without a message": ('{"id": "x", "choices": [{"index": 0, "finish_reason": "stop"}]}', "not a chat completion"),
    "empty body": ("", "not JSON"),
    "HTML": ("<html><body>502 Bad Gateway</body></html>", "not JSON"),
    "invalid UTF-8": (b'{"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": "\xff\xfe"}}]}',
                      "not UTF-8"),
}


@pytest.fixture(autouse=True)
def _fast(monkeypatch, local_endpoint):
    monkeypatch.setattr(llm, "BACKOFF_S", 0.01)


def _model(stub: OpenAIStub, retries: int) -> ChatOpenAI:
    return ChatOpenAI(model="m", base_url=stub.base_url, api_key="x", max_retries=retries)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", sorted(BODIES))
def test_a_malformed_reply_is_retried_then_the_decision_succeeds(kind, serve):
    body, _ = BODIES[kind]
    with serve([Fault(body=body), Fault(body=body), FinalAnswer(answer="a")]) as stub:
        d = decide(_model(stub, 2), [HumanMessage("q")], FinalAnswer)
    assert d.ok and d.value.answer == "a"
    assert d.usage.llm_calls == 3 and len(stub.requests) == 3  # every attempt is counted


@pytest.mark.parametrize("kind", sorted(BODIES))
def test_malformed_replies_past_the_bound_are_a_recorded_failure_with_the_reason(kind, serve):
    body, reason = BODIES[kind]
    with serve([Fault(body=body)] * 5) as stub:
        d = decide(_model(stub, 1), [HumanMessage("q")], FinalAnswer)
        g = generate(_model(stub, 1), [HumanMessage("q")])
    assert not d.ok and d.kind == "malformed_reply" and d.usage.llm_calls == 2
    assert d.error.startswith("LLM request failed: malformed reply (2 attempts)") and reason in d.error
    assert g.result is None and g.usage.llm_calls == 2 and "malformed reply" in g.error and reason in g.error
    assert g.kind == "malformed_reply"
    assert len(stub.requests) == 4  # the model's max_retries (1) more attempt each, no more


def test_an_html_page_labelled_as_html_is_a_malformed_reply(serve):
    page = Fault(body="<html><body>502 Bad Gateway</body></html>", content_type="text/html")
    with serve([page, page]) as stub:
        d = decide(load_chat_model("openai:m", base_url=stub.base_url, max_retries=1), [HumanMessage("q")], FinalAnswer)
    assert not d.ok and d.error.startswith("LLM request failed: malformed reply (2 attempts)") and len(stub.requests) == 2


def test_a_reply_over_max_reply_chars_is_a_malformed_reply_retried_then_recorded(serve):
    long = FinalAnswer(answer="x" * 5000)
    with serve([long, FinalAnswer(answer="a"), long, long, "y" * 5000, "y" * 5000]) as stub:
        ok = decide(_model(stub, 1), [HumanMessage("q")], FinalAnswer, max_reply_chars=1000)
        d = decide(_model(stub, 1), [HumanMessage("q")], FinalAnswer, max_reply_chars=1000)
        g = generate(_model(stub, 1), [HumanMessage("q")], max_reply_chars=1000)
    assert ok.ok and ok.value.answer == "a" and ok.usage.llm_calls == 2
    assert not d.ok and d.kind == "malformed_reply" and d.usage.llm_calls == 2 and len(d.error) < 400
    assert "too long" in d.error and "max_reply_chars=1,000" in d.error and "xxxxx" not in d.error
    assert g.result is None and g.kind == "malformed_reply" and "too long" in g.error and len(stub.requests) == 6


def test_a_free_text_call_is_retried_too(serve):
    with serve([Fault(body=""), "a plan"]) as stub:
        g = generate(_model(stub, 2), [HumanMessage("q")])
    assert g.ok and g.value.content == "a plan" and g.error == "" and g.usage.llm_calls == 2


@pytest.mark.parametrize("status, kind", [(400, "bad_request"), (401, "auth"), (403, "auth"), (404, "not_found")])
def test_real_errors_are_not_retried(status, kind, serve):
    with serve([Fault(status=status), FinalAnswer(answer="a")]) as stub:
        d = decide(_model(stub, 3), [HumanMessage("q")], FinalAnswer)
    assert not d.ok and d.kind == kind and str(status) in d.error and "malformed" not in d.error
    assert len(stub.requests) == 1


def test_a_model_named_like_a_status_code_is_not_a_rate_limit(serve):
    """A 404 for a model named ``qwen-429`` fails at once (its kind is from the type, not the text); a real 429 is
    retried by the client and, past its retries, is a ``rate_limit``."""
    missing = Fault(status=404, message="The model `qwen-429` does not exist or you do not have access to it.")
    with serve([missing, FinalAnswer(answer="a")]) as stub:
        d = decide(load_chat_model("openai:qwen-429", base_url=stub.base_url, max_retries=3), [HumanMessage("q")],
                   FinalAnswer)
    assert d.kind == "not_found" and "qwen-429" in d.error and len(stub.requests) == 1
    with serve([Fault(status=429)] * 3) as stub:
        d = decide(load_chat_model("openai:m", base_url=stub.base_url, max_retries=2), [HumanMessage("q")], FinalAnswer)
    assert d.kind == "rate_limit" and len(stub.requests) == 3


def test_an_unknown_request_option_is_not_taken_for_a_malformed_reply(serve):
    with serve(["text"]) as stub:
        g = generate(_model(stub, 3), [HumanMessage("q")], options={"not_an_openai_option": 1})
    assert g.ok and g.value.content == "text" and len(stub.requests) == 1  # called again without the option


def test_tool_arguments_that_are_not_an_object_are_repaired_not_retried(serve):
    with serve([ToolReply("FinalAnswer", {}, raw='["a", "b"]'), FinalAnswer(answer="a")]) as stub:
        d = decide(_model(stub, 0), [HumanMessage("q")], FinalAnswer)
    assert d.ok and d.attempts == 2 and len(stub.requests) == 2
    assert "tool_calls.0.args: Input should be a valid dictionary" in stub.requests[1].prompt_text  # the repair says why


def test_the_runner_retries_a_question_on_a_rate_limit_only(tmp_path, serve):
    """Issue 19 §4's regression: the evaluation runner re-runs a question on the typed kind ``rate_limit`` only. A 404
    "model `qwen-429` not found" fails at once (one attempt, one request); a real 429 is re-run ``rate_limit_retries``
    times, each time after the client's own retries."""
    import asyncio

    from ragplan.eval.runner import RunFolder, RunSettings, evaluate
    from ragplan.methods.planrag.generate import generate_clone

    clone = tmp_path / "clone"
    generate_clone(clone, "locating", 1, seed=3)
    missing = Fault(status=404, message="The model `qwen-429` does not exist or you do not have access to it.")
    for name, fault, kind, attempts in [("missing", missing, "not_found", 1), ("limited", Fault(status=429), "rate_limit", 3)]:
        with serve(responder=lambda req: fault) as stub:
            st = RunSettings(method="single_rag", benchmark="dqa-locating", data=str(clone), model="openai:qwen-429",
                             base_url=stub.base_url, rate_limit_retries=2, backoff_s=0.01, context={"llm_max_retries": 1})
            asyncio.run(evaluate(st, tmp_path / name))
        (rec,) = RunFolder(tmp_path / name).load_records().values()
        assert rec["stop_reason"] == "llm_error" and rec["failure"]["kind"] == kind and rec["attempts"] == attempts
        assert rec["failure"]["node"] and rec["failure"]["message"] == rec["error"]  # the node that caught it
        assert len(stub.requests) == attempts * (1 if kind == "not_found" else 2)  # the client retries a 429 once more
