"""The runner uses the concurrency it is given and loads each distinct script once per run (issue 13 §1).

Properties, not timings (the figures are benchmarks/batch.py's): with requests held by the endpoint until 16 are held
at once, ``--concurrency 16`` gets there (the old default thread pool capped it at 6 on two cores) and never has more
in flight; a run whose questions share scripts loads each script once, even when more scripts are in flight than the
process-wide store cache holds.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

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


def _single_rag_responder(hold_s: float = 0.0):
    """single_rag's two calls answered from their schemas (each held ``hold_s`` by the server)."""
    inner = auto_responder({"RetrievalAction": {"thought": "ids", "action": "graph_db",
                                                "action_input": "MATCH (b:Building) RETURN b.id AS id LIMIT 3"},
                            "FinalAnswer": {"answer": "1"}})
    return lambda req: Fault(delay_s=hold_s, reply=inner(req)) if hold_s else inner(req)


class HoldingStub(OpenAIStub):
    """Holds every request until ``want`` are held at once (from then on none): ``most`` is the most requests ever
    held at once, each of them in flight (its client waits for the answer). A run that never gets to ``want`` is let
    go after ``bound_s``, before its client gives up (against a hang; ``most`` then tells how far it got)."""

    def __init__(self, want: int, bound_s: float = 90.0, **kw: Any) -> None:
        super().__init__(**kw)
        self.want, self.bound_s = want, bound_s
        self.held = self.most = 0
        self.released = False
        self._cond = threading.Condition()

    def _next(self, rec: Any) -> Any:
        reply = super()._next(rec)
        with self._cond:
            self.held += 1
            self.most = max(self.most, self.held)
            if self.held >= self.want:
                self.released = True
                self._cond.notify_all()
            if not self._cond.wait_for(lambda: self.released, timeout=self.bound_s):
                self.released = True  # never got there: let every request go (the assertion on most fails)
                self._cond.notify_all()
            self.held -= 1  # (before its answer is sent: a request counted is one its client still waits for)
        return reply


def test_concurrency_16_keeps_16_requests_in_flight(tmp_path):
    clone = tmp_path / "clone"
    generate_clone(clone, "building", 32, seed=0)
    with HoldingStub(16, responder=_single_rag_responder()) as stub:
        settings = RunSettings(method="single_rag", benchmark="dqa-building", data=str(clone), model="openai:stub",
                               base_url=stub.base_url, concurrency=16, context={"llm_max_retries": 0}, checkpoints=False)
        summary = asyncio.run(evaluate(settings, tmp_path / "run"))
    assert summary["overall"]["n"] == 32 and summary["overall"]["errors"] == 0
    assert stub.most == 16  # all of them at once, never more


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
    with OpenAIStub(responder=_single_rag_responder(0.02)) as stub:
        settings = RunSettings(method="single_rag", benchmark="dqa-building", data=str(clone), model="openai:stub",
                               base_url=stub.base_url, concurrency=8, context={"llm_max_retries": 0}, checkpoints=False)
        summary = asyncio.run(evaluate(settings, tmp_path / "run"))
    assert summary["overall"]["n"] == len(items) and summary["overall"]["errors"] == 0
    runner = summary["runner"]
    assert runner["data"] == len(scripts)
    assert set(loads) == set(scripts) and set(loads.values()) == {1}  # every script, each once
    assert runner["data_prepared"] == len(scripts)
