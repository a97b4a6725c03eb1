"""The runner uses the concurrency it is given and loads each distinct script once per run (issue 13 §1).

Properties, not timings (the figures are benchmarks/batch.py's): with requests held by the endpoint,
``--concurrency 16`` has 16 requests in flight at once (the old default thread pool capped it at 6 on
two cores); a run whose questions share scripts loads each script once, even when more scripts are in
flight than the process-wide store cache holds, in one process and with worker processes (there once
per worker that runs its questions); worker processes write the same records as one process; the
``auto`` rule keeps one process where workers cannot help or cannot be used.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter

import pytest

import ragplan.tools.graphdb.tool as graph_tools
from ragplan.methods.planrag.generate import generate_clone
from ragplan.eval.registry import get_benchmark
from ragplan.eval.runner import RunSettings, evaluate
from ragplan.tools.graphdb.embedded import EmbeddedGraphStore
from tests.auto_reply import auto_responder
from tests.openai_server import Fault, OpenAIStub


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _single_rag_responder(hold_s: float, arrivals: list[float]):
    """single_rag's two calls answered from their schemas, each held ``hold_s`` by the server; arrival times kept."""
    inner = auto_responder({"RetrievalAction": {"thought": "ids", "action": "graph_db",
                                                "action_input": "MATCH (b:Building) RETURN b.id AS id LIMIT 3"},
                            "FinalAnswer": {"answer": "1"}})

    def respond(req):
        arrivals.append(time.monotonic())
        return Fault(delay_s=hold_s, reply=inner(req))

    return respond


def most_in_flight(arrivals: list[float], hold_s: float) -> int:
    """The most requests held by the server at one moment (each is held ``hold_s`` from its arrival)."""
    events = sorted([(t, 1) for t in arrivals] + [(t + hold_s, -1) for t in arrivals])
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_concurrency_16_keeps_16_requests_in_flight(tmp_path):
    clone = tmp_path / "clone"
    generate_clone(clone, "building", 32, seed=0)
    arrivals: list[float] = []
    with OpenAIStub(responder=_single_rag_responder(0.4, arrivals)) as stub:
        settings = RunSettings(method="single_rag", benchmark="dqa-building", data=str(clone), model="openai:stub",
                               base_url=stub.base_url, concurrency=16, context={"llm_max_retries": 0}, checkpoints=False)
        summary = asyncio.run(evaluate(settings, tmp_path / "run"))
    assert summary["overall"]["n"] == 32 and summary["overall"]["errors"] == 0
    assert most_in_flight(arrivals, 0.4) == 16  # all of them, never more


@pytest.mark.parametrize("workers", [1, 2])
def test_each_distinct_script_is_loaded_once_per_run(tmp_path, monkeypatch, workers):
    clone = tmp_path / "clone"
    generate_clone(clone, "building", 24, seed=1)
    items = get_benchmark("dqa-building", str(clone)).items()
    scripts = Counter(it.context["graph_path"] for it in items)
    assert len(scripts) < len(items)  # questions share scripts
    monkeypatch.setattr(graph_tools, "STORE_CACHE_SIZE", 2)  # fewer than the scripts in flight
    graph_tools._cache.clear()
    loads: Counter[str] = Counter()
    real = EmbeddedGraphStore.from_script.__func__  # type: ignore[attr-defined]

    def counted(cls, path, **kw):
        loads[str(path)] += 1
        return real(cls, path, **kw)

    monkeypatch.setattr(EmbeddedGraphStore, "from_script", classmethod(counted))
    with OpenAIStub(responder=_single_rag_responder(0.02, [])) as stub:
        settings = RunSettings(method="single_rag", benchmark="dqa-building", data=str(clone), model="openai:stub",
                               base_url=stub.base_url, concurrency=8, context={"llm_max_retries": 0}, checkpoints=False,
                               workers=workers)
        summary = asyncio.run(evaluate(settings, tmp_path / "run"))
    assert summary["overall"]["n"] == len(items) and summary["overall"]["errors"] == 0
    runner = summary["runner"]
    assert runner["workers"] == workers and runner["data"] == len(scripts) and runner["unfinished"] == []
    if workers == 1:
        assert set(loads) == set(scripts) and set(loads.values()) == {1}  # every script, each once
        assert runner["data_prepared"] == len(scripts) and runner["data_shared"] == 0
    else:  # in the workers (this process's counter sees nothing): each script once per worker that runs its questions
        assert not loads
        assert runner["data_prepared"] == len(scripts) + runner["data_shared"]
        assert runner["data_shared"] <= 2  # a script goes to a second worker only to take over its last questions


_TIMING = {"latency_s", "llm_seconds", "finished_at", "query_ms"}


def _untimed(value):
    """A record without its timing fields, at any depth (a step's query_ms …)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in _TIMING}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def test_workers_write_the_same_records_as_one_process(tmp_path):
    clone = tmp_path / "clone"
    generate_clone(clone, "building", 12, seed=2)
    records = {}
    with OpenAIStub(responder=_single_rag_responder(0.01, [])) as stub:
        for workers in (1, 2):
            settings = RunSettings(method="single_rag", benchmark="dqa-building", data=str(clone), model="openai:stub",
                                   base_url=stub.base_url, concurrency=4, context={"llm_max_retries": 0}, workers=workers)
            summary = asyncio.run(evaluate(settings, tmp_path / f"run{workers}"))
            assert summary["runner"]["workers"] == workers and summary["overall"]["n"] == 12
            lines = (tmp_path / f"run{workers}" / "results.jsonl").read_text().splitlines()
            records[workers] = {r["id"]: _untimed(r) for r in map(json.loads, lines)}
    assert len(records[2]) == 12 and records[2] == records[1]
    assert all(r["answer"] == "1" and r["error"] == "" and r["steps"][0]["ok"] for r in records[2].values())


def test_auto_workers_rule(monkeypatch):
    """auto: min(cores, concurrency // 8) with at least 4 questions each; one process for a chat-model object or
    settings that cannot be pickled; an explicit number that cannot be met is refused with the reason."""
    from ragplan.eval.benchmark import Item
    from ragplan.eval.question_runner import RunJob
    from ragplan.eval.workers import choose_workers

    monkeypatch.setattr("ragplan.eval.workers._cores", lambda: 4)

    def job(n_items: int, concurrency: int, workers: int | str = "auto", **base) -> RunJob:
        items = [Item(id=f"q{i}", question="q", gold="a") for i in range(n_items)]
        settings = RunSettings(method="single_rag", benchmark="dqa-building", data="-", workers=workers)
        return RunJob(settings=settings, run_dir="-", invocation=1, items=items, base=base, bench=None,  # type: ignore[arg-type]
                      concurrency=concurrency)

    assert choose_workers(job(64, 32)) == (4, None)
    assert choose_workers(job(64, 16)) == (2, None)
    assert choose_workers(job(64, 8)) == (1, None)
    assert choose_workers(job(64, 64)) == (4, None)  # never more than the cores
    assert choose_workers(job(10, 32)) == (2, None)  # at least 4 questions each
    assert choose_workers(job(7, 32)) == (1, None)
    assert choose_workers(job(64, 32), chat_model_given=True) == (1, None)
    assert choose_workers(job(64, 32, lock=threading.Lock())) == (1, None)  # cannot be pickled
    assert choose_workers(job(64, 32, workers=1)) == (1, None)
    assert choose_workers(job(64, 4, workers=3)) == (3, None)  # explicit: as asked (at most the concurrency)
    n, problem = choose_workers(job(64, 4, workers=2), chat_model_given=True)
    assert n == 1 and "chat-model object" in (problem or "")
    n, problem = choose_workers(job(64, 4, workers=2, lock=threading.Lock()))
    assert n == 1 and "cannot be sent to worker processes" in (problem or "")


def test_workers_report_the_llm_cache_entries_they_used(tmp_path):
    """A run recorded into an LLM cache in one process, replayed with two workers: the replay's llm_cache.json
    lists the same entries (the workers' usage is merged), and every answer comes from the cache."""
    clone = tmp_path / "clone"
    generate_clone(clone, "building", 12, seed=3)
    cache = str(tmp_path / "cache")
    with OpenAIStub(responder=_single_rag_responder(0.01, [])) as stub:
        rec = RunSettings(method="single_rag", benchmark="dqa-building", data=str(clone), model="openai:stub",
                          base_url=stub.base_url, concurrency=4, context={"llm_max_retries": 0}, workers=1,
                          llm_cache_dir=cache)
        recorded = asyncio.run(evaluate(rec, tmp_path / "rec"))
        asked = len(stub.requests)
        replay = RunSettings(method="single_rag", benchmark="dqa-building", data=str(clone), model="openai:stub",
                             concurrency=4, context={"llm_max_retries": 0}, workers=2, llm_cache_dir=cache, llm_replay=True)
        replayed = asyncio.run(evaluate(replay, tmp_path / "replay"))
        assert len(stub.requests) == asked  # nothing reached the endpoint
    assert replayed["runner"]["workers"] == 2 and replayed["overall"]["errors"] == 0
    assert recorded["llm_cache"]["entries"] == asked == 24
    assert replayed["llm_cache"]["fingerprint"] == recorded["llm_cache"]["fingerprint"]
    assert json.loads((tmp_path / "replay" / "llm_cache.json").read_text())["entries"] == 24
