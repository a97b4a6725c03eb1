"""`ragplan eval --method think_then_act --benchmark hotpotqa --context-only` end to end, fully offline.

The local OpenAI-compatible stub plays the LLM (by the schema each request forces); the index is built
for real from the questions' own context paragraphs (Sentence-BERT + FAISS); grading is EM/F1.
"""

from __future__ import annotations

import json

from ragplan.cli import main
from ragplan.nodes.think_then_act.answer_subquery import ShortAnswer
from ragplan.nodes.think_then_act.assess_query import QueryAssessment
from ragplan.nodes.think_then_act.confidence_gate import Confidence
from tests.openai_server import OpenAIStub
from tests.test_datasets import HOTPOT, write_json


def hotpot_agent(records):
    golds = {r["question"]: r["answer"] for r in records}

    def respond(req):
        text = req.prompt_text
        tool = req.forced_tool
        if tool == "QueryAssessment":
            return QueryAssessment(category="CLEAR AND COMPLETE", reason="one fact")
        if tool == "Confidence":
            return Confidence(probability=0.1, reason="obscure")
        question = next(q for q in golds if q in text)
        return ShortAnswer(answer=golds[question] if "Context:" in text else "no idea")

    return respond


def test_think_then_act_on_hotpotqa_context_only(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = write_json(tmp_path / "hotpot_dev_distractor_v1.json", HOTPOT)
    run = tmp_path / "run"
    with OpenAIStub(responder=hotpot_agent(HOTPOT)) as stub:
        code = main(["eval", "--method", "think_then_act", "--benchmark", "hotpotqa", "--data", str(data),
                     "--context-only", "--model", "openai:stub-model", "--base-url", stub.base_url,
                     "--out", str(run), "--no-progress"])
    assert code == 0
    recs = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert len(recs) == len(HOTPOT)
    for r in recs:
        assert r["correct"] and r["em"] == 1.0 and r["f1"] == 1.0
        assert r["retrieval_ratio"] == 1.0 and r["retrievals"] == 1 and r["assessment"] == "CLEAR AND COMPLETE"
        evidence = r["queries"][0]["evidence"]
        assert len(evidence) == 3 and all(e["source"] == "local" for e in evidence)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["overall"]["em"] == 1.0 and summary["overall"]["retrieval_ratio"] == 1.0
    assert (run / "context_index").is_dir()
    out = capsys.readouterr().out
    assert "think_then_act on hotpotqa" in out and "| em" in out


def test_ask_think_then_act_prints_gate_evidence_and_ratio(tmp_path, capsys, monkeypatch):
    from ragplan.tools.textindex import build_index

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    src = tmp_path / "p.jsonl"
    src.write_text(json.dumps({"id": "1", "title": "Canberra", "contents": "Canberra is the capital city of Australia."}) + "\n"
                   + json.dumps({"id": "2", "title": "Everest", "contents": "Mount Everest is the highest mountain."}) + "\n")
    build_index(src, tmp_path / "idx", progress=False)
    q = "What is the capital of Australia?"
    with OpenAIStub(responder=hotpot_agent([{"question": q, "answer": "Canberra"}])) as stub:
        code = main(["ask", "--method", "think_then_act", "--question", q, "--retriever", "local", "--index",
                     str(tmp_path / "idx"), "--model", "openai:stub-model", "--base-url", stub.base_url])
    assert code == 0
    out = capsys.readouterr().out
    assert "Assessment: CLEAR AND COMPLETE" in out and "Gate: RETRIEVAL: β = 0.10 < β′ = 0.5" in out
    assert "Evidence (" in out and "Canberra is the capital city of Australia." in out
    assert "Answer: Canberra" in out and "Retrieval ratio: 1.00" in out


def test_every_retrieval_failing_is_reported_as_failure(tmp_path, capsys, monkeypatch):
    """A Wikipedia endpoint that refuses every connection: every retrieval fails; the ratio is 0 and the failures are
    counted. (An index that cannot be opened is refused before the run: the family's run-wide check.)"""
    from ragplan.tools import wikipedia

    class QuickRetries(wikipedia.WikipediaClient):  # every retry still made, 0.01 s apart instead of 1, 2 and 4 s
        def __init__(self, *args, **kw):
            super().__init__(*args, **{"backoff_s": 0.01, **kw})

    monkeypatch.setattr(wikipedia, "WikipediaClient", QuickRetries)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = write_json(tmp_path / "hotpot_dev_distractor_v1.json", HOTPOT)
    run = tmp_path / "run"
    with OpenAIStub(responder=hotpot_agent(HOTPOT)) as stub:
        code = main(["eval", "--method", "think_then_act", "--benchmark", "hotpotqa", "--data", str(data),
                     "--set", "retriever=local", "--set", f"index_dir={tmp_path / 'no-such-index'}",
                     "--model", "openai:stub-model", "--base-url", stub.base_url, "--out", str(tmp_path / "refused"),
                     "--no-progress"])
        assert code == 2 and "the local index cannot be opened" in capsys.readouterr().err and not stub.requests
        code = main(["eval", "--method", "think_then_act", "--benchmark", "hotpotqa", "--data", str(data),
                     "--set", "retriever=wiki", "--set", "wiki_api_url=http://127.0.0.1:9/w/api.php",
                     "--set", f"wiki_cache_dir={tmp_path / 'wiki-cache'}",
                     "--model", "openai:stub-model", "--base-url", stub.base_url, "--out", str(run), "--no-progress"])
    assert code == 0
    assert "--context-only retrieves from the questions' own paragraphs" in capsys.readouterr().err  # (the way offline)
    recs = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert all(r["retrievals"] == 1 and r["retrieval_errors"] == 1 and r["retrieval_ratio"] == 0.0 for r in recs)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["overall"]["retrieval_ratio"] == 0.0 and summary["overall"]["retrieval_errors"] == 1.0
    assert summary["retrieval_totals"] == {"retrievals": 2, "retrieval_errors": 2, "questions_retrieving": 2,
                                           "questions_all_failed": 2}
    md = (run / "summary.md").read_text()
    assert "Retrievals: 2 run, 2 failed" in md and "| 2 | 0 (0.0%) |" in md


def test_fever_searches_the_claim_and_answers_with_the_labels(tmp_path, monkeypatch):
    from tests.test_datasets import FEVER, write_jsonl

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = write_jsonl(tmp_path / "paper_dev.jsonl", FEVER[:2])
    src = tmp_path / "p.jsonl"
    src.write_text(json.dumps({"id": "1", "title": "Roman Atwood", "contents": "Roman Atwood is an American vlogger.",
                               "sentences": ["Roman Atwood is an American vlogger."]}) + "\n")
    from ragplan.tools.textindex import build_index

    build_index(src, tmp_path / "idx", progress=False)

    def respond(req):
        if req.forced_tool == "QueryAssessment":
            return QueryAssessment(category="CLEAR AND COMPLETE", reason="one fact")
        if req.forced_tool == "Confidence":
            return Confidence(probability=0.1, reason="obscure")
        return ShortAnswer(answer="The evidence refutes the claim." if "content creator" in req.prompt_text
                           else "SUPPORTS")

    run = tmp_path / "run"
    with OpenAIStub(responder=respond) as stub:
        code = main(["eval", "--method", "think_then_act", "--benchmark", "fever", "--data", str(data),
                     "--set", "retriever=local", "--set", f"index_dir={tmp_path / 'idx'}", "--model", "openai:stub-model",
                     "--base-url", stub.base_url, "--out", str(run), "--no-progress"])
        prompts = [r.prompt_text for r in stub.requests]
    assert code == 0
    recs = {r["id"]: r for r in map(json.loads, (run / "results.jsonl").read_text().splitlines())}
    atwood = recs["150448"]
    assert atwood["question"] == "Roman Atwood is a content creator."
    assert atwood["executed_queries"] == ["Roman Atwood is a content creator."]           # the claim, nothing else
    assert (atwood["label"], atwood["predicted_label"], atwood["label_acc"], atwood["correct"], atwood["em"]) == (
        "REFUTES", "REFUTES", 1.0, True, 0.0)
    assert recs["75397"]["em"] == 1.0 and recs["75397"]["correct"]
    answer_prompts = [p for p in prompts if "Instructions: This is a claim to verify" in p]
    assert len(answer_prompts) >= 2
    assert atwood["queries"][0]["evidence"][0]["sentence_index"] == 0                    # given sentences kept
