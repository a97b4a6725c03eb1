"""The LLM record/replay cache (ragplan.llm_cache): what is keyed, what an entry holds, replay, misses, concurrency.

Requests go through the real ``langchain-openai`` client to the local OpenAI-compatible stub, or through
the scripted chat model (a model LangChain cannot serialise, keyed by its invocation parameters).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from langchain_core.load import dumps
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from ragplan.eval.runner import is_rate_limited
from ragplan.graphs.planrag import build_planrag
from ragplan.llm import LLMConfigError, chat_model_for, decide, decide_for, endpoint_problem, generate, load_chat_model
from ragplan.llm_cache import LLMCache, LLMCacheMiss, cache_request, llm_cache, model_with, track_cache_usage
from ragplan.nodes.planrag.plan import Plan
from ragplan.state.context import LLMContext, PlanRAGContext
from ragplan.state.planrag import PlanRAGResult
from tests.openai_server import OpenAIStub
from tests.scripted import ScriptedChatModel

MESSAGES = [SystemMessage("You plan."), HumanMessage("Which trade node?")]


pytestmark = pytest.mark.usefixtures("local_endpoint")  # no proxy for 127.0.0.1, no real key (tests/conftest.py)


def _digest(model, messages=MESSAGES, **call) -> str:
    return cache_request(dumps(messages), model._get_llm_string(**call)).digest


def _entries(d: Path) -> list[Path]:
    return sorted(d.glob("??/??/*.json"))


def test_key_is_model_settings_and_messages_not_transport():
    a = ChatOpenAI(model="m", base_url="http://a:1/v1", api_key="k1", temperature=0.0, timeout=5, max_retries=1)
    b = ChatOpenAI(model="m", base_url="http://b:2/v1", api_key="k2", temperature=0.0, timeout=60, max_retries=7,
                   stream_usage=True)
    assert _digest(a) == _digest(b)  # server, key, timeout, retries are not keyed
    hotter = ChatOpenAI(model="m", api_key="k", temperature=0.7)
    other = ChatOpenAI(model="m2", api_key="k", temperature=0.0)
    assert len({_digest(a), _digest(hotter), _digest(other)}) == 3
    assert _digest(a) != _digest(a, messages=[*MESSAGES[:1], HumanMessage("Which node?")])
    assert _digest(a) != _digest(a, logprobs=True) != _digest(a, stop=["\n"])
    # ids and an earlier reply's metadata are not sent to the endpoint, so they are not keyed
    said = AIMessage("ok", id="run-1", response_metadata={"id": "chatcmpl-1"}, usage_metadata={
        "input_tokens": 1, "output_tokens": 1, "total_tokens": 2})
    bare = AIMessage("ok")
    assert _digest(a, messages=[*MESSAGES, said]) == _digest(a, messages=[*MESSAGES, bare])
    req = cache_request(dumps(MESSAGES), b._get_llm_string())
    assert req.model == "openai:m" and req.settings == {"temperature": 0.0}
    assert "b:2" not in json.dumps(req.settings) and "k2" not in json.dumps(req.settings)


def test_a_copy_at_another_temperature_is_keyed_by_it():
    """LangChain caches a model's serialised form; model_with drops it so the copy keys by its own settings."""
    m = ChatOpenAI(model="m", api_key="k", temperature=0.2)
    before = _digest(m)
    assert _digest(m.model_copy(update={"temperature": 1.0})) == before  # LangChain's stale copy
    assert _digest(model_with(m, temperature=1.0)) != before
    assert _digest(model_with(m, temperature=1.0)) == _digest(ChatOpenAI(model="m", api_key="k", temperature=1.0))


def test_a_response_format_class_is_keyed_by_its_schema():
    def named(fields: dict) -> type[BaseModel]:
        return type("Verdict", (BaseModel,), {"__annotations__": fields, "__module__": __name__})

    m = ChatOpenAI(model="m", api_key="k", temperature=0.0)
    one, two = named({"ok": bool}), named({"ok": bool, "why": str})
    globals()["Verdict"] = one
    d1 = cache_request(dumps(MESSAGES), m._get_llm_string(response_format=one))
    globals()["Verdict"] = two
    d2 = cache_request(dumps(MESSAGES), m._get_llm_string(response_format=two))
    del globals()["Verdict"]
    assert d1.digest != d2.digest
    assert d1.settings["response_format"]["json_schema"]["required"] == ["ok"]


def test_record_then_replay_offline_from_another_address(tmp_path):
    cache = tmp_path / "cache"
    with OpenAIStub(replies=[Plan(steps=["count the nodes"], reason="r"), "Stockholm."]) as stub:
        model = load_chat_model("openai:stub-model", base_url=stub.base_url, cache_dir=str(cache))
        with track_cache_usage() as used:
            d = decide(model, MESSAGES, Plan)
            msg, usage, err = generate(model, MESSAGES)
    assert d.ok and d.value.steps == ["count the nodes"] and msg.content == "Stockholm." and not err
    assert len(stub.requests) == 2 and used.summary()["recorded"] == 2
    entries = _entries(cache)
    assert len(entries) == 2 and all(p.parent.parent.parent == cache for p in entries)
    by_kind = {("tools" in json.loads(p.read_text())["settings"]): json.loads(p.read_text()) for p in entries}
    plan_entry = by_kind[True]
    assert plan_entry["model"] == "openai:stub-model" and plan_entry["settings"]["tool_choice"]["function"]["name"] == "Plan"
    assert plan_entry["messages"][1]["kwargs"]["content"] == "Which trade node?"
    saved = plan_entry["generations"][0]["message"]
    assert saved["tool_calls"][0]["args"] == {"steps": ["count the nodes"], "reason": "r"}
    assert saved["usage_metadata"]["input_tokens"] == stub.requests[0].usage["prompt_tokens"]
    assert plan_entry["digest"] == entries[[json.loads(p.read_text())["digest"] for p in entries].index(plan_entry["digest"])].stem
    assert "127.0.0.1" not in json.dumps(plan_entry)
    # the server is gone; replay from a model pointed elsewhere (no key, no endpoint)
    replay = load_chat_model("openai:stub-model", cache_dir=str(cache), replay=True)
    with track_cache_usage() as used:
        d2 = decide(replay, MESSAGES, Plan)
        msg2, usage2, err2 = generate(replay, MESSAGES)
    assert d2.value == d.value and d2.usage.input_tokens == d.usage.input_tokens > 0
    assert msg2.content == "Stockholm." and usage2.output_tokens == usage.output_tokens and not err2
    assert used.summary() == {**used.summary(), "entries": 2, "replayed": 2, "recorded": 0}


def test_a_replay_miss_is_recorded_as_an_llm_error_and_sends_nothing(tmp_path, trade_store, question):
    (tmp_path / "empty").mkdir()
    with OpenAIStub(replies=[Plan(steps=["x"])]) as stub:  # a live server that must not be asked
        ctx = PlanRAGContext(model="openai:stub-model", base_url=stub.base_url, graph_store=trade_store,
                             llm_cache_dir=str(tmp_path / "empty"), llm_replay=True)
        d = decide_for(ctx, MESSAGES, Plan)
        out = build_planrag().compile().invoke({"question": question}, context=ctx, config={"recursion_limit": 40})
    assert stub.requests == [] and stub.remaining == 1
    assert not d.ok and d.kind == "endpoint" and "LLMCacheMiss" in d.error and "openai:stub-model" in d.error
    assert "replay: no recorded response" in d.error and "request key " in d.error
    res = PlanRAGResult.from_state(out)
    assert res.stop_reason == "llm_error" and res.answer == "" and res.error.startswith("plan: LLM request failed: LLMCacheMiss")
    assert not is_rate_limited(res.error)
    with pytest.raises(LLMCacheMiss) as miss:
        load_chat_model("openai:stub-model", cache_dir=str(tmp_path / "empty"), replay=True).invoke("hi")
    assert miss.value.model == "openai:stub-model" and len(miss.value.digest) == 64
    assert _entries(tmp_path / "empty") == []


def test_concurrent_identical_requests_share_one_entry(tmp_path):
    """Eight threads send the same request at once: every caller gets the one stored response."""
    count = iter(range(1000))
    barrier = threading.Barrier(8)
    with OpenAIStub(responder=lambda req: f"reply {next(count)}") as stub:
        model = load_chat_model("openai:stub-model", base_url=stub.base_url, cache_dir=str(tmp_path / "c"))
        got: list[str] = []

        def ask() -> None:
            barrier.wait()
            got.append(model.invoke(MESSAGES).content)

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert len(got) == 8 and len(set(got)) == 1, got
    (entry,) = _entries(tmp_path / "c")
    assert json.loads(entry.read_text())["generations"][0]["message"]["content"] == got[0]
    assert not [p for p in (tmp_path / "c").rglob("*") if p.name.endswith(".tmp")]
    assert len(stub.requests) >= 1


def test_a_python_model_object_is_copied_with_the_cache_and_logprobs_survive(tmp_path):
    logprobs = {"content": [{"token": "Paris", "logprob": -0.01, "bytes": None, "top_logprobs": []}]}
    reply = AIMessage("Paris", response_metadata={"logprobs": logprobs},
                      usage_metadata={"input_tokens": 7, "output_tokens": 1, "total_tokens": 8})
    obj = ScriptedChatModel(replies=[reply])
    ctx = LLMContext(chat_model=obj, llm_cache_dir=str(tmp_path / "c"))
    model = chat_model_for(ctx)
    assert model is not obj and obj.cache is None and isinstance(model.cache, LLMCache)
    assert chat_model_for(ctx) is model  # one copy per object and cache
    msg, usage, err = generate(model, MESSAGES, options={"logprobs": True})
    assert not err and msg.response_metadata["logprobs"] == logprobs and usage.input_tokens == 7
    (entry,) = _entries(tmp_path / "c")
    assert json.loads(entry.read_text())["model"].startswith("scripted:")
    replay = chat_model_for(LLMContext(chat_model=obj, llm_cache_dir=str(tmp_path / "c"), llm_replay=True))
    msg2, usage2, err2 = generate(replay, MESSAGES, options={"logprobs": True})
    assert not err2 and msg2.content == "Paris" and msg2.response_metadata["logprobs"] == logprobs
    assert usage2.input_tokens == 7 and len(obj.prompts) == 1  # the object was not called again
    _, _, err3 = generate(replay, MESSAGES)  # without logprobs: another request, not recorded
    assert "LLMCacheMiss" in err3


def test_replay_needs_no_endpoint_but_needs_a_cache(tmp_path):
    assert endpoint_problem("openai:gpt-4o-mini", "") is not None
    assert endpoint_problem("openai:gpt-4o-mini", "", replay=True) is None
    assert load_chat_model("openai:gpt-4o-mini", cache_dir=str(tmp_path), replay=True).cache is llm_cache(tmp_path, True)
    with pytest.raises(LLMConfigError, match="needs llm_cache_dir"):
        chat_model_for(LLMContext(model="openai:stub-model", base_url="http://x/v1", llm_replay=True))
    d = decide_for(LLMContext(model="openai:stub-model", base_url="http://x/v1", llm_replay=True), MESSAGES, Plan)
    assert d.kind == "config" and "--llm-cache" in d.error


def test_a_damaged_entry_is_re_recorded_or_a_clear_miss(tmp_path):
    with OpenAIStub(replies=["first", "second"]) as stub:
        model = load_chat_model("openai:stub-model", base_url=stub.base_url, cache_dir=str(tmp_path / "c"))
        assert model.invoke(MESSAGES).content == "first"
        (entry,) = _entries(tmp_path / "c")
        entry.write_text('{"format": 1, "generations": [')
        replay = load_chat_model("openai:stub-model", cache_dir=str(tmp_path / "c"), replay=True)
        with pytest.raises(LLMCacheMiss, match="unreadable"):
            replay.invoke(MESSAGES)
        assert model.invoke(MESSAGES).content == "second"  # recorded again over the damaged file
    assert replay.invoke(MESSAGES).content == "second"


def test_rate_limit_detection_ignores_429_inside_a_digest():
    assert is_rate_limited("LLM request failed: RateLimitError: Error code: 429")
    assert not is_rate_limited("replay: no recorded response … (request key a4291fc0be12)")
