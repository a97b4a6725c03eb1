"""Fault suite (issue 13 §3): every graph of every family, run by ``ragplan.eval`` against a local endpoint that
injects 429 with Retry-After, 500, 503, hangs past the client's timeout and malformed 200 bodies.

* recoverable faults (each request faulted at most once), all kinds mixed, over every graph in
  langgraph.json: every question finishes, none lost or duplicated, every injected fault was retried,
  and the run ends well within its deadline;
* persistent faults (every attempt faulted): each kind on one graph, and a 503 on every family's main
  graph: every question fails with ``llm_error`` and a reason naming the fault — none lost, duplicated or
  crashed, and the answer is empty.

The families and their data come from the registry and ``tests/family_data/`` (a new family adds its data
file and is covered). The figures over more runs are ``benchmarks/faults.py``'s.
"""

from __future__ import annotations

import pytest

import ragplan.llm as llm
from ragplan.registry import families, langgraph_graphs
from tests.auto_reply import auto_responder
from tests.fault_injection import KINDS, REASON_WORDS, run_with_faults

GRAPHS = sorted(langgraph_graphs())


@pytest.fixture(autouse=True)
def _fast_and_keyless(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(llm, "BACKOFF_S", 0.02)  # the malformed-reply backoff, kept short in tests


@pytest.fixture(scope="module")
def data(every_family_data):
    """Every family's test data (tests/family_data/<family>.py, built once per session)."""
    return every_family_data


def _family_of(method: str, data):
    fam = next(f for f in families() if any(g.name == method for g in f.graphs))
    return fam, data[fam.name]


@pytest.mark.parametrize("method", GRAPHS)
def test_recoverable_faults_of_every_kind_leave_every_question_finished(method, data, module_stub, tmp_path):
    fam, d = _family_of(method, data)
    figures, injector = run_with_faults(method, d.eval(method), auto_responder(d.overrides, d.text), tmp_path / "run",
                                        scenario="mixed", kinds=KINDS, rate=0.6, seed=sum(map(ord, method)), stub=module_stub)
    assert figures.injected >= 1
    assert figures.lost == 0 and figures.duplicated == 0 and figures.crashed == 0
    assert figures.finished == figures.questions, figures.errors  # every fault was recoverable, and was recovered
    assert injector.unretried() == [] and figures.retried == figures.faulted == len(injector.faulted)
    assert figures.wall_s < figures.deadline_s


PERSISTENT = [(kind, "single_rag") for kind in KINDS] + [("503", f.graphs[0].name) for f in families()
                                                         if f.graphs[0].name != "single_rag"]


@pytest.mark.parametrize("kind, method", PERSISTENT)
def test_persistent_faults_end_every_question_with_its_reason(kind, method, data, module_stub, tmp_path):
    fam, d = _family_of(method, data)
    figures, injector = run_with_faults(method, d.eval(method), auto_responder(d.overrides, d.text), tmp_path / "run",
                                        scenario=f"persistent {kind}", kinds=(kind,), persistent=True, stub=module_stub)
    assert figures.lost == 0 and figures.duplicated == 0 and figures.crashed == 0 and figures.failed_without_reason == 0
    assert figures.finished == 0 and figures.failed_with_reason == figures.questions
    for error in figures.errors:
        assert "LLM request failed" in error and any(w in error.lower() for w in REASON_WORDS[kind]), error
    assert injector.unretried() == []  # the client (5xx, 429, timeouts) or ragplan (malformed) tried again first
    assert figures.wall_s < figures.deadline_s


def _answer_paths():
    """Each family's main graph on its usual path, and on its loop path (which ends in the fallback answer node)."""
    out = []
    for fam in families():
        out.append((fam.graphs[0].name, fam.name, False))
        out.append((fam.graphs[0].name, fam.name, True))
    return out


@pytest.mark.parametrize("method, family, loop", _answer_paths())
def test_a_failed_answer_call_ends_with_llm_error_and_its_reason(method, family, loop, data, serve):
    """The last LLM call of a run is its answer (PlanRAG's answer, Think-then-Act's final answer, REAPER's respond,
    FuRePA's and InstructRAG's answers): when it fails, stop_reason is llm_error and error says why (issue 13 §2)."""
    from ragplan.api import ask
    from tests.malformed_corpus import loop_responder
    from tests.openai_server import Fault

    d = data[family]
    if loop and not d.endless:
        pytest.skip(f"{family} has no loop")
    inner = loop_responder(d) if loop else auto_responder(d.overrides, d.text)
    with serve(responder=inner) as stub:
        ok = ask(d.question, method, model="openai:stub-model", base_url=stub.base_url, llm_max_retries=0, **d.api(method))
        n = len(stub.requests)
    assert ok.answer and not ok.error, ok.error
    seen = {"n": 0}

    def fail_last(req):
        seen["n"] += 1
        return Fault(status=400, message="the answer call is refused") if seen["n"] == n else inner(req)

    with serve(responder=fail_last):
        res = ask(d.question, method, model="openai:stub-model", base_url=stub.base_url, llm_max_retries=0, **d.api(method))
    assert len(stub.requests) == n  # nothing after the answer
    assert res.stop_reason == "llm_error" and res.answer == ""
    assert "LLM request failed" in res.error and "the answer call is refused" in res.error
