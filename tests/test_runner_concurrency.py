"""The runner uses the concurrency it is given and loads each distinct script once per run (issue 13 §1).

Properties, not timings (the figures are benchmarks/batch.py's): with requests held by the endpoint,
``--concurrency 16`` has 16 requests in flight at once (the old default thread pool capped it at 6 on
two cores); a run whose questions share scripts loads each script once, even when more scripts are in
flight than the process-wide store cache holds.
"""

from __future__ import annotations

import asyncio
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


@pytest.mark.serial  # counts requests in flight within a time window
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


def test_each_distinct_script_is_loaded_once_per_run(tmp_path, monkeypatch):
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
                               base_url=stub.base_url, concurrency=8, context={"llm_max_retries": 0}, checkpoints=False)
        summary = asyncio.run(evaluate(settings, tmp_path / "run"))
    assert summary["overall"]["n"] == len(items) and summary["overall"]["errors"] == 0
    runner = summary["runner"]
    assert runner["data"] == len(scripts)
    assert set(loads) == set(scripts) and set(loads.values()) == {1}  # every script, each once
    assert runner["data_prepared"] == len(scripts)
