"""``langgraph dev`` serves every graph of langgraph.json, with their typed settings, and runs them.

Starts the real dev server (``langgraph dev --no-browser --no-reload``) from the repo root on a free
port, with its logs in a temp dir (outside the project, so nothing there touches the watched tree),
and talks to it with ``langgraph_sdk``. The LLM is the scripted OpenAI-compatible stub, run as its
own process from a JSON script (``python -m tests.openai_server``); the graph is the toy trade
network, given to the run as a ``.cql`` path in its context. Everything stays on 127.0.0.1.

The in-memory runtime keeps its threads and checkpoints in ``.langgraph_api/`` under the working
directory (the repo root, git-ignored) and reloads them on the next start (``langgraph dev`` sets
``LANGGRAPH_DISABLE_FILE_PERSISTENCE`` from langgraph.json's ``disable_persistence`` only, so the
environment cannot turn it off); the tests assert nothing that depends on earlier runs.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from ragplan.nodes.planrag.answer import FinalAnswer
from ragplan.nodes.planrag.plan import Plan
from ragplan.nodes.planrag.replan import ReplanDecision
from ragplan.nodes.planrag.retrieve import RetrievalAction
from tests.data import QUESTION, TRADE_NETWORK

# one worker runs the module: one dev server, and one writer of .langgraph_api/ in the repo root
pytestmark = [pytest.mark.server, pytest.mark.xdist_group("langgraph_dev")]

ROOT = Path(__file__).resolve().parents[1]
LANGGRAPH = Path(sys.executable).parent / "langgraph"
GRAPH_IDS = set(json.loads((ROOT / "langgraph.json").read_text())["graphs"])
START_TIMEOUT_S = 90

Q_POWER = 'MATCH (c:Country {name:"SWE"})-[r:NodeCountry]->(t:Trade_node) RETURN t.name AS node, r.calculated_trading_power AS power ORDER BY node'
SCRIPT = [
    Plan(steps=["Get SWE's trading power per node"], reason="where SWE has power"),
    RetrievalAction(thought="SWE's powers", action="graph_db", action_input=Q_POWER),
    ReplanDecision(replan=False, reason="enough data"),
    FinalAnswer(answer="lubeck", rationale="highest power outside home (12)"),
]


def _env() -> dict[str, str]:
    """Plain ``langgraph dev``: no GLIBC_TUNABLES (the graph store keeps kglite out of the server process)."""
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    env.update(LANGGRAPH_CLI_NO_ANALYTICS="1", LANGSMITH_TRACING="false", LANGCHAIN_TRACING_V2="false",
               HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    if any(k.lower().endswith("_proxy") for k in env):  # keep 127.0.0.1 off any configured proxy
        env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 60) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.exists() else "(no log)"


def _stop(proc: subprocess.Popen) -> None:
    """Terminate the process group we started (the server and its workers), then make sure."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


SERVERS: dict[str, subprocess.Popen] = {}
"""The process (its own process group) of each server :func:`_serving` is serving, by URL."""


@contextmanager
def _serving(cmd: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """Start a LangGraph dev server with ``cmd`` (its port is the last argument), wait for /ok; its URL (its process
    in :data:`SERVERS` meanwhile); stopped."""
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env or _env(), stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{cmd[-1]}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{cmd[2]} exited with {proc.returncode}:\n{_tail(log)}")
            try:
                with urllib.request.urlopen(url + "/ok", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{cmd[2]} not ready after {START_TIMEOUT_S} s:\n{_tail(log)}")
            time.sleep(0.5)
        SERVERS[url] = proc
        yield url
    finally:
        SERVERS.pop(url, None)
        _stop(proc)


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory):
    """URL of a ``langgraph dev`` server for this module; always stopped at the end."""
    if not LANGGRAPH.exists():
        pytest.skip(f"{LANGGRAPH} not installed (pip install -e '.[dev]')")
    log = tmp_path_factory.mktemp("langgraph_dev") / "server.log"
    cmd = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--config", "langgraph.json", "--port", str(_free_port())]
    with _serving(cmd, ROOT, log) as url:
        yield url


@pytest.fixture
def stub_url(tmp_path):
    """Base URL of a scripted OpenAI stub running as its own process (``python -m tests.openai_server``)."""
    script = tmp_path / "replies.json"
    script.write_text(json.dumps([{"tool": type(r).__name__, "args": r.model_dump()} for r in SCRIPT]))
    proc = subprocess.Popen([sys.executable, "-m", "tests.openai_server", "--port", "0", "--script", str(script)],
                            cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline().strip() if ready else "(no output in 30 s)"  # "READY http://127.0.0.1:PORT/v1"
        assert line.startswith("READY "), f"stub did not start: {line}"
        yield line.split(" ", 1)[1]
    finally:
        _stop(proc)


def _stub_requests(base_url: str) -> list[dict]:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/_stub/requests", timeout=5) as r:
        return json.load(r)


def test_dev_server_lists_all_graphs_with_typed_settings(dev_server):
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=dev_server)
    assistants = client.assistants.search(limit=100)
    assert GRAPH_IDS <= {a["graph_id"] for a in assistants}
    from ragplan.registry import family_of

    for a in assistants:  # every family's data flags are fields of its Studio form, with descriptions
        if a["graph_id"] not in GRAPH_IDS:
            continue
        props = client.assistants.get_schemas(a["assistant_id"])["context_schema"]["properties"]
        fam = family_of(a["graph_id"])
        for name in fam.settable():
            assert name in props and props[name].get("description"), (a["graph_id"], name)
    planrag = next(a for a in assistants if a["graph_id"] == "planrag")
    schemas = client.assistants.get_schemas(planrag["assistant_id"])
    props = schemas["context_schema"]["properties"]
    for name in ("max_steps", "max_replans", "row_cap", "query_timeout_s", "graph_path", "model", "base_url",
                 "structured_output", "llm_cache_dir", "llm_replay"):
        assert name in props, f"{name} missing from the context schema: {sorted(props)}"
        assert props[name].get("description"), f"{name} has no description"
    assert props["max_steps"]["type"] == "integer" and props["max_steps"]["default"] == 12
    assert props["query_timeout_s"]["type"] == "number"
    assert props["llm_replay"]["type"] == "boolean" and props["llm_replay"]["default"] is False
    assert set(props["structured_output"]["enum"]) == {"function_calling", "json_schema", "text"}
    assert set(schemas["input_schema"]["properties"]) == {"question"}
    assert {"answer", "steps", "plan", "usage", "stop_reason"} <= set(schemas["output_schema"]["properties"])


def test_dev_server_runs_planrag_to_completion(dev_server, stub_url, tmp_path):
    from langgraph_sdk import get_sync_client

    cql = tmp_path / "trade.cql"
    cql.write_text(TRADE_NETWORK)
    client = get_sync_client(url=dev_server)
    thread = client.threads.create()
    out = client.runs.wait(
        thread["thread_id"], "planrag", input={"question": QUESTION},
        context={"model": "openai:stub", "base_url": stub_url, "graph_path": str(cql), "llm_max_retries": 0},
    )
    assert out.get("error", "") == "", out.get("error")
    assert out["answer"] == "lubeck" and out["stop_reason"] == "plan_done"
    assert out["plan"] == ["Get SWE's trading power per node"]
    [step] = out["steps"]
    assert step["ok"] and step["query"] == Q_POWER and "lubeck | 12" in step["observation"]
    assert out["usage"]["llm_calls"] == 4 and out["usage"]["input_tokens"] > 0
    # the dev server's graph called the stub with each decision's schema forced as a tool
    seen = _stub_requests(stub_url)
    assert [r["body"]["tool_choice"]["function"]["name"] for r in seen] == [type(r).__name__ for r in SCRIPT]
    assert all(r["body"]["model"] == "stub" for r in seen)
    assert out["usage"]["input_tokens"] == sum(r["usage"]["prompt_tokens"] for r in seen)
    # the thread keeps the final state
    state = client.threads.get_state(thread["thread_id"])
    assert state["values"]["answer"] == "lubeck"


def _paused_planrag(dev_server: str, stub_url: str, tmp_path: Path) -> tuple[Any, str, dict]:
    """A planrag run with plan review on, started through the SDK on a new thread: ``(client, thread id, context)``."""
    from langgraph_sdk import get_sync_client

    cql = tmp_path / "trade.cql"
    cql.write_text(TRADE_NETWORK)
    ctx = {"model": "openai:stub", "base_url": stub_url, "graph_path": str(cql), "llm_max_retries": 0, "review_plan": True}
    client = get_sync_client(url=dev_server)
    tid = client.threads.create()["thread_id"]
    client.runs.wait(tid, "planrag", input={"question": QUESTION}, context=ctx)
    return client, tid, ctx


def test_dev_server_plan_review_pauses_and_approve_resumes(dev_server, stub_url, tmp_path):
    """Plan review through the LangGraph server: the run pauses at review_plan, the thread's interrupt shows the
    plan, and Command(resume={"action": "approve"}) from the SDK finishes the run."""
    client, tid, ctx = _paused_planrag(dev_server, stub_url, tmp_path)
    state = client.threads.get_state(tid)
    assert list(state["next"]) == ["review_plan"]
    [intr] = state["interrupts"]
    payload = intr["value"]
    assert payload["method"] == "planrag" and payload["kind"] == "plan"
    assert payload["plan"] == "1. Get SWE's trading power per node" and payload["steps"] == ["Get SWE's trading power per node"]
    assert '{"action": "approve"}' in payload["accepts"]
    assert [r["body"]["tool_choice"]["function"]["name"] for r in _stub_requests(stub_url)] == ["Plan"]
    out = client.runs.wait(tid, "planrag", command={"resume": {"action": "approve"}}, context=ctx)
    assert out.get("error", "") == "" and out["answer"] == "lubeck" and out["stop_reason"] == "plan_done"
    assert [r["action"] for r in out["plan_reviews"]] == ["approve"]
    assert len(_stub_requests(stub_url)) == 4


def test_dev_server_resume_without_the_runs_context_is_refused(dev_server, stub_url, tmp_path):
    """Resuming a paused run from the SDK without ``context=`` would run the plan with the default model and
    endpoint: the server refuses it (the run errors naming the settings), the thread stays paused with nothing sent,
    and the resume with the run's context finishes it."""
    client, tid, ctx = _paused_planrag(dev_server, stub_url, tmp_path)
    sent = len(_stub_requests(stub_url))
    try:
        out = client.runs.wait(tid, "planrag", command={"resume": {"action": "approve"}})
        refusal = json.dumps(out)
    except Exception as exc:  # (an SDK that raises on a failed run)
        refusal = str(exc)
    assert "ResumeContextMismatch" in refusal or "resume it with the context it ran with" in refusal, refusal
    state = client.threads.get_state(tid)
    assert list(state["next"]) == ["review_plan"] and state["interrupts"]
    assert len(_stub_requests(stub_url)) == sent
    out = client.runs.wait(tid, "planrag", command={"resume": {"action": "approve"}}, context=ctx)
    assert out["answer"] == "lubeck" and out.get("error", "") == ""


def test_dev_server_plan_review_reject_ends_the_run(dev_server, stub_url, tmp_path):
    client, tid, ctx = _paused_planrag(dev_server, stub_url, tmp_path)
    assert client.threads.get_state(tid)["interrupts"]
    out = client.runs.wait(tid, "planrag", command={"resume": "reject"}, context=ctx)
    assert out["stop_reason"] == "plan_rejected" and out.get("answer", "") == ""
    assert [r["action"] for r in out["plan_reviews"]] == ["reject"]
    state = client.threads.get_state(tid)
    assert list(state["next"]) == [] and not state["interrupts"]
    assert len(_stub_requests(stub_url)) == 1  # the plan only: no retrieval, no answer


def test_dev_server_run_with_unreachable_endpoint_ends_with_llm_error(dev_server, tmp_path):
    from langgraph_sdk import get_sync_client

    cql = tmp_path / "trade.cql"
    cql.write_text(TRADE_NETWORK)
    client = get_sync_client(url=dev_server)
    dead = f"http://127.0.0.1:{_free_port()}/v1"  # nothing listens there
    out = client.runs.wait(
        None, "single_rag", input={"question": QUESTION},
        context={"model": "openai:stub", "base_url": dead, "graph_path": str(cql), "llm_max_retries": 0},
    )
    assert out["stop_reason"] == "llm_error" and out["answer"] == ""
    assert "Connection" in out["error"], out["error"]
