"""The evaluation runner over generated DQA clones, through langchain-openai and the local stub.

The stub plays a deterministic agent: it answers each request by the schema the client forces
(Plan, RetrievalAction, ReplanDecision, FinalAnswer) and gets every odd-numbered question right and
every even-numbered one wrong, so accuracy, near-miss effects and tables are known in advance.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from ragplan.cli import main
from ragplan.methods.planrag.data import load_questions
from ragplan.methods.planrag.generate import generate_clone
from ragplan.methods.planrag.grade import solve_question
from ragplan.eval.runner import RunFolder, RunSettings, evaluate
from ragplan.eval.runfolder import record_line
from ragplan.nodes.planrag.answer import FinalAnswer
from ragplan.nodes.planrag.plan import Plan
from ragplan.nodes.planrag.replan import ReplanDecision
from ragplan.nodes.planrag.retrieve import RetrievalAction
from tests.openai_server import Fault, OpenAIStub

ROOT = Path(__file__).resolve().parents[1]


def agent(clone: Path, scenario: str, *, delay: float = 0.0, retrievals: int = 1):
    """A responder that plays PlanRAG / IterRAG on DQA questions; right on odd numbers, wrong on even."""
    questions = load_questions(clone, scenario)
    query = "MATCH (t:Trade_node) RETURN t.name AS n" if scenario == "locating" else "MATCH (b:Building) RETURN b.id AS id"

    def respond(req):
        text = req.prompt_text
        cands = [q for q in questions if q.question in text]
        tool = req.forced_tool
        if len(cands) > 1 and tool == "FinalAnswer":  # same question text on several scripts (as in DQA):
            words = set(re.findall(r"(?<![\d.])\d+(?![\d.])", text))
            cands = [q for q in cands if all(str(o.building_id) in words for o in solve_question(q).options)] or cands
        q = cands[0]
        if tool == "Plan":
            reply = Plan(steps=[f"step {i + 1}" for i in range(retrievals)])
        elif tool == "RetrievalAction":
            n = text.count("\nObservation:") + 1  # this question's retrievals so far, read from its own trace
            reply = (RetrievalAction(thought="enough", action="finish") if n > retrievals
                     else RetrievalAction(thought="look", action="graph_db", action_input=query))
        elif tool == "ReplanDecision":
            reply = ReplanDecision(replan=False, reason="fine")
        else:
            ranked = solve_question(q).ranked()
            worst = ranked[-1].node if scenario == "locating" else ranked[-1].building_id
            reply = FinalAnswer(answer=q.answer if q.num % 2 else f"I would pick {worst}.", rationale="r")
        return Fault(delay_s=delay, reply=reply) if delay else reply

    return respond


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def settings_for(stub, clone, method="planrag", benchmark="dqa-locating", **kw):
    return RunSettings(method=method, benchmark=benchmark, data=str(clone), model="openai:stub-model",
                       base_url=stub.base_url, **kw)


def test_eval_locating_grades_by_simulation_and_writes_run_folder(tmp_path):
    clone = tmp_path / "clone"
    generate_clone(clone, "locating", 6, seed=5)
    with OpenAIStub(responder=agent(clone, "locating")) as stub:
        import asyncio

        summary = asyncio.run(evaluate(settings_for(stub, clone, concurrency=3), tmp_path / "run"))
    recs = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert len(recs) == 6 and len({r["id"] for r in recs}) == 6
    by_num = {r["question_num"]: r for r in recs}
    for num, r in by_num.items():
        assert r["correct"] is bool(num % 2)
        assert r["retrievals"] == 1 and r["llm_calls"] == 4 and r["input_tokens"] > 0
        assert r["plan"] == ["step 1"] and r["steps"][0]["observation"].startswith("n\n")
        assert r["decision_check"]["correct"] is r["correct"]  # the graph's own simulator verdict
    wrong = by_num[2]
    assert "vs best" in wrong["verdict"] and wrong["effect"] < wrong["best_effect"]
    assert summary["overall"] == {"n": 6, "correct": 3, "accuracy": 0.5, "errors": 0}
    assert set(summary["groups"]) == {"scenario", "year"} and summary["retrieval"]["SR"]["n"] == 6
    assert summary["cost"]["llm_calls"] == 24 and summary["cost"]["wall_time_s"] > 0
    assert (tmp_path / "run" / "plot.png").stat().st_size > 1000
    assert "accuracy by year" in (tmp_path / "run" / "summary.md").read_text()
    assert json.loads((tmp_path / "run" / "settings.json").read_text())["method"] == "planrag"


def test_eval_cli_building_with_limit(tmp_path, capsys):
    clone = tmp_path / "clone"
    generate_clone(clone, "building", 4, seed=2)
    with OpenAIStub(responder=agent(clone, "building")) as stub:
        code = main(["eval", "--method", "single_rag", "--benchmark", "dqa-building", "--data", str(clone),
                     "--limit", "3", "--model", "openai:stub-model", "--base-url", stub.base_url,
                     "--out", str(tmp_path / "run"), "--no-progress"])
    assert code == 0
    out = capsys.readouterr().out
    assert "single_rag on dqa-building" in out and "66.7%" in out
    assert len((tmp_path / "run" / "results.jsonl").read_text().splitlines()) == 3


def test_rate_limited_question_is_retried_with_backoff(tmp_path):
    clone = tmp_path / "clone"
    generate_clone(clone, "locating", 1, seed=3)
    inner = agent(clone, "locating")
    calls = {"n": 0}

    def respond(req):
        calls["n"] += 1
        return Fault(status=429, message="Rate limit reached") if calls["n"] == 1 else inner(req)

    with OpenAIStub(responder=respond) as stub:
        import asyncio

        st = settings_for(stub, clone, backoff_s=0.01, context={"llm_max_retries": 0})
        summary = asyncio.run(evaluate(st, tmp_path / "run"))
    rec = json.loads((tmp_path / "run" / "results.jsonl").read_text())
    assert rec["attempts"] == 2 and rec["error"] == "" and rec["correct"]
    assert summary["overall"]["correct"] == 1
    assert rec["llm_calls"] == len(stub.requests) == 5  # the rate-limited attempt's call is counted too


def test_endpoint_down_is_recorded_per_question(tmp_path):
    clone = tmp_path / "clone"
    generate_clone(clone, "locating", 2, seed=4)
    st = RunSettings(method="iter_rag", benchmark="dqa-locating", data=str(clone), model="openai:x",
                     base_url="http://127.0.0.1:9/v1", context={"llm_max_retries": 0, "llm_timeout_s": 2})
    import asyncio

    summary = asyncio.run(evaluate(st, tmp_path / "run"))
    recs = RunFolder(tmp_path / "run").load_records()
    assert len(recs) == 2 and all(r["stop_reason"] == "llm_error" and r["error"] for r in recs.values())
    assert summary["overall"]["errors"] == 2 and summary["overall"]["correct"] == 0


def test_kill_and_resume_finishes_without_redoing_or_losing(tmp_path):
    from tests import ragplan_process

    clone = tmp_path / "clone"
    generate_clone(clone, "locating", 6, seed=9)
    run = tmp_path / "run"
    results = run / "results.jsonl"
    answer = agent(clone, "locating")
    hold = {"on": True}

    def respond(req):  # once two questions are recorded every request is held (for minutes): the kill lands mid-run
        recorded = len(results.read_text().splitlines()) if results.exists() else 0
        return Fault(delay_s=600, reply=answer(req)) if hold["on"] and recorded >= 2 else answer(req)

    with OpenAIStub(responder=respond) as stub:
        args = ["eval", "--method", "planrag", "--benchmark", "dqa-locating", "--data", str(clone), "--model",
                "openai:stub-model", "--base-url", stub.base_url, "--concurrency", "1", "--out", str(run), "--no-progress"]
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
        proc = ragplan_process.start(args, ROOT, env)  # a process of its own (forked with its imports done)
        deadline = time.time() + 90
        while time.time() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 2):
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        before = results.read_text()
        done_before = len(before.splitlines())
        assert 2 <= done_before < 6
        with open(results, "a") as fh:  # a kill in the middle of a write leaves a torn line
            fh.write('{"id": "locating-9", "answ')
        hold["on"] = False
        assert main(["eval", "--resume", str(run), "--no-progress"]) == 0
    lines = results.read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    assert len(recs) == 6 and len({r["id"] for r in recs}) == 6
    assert "\n".join(lines[:done_before]) + "\n" == before  # earlier answers untouched, not redone
    asked = [r for r in stub.requests if r.forced_tool == "Plan"]
    assert len(asked) <= 6 + 1  # at most the one question in flight at the kill was asked twice


def test_report_compares_runs_with_iter_rag_split(tmp_path, capsys):
    clone = tmp_path / "clone"
    generate_clone(clone, "locating", 4, seed=6)
    import asyncio

    with OpenAIStub(responder=agent(clone, "locating", retrievals=2)) as stub:
        asyncio.run(evaluate(settings_for(stub, clone, method="iter_rag"), tmp_path / "iter"))
    with OpenAIStub(responder=agent(clone, "locating")) as stub:
        asyncio.run(evaluate(settings_for(stub, clone, method="planrag"), tmp_path / "plan"))
    assert main(["eval", "report", str(tmp_path / "iter"), str(tmp_path / "plan")]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| iter_rag") or line.startswith("| planrag")]
    assert len(rows) == 2
    assert "SR/MR by iter_rag's retrieval count" in out
    # iter_rag retrieved twice for every question: both runs' questions are all MR
    assert all("0.0% (0)" in r for r in rows)
    assert main(["eval", "report", str(tmp_path / "nope")]) == 2


def test_report_names_a_failing_benchmark_comparison_and_still_prints_the_rest(tmp_path, capsys, monkeypatch):
    """A benchmark's ``compare`` hook that raises: the table and the HTML page are still made, the error names the
    benchmark and the runs, exit 1 (not a traceback)."""
    from ragplan.methods.planrag.benchmark import DQABenchmark

    clone = tmp_path / "clone"
    generate_clone(clone, "locating", 2, seed=6)
    import asyncio

    with OpenAIStub(responder=agent(clone, "locating")) as stub:
        asyncio.run(evaluate(settings_for(stub, clone), tmp_path / "plan"))

    calls = []

    def broken(self, runs):
        calls.append(runs)
        raise ZeroDivisionError("division by zero in the hook")

    monkeypatch.setattr(DQABenchmark, "compare", broken, raising=False)
    html = tmp_path / "report.html"
    assert main(["eval", "report", str(tmp_path / "plan"), "--html", str(html)]) == 1
    cap = capsys.readouterr()
    assert re.search(r"^\| planrag ", cap.out, re.M) and html.is_file() and "Traceback" not in cap.err
    message = (f"dqa-locating's own comparison of {tmp_path / 'plan'} could not be made: ZeroDivisionError: division by "
               "zero in the hook")
    assert cap.err.strip().splitlines()[-1:] == [f"error: {message}"]
    assert len(calls) == 1 and "division by zero in the hook" in html.read_text()  # one comparison: table and page


def test_a_corrupt_line_in_the_middle_loses_no_later_record(tmp_path):
    """Every valid line survives; the bad one is set aside with a warning naming its line (issue 13)."""
    folder = RunFolder(tmp_path)
    folder.path.mkdir(exist_ok=True)
    lines = [json.dumps({"id": f"q{i}", "answer": str(i)}) for i in range(30)]
    lines[2] = '{"id": "q2", "answ'  # torn in the middle of the file
    folder.results_file.write_text("\n".join(lines) + "\n")
    with pytest.warns(RuntimeWarning, match=r"results.jsonl:3: not JSON"):
        recs = folder.load_records(repair=True)
    assert len(recs) == 29 and "q2" not in recs and recs["q29"]["answer"] == "29"
    assert len(folder.results_file.read_text().splitlines()) == 29
    rejected = [json.loads(x) for x in (tmp_path / "results.rejected.jsonl").read_text().splitlines()]
    assert rejected == [{"line": 3, "text": '{"id": "q2", "answ'}]
    folder.append_lines([record_line({"id": "q2", "answer": "2"})])  # appends continue on a clean file
    assert len(folder.load_records()) == 30


def test_wall_time_counts_a_killed_invocation(tmp_path):
    """The time before a kill is part of the run's wall time: each invocation runs to its last finished question."""
    folder = RunFolder(tmp_path)
    folder.path.mkdir(exist_ok=True)
    (tmp_path / "invocations.jsonl").write_text(json.dumps({"invocation": 1, "started": 1000.0}) + "\n"
                                                + json.dumps({"invocation": 2, "started": 2000.0}) + "\n")
    recs = {"a": {"id": "a", "invocation": 1, "finished_at": 1030.0}, "b": {"id": "b", "invocation": 1, "finished_at": 1042.5},
            "c": {"id": "c", "invocation": 2, "finished_at": 2010.0}}
    assert folder.wall_time(recs, now=2011.0) == 42.5 + 11.0


def test_a_record_of_the_wrong_type_is_named_by_line_and_counts_as_not_done(tmp_path):
    folder = RunFolder(tmp_path)
    rows = [{"id": "q0", "llm_calls": 1}, {"id": "q1", "llm_calls": "7"}, {"id": "q2", "latency_s": True},
            {"id": "q3", "error": {"x": 1}}, {"id": 4}, [1], {"id": "q5", "llm_calls": 2, "answer": None}]
    folder.results_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.warns(RuntimeWarning) as caught:
        recs = folder.load_records(repair=True)
    text = str(caught[0].message)
    assert sorted(recs) == ["q0", "q5"]
    for n, why in ((2, "llm_calls"), (3, "latency_s"), (4, "error"), (5, "no string id"), (6, "not an object")):
        assert f"results.jsonl:{n}: " in text and why in text
    assert [json.loads(x)["line"] for x in (tmp_path / "results.rejected.jsonl").read_text().splitlines()] == [2, 3, 4, 5, 6]


def test_resume_and_report_over_records_of_the_wrong_type_and_unknown_ids(tmp_path, capsys):
    """A typed line is rerun by --resume (not a bare TypeError); the report counts the benchmark's questions only."""
    clone = tmp_path / "clone"
    generate_clone(clone, "locating", 3, seed=4)
    run = tmp_path / "run"
    import asyncio

    with OpenAIStub(responder=agent(clone, "locating")) as stub:
        asyncio.run(evaluate(settings_for(stub, clone), run))
        lines = (run / "results.jsonl").read_text().splitlines()
        bad = json.loads(lines[1])
        lines[1] = json.dumps({**bad, "llm_calls": "3"})
        lines.append(json.dumps({**json.loads(lines[0]), "id": "not-a-question"}))
        (run / "results.jsonl").write_text("\n".join(lines) + "\n")
        with pytest.warns(RuntimeWarning) as caught:
            assert main(["eval", "report", str(run)]) == 0
        assert re.search(r"\| planrag .*\| 2 +\|", capsys.readouterr().out)  # 2 valid records of 3 questions, not 4
        assert any("results.jsonl:2: llm_calls" in str(w.message) for w in caught)
        assert any("not a question" in str(w.message) and "line 4" in str(w.message) for w in caught)
        with pytest.warns(RuntimeWarning, match=r"results.jsonl:2: llm_calls"):
            assert main(["eval", "--resume", str(run), "--no-progress"]) == 0
    recs = RunFolder(run).load_records()
    assert isinstance(recs[bad["id"]]["llm_calls"], int) and recs[bad["id"]]["invocation"] == 2
    assert json.loads((run / "summary.json").read_text())["overall"]["n"] == 3


def test_eval_writes_and_prints_no_password_of_the_url_nor_a_key_the_endpoint_echoes(tmp_path, capsys, monkeypatch):
    import base64

    password, key = "S3cretPass99", "sk-test-Secret-123456"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    clone, run, html = tmp_path / "clone", tmp_path / "run", tmp_path / "report.html"
    generate_clone(clone, "locating", 2, seed=4)
    basic = base64.b64encode(f"user:{password}".encode()).decode()

    def echo_401(req):  # an endpoint whose 401 body echoes the Authorization header
        return Fault(status=401, message=f"Incorrect API key provided: {req.headers.get('authorization')}")

    with OpenAIStub(responder=echo_401) as stub:
        for url, out in ((stub.base_url.replace("http://", f"http://user:{password}@"), run), (stub.base_url, run.with_name("plain"))):
            assert main(["eval", "--method", "planrag", "--benchmark", "dqa-locating", "--data", str(clone), "--model",
                         "openai:m", "--base-url", url, "--out", str(out), "--no-progress"]) == 1
    assert main(["eval", "report", str(run), str(run.with_name("plain")), "--html", str(html)]) == 0
    cap = capsys.readouterr()
    assert {r.headers["authorization"] for r in stub.requests} == {f"Basic {basic}", f"Bearer {key}"}
    recs = [*RunFolder(run).load_records().values(), *RunFolder(run.with_name("plain")).load_records().values()]
    assert len(recs) == 4 and all("Incorrect API key provided" in r["error"] for r in recs)
    assert "Basic ***" in recs[0]["error"] and "Bearer ***" in recs[-1]["error"]
    assert json.loads((run / "settings.json").read_text())["base_url"].startswith("http://user:***@127.0.0.1")
    written = b"".join(p.read_bytes() for d in (run, run.with_name("plain")) for p in d.rglob("*") if p.is_file())
    written += html.read_bytes()
    assert all(s not in written for s in (password.encode(), key.encode(), basic.encode()))
    assert all(s not in cap.out + cap.err for s in (password, key, basic))
    # the password is not kept: a resume is given the URL again
    assert main(["eval", "--resume", str(run), "--no-progress"]) == 2
    assert "without the password" in capsys.readouterr().err


def test_keys_read_once_holds_the_keys_read_on_entry_in_its_threads(monkeypatch):
    """A run reads the keys to mask once (not at every record and checkpoint write); outside, they are read again."""
    import asyncio

    from ragplan.redact import configured_keys, keys_read_once, redact

    monkeypatch.setenv("FIRST_API_KEY", "first-key-123456")
    with keys_read_once() as keys:
        monkeypatch.setenv("LATER_API_KEY", "later-key-123456")
        seen = asyncio.run(asyncio.to_thread(configured_keys))  # a task, then a thread, started with its context
        assert redact("first-key-123456 later-key-123456") == "*** later-key-123456"
    assert "first-key-123456" in keys and seen == keys and "later-key-123456" not in keys
    assert redact("first-key-123456 later-key-123456") == "*** ***"


def _two_cot_questions(tmp_path: Path) -> dict:
    """``cot`` over two HotpotQA questions against the stub into ``tmp_path / "run"``; the summary."""
    import asyncio

    from ragplan.nodes.think_then_act.direct_answer import ChainOfThought

    data = tmp_path / "hotpot_dev_distractor_v1.json"
    data.write_text(json.dumps([{"_id": f"q{i}", "question": f"Is city {i} big?", "answer": "yes", "type": "comparison",
                                 "level": "easy", "supporting_facts": [], "context": []} for i in range(2)]))
    with OpenAIStub(responder=lambda req: ChainOfThought(reasoning="r", answer="yes")) as stub:
        return asyncio.run(evaluate(RunSettings(method="cot", benchmark="hotpotqa", data=str(data),
                                                model="openai:stub", base_url=stub.base_url), tmp_path / "run"))


def test_the_run_clock_starts_after_its_set_up(tmp_path, monkeypatch):
    """The run's wall time starts once the checkpoints are open and the graph compiled (set-up, once per run)."""
    from ragplan.eval.item_checkpoints import ItemCheckpoints

    opened: list[float] = []
    real_open = ItemCheckpoints.open

    async def open_and_note(self):
        saver = await real_open(self)
        opened.append(time.time())
        return saver

    monkeypatch.setattr(ItemCheckpoints, "open", open_and_note)
    summary = _two_cot_questions(tmp_path)
    started = json.loads((tmp_path / "run" / "invocations.jsonl").read_text())["started"]
    assert summary["overall"]["n"] == 2 and len(opened) == 1 and started >= opened[0]


def test_a_graph_that_ends_with_nothing_is_a_recorded_failure(tmp_path, monkeypatch):
    """A question whose graph returns no answer, no stop reason and no error (a bug, or a checkpoint read wrongly)
    is recorded as a failure with that reason, never as an empty success; the others are unaffected."""
    from ragplan.eval.item_checkpoints import ItemCheckpoints

    real_run = ItemCheckpoints.run

    async def nothing_for_q0(self, graph, item_id, *args):
        return {} if item_id == "q0" else await real_run(self, graph, item_id, *args)

    monkeypatch.setattr(ItemCheckpoints, "run", nothing_for_q0)
    summary = _two_cot_questions(tmp_path)
    recs = RunFolder(tmp_path / "run").load_records()
    assert recs["q0"]["stop_reason"] == "crash" and "no answer, no stop reason" in recs["q0"]["error"]
    assert recs["q1"]["answer"] == "yes" and recs["q1"]["error"] == "" and recs["q1"]["stop_reason"]
    assert summary["overall"]["errors"] == 1 and summary["overall"]["correct"] == 1


def test_the_full_garbage_collection_of_set_up_runs_before_the_clock(tmp_path, monkeypatch):
    """A fresh process's imports leave a full (generation 2) collection due: the run does it in its set-up, so it does
    not stop every question in flight (about 0.1 s at a time) once the clock runs."""
    import asyncio
    import gc

    from ragplan.nodes.think_then_act.direct_answer import ChainOfThought

    full: list[bool] = []  # one entry per full collection: whether the run's clock had started
    clock: list[int] = []
    real_start = RunFolder.start_invocation

    def start(self):
        clock.append(real_start(self))
        return clock[-1]

    def note(phase, info):
        if phase == "start" and info["generation"] == 2:
            full.append(bool(clock))

    monkeypatch.setattr(RunFolder, "start_invocation", start)
    data = tmp_path / "hotpot_dev_distractor_v1.json"
    data.write_text(json.dumps([{"_id": f"q{i}", "question": f"Is city {i} big?", "answer": "yes", "type": "comparison",
                                 "level": "easy", "supporting_facts": [], "context": []} for i in range(4)]))
    gc.callbacks.append(note)
    try:
        with OpenAIStub(responder=lambda req: ChainOfThought(reasoning="r", answer="yes")) as stub:
            summary = asyncio.run(evaluate(RunSettings(method="cot", benchmark="hotpotqa", data=str(data),
                                                       model="openai:stub", base_url=stub.base_url), tmp_path / "run"))
    finally:
        gc.callbacks.remove(note)
    assert summary["overall"]["n"] == 4 and summary["overall"]["errors"] == 0
    assert full and full[0] is False  # the first full collection came before the clock


def test_a_summary_write_that_fails_midway_leaves_the_previous_summary_whole(tmp_path, monkeypatch):
    """summary.json and summary.md are written whole or not at all: a disk that fills mid-write keeps the old ones."""
    import builtins
    import io

    from ragplan.eval.report import summarise, write_summary

    old = summarise([{"id": "1", "correct": True}], [])
    write_summary(tmp_path, old)
    before = {n: (tmp_path / n).read_text() for n in ("summary.json", "summary.md")}
    real_open = builtins.open

    class HalfWritten:  # writes half of what it is given, then the disk is full
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            raise OSError(28, "No space left on device")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def __getattr__(self, name):
            return getattr(self.fh, name)

    def failing_open(file, mode="r", *args, **kw):
        fh = real_open(file, mode, *args, **kw)
        return HalfWritten(fh) if "summary" in str(file) and ("w" in mode or "x" in mode) else fh

    monkeypatch.setattr(builtins, "open", failing_open)
    monkeypatch.setattr(io, "open", failing_open)
    new = summarise([{"id": "1", "correct": False}, {"id": "2", "correct": True}], [])
    with pytest.raises(OSError, match="No space left"):
        write_summary(tmp_path, new)
    monkeypatch.undo()
    assert {n: (tmp_path / n).read_text() for n in ("summary.json", "summary.md")} == before
    assert json.loads(before["summary.json"])["overall"]["n"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.png", "summary.json", "summary.md"]  # no temp file left
