"""``ragplan eval --server URL``: the questions run on a LangGraph server (``ragplan studio``, the in-memory runtime of
``langgraph dev``) and the run folder is the one an in-process run writes.

The server is started once for the module on a free port, from a folder outside the project, its files in a temp
state folder (the test that stops it hard starts it again from those folders, on another port); the LLM is the OpenAI-compatible stub (:mod:`tests.openai_server`) in this process, which the server's
graphs reach over 127.0.0.1. Each family's small test data come from ``tests/family_data/``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from ragplan.cli import main
from ragplan.eval.runfolder import record_differences
from tests.auto_reply import auto_responder
from tests.openai_server import OpenAIStub
from tests.test_langgraph_dev import GRAPH_IDS, LANGGRAPH, ROOT, SERVERS, _env, _free_port, _serving, _stop

pytestmark = [pytest.mark.server, pytest.mark.xdist_group("eval_server")]  # one studio server for the module

MODEL = "openai:stub-model"
FAMILIES = {"planrag": "planrag", "think_then_act": "think_then_act", "reaper": "reaper", "furepa": "furepa",
            "instructrag": "instructrag"}  # one graph of each family


def _studio(tmp: Path, port: int | None = None):
    """``ragplan studio`` serving from ``tmp`` (its state there too): a context manager giving its URL."""
    (tmp / "anywhere").mkdir(exist_ok=True)
    env = {**_env(), "XDG_STATE_HOME": str(tmp / "state"), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "ragplan", "studio", "--no-browser", "--no-reload", "--n-jobs-per-worker", "4",
           "--port", str(port or _free_port())]
    return _serving(cmd, tmp / "anywhere", tmp / f"studio-{time.monotonic_ns()}.log", env)


class _Studio:
    """The module's ``ragplan studio`` (its folders in ``home``): :attr:`url` while it serves; a test that stops it
    hard starts the next one from the same home (:meth:`start`), which the later tests share."""

    def __init__(self, home: Path, stack: ExitStack) -> None:
        self.home, self.stack, self.url = home, stack, ""

    def start(self) -> str:
        self.url = self.stack.enter_context(_studio(self.home))
        return self.url

    def serving(self) -> bool:
        return self.url in SERVERS and SERVERS[self.url].poll() is None


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    if not LANGGRAPH.exists():
        pytest.skip(f"{LANGGRAPH} not installed (pip install -e '.[dev]')")
    with ExitStack() as stack:  # every server started for the module, stopped at its end
        yield _Studio(tmp_path_factory.mktemp("studio"), stack)


@pytest.fixture
def server(studio) -> str:
    """URL of the module's studio server (started again if a test stopped it)."""
    return studio.url if studio.serving() else studio.start()


def test_ragplan_studio_serves_every_graph_from_any_folder(studio, server):
    """`ragplan studio` run in a folder without langgraph.json serves the installed package's graphs (its config and
    the server's files in ragplan's state folder, the user's folder left empty)."""
    from langgraph_sdk import get_sync_client

    served = {a["graph_id"] for a in get_sync_client(url=server).assistants.search(limit=100)}
    assert GRAPH_IDS <= served
    assert list((studio.home / "anywhere").iterdir()) == []
    assert (studio.home / "state" / "ragplan" / "studio" / "langgraph.json").exists()


@pytest.fixture(scope="module")
def data(every_family_data):
    return {f: every_family_data[f] for f in FAMILIES}


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


#: A fresh server loads REAPER's retail tools (an embedding model) inside the first tool calls, where an in-process
#: run loads them before its questions start: a budget a loaded machine cannot miss.
SLOW_TOOLS = {"reaper": ["--set", "step_timeout_s=600"]}


def _flags(method: str, d) -> list[str]:
    return [*d.eval(method), "--limit", "2", "--model", MODEL, *SLOW_TOOLS.get(method, [])]


def _eval(method: str, d, run: Path, stub: OpenAIStub, *extra: str) -> int:
    return main(["eval", "--method", method, *_flags(method, d), "--base-url", stub.base_url, "--out", str(run),
                 "--no-progress", *extra])


def _lines(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines() if x.strip()]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_server_run_writes_the_records_an_in_process_run_writes(family, server, data, tmp_path):
    from langgraph_sdk import get_sync_client

    d, method = data[family], FAMILIES[family]
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
        assert _eval(method, d, tmp_path / "local", stub) == 0
        local_calls = len(stub.requests)
        assert _eval(method, d, tmp_path / "remote", stub, "--server", server) == 0
        assert len(stub.requests) == 2 * local_calls > 0  # the server's graphs called the same endpoint as often
    compared, diffs = record_differences(tmp_path / "local", tmp_path / "remote")
    assert compared >= 1 and diffs == {}
    recs = _lines(tmp_path / "remote")
    assert all(r["error"] == "" and r["answer"] for r in recs)
    settings = json.loads((tmp_path / "remote" / "settings.json").read_text())
    assert settings["server"] == server
    summary = json.loads((tmp_path / "remote" / "summary.json").read_text())
    assert summary["runner"]["data_prepared"] == 0  # the data was opened on the server, not here
    # each question ran in a thread of its own on the server, tagged with the run folder and the question
    client = get_sync_client(url=server)
    for r in recs:
        [t] = client.threads.search(metadata={"ragplan_question": r["id"], "ragplan_run":
                                              f"{(tmp_path / 'remote').resolve()}@{settings['created']}"}, limit=5)
        assert t["status"] == "idle" and t["metadata"]["ragplan_attempt"] == 1
    assert (tmp_path / "remote" / "summary.md").exists() and not (tmp_path / "remote" / "checkpoints.sqlite").exists()


def test_resume_takes_results_finished_on_the_server_and_runs_nothing_again(server, data, tmp_path):
    """A client that died after the server finished a question but before its record: --resume takes the result from
    the server (no LLM call) and writes each record once."""
    d, run = data["reaper"], tmp_path / "run"
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
        assert _eval("reaper", d, run, stub, "--server", server) == 0
        calls = len(stub.requests)
        first = _lines(run)
        assert len(first) == 2
        (run / "results.jsonl").write_text(json.dumps(first[0]) + "\n")  # the second record was never written
        assert main(["eval", "--resume", str(run), "--no-progress"]) == 0
        assert len(stub.requests) == calls  # nothing ran again
    again = _lines(run)
    assert sorted(r["id"] for r in again) == sorted(r["id"] for r in first)
    assert again[1]["answer"] == first[1]["answer"] and again[1]["llm_calls"] == first[1]["llm_calls"]
    assert again[1]["invocation"] == 2 and again[1]["attempts"] == 1


def _slow(d, delay_s: float):
    """The family's replies, each after ``delay_s`` (``respond.delay_s = 0`` answers at once from then on)."""
    reply = auto_responder(d.overrides, d.text)

    def respond(req):
        time.sleep(respond.delay_s)
        return reply(req)
    respond.delay_s = delay_s
    return respond


def _wait_for(cond, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_a_killed_client_reattaches_to_the_runs_still_going(server, data, tmp_path):
    """Kill the client while its questions run on the server: --resume joins those runs (each question's graph ran
    once: no LLM call repeated) and writes each record once."""
    d, run = data["reaper"], tmp_path / "run"
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:  # how many calls a clean run makes
        assert _eval("reaper", d, tmp_path / "clean", stub, "--server", server) == 0
        clean = len(stub.requests)
    with OpenAIStub(responder=_slow(d, 1.5)) as stub:
        cmd = [sys.executable, "-m", "ragplan", "eval", "--method", "reaper", *_flags("reaper", d), "--base-url",
               stub.base_url, "--out", str(run), "--no-progress", "--server", server]
        proc = subprocess.Popen(cmd, cwd=tmp_path, env={**_env(), "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            _wait_for(lambda: len(stub.requests) >= 1)
        finally:
            proc.kill()
            _stop(proc)
        assert not (run / "results.jsonl").exists() or not _lines(run)
        assert main(["eval", "--resume", str(run), "--no-progress"]) == 0
        assert len(stub.requests) == clean
    recs = _lines(run)
    assert len(recs) == 2 and len({r["id"] for r in recs}) == 2 and all(r["error"] == "" for r in recs)
    assert record_differences(tmp_path / "clean", run)[1] == {}


def test_a_question_past_its_time_budget_stops_its_run_on_the_server(server, data, tmp_path):
    """A question given up by the client (past item_timeout_s) is recorded as timed out, and its run on the server is
    cancelled rather than left running (and billing the endpoint) after the eval has ended."""
    from langgraph_sdk import get_sync_client

    d, run = data["think_then_act"], tmp_path / "run"
    with OpenAIStub(responder=_slow(d, 30)) as stub:
        _eval("think_then_act", d, run, stub, "--server", server, "--item-timeout", "3")  # 1: every question failed
        recs = _lines(run)
        assert recs and all(r["stop_reason"] == "item_timeout" for r in recs)
        settings = json.loads((run / "settings.json").read_text())
        client = get_sync_client(url=server)
        for r in recs:
            [t] = client.threads.search(metadata={"ragplan_question": r["id"], "ragplan_run":
                                                  f"{run.resolve()}@{settings['created']}"}, limit=5)
            _wait_for(lambda: all(x["status"] not in ("pending", "running")
                                  for x in client.runs.list(t["thread_id"])), timeout_s=20)
            assert {x["status"] for x in client.runs.list(t["thread_id"])} == {"interrupted"}


def test_server_stopped_mid_run_records_failures_naming_it_and_resume_finishes(studio, server, data, tmp_path,
                                                                               monkeypatch):
    """The module's server is the one stopped; the one started again from its folders serves the later tests."""
    import ragplan.eval.server as server_mod

    monkeypatch.setattr(server_mod, "BACKOFF_S", 0.2)
    d, run, url = data["reaper"], tmp_path / "run", server
    codes: list[int] = []
    slow = _slow(d, 2.0)
    with OpenAIStub(responder=slow) as stub:
        t = threading.Thread(target=lambda: codes.append(_eval("reaper", d, run, stub, "--server", url)))
        t.start()
        _wait_for(lambda: len(stub.requests) >= 1)
        os.killpg(SERVERS[url].pid, signal.SIGKILL)  # stopped hard: a graceful stop could finish the runs
        t.join(120)  # the server is stopped: the client's retries end, the questions in flight are recorded
        slow.delay_s = 0  # (the runs to stop are over)
        assert not t.is_alive() and codes == [1]  # every question failed
        failed = _lines(run)
        assert len(failed) == 2
        for r in failed:
            assert url in r["error"] and r["failure"]["node"] == "langgraph_server", r
            assert r["failure"]["kind"] == "connection" and r["stop_reason"] == "crash"
        url2 = studio.start()  # back (on another port, from the same folders): --resume runs them on it
        assert main(["eval", "--resume", str(run), "--server", url2, "--no-progress"]) == 0
    recs = _lines(run)
    assert len(recs) == 2 and len({r["id"] for r in recs}) == 2
    assert all(r["error"] == "" and r["answer"] and r["invocation"] == 2 for r in recs)
    assert json.loads((run / "settings.json").read_text())["server"] == url2


def test_a_server_that_cannot_be_reached_refuses_the_run_naming_it(data, tmp_path, capsys):
    d, run, url = data["reaper"], tmp_path / "run", f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
        assert _eval("reaper", d, run, stub, "--server", url) == 2
        assert stub.requests == []
    err = capsys.readouterr().err
    assert f"LangGraph server {url}: ConnectError" in err and "Traceback" not in err
    assert not (run / "results.jsonl").exists()


def test_an_llm_cache_is_refused_on_a_server_run(data, tmp_path, capsys):
    """The server makes the LLM calls: a --llm-cache run there would record or replay none (it wrote an empty
    llm_cache.json), so it is refused before anything runs."""
    d, run, url = data["reaper"], tmp_path / "run", f"http://127.0.0.1:{_free_port()}"
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
        assert _eval("reaper", d, run, stub, "--server", url, "--llm-cache", str(tmp_path / "cache")) == 2
        assert stub.requests == []
    err = capsys.readouterr().err
    assert "--llm-cache cannot record or replay a run on a LangGraph server" in err and "Traceback" not in err
    assert not (run / "settings.json").exists() and not (run / "llm_cache.json").exists()


class _ErroringRuns:
    """langgraph_sdk's runs API for a server whose graph raised: every run ends in ``__error__`` (or, with
    ``unavailable=n``, the first n creates answer 503 and the runs then finish)."""

    def __init__(self, unavailable: int = 0) -> None:
        self.created, self.unavailable = 0, unavailable

    async def create(self, *args, **kwargs):
        import httpx

        self.created += 1
        if self.created <= self.unavailable:
            req = httpx.Request("POST", "http://127.0.0.1:1/runs")
            raise httpx.HTTPStatusError("503 Service Unavailable", request=req, response=httpx.Response(503, request=req))
        return {"run_id": f"run-{self.created}"}

    async def list(self, thread_id, limit=5):
        return []

    async def join(self, thread_id, run_id):
        if self.unavailable:
            return {"answer": "done"}
        return {"__error__": {"error": "ValueError", "message": "boom"}}


def _server_runs(tmp_path, runs):
    from types import SimpleNamespace

    from ragplan.eval.runfolder import RunFolder, RunSettings
    from ragplan.eval.server import ServerRuns

    async def created(**kwargs):
        return {}

    async def state(thread_id):
        return {}

    settings = RunSettings(method="cot", benchmark="hotpotqa", data="", server="http://127.0.0.1:1")
    sr = ServerRuns(settings, RunFolder(tmp_path), {}, {"q1": SimpleNamespace(context={})})
    sr.client = SimpleNamespace(runs=runs, threads=SimpleNamespace(create=created, get_state=state))
    return sr


@pytest.mark.parametrize("down", [2, 9])
def test_a_server_answering_5xx_is_retried_then_recorded_naming_it(tmp_path, monkeypatch, down):
    """A 5xx is retried with backoff (RETRIES more tries); a server still failing after them is the question's
    recorded failure (kind server_error, the server named), which --resume runs again."""
    import asyncio
    from types import SimpleNamespace

    import ragplan.eval.server as server_mod

    monkeypatch.setattr(server_mod, "BACKOFF_S", 0.01)
    runs = _ErroringRuns(unavailable=down)
    out = asyncio.run(_server_runs(tmp_path, runs).run("q1", 1, {"question": "q"}, SimpleNamespace(), 25))
    if down <= server_mod.RETRIES:
        assert out == {"answer": "done"} and runs.created == down + 1
    else:
        assert runs.created == server_mod.RETRIES + 1 and out["stop_reason"] == "crash"
        assert server_mod.server_failed(out) and out["failure"]["kind"] == "server_error"
        assert "LangGraph server http://127.0.0.1:1" in out["failure"]["message"] and "503" in out["failure"]["message"]


def test_a_server_that_is_down_is_tried_once_per_retry(tmp_path, monkeypatch, caplog):
    """A refused connection is tried once per try (the open, then RETRIES more after the first): no connection retries
    hidden under each (the SDK's transport made each request to a server that is down five more tries over 7.5 s, and
    a question wait over a minute before its failure was recorded)."""
    import asyncio
    import logging
    from types import SimpleNamespace

    import ragplan.eval.server as server_mod
    from ragplan.eval.runfolder import RunFolder, RunSettings

    monkeypatch.setattr(server_mod, "BACKOFF_S", 0.01)
    url = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    sr = server_mod.ServerRuns(RunSettings(method="cot", benchmark="hotpotqa", data="", server=url),
                               RunFolder(tmp_path), {}, {"q1": SimpleNamespace(context={})})
    caplog.set_level(logging.DEBUG, logger="httpcore.connection")

    def connects() -> int:
        return sum(r.getMessage().startswith("connect_tcp.started") for r in caplog.records)

    async def go():
        with pytest.raises(ConnectionError, match=f"LangGraph server {url}: ConnectError"):
            await sr.open()
        assert connects() == 1
        try:
            return await sr.run("q1", 1, {"question": "q"}, SimpleNamespace(), 25)
        finally:
            await sr.close()

    out = asyncio.run(go())
    assert out["failure"]["kind"] == "connection" and server_mod.server_failed(out) and out["stop_reason"] == "crash"
    assert connects() == 1 + server_mod.RETRIES + 1


def test_a_run_that_errored_on_the_server_is_recorded_at_once_naming_it(tmp_path):
    """A graph that raised on the server is that question's recorded crash, as a graph raising in-process is: no
    retry of a run that would raise again, and the message names the server and the error."""
    import asyncio
    from types import SimpleNamespace

    from ragplan.eval.server import RunError

    runs = _ErroringRuns()
    with pytest.raises(RunError, match=r"LangGraph server http://127\.0\.0\.1:1: ValueError: boom"):
        asyncio.run(_server_runs(tmp_path, runs).run("q1", 1, {"question": "q"}, SimpleNamespace(), 25))
    assert runs.created == 1
