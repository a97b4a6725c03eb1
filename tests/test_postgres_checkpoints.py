"""Checkpoints in PostgreSQL: ``--checkpoint-db postgresql://…`` for ``ask``, ``resume`` and ``eval``.

* A value that is neither a path nor a PostgreSQL URL is refused (exit 2) and creates nothing; a server that
  cannot be reached (nothing listening, or listening and never answering) is exit 2 naming it, within the
  connect timeout, its password masked.
* Two processes, as two machines would (own working folder, own state folder), continue one thread from one
  PostgreSQL: a run paused for plan review in one is approved in the other. No file is written locally and the
  URL's password is in no output, no file and no row of the database.
* ``eval --checkpoint-db URL`` killed with a question in flight: ``--resume`` needs the URL again (settings.json keeps
  it masked), continues the question from its last node, and leaves no schema behind.

The database tests need ``RAGPLAN_TEST_POSTGRES=postgresql://…`` (a role that may create databases; each session
works in a database of its own); scripts/test.sh starts a throwaway server and sets it. Without it they skip,
unless ``RAGPLAN_POSTGRES_EXPECTED`` is set (scripts/test.sh sets it where it can install PostgreSQL, as in CI).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from ragplan.cli import main
from tests import ragplan_process
from tests.data import QUESTION
from tests.openai_server import OpenAIStub
from tests.test_checkpoints import MODEL, ROOT, _building_responder, _env, _kill, _thread, _wait_for, script

PASSWORD = "pg-s3cret-Pw"


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh database on the test server (dropped at the end), as a URL carrying a password (the test server
    trusts local connections, so the password is only something that must never be written)."""
    base = os.environ.get("RAGPLAN_TEST_POSTGRES", "")
    if not base:
        reason = "RAGPLAN_TEST_POSTGRES is not set (scripts/test.sh starts PostgreSQL when run as root)"
        if os.environ.get("RAGPLAN_POSTGRES_EXPECTED"):
            pytest.fail(reason + ", but RAGPLAN_POSTGRES_EXPECTED is set")
        pytest.skip(reason)
    import psycopg

    name = f"ragplan_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(base)
    netloc = f"{parts.username or 'postgres'}:{PASSWORD}@{parts.hostname}:{parts.port or 5432}"
    yield urlunsplit((parts.scheme, netloc, f"/{name}", parts.query, ""))
    with psycopg.connect(base, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def _run(args: list[str], cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    """``ragplan ARGS`` in a process of its own (forked with its imports done), as on another machine: its own working
    and state folders."""
    env = {k: v for k, v in _env().items() if k != "RAGPLAN_CHECKPOINT_DB"}
    env.update(XDG_STATE_HOME=str(cwd / "state"), HOME=str(cwd), PYTHONPATH=str(ROOT))
    cwd.mkdir(parents=True, exist_ok=True)
    return ragplan_process.run(args, cwd, env, stdin=stdin, timeout=300)


def _no_password_in(*folders: Path) -> None:
    for folder in folders:
        for f in folder.rglob("*"):
            assert not f.is_file() or PASSWORD.encode() not in f.read_bytes(), f


@pytest.mark.parametrize("value", ["mysql://u@127.0.0.1/db", "sqlite:///tmp/x.sqlite", "https://example.com/c.db"])
def test_a_value_neither_a_path_nor_a_postgres_url_is_refused(value, trade_cql, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ask = ["ask", "--method", "planrag", "--graph", str(trade_cql), "--question", "q", "--model", MODEL,
           "--base-url", "http://127.0.0.1:9/v1", "--checkpoint-db", value]
    for argv in (ask, ["resume", "abc", "--checkpoint-db", value], ["resume", "--list", "--checkpoint-db", value]):
        assert main(argv) == 2
        assert f"--checkpoint-db {value}: neither a file path nor a PostgreSQL URL" in capsys.readouterr().err
    assert main(["eval", "--method", "single_rag", "--benchmark", "dqa-building", "--data", str(tmp_path), "--model",
                 MODEL, "--base-url", "http://127.0.0.1:9/v1", "--checkpoint-db", str(tmp_path / "c.sqlite")]) == 2
    assert "eval takes a postgresql:// URL" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trade.cql"]  # no folder named after the scheme


def _silent_server() -> tuple[socket.socket, int]:
    """A port that accepts connections and never answers (a server that hangs)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s, s.getsockname()[1]


def test_an_unreachable_server_is_exit_2_naming_it(trade_cql, tmp_path, monkeypatch, capsys):
    import ragplan.checkpoints

    monkeypatch.chdir(tmp_path)
    # the default connect timeout, shortened (to libpq's least, 2 s): the silent server is given up on by it all the same
    monkeypatch.setattr(ragplan.checkpoints, "CONNECT_TIMEOUT_S", 2)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there
    silent, quiet_port = _silent_server()
    try:
        for p in (port, quiet_port):  # refused at once; silent: the default connect timeout (here 2 s), not a hang
            url = f"postgresql://ragplan:{PASSWORD}@127.0.0.1:{p}/ragplan"
            for argv in (["resume", "--list", "--checkpoint-db", url],
                         ["ask", "--method", "planrag", "--graph", str(trade_cql), "--question", "q", "--model", MODEL,
                          "--base-url", "http://127.0.0.1:9/v1", "--checkpoint-db", url]):
                t0 = time.monotonic()
                assert main(argv) == 2
                assert time.monotonic() - t0 < 30
                err = capsys.readouterr().err
                assert f"cannot connect to the checkpoint database postgresql://ragplan:***@127.0.0.1:{p}/ragplan" in err
                assert PASSWORD not in err
    finally:
        silent.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trade.cql"]  # no folder named after the scheme


def test_two_processes_continue_one_thread_from_one_postgres(pg_url, trade_cql, tmp_path, capsys):
    a, b = tmp_path / "machine-a", tmp_path / "machine-b"
    with OpenAIStub(replies=script()) as stub:
        first = _run(["ask", "--method", "planrag", "--graph", str(trade_cql), "--question", QUESTION, "--model", MODEL,
                      "--base-url", stub.base_url, "--review", "--checkpoint-db", pg_url], a)  # no terminal: it pauses
        assert first.returncode == 1, first.stderr
        tid = _thread(first.stdout)
        masked = pg_url.replace(PASSWORD, "***")
        assert f"continue with: ragplan resume {tid} --checkpoint-db {masked}" in first.stderr
        assert len(stub.requests) == 1  # the plan only
        assert main(["resume", "--list", "--checkpoint-db", pg_url]) == 0
        assert f"{tid}  paused" in capsys.readouterr().out
        second = _run(["resume", tid, "--checkpoint-db", pg_url], b, stdin="a\n")  # approve
        assert second.returncode == 0, second.stderr
        assert f"Thread: {tid}  (paused for plan review)" in second.stdout and "Answer: lubeck" in second.stdout
        assert [r.forced_tool for r in stub.requests] == ["Plan", "RetrievalAction", "ReplanDecision", "FinalAnswer"]
        assert main(["resume", tid, "--checkpoint-db", pg_url]) == 0
        assert "is finished" in capsys.readouterr().out and len(stub.requests) == 4
    for proc in (first, second):
        assert PASSWORD not in proc.stdout + proc.stderr
    assert not list(a.rglob("*.sqlite*")) and not list(b.rglob("*.sqlite*"))  # nothing kept locally
    _no_password_in(a, b)
    [(status, settings)] = _rows(pg_url, f"SELECT status, settings FROM ragplan_runs WHERE thread_id = '{tid}'")
    assert status == "finished" and PASSWORD not in settings
    assert _rows(pg_url, f"SELECT count(*) FROM checkpoints WHERE thread_id = '{tid}'")[0][0] > 0


def test_eval_checkpoints_in_postgres_survive_a_kill_and_go_when_the_run_is_done(pg_url, tmp_path):
    from ragplan.methods.planrag.generate import generate_clone

    generate_clone(tmp_path / "clone", "building", 2, seed=0)
    run = tmp_path / "run"
    schemas = "SELECT count(*) FROM information_schema.schemata WHERE schema_name LIKE 'ragplan_eval_%'"
    before = _rows(pg_url, schemas)[0][0]
    hold = {"on": True}
    with OpenAIStub(responder=_building_responder(hold)) as stub:
        proc = ragplan_process.start(  # (a process of its own, forked with its imports done)
            ["eval", "--method", "single_rag", "--benchmark", "dqa-building", "--data", str(tmp_path / "clone"),
             "--limit", "2", "--concurrency", "1", "--out", str(run), "--no-progress", "--model", MODEL,
             "--base-url", stub.base_url, "--set", "llm_max_retries=0", "--checkpoint-db", pg_url], ROOT, _env())
        try:  # the first question's answer request is held
            _wait_for(lambda: any(r.forced_tool == "FinalAnswer" for r in stub.requests), proc=proc)
        finally:
            _kill(proc)
        assert _rows(pg_url, schemas)[0][0] == before + 1  # the question's checkpoints are in PostgreSQL
        assert not (run / "checkpoints.sqlite").exists()
        saved = json.loads((run / "settings.json").read_text())
        assert saved["checkpoint_db"] == pg_url.replace(PASSWORD, "***")
        _no_password_in(run)
        assert main(["eval", "--resume", str(run), "--no-progress"]) == 2  # the password is needed again
        hold["on"] = False
        assert main(["eval", "--resume", str(run), "--no-progress", "--checkpoint-db", pg_url]) == 0
        tools = [r.forced_tool for r in stub.requests]
    assert tools.count("RetrievalAction") == 2, tools  # the killed question's query was not asked again
    assert tools.count("FinalAnswer") == 3, tools  # its answer was (it was in flight)
    recs = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert len(recs) == 2 and all(r["answer"] == "1" and r["error"] == "" for r in recs)
    assert _rows(pg_url, schemas)[0][0] == before  # finished: its schema is dropped
    _no_password_in(run)
