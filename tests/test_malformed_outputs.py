"""Malformed-output corpus (issue 13 §3): ≥ 200 distinct bad replies across every LLM decision of every
family (tests/malformed_corpus.py builds them from each decision's schema), sent through the real
``langchain-openai`` client by the local stub, each in two ways:

* **always** — every request of that decision gets the bad reply: the run ends with the failure recorded
  (``stop_reason`` and ``error``) or with an answer the graph could still give (a bounded fallback),
  within a bounded number of requests;
* **once** — only the first request gets it: the repair (the reply shown back with its error, REAPER's
  plan repair) or the graph's own fallback carries the run to an answer.

Never an exception, never an unbounded loop. The family loops (re-plan forever, search forever, never
finish) end at their bounds with an answer.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from ragplan.registry import families, family_of, langgraph_graphs
from tests.auto_reply import auto_responder
from tests.malformed_corpus import Case, cases_for, decision_of, discover, endless_cases, loop_responder
from tests.openai_server import OpenAIStub

MODEL = "openai:stub-model"
MOST_REQUESTS = 80
"""No run may send more requests than this (every loop and repair is bounded well below it)."""


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _graphs(data: dict[str, Any]) -> list[tuple[str, str, Any]]:
    order = {g: i for i, g in enumerate(langgraph_graphs())}
    out = [(spec.name, fam.name, data[fam.name]) for fam in families() for spec in fam.graphs]
    return sorted(out, key=lambda t: order.get(t[0], 10**6))


class Runner:
    """Runs one question of any graph against one local stub whose responder each run sets (graphs compiled and
    contexts prepared once per graph, as a batch would)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.responder: Callable[[Any], Any] = lambda req: ""
        self.stub = OpenAIStub(responder=lambda req: self.responder(req), keep_alive=True).start()  # connections kept
        self._graphs: dict[str, tuple[Any, Any, Any]] = {}

    def _graph(self, method: str, data: Any) -> tuple[Any, Any, Any]:
        if method not in self._graphs:
            fam = family_of(method)
            ctx = fam.make_context(method, model=MODEL, base_url=self.stub.base_url, llm_max_retries=0, **data.api(method))
            assert fam.prepare(method, ctx) is None
            self._graphs[method] = (fam, fam.graph(method).build().compile(name=method), ctx)
        return self._graphs[method]

    def ask(self, method: str, data: Any, responder: Callable[[Any], Any]) -> tuple[Any, list[Any]]:
        """The typed result and the requests of one run (an exception here is a crash)."""
        fam, graph, ctx = self._graph(method, data)
        self.responder = responder
        start = len(self.stub.requests)
        out = graph.invoke(fam.graph_input(data.question), context=ctx,
                           config={"recursion_limit": fam.recursion_limit(ctx)})
        return fam.result.from_state(out, method=method), list(self.stub.requests[start:])


@pytest.fixture(scope="module")
def runner(every_family_data):
    r = Runner(every_family_data)
    yield r
    r.stub.stop()


@pytest.fixture(scope="module")
def corpus(every_family_data, runner) -> list[Case]:
    graphs = _graphs(every_family_data)
    decisions = discover(graphs, lambda m, d, resp: runner.ask(m, d, resp))
    return [c for d in decisions for c in cases_for(d)] + endless_cases(graphs)


def test_the_corpus_covers_every_decision_with_200_distinct_replies(corpus, every_family_data):
    ids = [c.id for c in corpus]
    assert len(ids) == len(set(ids)) >= 200
    decisions = {c.decision for c in corpus}
    # every family's decisions are in: each family contributes cases
    assert {c.family for c in corpus} == {f.name for f in families()}
    for must in ("Plan", "RetrievalAction", "ReplanDecision", "FinalAnswer", "QueryAssessment", "Proposal",
                 "TAODecision", "EvidenceAnswer", "text:reaper", "text:think_then_act"):
        assert must in decisions
    assert sum(1 for c in corpus if c.endless) >= 4


def _responder(case: Case, data: Any, mode: str) -> tuple[Callable[[Any], Any], dict[str, int]]:
    inner = loop_responder(data) if case.endless or case.via_loop else auto_responder(data.overrides, data.text)
    served = {"bad": 0}

    def respond(req: Any) -> Any:
        if (case.endless is None and decision_of(req, case.family) == case.decision
                and (mode == "always" or served["bad"] == 0)):
            served["bad"] += 1
            return case.reply
        return inner(req)

    return respond, served


def _run(case: Case, runner: Runner, mode: str) -> tuple[Any, list[Any], dict[str, int]]:
    data = runner.data[case.family]
    respond, served = _responder(case, data, mode)
    res, requests = runner.ask(case.method, data, respond)  # an exception here is a crash: the test fails
    return res, requests, served


def test_every_bad_reply_always_ends_bounded_with_a_recorded_failure_or_an_answer(corpus, runner):
    problems = []
    for case in corpus:
        if case.endless:
            continue
        try:
            res, requests, served = _run(case, runner, "always")
        except Exception as exc:  # noqa: BLE001 - a crash is what this test looks for
            problems.append(f"{case.method} / {case.id}: crashed: {type(exc).__name__}: {exc}")
            continue
        if served["bad"] == 0:
            problems.append(f"{case.method} / {case.id}: the decision was never asked")
        if len(requests) > MOST_REQUESTS:
            problems.append(f"{case.method} / {case.id}: {len(requests)} requests")
        if res.error and not res.stop_reason:
            problems.append(f"{case.method} / {case.id}: an error without a stop reason: {res.error}")
        if not res.error and not res.answer:
            problems.append(f"{case.method} / {case.id}: neither an answer nor a recorded failure ({res.stop_reason})")
        if res.stop_reason == "crash":
            problems.append(f"{case.method} / {case.id}: recorded as a crash: {res.error}")
    assert not problems, "\n".join(problems)


def test_every_bad_reply_once_is_repaired_or_handled(corpus, runner):
    problems = []
    for case in corpus:
        if case.endless:
            continue
        try:
            res, requests, served = _run(case, runner, "once")
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{case.method} / {case.id}: crashed: {type(exc).__name__}: {exc}")
            continue
        if len(requests) > MOST_REQUESTS:
            problems.append(f"{case.method} / {case.id}: {len(requests)} requests")
        if not res.answer or res.stop_reason == "crash":
            problems.append(f"{case.method} / {case.id}: no answer after one bad reply "
                            f"(stop_reason={res.stop_reason!r}, error={res.error!r})")
    assert not problems, "\n".join(problems)


def test_endless_loops_end_at_their_bounds(corpus, runner):
    problems = []
    for case in [c for c in corpus if c.endless]:
        res, requests, _ = _run(case, runner, "always")
        if len(requests) > MOST_REQUESTS or not res.stop_reason or res.stop_reason == "crash":
            problems.append(f"{case.method}: {len(requests)} requests, stop_reason={res.stop_reason!r}, error={res.error!r}")
        if not res.answer and not res.error:
            problems.append(f"{case.method}: neither an answer nor a recorded failure ({res.stop_reason})")
    assert not problems, "\n".join(problems)
