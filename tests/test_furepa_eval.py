"""``ragplan eval`` with FuRePA through the common runner and the local OpenAI-compatible server: the family's
run-wide check refuses a run before any LLM call (no trained assessor, an index that is not there), and the
summary carries the family's run figures (iterations, repeated-query rate, temperature raises, stop reasons) and
the retrieval-only figures of the executed queries."""

from __future__ import annotations

import json

import pytest

from ragplan.cli import main
from ragplan.methods.furepa.synthetic import write_synthetic
from tests.auto_reply import auto_responder
from tests.openai_server import OpenAIStub


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("RAGPLAN_FUREPA_ASSESSOR", raising=False)


def _eval(stub, data, run, method, *extra):
    return main(["eval", "--method", method, "--benchmark", "hotpotqa", "--data", str(data), "--model", "openai:stub",
                 "--base-url", stub.base_url, "--out", str(run), "--no-progress", "--concurrency", "2", *extra])


def test_eval_furepa_without_an_assessor_is_refused_before_any_llm_call(tmp_path, capsys, offline):
    data = write_synthetic(tmp_path / "syn.jsonl", 4, seed=5)
    with OpenAIStub(responder=lambda req: {"thought": "t", "action": "answer", "queries": [], "answer": "x"}) as stub:
        code = _eval(stub, data, tmp_path / "run", "furepa", "--context-only")
        err = capsys.readouterr().err
        assert code == 2 and "error: assessor_mode 'trained' needs a trained plan assessor" in err
        code = _eval(stub, data, tmp_path / "run2", "furepa", "--context-only", "--set", f"assessor_dir={tmp_path / 'none'}")
        err = capsys.readouterr().err
        assert code == 2 and "error: the plan assessor cannot be loaded" in err
        # the check is the family's, for every family: a local retriever without an index refuses ircot and
        # think_then_act alike
        for method in ("ircot", "think_then_act"):
            code = _eval(stub, data, tmp_path / f"run-{method}", method, "--set", "retriever=local")
            err = capsys.readouterr().err
            assert code == 2 and "--retriever local needs --index DIR" in err, (method, err)
        requests = list(stub.requests)
    assert requests == []  # refused before any question reached the LLM
    for run in ("run", "run2", "run-ircot", "run-think_then_act"):
        res = tmp_path / run / "results.jsonl"
        assert not res.exists() or not res.read_text().strip()


def test_eval_summary_has_furepa_figures_and_the_executed_queries_retrieval(tmp_path, capsys, offline):
    """summary.json/summary.md and `eval report` carry the family's run figures (iterations, repeated-query rate,
    temperature raises), the stop-reason counts, and the support recall/MRR of the executed queries, equal to what
    `ragplan eval retrieval --queries RUN_DIR` computes afterwards."""
    data = write_synthetic(tmp_path / "syn.jsonl", 3, seed=5)
    recs = [json.loads(x) for x in data.read_text().splitlines()]
    first_title = {r["question"]: r["metadata"]["supporting_facts"][0][0] for r in recs}
    stubborn = recs[0]["question"]

    def proposal(req):
        question = req.prompt_text.split("Question: ", 1)[1].split("\n", 1)[0]
        raised = req.body.get("temperature", 0) > 0.2
        if "none yet" in req.prompt_text or not raised:  # the first search, then the same query again (a repeat)
            return {"thought": "t", "action": "search", "queries": [first_title[question], "x"], "answer": ""}
        if question == stubborn:  # a fresh query at the raised temperature; the iteration bound ends the run
            return {"thought": "t", "action": "search", "queries": ["an unrelated query"], "answer": ""}
        return {"thought": "t", "action": "answer", "queries": [], "answer": "somewhere"}

    run = tmp_path / "run"
    with OpenAIStub(responder=auto_responder({"Proposal": proposal, "EvidenceAnswer": {"answer": "x"}})) as stub:
        code = _eval(stub, data, run, "furepa", "--context-only", "--set", "assessor_mode=first",
                     "--set", "repeat_similarity=1.0", "--set", "max_iterations=3")
        assert code == 0, capsys.readouterr().err
    s = json.loads((run / "summary.json").read_text())
    assert s["run_metrics"] == ["iterations", "repeated_query_rate", "temperature_raises"]
    o = s["overall"]
    assert (o["iterations"], o["repeated_query_rate"], o["temperature_raises"]) == (3.0, round((0.5 + 0.5 + 1 / 3) / 3, 4), 1.0)
    assert s["stop_reasons"] == {"answered": 2, "max_iterations": 1}
    assert s["cost"]["per_question_llm_calls"] == round((3 + 3 + 4) / 3, 2)  # the stubborn one asks the answer step too
    support = ["support_recall@2", "support_recall@5", "support_mrr"]
    assert all(m in s["metrics"] for m in support) and o["support_mrr"] > 0
    assert all(s["groups"]["type"][t]["iterations"] == 3.0 for t in s["groups"]["type"])  # per group too
    md = (run / "summary.md").read_text()
    assert "| iterations | repeated_query_rate | temperature_raises |" in md and "support_mrr" in md
    assert "Stop reasons: answered 2, max_iterations 1" in md
    capsys.readouterr()
    # the same figures as retrieval-only evaluation of the run's executed queries, afterwards
    assert main(["eval", "retrieval", "--benchmark", "hotpotqa", "--data", str(data), "--context-only", "-k", "2,5",
                 "--queries", str(run), "--out", str(tmp_path / "ret.json"), "--no-progress"]) == 0, capsys.readouterr().err
    ret = json.loads((tmp_path / "ret.json").read_text())["overall"]
    assert (o["support_recall@2"], o["support_recall@5"], o["support_mrr"]) == (
        ret["recall@2"], ret["recall@5"], ret["mrr"])
    capsys.readouterr()
    assert main(["eval", "report", str(run)]) == 0
    table = capsys.readouterr().out
    head, row = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[:3:2]]
    cols = dict(zip(head, row))
    assert (cols["iterations"], cols["temperature_raises"], cols["repeated_query_rate"]) == ("3.000", "1.000", "0.444")
    assert cols["support_mrr"] == f"{o['support_mrr']:.3f}"


def test_support_figures_need_a_local_index_and_never_cost_a_grade(tmp_path):
    """Without a local index there are no support figures; an index that fails to open is recorded per question
    (support_error) and the question keeps its EM/F1; a question whose method ran no query scores 0."""
    from ragplan.eval.benchmarks.textqa import TextQABenchmark
    from tests.test_datasets import HOTPOT, write_json

    data = write_json(tmp_path / "hotpot_dev_distractor_v1.json", HOTPOT)
    bench = TextQABenchmark("hotpotqa", str(data))
    assert bench.prepare(tmp_path, {"retriever": "wiki"}) == {} and "support_mrr" not in bench.metrics
    item = bench.items()[0]
    assert "support_mrr" not in bench.grade(item, {"answer": item.gold, "executed_queries": ["x"]})
    bench.prepare(tmp_path, {"retriever": "local", "index_dir": str(tmp_path / "missing")})
    assert bench.metrics[-3:] == ("support_recall@2", "support_recall@5", "support_mrr")
    graded = bench.grade(item, {"answer": item.gold, "executed_queries": ["Ed Wood"]})
    assert graded["em"] == 1.0 and graded["correct"] and graded["support_mrr"] is None
    assert "missing" in graded["support_error"]
    none_run = bench.grade(item, {"answer": "x", "executed_queries": []})  # nothing searched: nothing retrieved
    assert (none_run["support_recall@5"], none_run["support_mrr"]) == (0.0, 0.0) and "support_error" not in none_run
    assert bench.grade(item, {"answer": "x"})["support_mrr"] is None  # queries not given: not graded
