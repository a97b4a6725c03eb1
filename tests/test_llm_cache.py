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

from ragplan.eval.question_runner import is_rate_limited
from ragplan.graphs.planrag import build_planrag
from ragplan.llm import LLMConfigError, chat_model_for, decide, decide_for, endpoint_problem, generate, load_chat_model
from ragplan.llm_cache import FORMAT, LLMCache, LLMCacheMiss, digest_of, llm_cache, model_with, track_cache_usage
from ragplan.nodes.planrag.plan import Plan
from ragplan.state.context import LLMContext, PlanRAGContext
from ragplan.state.planrag import PlanRAGResult
from tests.openai_server import OpenAIStub
from tests.scripted import ScriptedChatModel

MESSAGES = [SystemMessage("You plan."), HumanMessage("Which trade node?")]


pytestmark = pytest.mark.usefixtures("local_endpoint")  # no proxy for 127.0.0.1, no real key (tests/conftest.py)


def _entries(d: Path) -> list[Path]:
    return sorted(d.glob("??/??/*.json"))


def test_key_is_what_langchain_hands_over_without_the_transport(tmp_path):
    """The key hashes LangChain's prompt and llm_string as given; the endpoint, key, timeout and retries of a model
    built by name are on its OpenAI clients, outside the llm_string, so they are not keyed."""
    cache = str(tmp_path / "c")
    with OpenAIStub(responder=lambda req: "ok") as one, OpenAIStub(responder=lambda req: "ok") as two:
        a = load_chat_model("openai:m", base_url=one.base_url, timeout_s=5, max_retries=1, cache_dir=cache)
        b = load_chat_model("openai:m", base_url=two.base_url, timeout_s=60, max_retries=7, cache_dir=cache)
        a.invoke(MESSAGES)
        b.invoke(MESSAGES)
        assert len(one.requests) == 1 and two.requests == []  # the same request: served from the cache
        load_chat_model("openai:m", base_url=one.base_url, temperature=0.7, cache_dir=cache).invoke(MESSAGES)
        load_chat_model("openai:m2", base_url=one.base_url, cache_dir=cache).invoke(MESSAGES)
        a.invoke([*MESSAGES[:1], HumanMessage("Which node?")])
        a.bind(logprobs=True).invoke(MESSAGES)
        a.bind(stop=["\n"]).invoke(MESSAGES)
    entries = [json.loads(p.read_text()) for p in _entries(tmp_path / "c")]
    assert len(entries) == len(one.requests) == 6
    for p, e in zip(_entries(tmp_path / "c"), entries):
        assert e["format"] == FORMAT and p.stem == e["digest"]
        assert "127.0.0.1" not in json.dumps(e) and e["model"] in ("openai:m", "openai:m2")
    assert sum(digest_of(dumps(MESSAGES), e["llm_string"]) == e["digest"] for e in entries) == 5  # all but "Which node?"


def test_a_copy_at_another_temperature_is_keyed_by_it(tmp_path, serve):
    """LangChain keeps a model's serialised form; model_with drops it so the copy keys by its own settings."""
    with serve(responder=lambda req: "ok") as stub:
        m = ChatOpenAI(model="m", base_url=stub.base_url, api_key="k", temperature=0.2, cache=LLMCache(tmp_path))
        m.invoke(MESSAGES)
        m.model_copy(update={"temperature": 1.0}).invoke(MESSAGES)  # LangChain's stale copy: a hit
        assert len(stub.requests) == 1
        model_with(m, temperature=1.0).invoke(MESSAGES)
        assert len(stub.requests) == 2 and stub.requests[1].body["temperature"] == 1.0


def test_an_older_cache_folder_is_named_in_a_replay_miss(tmp_path):
    old = tmp_path / "ab" / "cd" / ("ab" + "cd" + "0" * 60 + ".json")
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps({"format": 1, "digest": old.stem, "generations": []}))
    with pytest.raises(LLMCacheMiss, match="recorded by an older ragplan \\(entry format 1"):
        load_chat_model("openai:stub-model", cache_dir=str(tmp_path), replay=True).invoke(MESSAGES)


def test_record_then_replay_offline_from_another_address(tmp_path, serve):
    cache = tmp_path / "cache"
    with serve([Plan(steps=["count the nodes"], reason="r"), "Stockholm."]) as stub:
        model = load_chat_model("openai:stub-model", base_url=stub.base_url, cache_dir=str(cache))
        with track_cache_usage() as used:
            d = decide(model, MESSAGES, Plan)
            g = generate(model, MESSAGES)
    assert d.ok and d.value.steps == ["count the nodes"] and g.value.content == "Stockholm." and not g.error
    assert len(stub.requests) == 2 and used.summary()["recorded"] == 2
    entries = _entries(cache)
    assert len(entries) == 2 and all(p.parent.parent.parent == cache for p in entries)
    by_kind = {("tool_choice" in json.loads(p.read_text())["llm_string"]): json.loads(p.read_text()) for p in entries}
    plan_entry = by_kind[True]
    assert plan_entry["model"] == "openai:stub-model" and "Plan" in plan_entry["llm_string"]
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
        g2 = generate(replay, MESSAGES)
    assert d2.value == d.value and d2.usage.input_tokens == d.usage.input_tokens > 0
    assert g2.value.content == "Stockholm." and g2.usage.output_tokens == g.usage.output_tokens and not g2.error
    assert used.summary() == {**used.summary(), "entries": 2, "replayed": 2, "recorded": 0}


def test_a_replay_miss_is_recorded_as_an_llm_error_and_sends_nothing(tmp_path, trade_store, question, serve):
    (tmp_path / "empty").mkdir()
    with serve([Plan(steps=["x"])]) as stub:  # a live server that must not be asked
        ctx = PlanRAGContext(model="openai:stub-model", base_url=stub.base_url, graph_store=trade_store,
                             llm_cache_dir=str(tmp_path / "empty"), llm_replay=True)
        d = decide_for(ctx, MESSAGES, Plan)
        out = build_planrag().compile().invoke({"question": question}, context=ctx, config={"recursion_limit": 40})
    assert stub.requests == [] and stub.remaining == 1
    assert not d.ok and d.kind == "replay_miss" and "LLMCacheMiss" in d.error and "openai:stub-model" in d.error
    assert "replay: no recorded response" in d.error and "request key " in d.error
    res = PlanRAGResult.from_state(out)
    assert res.stop_reason == "llm_error" and res.answer == "" and res.error.startswith("plan: LLM request failed: LLMCacheMiss")
    assert res.failure["kind"] == "replay_miss" and not is_rate_limited(out)
    with pytest.raises(LLMCacheMiss) as miss:
        load_chat_model("openai:stub-model", cache_dir=str(tmp_path / "empty"), replay=True).invoke("hi")
    assert miss.value.model == "openai:stub-model" and len(miss.value.digest) == 64
    assert _entries(tmp_path / "empty") == []


def test_concurrent_identical_requests_share_one_entry(tmp_path, serve):
    """Eight threads send the same request at once: every caller gets the one stored response."""
    count = iter(range(1000))
    barrier = threading.Barrier(8)
    with serve(responder=lambda req: f"reply {next(count)}") as stub:
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
    g = generate(model, MESSAGES, options={"logprobs": True})
    assert not g.error and g.value.response_metadata["logprobs"] == logprobs and g.usage.input_tokens == 7
    (entry,) = _entries(tmp_path / "c")
    assert json.loads(entry.read_text())["model"].startswith("ScriptedChatModel:")
    replay = chat_model_for(LLMContext(chat_model=obj, llm_cache_dir=str(tmp_path / "c"), llm_replay=True))
    g2 = generate(replay, MESSAGES, options={"logprobs": True})
    assert not g2.error and g2.value.content == "Paris" and g2.value.response_metadata["logprobs"] == logprobs
    assert g2.usage.input_tokens == 7 and len(obj.prompts) == 1  # the object was not called again
    g3 = generate(replay, MESSAGES)  # without logprobs: another request, not recorded
    assert "LLMCacheMiss" in g3.error and g3.kind == "replay_miss"


def test_replay_needs_no_endpoint_but_needs_a_cache(tmp_path):
    assert endpoint_problem("openai:gpt-4o-mini", "") is not None
    assert endpoint_problem("openai:gpt-4o-mini", "", replay=True) is None
    assert load_chat_model("openai:gpt-4o-mini", cache_dir=str(tmp_path), replay=True).cache is llm_cache(
        tmp_path, True, "openai:gpt-4o-mini")
    with pytest.raises(LLMConfigError, match="needs llm_cache_dir"):
        chat_model_for(LLMContext(model="openai:stub-model", base_url="http://x/v1", llm_replay=True))
    d = decide_for(LLMContext(model="openai:stub-model", base_url="http://x/v1", llm_replay=True), MESSAGES, Plan)
    assert d.kind == "config" and "--llm-cache" in d.error


def test_a_damaged_entry_is_re_recorded_or_a_clear_miss(tmp_path, serve):
    with serve(["first", "second"]) as stub:
        model = load_chat_model("openai:stub-model", base_url=stub.base_url, cache_dir=str(tmp_path / "c"))
        assert model.invoke(MESSAGES).content == "first"
        (entry,) = _entries(tmp_path / "c")
        entry.write_text('{"format": 1, "generations": [')
        replay = load_chat_model("openai:stub-model", cache_dir=str(tmp_path / "c"), replay=True)
        with pytest.raises(LLMCacheMiss, match="unreadable"):
            replay.invoke(MESSAGES)
        assert model.invoke(MESSAGES).content == "second"  # recorded again over the damaged file
    assert replay.invoke(MESSAGES).content == "second"


def test_rate_limit_detection_reads_the_failure_kind_not_the_text():
    assert is_rate_limited({"error": "x", "failure": {"kind": "rate_limit", "node": "plan", "message": "x"}})
    assert not is_rate_limited({"error": "model `qwen-429` not found: rate limit 429",
                                "failure": {"kind": "not_found", "node": "plan", "message": "…429…"}})
    assert not is_rate_limited({"error": "LLM request failed: RateLimitError: Error code: 429"})  # no typed failure


def test_a_memo_is_dropped_with_its_object():
    """memo keeps what it made while the object lives and forgets it when the object is collected."""
    import gc

    from ragplan import llm_cache

    class Obj:
        pass

    obj, made = Obj(), []
    assert llm_cache.memo(obj, "k", lambda: made.append(1) or "v") == "v" == llm_cache.memo(obj, "k", lambda: "w")
    assert made == [1] and any(k[1] == "k" for k in llm_cache._memos)
    del obj
    gc.collect()
    assert not any(k[1] == "k" for k in llm_cache._memos)


def test_a_memo_asked_from_many_threads_at_once_is_made_once():
    """The first wave of a batch asks for the same bound model from every worker thread: it is built once."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from ragplan import llm_cache

    class Obj:
        pass

    obj, made, start = Obj(), [], threading.Barrier(8)

    def make():
        made.append(1)
        time.sleep(0.05)  # a slow build: without the lock every waiting thread builds its own
        return object()

    def ask(_):
        start.wait()
        return llm_cache.memo(obj, "bound", make)

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(ask, range(8)))
    assert len(made) == 1 and all(g is got[0] for g in got)
