"""``ragplan eval`` with FuRePA through the common runner and the local OpenAI-compatible server: the family's
run-wide check refuses a run before any LLM call (no trained assessor, an index that is not there), and the
summary carries the family's run figures (iterations, repeated-query rate, temperature raises, stop reasons) and
the retrieval-only figures of the executed queries."""

from __future__ import annotations

import json

import pytest

from ragplan.cli import main
from ragplan.training.furepa.synthetic import write_synthetic
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
