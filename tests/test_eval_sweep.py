"""`ragplan eval sweep` (issue 9 §4): Think-then-Act's Figure 3/4 as one command, resumable, any setting.

A HotpotQA file the test writes (published format), the local index of its own paragraphs (--context-only,
real Sentence-BERT + FAISS), and the OpenAI-compatible stub as the LLM: each question states its own
confidence β, and answers right only with retrieved context, so EM and the retrieval ratio at β′ are known.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragplan.cli import main
from ragplan.eval.sweep import SweepError, check_sweep_setting, parse_sweep, sweep_run_dir
from ragplan.nodes.think_then_act.answer_subquery import ShortAnswer
from ragplan.nodes.think_then_act.assess_query import QueryAssessment
from ragplan.nodes.think_then_act.confidence_gate import Confidence
from tests.openai_server import OpenAIStub
from tests.test_datasets import write_json

BETAS = (0.1, 0.3, 0.6, 0.9)
LEVELS = ("hard", "easy", "medium", "easy")


def _hotpot() -> list[dict]:
    """Four HotpotQA distractor records (the published fields), one fact each."""
    facts = [("Lake Orvan", "Lake Orvan is the deepest lake in Veltria.", "What is the deepest lake in Veltria?"),
             ("Mira Tolsen", "Mira Tolsen wrote the novel Grey Harbour.", "Who wrote the novel Grey Harbour?"),
             ("Castell Bridge", "Castell Bridge spans the river Aun.", "Which river does Castell Bridge span?"),
             ("Dovan Prize", "The Dovan Prize is awarded in the city of Keth.", "In which city is the Dovan Prize awarded?")]
    answers = ["Lake Orvan", "Mira Tolsen", "Aun", "Keth"]
    return [{"_id": f"q{i}", "question": q, "answer": a, "type": "bridge", "level": LEVELS[i],
             "supporting_facts": [[t, 0]], "context": [[t, [s]], ["Filler", ["Nothing here is relevant."]]]}
            for i, ((t, s, q), a) in enumerate(zip(facts, answers))]


def _agent(records):
    beta = {r["question"]: b for r, b in zip(records, BETAS)}
    gold = {r["question"]: r["answer"] for r in records}

    def respond(req):
        text, tool = req.prompt_text, req.forced_tool
        q = next(q for q in gold if q in text)
        if tool == "QueryAssessment":
            return QueryAssessment(category="CLEAR AND COMPLETE", reason="one fact")
        if tool == "Confidence":
            return Confidence(probability=beta[q], reason="stated")
        return ShortAnswer(answer=gold[q] if "Context:" in text else "I do not know")

    return respond


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _sweep(data: Path, out: Path, stub: OpenAIStub, *extra: str) -> int:
    return main(["eval", "sweep", "--method", "think_then_act", "--benchmark", "hotpotqa", "--data", str(data),
                 "--sweep", "beta_threshold=0,0.25,0.5,0.75,1", "--context-only", "--model", "openai:stub-model",
                 "--base-url", stub.base_url, "--concurrency", "2", "--out", str(out), "--no-progress", *extra])


def test_sweep_beta_threshold_draws_figure_3_and_resumes(tmp_path, capsys):
    records = _hotpot()
    data = write_json(tmp_path / "hotpot_dev_distractor_v1.json", records)
    out = tmp_path / "sweep"
    with OpenAIStub(responder=_agent(records)) as stub:
        assert _sweep(data, out, stub) == 0
    printed = capsys.readouterr().out
    result = json.loads((out / "sweep.json").read_text())
    assert result["key"] == "beta_threshold" and result["values"] == [0, 0.25, 0.5, 0.75, 1]
    # β′ = v retrieves for the questions whose β < v (none at 0, all at 1); only those are answered right
    expected = [0.0, 0.25, 0.5, 0.75, 1.0]
    assert [r["overall"]["retrieval_ratio"] for r in result["rows"]] == expected
    assert [r["overall"]["em"] for r in result["rows"]] == expected
    assert [r["overall"]["f1"] for r in result["rows"]] == expected
    assert result["figure_metrics"] == ["em", "f1", "retrieval_ratio"]
    for v in (0, 0.25, 0.5, 0.75, 1):
        run = sweep_run_dir(out, "beta_threshold", v)
        assert json.loads((run / "settings.json").read_text())["context"] == {"beta_threshold": v}
        assert len((run / "results.jsonl").read_text().splitlines()) == 4 and (run / "plot.png").is_file()
    assert (out / "sweep.png").stat().st_size > 1000
    md = (out / "sweep.md").read_text()
    assert "| beta_threshold | questions | accuracy | em | f1 |" in md and "| 0.5 | 4 | 50.0% | 0.500 | 0.500 |" in md
    assert "sweep folder:" in printed and "| 0.75 | 4 | 75.0% | 0.750 | 0.750 |" in printed
    # the run's summary tables are in reading order
    summary = json.loads((sweep_run_dir(out, "beta_threshold", 1) / "summary.json").read_text())
    assert list(summary["groups"]["level"]) == ["easy", "medium", "hard"] and summary["plot_metrics"] == ["em", "f1"]

    # an unfinished sweep: one run lost its last three questions, another was never started
    half = sweep_run_dir(out, "beta_threshold", 0.5) / "results.jsonl"
    half.write_text(half.read_text().splitlines(keepends=True)[0])
    last = sweep_run_dir(out, "beta_threshold", 1)
    for f in sorted(last.rglob("*"), reverse=True):
        f.unlink() if f.is_file() else f.rmdir()
    last.rmdir()
    with OpenAIStub(responder=_agent(records)) as stub:
        assert _sweep(data, out, stub) == 0
        assessed = [r for r in stub.requests if r.forced_tool == "QueryAssessment"]
    assert len(assessed) == 3 + 4  # only the unfinished questions ran
    again = json.loads((out / "sweep.json").read_text())
    assert [r["overall"]["em"] for r in again["rows"]] == expected
    assert "resuming (1 question(s) finished)" in capsys.readouterr().err

    # the same folder with other settings is refused, naming what differs; nothing runs
    with OpenAIStub(responder=_agent(records)) as stub:
        assert _sweep(data, out, stub, "--limit", "2") == 2
        assert stub.requests == []
    assert "holds a run with other settings: limit (None there, 2 now)" in capsys.readouterr().err


def test_sweep_refuses_bad_input(tmp_path, capsys):
    data = write_json(tmp_path / "h.json", _hotpot())
    base = ["eval", "sweep", "--method", "think_then_act", "--benchmark", "hotpotqa", "--data", str(data),
            "--model", "openai:stub-model", "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "s")]
    assert main(base + ["--sweep", "beta=0,1"]) == 2
    assert "--sweep beta: not a setting of think_then_act" in capsys.readouterr().err
    assert main(base + ["--sweep", "beta_threshold=0,high"]) == 2
    assert "'high' is not a valid value" in capsys.readouterr().err
    assert main(base + ["--sweep", "beta_threshold=0,0.5,0.5"]) == 2
    assert "given twice" in capsys.readouterr().err
    assert main(base) == 2 and "missing --sweep" in capsys.readouterr().err
    # the other settings are checked too, before anything runs, in sweep, eval and compare alike
    assert main(base + ["--sweep", "beta_threshold=0,1", "--set", "top_sentences=many"]) == 2
    assert "--set top_sentences='many': Input should be a valid integer" in capsys.readouterr().err
    assert main(["eval", *base[2:-2], "--set", "top_sentences=-3", "--out", str(tmp_path / "e")]) == 2
    assert "--set top_sentences=-3: must not be negative" in capsys.readouterr().err
    assert main(["compare", "--methods", "think_then_act,cot", *base[4:-2], "--set", "beta_threshold=high",
                 "--out", str(tmp_path / "c")]) == 2
    assert "--set beta_threshold='high'" in capsys.readouterr().err
    assert not (tmp_path / "e").exists() and not (tmp_path / "c").exists()
    assert main(base + ["--sweep", "beta_threshold=0,1", "--set", "beta_threshold=0.3"]) == 2
    assert "both set beta_threshold" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:  # --sweep is a flag of the `eval sweep` sub-command only
        main(["eval", "--method", "standard", "--benchmark", "hotpotqa", "--data", str(data), "--sweep", "beta_threshold=0,1"])
    assert e.value.code == 2 and "usage: ragplan eval" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_sweep_is_generic():
    assert parse_sweep("max_replans=0,1,3") == ("max_replans", [0, 1, 3])
    assert parse_sweep("gate_mode=confidence,direct") == ("gate_mode", ["confidence", "direct"])
    check_sweep_setting("planrag", "max_replans", [0, 1, 3])
    check_sweep_setting("reaper", "max_plan_repairs", [0, 1])
    check_sweep_setting("think_then_act", "gate_mode", ["confidence", "direct"])
    with pytest.raises(SweepError, match="not a valid value"):
        check_sweep_setting("planrag", "max_replans", [0.5])
    with pytest.raises(SweepError, match="SETTING=V1"):
        parse_sweep("beta_threshold")
