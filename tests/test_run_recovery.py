"""Kill/resume suite (issue 13 §3): a real ``ragplan eval`` process (forked with its imports done:
tests/ragplan_process.py) killed with SIGKILL at several points (the endpoint holds every request from there on) —
before any answer, mid-run, with a torn last line, twice in a row — then resumed: no question lost, none
duplicated, none asked again once finished, and the summary counts every question once. Also: ``--resume`` keeps the run's
own settings unless a flag is given, and refuses flags that would change what it measures.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from ragplan.cli import main
from ragplan.methods.planrag.generate import generate_clone
from ragplan.eval.runfolder import RunFolder, RunSettings
from tests import ragplan_process
from tests.auto_reply import auto_responder
from tests.openai_server import Fault, OpenAIStub
from tests.ragplan_process import RagplanProcess

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


# ------------------------------------------------------------------------------------------ resume settings

def _saved_run(tmp_path: Path, **kw: Any) -> Path:
    run = tmp_path / "run"
    RunFolder(run).save_settings(RunSettings(method="planrag", benchmark="dqa-locating", data=str(tmp_path / "clone"),
                                             model="openai:m", base_url="http://127.0.0.1:9/v1", **kw))
    return run


def _resumed_settings(monkeypatch, argv: list[str]) -> tuple[int, RunSettings | None]:
    """Run ``ragplan eval --resume …`` up to the point the runner would start; return the settings it would run."""
    seen: dict[str, RunSettings] = {}

    def fake_run(settings: RunSettings, run_dir: Any, **kw: Any) -> dict[str, Any]:
        seen["s"] = settings
        raise SystemExit(0)

    monkeypatch.setattr("ragplan.eval.runner.run_evaluation", fake_run)
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, seen.get("s")


def test_resume_keeps_the_runs_settings_unless_a_flag_is_given(tmp_path, monkeypatch):
    run = _saved_run(tmp_path, concurrency=7, item_timeout_s=33.0, limit=5, context={"max_steps": 3})
    code, s = _resumed_settings(monkeypatch, ["eval", "--resume", str(run), "--no-progress"])
    assert code == 0 and s is not None
    assert (s.concurrency, s.item_timeout_s, s.limit, s.base_url) == (7, 33.0, 5, "http://127.0.0.1:9/v1")
    assert s.context == {"max_steps": 3}
    code, s = _resumed_settings(monkeypatch, ["eval", "--resume", str(run), "--concurrency", "2", "--item-timeout", "9",
                                              "--base-url", "http://127.0.0.1:8/v1", "--limit", "6",
                                              "--set", "max_steps=3", "--no-progress"])
    assert code == 0 and s is not None
    assert (s.concurrency, s.item_timeout_s, s.limit, s.base_url) == (2, 9.0, 6, "http://127.0.0.1:8/v1")


@pytest.mark.parametrize("flags, named", [(["--method", "iter_rag"], "--method"), (["--model", "openai:other"], "--model"),
                                          (["--set", "max_steps=4"], "--set max_steps"),
                                          (["--benchmark", "dqa-building"], "--benchmark")])
def test_resume_refuses_a_flag_that_changes_what_the_run_measures(tmp_path, monkeypatch, capsys, flags, named):
    run = _saved_run(tmp_path, context={"max_steps": 3})
    code, s = _resumed_settings(monkeypatch, ["eval", "--resume", str(run), *flags, "--no-progress"])
    assert code == 2 and s is None
    err = capsys.readouterr().err
    assert named in err and "would change what the run measures" in err


# ------------------------------------------------------------------------------------------ kill -9 and resume

N = 8


def _responder(results: Path, hold: dict[str, float]):
    """Every PlanRAG request answered from its schema (one retrieval per question); once ``results`` has
    ``hold["lines"]`` lines, every request is held instead (for minutes), so a kill lands at that point of the run
    however fast or slow the machine."""
    inner = auto_responder({"Plan": {"steps": ["Count the trade nodes"]},
                            "RetrievalAction": lambda r: ({"thought": "enough", "action": "finish", "action_input": ""}
                                                          if "\nObservation" in r.prompt_text else
                                                          {"thought": "count", "action": "graph_db",
                                                           "action_input": "MATCH (t:Trade_node) RETURN count(t) AS n"}),
                            "ReplanDecision": {"replan": False, "reason": "fine"}})

    def respond(req):
        reply = inner(req)
        return Fault(delay_s=600, reply=reply) if _lines(results) >= hold["lines"] else reply

    return respond


def _start(*args: str) -> RagplanProcess:
    """``ragplan ARGS`` as a process of its own (forked with its imports done), without an API key."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    return ragplan_process.start(list(args), ROOT, env)


def _eval(run: Path, clone: Path, stub: OpenAIStub, concurrency: int, *extra: str) -> RagplanProcess:
    return _start("eval", "--method", "planrag", "--benchmark", "dqa-locating", "--data", str(clone),
                  "--model", "openai:stub-model", "--base-url", stub.base_url, "--concurrency", str(concurrency),
                  "--out", str(run), "--no-progress", *extra)


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def _kill_when(proc: RagplanProcess, ready: Any, timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and not ready():
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.mark.parametrize("point", ["before_any_answer", "mid_run_torn_line", "twice"])
def test_kill_minus_9_then_resume_loses_and_duplicates_nothing(tmp_path, point):
    clone = tmp_path / "clone"
    generate_clone(clone, "locating", N, seed=13)
    run = tmp_path / "run"
    results = run / "results.jsonl"
    hold = {"lines": 0 if point == "before_any_answer" else 3}  # (requests held from then on, until the kill)
    with OpenAIStub(responder=_responder(results, hold)) as stub:
        proc = _eval(run, clone, stub, concurrency=2)
        if point == "before_any_answer":  # killed while the first questions are in flight
            _kill_when(proc, lambda: len(stub.requests) >= 2)
            assert _lines(results) == 0
        else:
            _kill_when(proc, lambda: _lines(results) >= 3)
            assert 3 <= _lines(results) < N
        if point == "mid_run_torn_line":
            with open(results, "ab") as fh:  # the kill landed in the middle of a write
                fh.write(b'{"id": "locating-9", "answer": "no')
        if point == "twice":  # killed again during the resume
            before = _lines(results)
            hold["lines"] = before + 2
            proc = _start("eval", "--resume", str(run), "--no-progress")
            _kill_when(proc, lambda: _lines(results) >= before + 2)
        finished_before = {json.loads(x)["id"] for x in results.read_bytes().splitlines() if x.endswith(b"}")} \
            if results.exists() else set()
        hold["lines"] = float("inf")
        assert main(["eval", "--resume", str(run), "--no-progress"]) == 0
    recs = [json.loads(x) for x in results.read_text().splitlines()]
    ids = [r["id"] for r in recs]
    assert len(ids) == N and len(set(ids)) == N  # 0 lost, 0 duplicated
    summary = json.loads((run / "summary.json").read_text())
    assert summary["overall"]["n"] == N  # the summary counts every question once
    planned = [r for r in stub.requests if r.forced_tool == "Plan"]
    # a question finished before a kill is never asked again: Plan requests = questions + those in flight at kills
    assert len(planned) <= N + 2 * (2 if point == "twice" else 1)
    assert all(r["stop_reason"] != "crash" for r in recs)
    if point == "mid_run_torn_line":
        rejected = (run / "results.rejected.jsonl").read_text()
        assert "locating-9" in rejected
    assert finished_before <= set(ids)
    invocations = (run / "invocations.jsonl").read_text().splitlines()
    assert len(invocations) == (3 if point == "twice" else 2)
    assert summary["cost"]["wall_time_s"] > 0
