"""Checkpointed runs (issue 12 §2) and plan review from the command line and the Python API (§1).

* ``ragplan ask`` keeps a SQLite checkpoint per run and prints its thread; ``ragplan resume ID`` answers a
  pending review, continues a killed run from its last finished node, prints a finished one, refuses an
  unknown one. The kill is real: ``ragplan ask`` runs as its own process (forked with its imports done:
  tests/ragplan_process.py) and is SIGKILLed while an LLM request is in flight; the local stub's request log
  proves no finished LLM call is made again.
* The terminal review: a scripted stdin answers ``approve / edit / reject [a/e/r]``; ``e`` opens
  ``$EDITOR`` (a small script the test writes) or reads the plan from stdin without one.
* ``ragplan.api.ask`` with review on and no callback returns ``awaiting_review`` and the thread;
  ``ragplan.api.resume`` continues it.
* The evaluation runner: a question in flight when ``ragplan eval`` is killed continues from its last
  node on ``--resume``; a finished but unrecorded question is graded from its checkpoint.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ragplan.api import ask, resume
from ragplan.checkpoints import UnknownThread, checkpoint_db, default_checkpoint_db
from ragplan.cli import main
from ragplan.nodes.planrag.answer import FinalAnswer
from ragplan.nodes.planrag.plan import Plan
from ragplan.nodes.planrag.replan import ReplanDecision
from ragplan.nodes.planrag.retrieve import RetrievalAction
from ragplan.state.review import AWAITING_REVIEW, PLAN_REJECTED
from tests.data import QUESTION
from tests import ragplan_process
from tests.openai_server import Fault, OpenAIStub
from tests.ragplan_process import RagplanProcess
from tests.scripted import ScriptedChatModel

ROOT = Path(__file__).resolve().parents[1]
MODEL = "openai:stub"
Q = "MATCH (t:Trade_node) RETURN count(t) AS n"


def script() -> list[Any]:
    """One plan step, one query, no re-plan, the answer: four LLM decisions."""
    return [Plan(steps=["Count the trade nodes"]), RetrievalAction(thought="count", action="graph_db", action_input=Q),
            ReplanDecision(replan=False, reason="enough"), FinalAnswer(answer="lubeck", rationale="r")]


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)


def _ask(trade_cql: Path, stub: OpenAIStub, *extra: str) -> int:
    return main(["ask", "--method", "planrag", "--graph", str(trade_cql), "--question", QUESTION, "--model", MODEL,
                 "--base-url", stub.base_url, *extra])


def _thread(out: str) -> str:
    [line] = [ln for ln in out.splitlines() if ln.startswith("Thread: ")]
    return line.split()[1]


def _env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    return env


def _wait_for(pred, timeout: float = 90.0, proc: RagplanProcess | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended early ({proc.returncode}): {proc.stderr.read() if proc.stderr else ''}")
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _kill(proc: RagplanProcess) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def test_checkpoint_file_location(monkeypatch, tmp_path):
    monkeypatch.delenv("RAGPLAN_CHECKPOINT_DB")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_checkpoint_db() == tmp_path / "state" / "ragplan" / "checkpoints.sqlite" == checkpoint_db()
    monkeypatch.setenv("RAGPLAN_CHECKPOINT_DB", str(tmp_path / "env.sqlite"))
    assert checkpoint_db() == tmp_path / "env.sqlite" and checkpoint_db(tmp_path / "x.sqlite") == tmp_path / "x.sqlite"


def test_ask_prints_its_thread_and_a_finished_thread_is_printed_by_resume(trade_cql, capsys):
    with OpenAIStub(replies=script()) as stub:
        assert _ask(trade_cql, stub) == 0
        out = capsys.readouterr().out
        lines = out.splitlines()
        tid = _thread(out)
        assert lines[2] == f"Thread: {tid}  (resume with: ragplan resume {tid})"
        assert main(["resume", tid]) == 0
        out = capsys.readouterr().out
        assert f"Thread {tid} is finished; nothing to run." in out and "Answer: lubeck" in out
        assert len(stub.requests) == 4  # nothing ran again
        assert main(["resume", "--list"]) == 0
        assert f"{tid}  finished" in capsys.readouterr().out
        code = _ask(trade_cql, stub, "--thread", tid)  # a thread holds one run
        assert code == 2 and f"thread {tid} already exists" in capsys.readouterr().err
        assert main(["resume", "no-such-thread"]) == 2
        assert "no run with thread id 'no-such-thread'" in capsys.readouterr().err


def test_a_checkpoint_file_that_cannot_be_used_is_exit_2(trade_cql, tmp_path, capsys):
    bad = tmp_path / "not-a-database.sqlite"
    bad.write_text("this is not SQLite")
    assert main(["ask", "--method", "planrag", "--graph", str(trade_cql), "--question", "q", "--model", MODEL,
                 "--base-url", "http://127.0.0.1:9/v1", "--checkpoint-db", str(bad)]) == 2
    assert f"the checkpoint file {bad} cannot be used" in capsys.readouterr().err
    assert main(["resume", "abc", "--checkpoint-db", str(bad)]) == 2
    assert "cannot be used: file is not a database" in capsys.readouterr().err
    missing = tmp_path / "missing.sqlite"
    for args in (["resume", "abc"], ["resume", "--list"]):
        assert main([*args, "--checkpoint-db", str(missing)]) == 2
        assert f"no checkpoint file at {missing}" in capsys.readouterr().err
    assert not missing.exists()  # reading never creates the file


def test_resume_names_a_checkpoint_store_that_fails_to_read_instead_of_a_traceback(tmp_path, monkeypatch, capsys):
    """Any error reading the store (here an OSError, neither SQLite's nor psycopg's) is exit 2 naming it, as in ask."""
    import ragplan.runs

    db = tmp_path / "runs.sqlite"
    sqlite3.connect(db).close()

    def unreadable(thread_id, checkpoint_db=None):
        raise OSError("I/O error reading the file")

    monkeypatch.setattr(ragplan.runs, "thread_status", unreadable)
    assert main(["resume", "abc", "--checkpoint-db", str(db)]) == 2
    assert f"the checkpoint file {db} cannot be used: I/O error reading the file" in capsys.readouterr().err


def test_resume_does_not_report_a_bug_as_a_store_that_cannot_be_used(tmp_path, monkeypatch, capsys):
    """Only what a bad store raises (SQLite's, psycopg's, OSError, ValueError) is "cannot be used"; a bug surfaces."""
    import ragplan.runs

    db = tmp_path / "runs.sqlite"
    sqlite3.connect(db).close()

    def buggy(thread_id, checkpoint_db=None):
        raise TypeError("a bug in reading the run")

    monkeypatch.setattr(ragplan.runs, "thread_status", buggy)
    with pytest.raises(TypeError, match="a bug in reading the run"):
        main(["resume", "abc", "--checkpoint-db", str(db)])
    assert "cannot be used" not in capsys.readouterr().err


def test_ask_review_edit_in_editor(trade_cql, tmp_path, monkeypatch, capsys):
    seen = tmp_path / "editor-saw.txt"
    editor = tmp_path / "editor.py"
    editor.write_text("import shutil, sys\n"
                      f"shutil.copy(sys.argv[1], {str(seen)!r})\n"
                      "open(sys.argv[1], 'w').write('# my plan\\nCount the trade nodes again\\n')\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    monkeypatch.setattr(sys, "stdin", io.StringIO("e\n"))
    with OpenAIStub(replies=script()) as stub:
        assert _ask(trade_cql, stub, "--review") == 0
    out = capsys.readouterr().out
    assert "Review the plan (planrag):\n  1. Count the trade nodes\napprove / edit / reject [a/e/r]: " in out
    shown = seen.read_text()
    assert shown.startswith("# Edit the plan below") and shown.rstrip().endswith("Count the trade nodes")
    # the header reads whole (an inner quote once ended the f-string early and garbled it)
    assert ('\n# Lines starting with "# " are ignored. Save and quit to continue; an empty plan keeps the one shown.\n'
            in shown)
    assert "Review of the plan: edited\n  1. Count the trade nodes again" in out
    assert "(plan step 1: Count the trade nodes again)" in out and "Answer: lubeck" in out


def test_ask_review_paused_then_resumed_with_an_edit_from_stdin(trade_cql, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # no terminal: the run stays paused
    with OpenAIStub(replies=script()) as stub:
        assert _ask(trade_cql, stub, "--review") == 1
        cap = capsys.readouterr()
        tid = _thread(cap.out)
        assert f"paused for plan review; continue with: ragplan resume {tid}" in cap.err
        assert len(stub.requests) == 1  # the plan only
        monkeypatch.setattr(sys, "stdin", io.StringIO("what\ne\nCount the trade nodes per region\n\n"))
        assert main(["resume", tid]) == 0
        out = capsys.readouterr().out
        assert f"Thread: {tid}  (paused for plan review)" in out
        assert "answer a (approve), e (edit) or r (reject)" in out and "end with an empty line:" in out
        assert "(plan step 1: Count the trade nodes per region)" in out and "Answer: lubeck" in out
        assert [r.forced_tool for r in stub.requests] == ["Plan", "RetrievalAction", "ReplanDecision", "FinalAnswer"]


def test_ask_review_reject_with_a_reason(trade_cql, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO("r\nwrong approach\n"))
    with OpenAIStub(replies=script()) as stub:
        assert main(["ask", "--method", "planrag", "--graph", str(trade_cql), "--question", QUESTION, "--model", MODEL,
                     "--base-url", stub.base_url, "--review", "--json"]) == 1
        assert len(stub.requests) == 1
    res = json.loads(capsys.readouterr().out)
    assert res["stop_reason"] == PLAN_REJECTED and res["answer"] == "" and res["thread_id"]
    assert res["plan_reviews"] == [{"kind": "plan", "round": 1, "action": "reject", "plan": "1. Count the trade nodes",
                                    "edited": "", "reason": "wrong approach", "error": ""}]


@pytest.mark.parametrize("method", ["iter_rag", "think_then_act"])
def test_review_refused_for_graphs_without_a_plan(method, trade_cql, capsys):
    data = ["--graph", str(trade_cql)] if method == "iter_rag" else ["--retriever", "wiki"]
    assert main(["ask", "--method", method, *data, "--question", "q", "--model", MODEL, "--base-url", "http://127.0.0.1:9/v1",
                 "--review"]) == 2
    assert f"--review: {method} writes no plan to review" in capsys.readouterr().err


def test_killed_ask_resumes_without_repeating_finished_llm_calls(trade_cql, tmp_path, capsys):
    db = tmp_path / "killed.sqlite"
    plan, query, replan, answer = script()
    with OpenAIStub(replies=[plan, query, Fault(delay_s=120, reply=replan)]) as stub:
        proc = ragplan_process.start(
            ["ask", "--method", "planrag", "--graph", str(trade_cql), "--question", QUESTION, "--model", MODEL,
             "--base-url", stub.base_url, "--thread", "killed-run", "--checkpoint-db", str(db)], ROOT, _env())
        try:
            _wait_for(lambda: len(stub.requests) == 3, proc=proc)  # the re-plan request is in flight
        finally:
            _kill(proc)
        assert proc.stdout is not None and "Thread: killed-run" in proc.stdout.read()
        stub.add(replan, answer)
        assert main(["resume", "killed-run", "--checkpoint-db", str(db)]) == 0
        out = capsys.readouterr().out
        assert "Thread: killed-run  (continuing from its last finished node)" in out and "Answer: lubeck" in out
        assert [r.forced_tool for r in stub.requests] == ["Plan", "RetrievalAction", "ReplanDecision", "ReplanDecision",
                                                          "FinalAnswer"]  # plan and query made once
        assert main(["resume", "killed-run", "--checkpoint-db", str(db)]) == 0
        assert "is finished" in capsys.readouterr().out and len(stub.requests) == 5


def test_api_review_without_a_callback_pauses_and_resume_continues(trade_cql):
    with OpenAIStub(replies=script()) as stub:
        res = ask(QUESTION, "planrag", model=MODEL, base_url=stub.base_url, store=str(trade_cql), review_plan=True)
        assert res.stop_reason == AWAITING_REVIEW and res.thread_id and res.answer == ""
        assert res.pending_review["kind"] == "plan" and res.pending_review["steps"] == ["Count the trade nodes"]
        again = resume(res.thread_id)  # no decision: still paused, nothing sent
        assert again.stop_reason == AWAITING_REVIEW and len(stub.requests) == 1
        done = resume(res.thread_id, {"action": "edit", "plan": "Count the trade nodes by name"})
        assert done.answer == "lubeck" and done.plan == ["Count the trade nodes by name"] and done.thread_id == res.thread_id
        assert resume(res.thread_id).answer == "lubeck" and len(stub.requests) == 4
    with pytest.raises(UnknownThread):
        resume("nope")
    with pytest.raises(KeyError):
        resume("nope")


def test_api_run_with_a_chat_model_object_needs_it_to_resume(trade_cql, tmp_path):
    m = ScriptedChatModel(replies=script())
    res = ask(QUESTION, "planrag", model=m, store=str(trade_cql), review_plan=True, checkpoint_db=str(tmp_path / "c.sqlite"))
    with pytest.raises(ValueError, match="chat model objects"):
        resume(res.thread_id, "approve", checkpoint_db=str(tmp_path / "c.sqlite"))
    done = resume(res.thread_id, "approve", model=m, checkpoint_db=str(tmp_path / "c.sqlite"))
    assert done.answer == "lubeck" and m.remaining == 0


def test_resume_continues_a_run_killed_after_its_last_step_wrote_and_before_its_checkpoint(trade_cql, tmp_path):
    """A run killed once its last node's writes were saved and before the checkpoint after it was (its last row
    removed here, as that kill leaves it) is unfinished, not finished: resume applies the saved writes and ends,
    asking the model nothing again."""
    from ragplan.runs import thread_status

    db = str(tmp_path / "killed.sqlite")
    m = ScriptedChatModel(replies=script())
    res = ask(QUESTION, "planrag", model=m, store=str(trade_cql), checkpoint_db=db)
    assert res.answer == "lubeck" and m.remaining == 0
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id = (SELECT max(checkpoint_id) "
                     "FROM checkpoints WHERE thread_id = ?)", (res.thread_id, res.thread_id))
    assert thread_status(res.thread_id, db)[1] == "unfinished"
    again = resume(res.thread_id, model=ScriptedChatModel(replies=[]), checkpoint_db=db)
    assert again.answer == "lubeck" and thread_status(res.thread_id, db)[1] == "finished"


def test_checkpointed_state_reads_back_the_typed_objects(trade_cql, tmp_path):
    """Checkpoints are read with an allowlist of the graphs' state classes: the objects come back typed, no warning."""
    import warnings

    from ragplan.checkpoints import open_saver
    from ragplan.graphs.planrag import build_planrag
    from ragplan.state.planrag import PlanVersion, RetrievalStep

    db = str(tmp_path / "typed.sqlite")
    res = ask(QUESTION, "planrag", model=ScriptedChatModel(replies=script()), store=str(trade_cql), checkpoint_db=db)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with open_saver(db) as saver:
            snap = build_planrag().compile(checkpointer=saver).get_state({"configurable": {"thread_id": res.thread_id}})
    assert isinstance(snap.values["plan_history"][0], PlanVersion) and isinstance(snap.values["steps"][0], RetrievalStep)


def _building_responder(hold: dict[str, bool]) -> Any:
    def respond(req: Any) -> Any:
        if req.forced_tool == "RetrievalAction":
            return RetrievalAction(thought="ids", action="graph_db", action_input="MATCH (b:Building) RETURN b.id AS id LIMIT 5")
        reply = FinalAnswer(answer="1", rationale="r")
        return Fault(delay_s=120, reply=reply) if hold["on"] else reply
    return respond


@pytest.mark.parametrize("in_flight", [1, 2])
def test_eval_question_in_flight_at_a_kill_continues_from_its_last_node(tmp_path, capsys, in_flight):
    """One and two questions in flight at the kill: after kill -9 and --resume no finished LLM call is made again."""
    from ragplan.methods.planrag.generate import generate_clone

    generate_clone(tmp_path / "clone", "building", 2, seed=0)
    run = tmp_path / "run"
    hold = {"on": True}
    with OpenAIStub(responder=_building_responder(hold)) as stub:
        proc = ragplan_process.start(
            ["eval", "--method", "single_rag", "--benchmark", "dqa-building", "--data", str(tmp_path / "clone"),
             "--limit", "2", "--concurrency", str(in_flight), "--out", str(run), "--no-progress", "--model", MODEL,
             "--base-url", stub.base_url, "--set", "llm_max_retries=0"], ROOT, _env())
        try:  # the answer requests of the questions in flight are held
            _wait_for(lambda: sum(r.forced_tool == "FinalAnswer" for r in stub.requests) == in_flight, proc=proc)
        finally:
            _kill(proc)
        assert not (run / "results.jsonl").exists() or (run / "results.jsonl").read_text() == ""
        hold["on"] = False
        assert main(["eval", "--resume", str(run), "--no-progress"]) == 0
        tools = [r.forced_tool for r in stub.requests]
        summary = json.loads((run / "summary.json").read_text())
    assert summary["overall"]["n"] == 2
    assert tools.count("RetrievalAction") == 2, tools  # the killed questions' queries were not asked again
    assert tools.count("FinalAnswer") == 2 + in_flight, tools  # their answers were (they were in flight)
    recs = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert len(recs) == 2 and all(r["answer"] == "1" and r["error"] == "" for r in recs)
    # every request the endpoint received is counted, the ones in flight at the kill too
    assert summary["cost"]["llm_calls"] == len(tools) == 4 + in_flight and sorted(r["llm_calls"] for r in recs) == \
        sorted([2 + (in_flight == 2), 3])
    assert not (run / "checkpoints.sqlite").exists()  # recorded questions leave no thread, so no file, behind


def test_eval_a_reply_over_the_cap_is_a_small_recorded_failure_and_no_checkpoint_file_stays(tmp_path, monkeypatch):
    """A huge reply is a malformed_reply failure (not kept in results.jsonl or checkpoints); a finished run leaves
    no checkpoint file (its pages would stay allocated with no row in them)."""
    from ragplan.methods.planrag.generate import generate_clone

    monkeypatch.setattr("ragplan.llm.BACKOFF_S", 0.01)
    generate_clone(tmp_path / "clone", "building", 2, seed=0)
    run = tmp_path / "run"

    def respond(req: Any) -> Any:
        if req.forced_tool == "RetrievalAction":
            return RetrievalAction(thought="ids", action="graph_db", action_input="MATCH (b:Building) RETURN b.id AS id")
        return FinalAnswer(answer="1" * 300_000, rationale="r")

    with OpenAIStub(responder=respond) as stub:
        assert main(["eval", "--method", "single_rag", "--benchmark", "dqa-building", "--data", str(tmp_path / "clone"),
                     "--out", str(run), "--no-progress", "--model", MODEL, "--base-url", stub.base_url,
                     "--set", "llm_max_retries=1"]) == 1  # (every question failed)
        answers = sum(r.forced_tool == "FinalAnswer" for r in stub.requests)
    lines = (run / "results.jsonl").read_bytes().splitlines()
    recs = [json.loads(x) for x in lines]
    assert len(recs) == 2 and all(r["failure"]["kind"] == "malformed_reply" and "too long" in r["error"] for r in recs)
    assert answers == 4 and all(len(x) < 20_000 for x in lines)  # each answer asked twice, no reply kept
    assert sorted(p.name for p in run.iterdir() if p.name.startswith("checkpoints")) == []


def test_eval_never_pauses_for_review(tmp_path):
    """review_plan set for a batch is forced off: every question runs to its answer."""
    from tests.auto_reply import auto_responder
    from tests.family_data.planrag import make

    d = make(tmp_path)
    run = tmp_path / "run"
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
        assert main(["eval", "--method", "planrag", *d.eval("planrag"), "--limit", "1", "--model", MODEL, "--base-url",
                     stub.base_url, "--out", str(run), "--no-progress", "--set", "review_plan=true"]) == 0
    (rec,) = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert rec["answer"] and rec["error"] == "" and rec["plan_reviews"] == []


def test_item_checkpoints_finished_unrecorded_and_fresh_attempts(trade_cql, tmp_path):
    from ragplan.eval.item_checkpoints import ItemCheckpoints
    from ragplan.graphs.planrag import build_single_rag
    from ragplan.state.context import PlanRAGContext

    path = tmp_path / "items.sqlite"
    replies = [RetrievalAction(thought="t", action="graph_db", action_input=Q), FinalAnswer(answer="lubeck")]

    async def go() -> tuple[dict, dict, dict, ScriptedChatModel, ScriptedChatModel]:
        first = ScriptedChatModel(replies=list(replies))
        ck = ItemCheckpoints(path)
        graph = build_single_rag().compile(checkpointer=await ck.open())
        done = await ck.run(graph, "q1", 1, {"question": QUESTION}, PlanRAGContext(model="-", chat_model=first,
                                                                                   graph_path=str(trade_cql)), 50)
        await ck.close()  # "killed" before the result line was written
        second = ScriptedChatModel(replies=list(replies))
        ck = ItemCheckpoints(path)
        graph = build_single_rag().compile(checkpointer=await ck.open())
        ctx = PlanRAGContext(model="-", chat_model=second, graph_path=str(trade_cql))
        again = await ck.run(graph, "q1", 1, {"question": QUESTION}, ctx, 50)  # graded from the checkpoint
        retry = await ck.run(graph, "q1", 2, {"question": QUESTION}, ctx, 50)  # a retry: a fresh thread
        assert ck.holds("q1", 1) and ck.holds("q1", 2)
        ck.forget("q1")
        assert not ck.holds("q1", 1) and not ck.holds("q1", 2)
        await ck.close()
        return done, again, retry, first, second

    done, again, retry, first, second = asyncio.run(go())
    assert done["answer"] == again["answer"] == retry["answer"] == "lubeck"
    assert first.remaining == 0 and second.remaining == 0 and len(second.prompts) == 2  # only the retry called the model


def test_item_checkpoints_close_the_file_on_every_exit_path(tmp_path, monkeypatch):
    """A file that cannot be opened leaves no connection open behind; close is safe twice and unopened;
    a recorded question's threads are deleted from the file."""
    from ragplan.eval.item_checkpoints import ItemCheckpoints

    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database " * 200)
    made: list[sqlite3.Connection] = []
    real_connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: made.append(real_connect(*a, **k)) or made[-1])

    def open_connections() -> int:
        n = 0
        for conn in made:
            try:
                conn.execute("SELECT 1")
                n += 1
            except sqlite3.ProgrammingError:  # (closed)
                pass
        return n

    async def go() -> tuple[int, int, int]:
        ck = ItemCheckpoints(bad)
        with pytest.raises(sqlite3.DatabaseError):
            await ck.open()
        await ck.close()
        after_failure = open_connections()
        ok = ItemCheckpoints(tmp_path / "ok.sqlite")
        await ItemCheckpoints(tmp_path / "never.sqlite").close()
        saver = await ok.open()
        assert saver is not None
        opened = open_connections()
        await ok.close()
        await ok.close()
        return after_failure, opened, open_connections()

    assert asyncio.run(go()) == (0, 1, 0) and len(made) == 2


def test_item_checkpoints_a_question_given_up_stops_after_the_step_it_is_in(trade_cql, tmp_path):
    """Past its time budget a question is no longer waited for; its graph, running in a worker thread, ends after the
    node it is in instead of going on to the next LLM call."""
    import threading

    from ragplan.eval.item_checkpoints import ItemCheckpoints
    from ragplan.graphs.planrag import build_single_rag
    from ragplan.state.context import PlanRAGContext

    called, gate = threading.Event(), threading.Event()

    def responder(messages: Any, tool: Any) -> Any:
        if len(model.prompts) == 1:
            called.set()
            gate.wait(30)
            return RetrievalAction(thought="t", action="graph_db", action_input=Q)
        return FinalAnswer(answer="lubeck")

    model = ScriptedChatModel(responder=responder)
    ck = ItemCheckpoints(tmp_path / "items.sqlite")

    async def go() -> None:
        graph = build_single_rag().compile(checkpointer=await ck.open())
        ctx = PlanRAGContext(model="-", chat_model=model, graph_path=str(trade_cql))
        running = asyncio.ensure_future(ck.run(graph, "q1", 1, {"question": QUESTION}, ctx, 50))
        assert await asyncio.to_thread(called.wait, 30)
        running.cancel()  # (what the runner's item timeout does)
        with pytest.raises(asyncio.CancelledError):
            await running
        gate.set()  # the node in flight ends now; the run's thread pool is waited for when the loop closes

    asyncio.run(go())
    asyncio.run(ck.close())
    assert len(model.prompts) == 1


def test_item_checkpoints_recorded_question_leaves_no_thread(trade_cql, tmp_path):
    """forget deletes every attempt's thread through the saver (at close); another question's thread stays."""
    from ragplan.eval.item_checkpoints import ItemCheckpoints
    from ragplan.graphs.planrag import build_single_rag
    from ragplan.state.context import PlanRAGContext

    path = tmp_path / "items.sqlite"

    async def go() -> None:
        ck = ItemCheckpoints(path)
        graph = build_single_rag().compile(checkpointer=await ck.open())
        for item in ("q1", "q2"):
            replies = [RetrievalAction(thought="t", action="graph_db", action_input=Q), FinalAnswer(answer="lubeck")]
            ctx = PlanRAGContext(model="-", chat_model=ScriptedChatModel(replies=replies), graph_path=str(trade_cql))
            await ck.run(graph, item, 1, {"question": QUESTION}, ctx, 50)
        ck.forget("q1")
        await ck.close()

    asyncio.run(go())
    with sqlite3.connect(path) as conn:
        assert {r[0] for r in conn.execute("SELECT thread_id FROM checkpoints")} == {"q2#1"}
        assert {r[0] for r in conn.execute("SELECT thread_id FROM writes")} <= {"q2#1"}


def test_item_checkpoints_threads_of_questions_recorded_before_a_kill_go_at_close(trade_cql, tmp_path):
    """A resumed run keeps only the threads of the questions it still has to run; the others are deleted at close."""
    from ragplan.eval.item_checkpoints import ItemCheckpoints
    from ragplan.graphs.planrag import build_single_rag
    from ragplan.state.context import PlanRAGContext

    path = tmp_path / "items.sqlite"

    async def go() -> None:
        ck = ItemCheckpoints(path)
        graph = build_single_rag().compile(checkpointer=await ck.open())
        for item in ("q1", "q2"):  # a kill after q1's line was written: both threads are in the file
            replies = [RetrievalAction(thought="t", action="graph_db", action_input=Q), FinalAnswer(answer="lubeck")]
            ctx = PlanRAGContext(model="-", chat_model=ScriptedChatModel(replies=replies), graph_path=str(trade_cql))
            await ck.run(graph, item, 1, {"question": QUESTION}, ctx, 50)
        await ck.close()
        again = ItemCheckpoints(path)
        await again.open()
        again.keep_only({"q2"})  # the resume has only q2 to run
        assert not again.holds("q1", 1) and again.holds("q2", 1)
        await again.close()

    asyncio.run(go())
    with sqlite3.connect(path) as conn:
        assert {r[0] for r in conn.execute("SELECT thread_id FROM checkpoints")} == {"q2#1"}


@pytest.mark.parametrize("step", [-1, 0, 1])
def test_item_checkpoints_a_kill_before_the_next_checkpoint_continues_the_question(trade_cql, tmp_path, step):
    """Checkpoints are written in the background: a kill can land after a step's writes were saved and before the next
    checkpoint was. The thread then shows no next node and the values before that step; a resume continues it (the
    saved writes are not made again), where taking it for a finished graph recorded an empty answer as a success
    (seen under load with PostgreSQL). Steps: -1 the input, 0 read_schema, 1 retrieve (its LLM call made)."""
    from ragplan.eval.item_checkpoints import ItemCheckpoints
    from ragplan.graphs.planrag import build_single_rag
    from ragplan.state.context import PlanRAGContext

    path = tmp_path / "items.sqlite"

    def ctx(retrieves: bool = True) -> PlanRAGContext:
        retrieval = [RetrievalAction(thought="t", action="graph_db", action_input=Q)] if retrieves else []
        replies = [*retrieval, FinalAnswer(answer="lubeck")]
        return PlanRAGContext(model="-", chat_model=ScriptedChatModel(replies=replies), graph_path=str(trade_cql))

    async def go() -> tuple[Any, dict[str, Any], int]:
        ck = ItemCheckpoints(path)
        saver = await ck.open()
        graph = build_single_rag().compile(checkpointer=saver)
        await ck.run(graph, "q1", 1, {"question": QUESTION}, ctx(), 50)
        kept = next(t for t in saver.list({"configurable": {"thread_id": "q1#1"}}) if t.metadata["step"] == step)
        # q2's thread as that kill leaves it: q1's checkpoint at `step` and its tasks' writes, nothing after
        at = saver.put({"configurable": {"thread_id": "q2#1", "checkpoint_ns": ""}}, kept.checkpoint, kept.metadata, {})
        for task in {t for t, _, _ in kept.pending_writes or []}:
            saver.put_writes(at, [(c, v) for t, c, v in kept.pending_writes or [] if t == task], task)
        await ck.close()
        again = ItemCheckpoints(path)
        graph = build_single_rag().compile(checkpointer=await again.open())
        torn = graph.get_state({"configurable": {"thread_id": "q2#1"}})
        c = ctx(retrieves=step < 1)  # (from step 1 on, the retrieval's reply was saved with its step)
        out = await again.run(graph, "q2", 1, {"question": QUESTION}, c, 50)
        await again.close()
        return torn, out, len(c.chat_model.prompts)

    torn, out, prompts = asyncio.run(go())
    assert torn.created_at is not None and not torn.next and "answer" not in torn.values  # what the kill left
    assert out["answer"] == "lubeck" and out["stop_reason"] == "single_retrieval"
    assert len(out["steps"]) == 1 and out["steps"][0].ok and prompts == (1 if step == 1 else 2)


def test_item_checkpoints_request_log_survives_a_kill_and_a_torn_line(tmp_path):
    """Requests logged before they are sent are read back by the next invocation (a line torn by a kill is skipped);
    the log goes with the checkpoint file once no thread is left."""
    from ragplan.eval.item_checkpoints import ItemCheckpoints

    path = tmp_path / "items.sqlite"

    async def go() -> tuple[int, int, int]:
        ck = ItemCheckpoints(path)
        await ck.open()
        ck._threads.add("q1#1")  # a thread in flight, as a kill leaves it
        for _ in range(2):
            ck.counter("q1")()
        ck.counter("q2")()
        ck._fd, fd = -1, ck._fd  # "killed": nothing more is written
        os.write(fd, b'"q1')
        os.close(fd)
        ck.saver.conn.close()
        again = ItemCheckpoints(path)
        await again.open()
        seen = again.requests("q1"), again.requests("q2")
        await again.close()
        return (*seen, Path(f"{path}.requests").exists())

    assert asyncio.run(go()) == (2, 1, False)


def test_item_checkpoints_keep_every_node_of_a_multi_step_graph_and_only_the_output_of_a_one_step_graph(trade_cql, tmp_path):
    """A graph of one step (the cot baseline) writes one checkpoint, its finished output, which a resume grades from;
    a graph of several nodes is checkpointed after each, so a kill continues it from its last node."""
    from ragplan.eval.item_checkpoints import ItemCheckpoints, durability
    from ragplan.graphs.planrag import build_single_rag
    from ragplan.graphs.think_then_act import build_cot
    from ragplan.nodes.think_then_act.direct_answer import ChainOfThought
    from ragplan.state.context import PlanRAGContext, ThinkThenActContext

    path = tmp_path / "items.sqlite"

    def cot_ctx() -> ThinkThenActContext:
        return ThinkThenActContext(model="-", chat_model=ScriptedChatModel(replies=[ChainOfThought(reasoning="r", answer="Canberra")]))

    async def go() -> tuple[dict, dict, ScriptedChatModel]:
        ck = ItemCheckpoints(path)
        saver = await ck.open()
        cot, rag = build_cot().compile(checkpointer=saver), build_single_rag().compile(checkpointer=saver)
        assert (durability(cot), durability(rag)) == ("exit", "async")
        done = await ck.run(cot, "q1", 1, {"question": "Capital of Australia?"}, cot_ctx(), 50)
        replies = [RetrievalAction(thought="t", action="graph_db", action_input=Q), FinalAnswer(answer="lubeck")]
        await ck.run(rag, "q2", 1, {"question": QUESTION},
                     PlanRAGContext(model="-", chat_model=ScriptedChatModel(replies=replies), graph_path=str(trade_cql)), 50)
        await ck.close()  # "killed" before the result lines were written
        again = ItemCheckpoints(path)
        cot = build_cot().compile(checkpointer=await again.open())
        ctx = cot_ctx()
        graded = await again.run(cot, "q1", 1, {"question": "Capital of Australia?"}, ctx, 50)
        await again.close()
        return done, graded, ctx.chat_model

    done, graded, unused = asyncio.run(go())
    assert done["answer"] == graded["answer"] == "Canberra" and unused.remaining == 1  # not asked again
    with sqlite3.connect(path) as conn:
        count = dict(conn.execute("SELECT thread_id, count(*) FROM checkpoints GROUP BY thread_id").fetchall())
    assert count["q1#1"] == 1 and count["q2#1"] >= 4  # the output only; the input and every node's step


def test_item_checkpoints_a_finished_runs_file_is_not_written_again_at_close(trade_cql, tmp_path):
    """With every question recorded the files go, removed before the close: SQLite then copies no log into the file
    (a hard link to it shows what the close wrote)."""
    from ragplan.eval.item_checkpoints import ItemCheckpoints
    from ragplan.graphs.planrag import build_single_rag
    from ragplan.state.context import PlanRAGContext

    path, link = tmp_path / "items.sqlite", tmp_path / "link.sqlite"

    async def go() -> int:
        ck = ItemCheckpoints(path)
        graph = build_single_rag().compile(checkpointer=await ck.open())
        replies = [RetrievalAction(thought="t", action="graph_db", action_input=Q), FinalAnswer(answer="lubeck")]
        ctx = PlanRAGContext(model="-", chat_model=ScriptedChatModel(replies=replies), graph_path=str(trade_cql))
        await ck.run(graph, "q1", 1, {"question": QUESTION}, ctx, 50)
        ck.forget("q1")
        os.link(path, link)
        before = link.stat().st_size
        await ck.close()
        return before

    before = asyncio.run(go())
    assert not path.exists() and not Path(f"{path}-wal").exists() and not Path(f"{path}.requests").exists()
    assert link.stat().st_size == before  # the checkpoints stayed in the log, never copied into the file
