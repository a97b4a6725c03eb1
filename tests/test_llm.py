"""Typed LLM decisions (repair, fallbacks, failures) and model configuration."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import BaseModel, Field

from ragplan.llm import LLMConfigError, decide, endpoint_problem, kind_of, load_chat_model, split_model_spec
from tests.scripted import ScriptedChatModel


class Verdict(BaseModel):
    replan: bool
    reason: str


MSG = [HumanMessage("decide")]


def test_tool_call_parsed_first_time():
    d = decide(ScriptedChatModel(replies=[Verdict(replan=True, reason="r")]), MSG, Verdict)
    assert d.ok and d.value.replan and d.attempts == 1 and d.usage.llm_calls == 1 and d.usage.input_tokens == 100


def test_invalid_arguments_are_repaired_with_the_error_shown():
    bad = AIMessage(content="", tool_calls=[{"name": "Verdict", "args": {"replan": "maybe"}, "id": "1"}])
    model = ScriptedChatModel(replies=[bad, Verdict(replan=False, reason="ok")])
    d = decide(model, MSG, Verdict, max_repairs=1)
    assert d.ok and d.attempts == 2
    repair = model.prompts[1][-1].content
    assert "could not be used" in repair and "replan" in repair


def test_repairs_are_bounded():
    model = ScriptedChatModel(replies=["x", "y", "z", "never used"])
    d = decide(model, MSG, Verdict, max_repairs=2)
    assert not d.ok and d.attempts == 3 and model.remaining == 1 and "Verdict" in d.error


def test_json_in_text_accepted_without_tool_call():
    d = decide(ScriptedChatModel(replies=['{"replan": false, "reason": "fine"}']), MSG, Verdict)
    assert d.ok and d.value.reason == "fine"


def test_model_without_tool_calling_falls_back_to_text():
    model = FakeListChatModel(responses=['{"name": "Verdict", "arguments": {"replan": true, "reason": "t"}}'])
    d = decide(model, MSG, Verdict)
    assert d.ok and d.value.replan


def test_endpoint_exception_is_returned_not_raised():
    d = decide(ScriptedChatModel(replies=[TimeoutError("read timed out")]), MSG, Verdict)
    assert not d.ok and "TimeoutError" in d.error and d.usage.llm_calls == 1 and d.kind == "timeout"


def test_text_mode_asks_with_format_instructions_and_repairs():
    """``text``: LangChain's JsonOutputParser format instructions, its parse, the pydantic error shown back."""
    model = ScriptedChatModel(replies=["nothing", '{"replan": true}', '```json\n{"replan": true, "reason": "r"}\n```'])
    d = decide(model, MSG, Verdict, method="text")
    assert d.ok and d.value.reason == "r" and d.attempts == 3
    assert "JSON schema" in model.prompts[0][0].content and '"replan"' in model.prompts[0][0].content
    assert "holds no JSON object" in model.prompts[1][-1].content and "reason: Field required" in model.prompts[2][-1].content


class Short(BaseModel):
    answer: str
    reasoning: str = ""


class Reasoned(BaseModel):
    reasoning: str
    answer: str


@pytest.mark.parametrize("reply, answer", [
    ("Paris", "Paris"), ("Answer: Paris", "Paris"), ("**Answer:** \"Paris\".", "Paris"),
    ("France's capital is a famous city. So the answer is Paris.", "Paris"), ("Paris\nin France.", "Paris in France"),
    ("The answer to the question about France is: Paris", "Paris"),
    ('The answer to "What is the capital of France?" is: Paris', "Paris")])
def test_text_mode_answer_step_reads_a_plain_text_reply(reply, answer):
    """``text``: a step whose output is only an answer asks for, and reads, plain text (a small local model's reply)."""
    model = ScriptedChatModel(replies=[reply])
    d = decide(model, MSG, Short, method="text")
    assert d.ok and d.value.answer == answer and d.attempts == 1
    assert "Answer: <" in model.prompts[0][0].content and "JSON" not in model.prompts[0][0].content


@pytest.mark.parametrize("reply, reasoning, answer", [
    ("Paris is the capital of France.\nAnswer: Paris", "Paris is the capital of France.", "Paris"),
    ("It is in France.\nSo the answer is Paris.", "It is in France.", "Paris"),
    ("France's capital.\nParis", "France's capital.", "Paris"),
    ('{"reasoning": "r", "answer": "Paris"}', "r", "Paris")])
def test_text_mode_reasoning_then_answer_in_plain_text(reply, reasoning, answer):
    model = ScriptedChatModel(replies=[reply])
    d = decide(model, MSG, Reasoned, method="text")
    assert d.ok and d.value.answer == answer and d.value.reasoning.startswith(reasoning)
    assert "first your reasoning" in model.prompts[0][0].content


def test_text_mode_empty_answer_is_repaired_then_unparseable():
    model = ScriptedChatModel(replies=["", "Answer:", "  "])
    d = decide(model, MSG, Short, method="text")
    assert not d.ok and d.kind == "unparseable" and d.attempts == 3 and "Answer:" in model.prompts[1][-1].content


def test_a_reply_cut_off_at_the_output_limit_is_repaired_then_unparseable():
    """A reply the endpoint stopped at its token limit is never taken (in text mode its first part would pass for the
    answer): it is shown back asking for a shorter one, and after the repairs the step is unparseable."""
    cut = AIMessage(content="The short answer only. Question: What river flows through", response_metadata={
        "finish_reason": "length"})
    model = ScriptedChatModel(replies=[cut, "Answer: the Salzach"])
    d = decide(model, MSG, Short, method="text")
    assert d.ok and d.value.answer == "the Salzach" and d.attempts == 2
    assert "cut off at the model's output limit (length)" in model.prompts[1][-1].content
    d = decide(ScriptedChatModel(replies=[cut] * 3), MSG, Short, method="text")
    assert not d.ok and d.kind == "unparseable" and d.attempts == 3 and "cut off" in d.error
    for meta in ({"finish_reason": "MAX_TOKENS"}, {"done_reason": "length"}, {"stop_reason": "max_tokens"}):
        model = ScriptedChatModel(replies=[AIMessage(content="Answer: the Sal", response_metadata=meta), "Answer: x"])
        assert decide(model, MSG, Short, method="text").attempts == 2  # (Google, Ollama, Anthropic)
    done = AIMessage(content="Answer: the Salzach", response_metadata={"finish_reason": "stop"})
    assert decide(ScriptedChatModel(replies=[done]), MSG, Short, method="text").value.answer == "the Salzach"


def test_text_mode_decision_prompt_shows_a_filled_example():
    """A decision that needs fields is asked for as JSON, with an example built from the schema that validates."""
    class Gate(BaseModel):
        probability: float = Field(ge=0.0, le=1.0, description="Probability.")
        label: Literal["A", "B"]
        steps: list[str] = Field(min_length=1)
        verdict: Verdict

    model = ScriptedChatModel(replies=["Answer: A"] * 3)
    assert not decide(model, MSG, Gate, method="text").ok  # plain text is no decision with fields
    prompt = model.prompts[0][0].content
    example = json.loads(prompt.split("example:\n", 1)[1].splitlines()[0])
    assert Gate.model_validate(example).label == "A" and example["probability"] == 0.5


def test_failure_kinds_come_from_the_exception_type():
    import httpx
    import openai

    request = httpx.Request("POST", "http://x/v1/chat/completions")

    def status(cls, code):
        return cls("Error code: %d - model `qwen-429` ..." % code, response=httpx.Response(code, request=request), body=None)

    assert kind_of(status(openai.NotFoundError, 404)) == "not_found"  # whatever the message says
    assert kind_of(status(openai.RateLimitError, 429)) == "rate_limit"
    assert kind_of(status(openai.AuthenticationError, 401)) == kind_of(status(openai.PermissionDeniedError, 403)) == "auth"
    assert kind_of(status(openai.BadRequestError, 400)) == "bad_request"
    assert kind_of(status(openai.InternalServerError, 500)) == "server_error"
    assert kind_of(openai.APITimeoutError(request=request)) == kind_of(httpx.ReadTimeout("t")) == "timeout"
    assert kind_of(openai.APIConnectionError(request=request)) == "connection"
    assert kind_of(json.JSONDecodeError("Expecting value", "", 0)) == "malformed_reply"
    assert kind_of(RuntimeError("rate limit 429")) == "error"


def test_model_spec_and_endpoint_checks(monkeypatch):
    assert split_model_spec("openai:gpt-4o-mini") == ("openai", "gpt-4o-mini")
    assert split_model_spec("llama3") == ("openai", "llama3")
    assert split_model_spec("openai:qwen2.5:14b") == ("openai", "qwen2.5:14b")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert "OPENAI_API_KEY" in endpoint_problem("openai:gpt-4o-mini")
    assert "Ollama" in endpoint_problem("openai:gpt-4o-mini")
    assert endpoint_problem("openai:llama3", "http://127.0.0.1:9/v1") is None
    with pytest.raises(LLMConfigError):
        load_chat_model("openai:gpt-4o-mini")
    m = load_chat_model("openai:llama3", base_url="http://127.0.0.1:9/v1", timeout_s=5, max_retries=1)
    assert m is load_chat_model("openai:llama3", base_url="http://127.0.0.1:9/v1", timeout_s=5, max_retries=1)
    assert m.model_name == "llama3" and m.root_client.max_retries == 1 and m.root_client.timeout == 5


def test_model_roles_pick_their_own_model_or_fall_back():
    from ragplan.llm import chat_model_for
    from ragplan.state.context import ReaperContext

    planner, general = ScriptedChatModel(replies=[]), ScriptedChatModel(replies=[])
    ctx = ReaperContext(model="-", chat_model=general, planner_chat_model=planner)
    assert chat_model_for(ctx, "planner") is planner
    assert chat_model_for(ctx, "responder") is general and chat_model_for(ctx) is general
    named = ReaperContext(model="openai:big", planner_model="openai:small", base_url="http://127.0.0.1:9/v1")
    assert chat_model_for(named, "planner").model_name == "small"
    assert chat_model_for(named, "responder").model_name == "big"


def test_generate_text_call_usage_fallback_and_failure():
    from ragplan.llm import generate, message_text

    class NoOptions(ScriptedChatModel):
        def bind(self, **kwargs):
            raise TypeError("no such parameter")

    g = generate(NoOptions(replies=["draft"]), MSG, options={"logprobs": True})
    assert message_text(g.value) == "draft" and g.error == "" and g.usage.llm_calls == 1 and g.usage.input_tokens == 100
    g = generate(ScriptedChatModel(replies=[ConnectionError("down")]), MSG)
    assert g.result is None and g.error.startswith("LLM request failed: ConnectionError") and g.usage.llm_calls == 1
    assert g.kind == "connection"


def test_an_unreachable_endpoint_is_named_in_the_reason():
    """A connection error says which URL could not be reached (a typo in --base-url is then plain to see)."""
    import socket

    from ragplan.llm import generate

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    model = load_chat_model("openai:m", base_url=url, timeout_s=5, max_retries=0)
    g = generate(model, MSG)
    assert g.result is None and "Connection" in g.error and f"(endpoint {url})" in g.error and g.kind == "connection"
    d = decide(model, MSG, Verdict, max_repairs=0)
    assert d.result is None and f"(endpoint {url})" in d.error


def test_questions_threads_asking_at_once_share_one_model():
    """One chat model per setting in a process, also when a batch's threads ask for it at the same moment."""
    import threading

    start, models = threading.Barrier(12), []

    def ask() -> None:
        start.wait()
        models.append(load_chat_model("openai:llama3", base_url="http://127.0.0.1:9/v1", timeout_s=7.25))

    threads = [threading.Thread(target=ask) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(models) == 12 and len({id(m) for m in models}) == 1
