"""Failures inside Think-then-Act's parallel sub-query branches reach the parent state (regression, issue 8).

A 429 or a dead endpoint in a branch used to end the run with ``stop_reason="no_answer"`` and no error, so
the runner's rate-limit retry never fired and ``final_answer`` called the dead endpoint again.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from ragplan.api import ask
from ragplan.eval.runner import RunSettings, evaluate
from ragplan.nodes.think_then_act.answer_subquery import ShortAnswer
from ragplan.nodes.think_then_act.assess_query import QueryAssessment
from ragplan.nodes.think_then_act.confidence_gate import Confidence
from tests.openai_server import Fault, OpenAIStub
from tests.test_datasets import HOTPOT, write_json

AMBIGUOUS = QueryAssessment(category="AMBIGUOUS", reason="two facts",
                            sub_queries=["Who directed Alien?", "Who directed Blade Runner?"])


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.mark.parametrize("failing", ["Confidence", "ShortAnswer"])
def test_rate_limit_in_a_branch_ends_the_run_as_llm_error(failing):
    """Both branches of the wave hit 429 (after the client's own retry); the run stops without final_answer."""
    def respond(req):
        tool = req.forced_tool
        if tool == "QueryAssessment":
            return AMBIGUOUS
        if tool == failing:
            return Fault(status=429, message="rate limited")
        return Confidence(probability=0.9, reason="known") if tool == "Confidence" else ShortAnswer(answer="Ridley Scott")

    with OpenAIStub(responder=respond) as stub:
        res = ask("Did the same person direct Alien and Blade Runner?", "think_then_act", model="openai:stub-model",
                  base_url=stub.base_url, llm_max_retries=1, retriever="wiki")
    assert res.stop_reason == "llm_error" and res.answer == ""
    assert "429" in res.error and "sub-query 1" in res.error and "sub-query 2" in res.error
    assert len(res.failures) == 2 and {f.kind for f in res.failures} == {"llm_error"}
    tools = [r.forced_tool for r in stub.requests]
    assert tools.count("QueryAssessment") == 1 and tools.count(failing) == 4  # 2 branches × (1 + 1 client retry)
    assert "ShortAnswer" not in tools or failing == "ShortAnswer"  # no answer after a dead gate
    assert len([t for t in tools if t == "ShortAnswer"]) <= 4  # no final_answer composition after the failure


def test_dead_endpoint_in_a_branch_is_not_called_again():
    """The endpoint dies after the assessment: each branch fails once at its gate; final_answer makes no call."""
    state = {"n": 0}

    def respond(req):
        state["n"] += 1
        return AMBIGUOUS if req.forced_tool == "QueryAssessment" else Fault(status=503, message="down")

    with OpenAIStub(responder=respond) as stub:
        res = ask("Did the same person direct Alien and Blade Runner?", "think_then_act", model="openai:stub-model",
                  base_url=stub.base_url, llm_max_retries=0, retriever="wiki")
    assert res.stop_reason == "llm_error" and "503" in res.error
    assert len(stub.requests) == 3  # assessment + one gate per branch


def test_unparseable_branch_reply_is_recorded_and_the_run_still_answers():
    """A branch whose answer does not parse is recorded in error; the other sub-answer is still composed."""
    def respond(req):
        tool, text = req.forced_tool, req.prompt_text
        if tool == "QueryAssessment":
            return AMBIGUOUS
        if tool == "Confidence":
            return Confidence(probability=0.9, reason="known")
        if tool == "ShortAnswer" and "Question: Who directed Blade Runner?" in text:
            return "this is not JSON"
        return ShortAnswer(answer="Ridley Scott")

    with OpenAIStub(responder=respond) as stub:
        res = ask("Did the same person direct Alien and Blade Runner?", "think_then_act", model="openai:stub-model",
                  base_url=stub.base_url, llm_max_retries=0, max_repairs=0, retriever="wiki")
    assert res.answer == "Ridley Scott" and res.stop_reason == "answered"
    assert "answer_subquery (sub-query 2)" in res.error and [f.kind for f in res.failures] == ["llm_unparseable"]


def test_runner_retries_a_question_whose_branch_was_rate_limited(tmp_path):
    """The rate-limited question is re-run by the runner (attempts 2) and then graded correct."""
    record = HOTPOT[0]
    data = write_json(tmp_path / "hotpot.json", [record])
    calls = {"gate": 0}

    def respond(req):
        tool = req.forced_tool
        if tool == "QueryAssessment":
            return QueryAssessment(category="AMBIGUOUS", reason="two people",
                                   sub_queries=["What nationality was Scott Derrickson?", "What nationality was Ed Wood?"])
        if tool == "Confidence":
            calls["gate"] += 1
            return Fault(status=429, message="slow down") if calls["gate"] <= 2 else Confidence(probability=0.9, reason="k")
        return ShortAnswer(answer="yes")

    with OpenAIStub(responder=respond) as stub:
        settings = RunSettings(method="think_then_act", benchmark="hotpotqa", data=str(data), model="openai:stub-model",
                               base_url=stub.base_url, context={"llm_max_retries": 0, "retriever": "wiki"},
                               backoff_s=0.01, concurrency=1)
        summary = asyncio.run(evaluate(settings, tmp_path / "run"))
    (rec,) = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert rec["attempts"] == 2 and rec["error"] == "" and rec["answer"] == "yes" and rec["correct"]
    assert summary["overall"]["errors"] == 0
