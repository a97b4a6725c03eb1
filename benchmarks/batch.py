"""Throughput of one cold `ragplan eval` run against an endpoint with a fixed latency.

What a user runs: a fresh ``ragplan eval`` process runs ``--n`` one-call HotpotQA questions (published JSON
format) with the ``cot`` baseline at ``--concurrency`` against a local OpenAI-compatible endpoint (the tests'
stub, in its own process) that answers every request after ``--latency`` seconds. Efficiency is calls ×
latency / concurrency over the runner's wall time (``summary.json``'s ``cost.wall_time_s``); 1.0 means
``concurrency`` requests were in flight all the time. The whole process's wall time is printed beside it.

    .venv/bin/python benchmarks/batch.py [--n 64] [--latency 1] [--concurrency 32] [--no-checkpoints] [--server]
                                         [--save FILE.json] [--baseline FILE.json]

``--server`` also starts ``ragplan studio`` (a local LangGraph dev server) and runs the same questions with
``eval --server``, printing both rows and the CPU seconds the client and the server spent.

Target: efficiency ≥ 0.85 at the defaults.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import add_report_flags, print_rows, save_report  # noqa: E402
from tests.test_langgraph_dev import SERVERS, _free_port, _serving  # noqa: E402


def serve(latency: float, ready: Any) -> None:
    """The endpoint process: every request answered with a chain of thought after ``latency`` seconds."""
    from ragplan.nodes.think_then_act.direct_answer import ChainOfThought
    from tests.openai_server import Fault, OpenAIStub

    reply = ChainOfThought(reasoning="The question names it.", answer="yes")
    stub = OpenAIStub(responder=lambda req: Fault(delay_s=latency, reply=reply), keep_alive=True).start()
    ready.put(stub.base_url)
    while True:
        time.sleep(3600)


def hotpot_records(n: int) -> list[dict[str, Any]]:
    """``n`` questions in HotpotQA's published format (``_id``, question, answer, type, level, facts, context)."""
    return [{"_id": f"q{i:04d}", "question": f"Is city {i} in the same country as city {i + 1}?", "answer": "yes",
             "type": "comparison", "level": "easy", "supporting_facts": [[f"City {i}", 0], [f"City {i + 1}", 0]],
             "context": [[f"City {i}", [f"City {i} is in Country {i % 7}."]],
                         [f"City {i + 1}", [f"City {i + 1} is in Country {i % 7}."]]]}
            for i in range(n)]


def group_cpu(pgid: int) -> float:
    """CPU seconds (user + sys) of the live processes in the process group ``pgid`` (Linux /proc)."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # (fields after the name: state, ppid, pgrp, …, utime at 11, stime at 12)
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def cold_run(base_url: str, data: Path, out: Path, n: int, concurrency: int, latency: float,
             checkpoints: bool, server: str = "") -> dict[str, Any]:
    """One fresh ``ragplan eval`` process (its questions run on ``server`` when given); its figures."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    env.pop("OPENAI_API_KEY", None)
    cmd = [sys.executable, "-m", "ragplan", "eval", "--method", "cot", "--benchmark", "hotpotqa", "--data", str(data),
           "--limit", str(n), "--concurrency", str(concurrency), "--model", "openai:stub", "--base-url", base_url,
           "--out", str(out), "--no-progress", *([] if checkpoints else ["--no-checkpoints"]),
           *(["--server", server] if server else [])]
    t0, cpu0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    process_s = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    client_cpu = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
    if proc.returncode != 0:
        raise SystemExit(f"ragplan eval failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    calls = int(summary["cost"]["llm_calls"])
    run_s = float(summary["cost"]["wall_time_s"])
    ideal = calls * latency / concurrency
    return {"path": "server" if server else "in-process", "concurrency": concurrency, "questions": summary["overall"]["n"], "errors": summary["overall"].get("errors", 0),
            "calls": calls, "ideal_s": round(ideal, 3), "run_s": round(run_s, 3), "efficiency": round(ideal / run_s, 3),
            "process_s": round(process_s, 3), "process_efficiency": round(ideal / process_s, 3),
            "client_cpu_s": round(client_cpu, 2)}


def main(argv: list[str] | None = None) -> int:
    """Start the endpoint, run one cold ``ragplan eval``, print its row."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=64, help="questions (default 64)")
    ap.add_argument("--latency", type=float, default=1.0, help="seconds per LLM request (default 1)")
    ap.add_argument("--concurrency", type=int, default=32, help="questions in flight (default 32)")
    ap.add_argument("--no-checkpoints", action="store_true", help="ragplan eval --no-checkpoints")
    ap.add_argument("--server", action="store_true", help="also run the questions on a local `ragplan studio`")
    add_report_flags(ap, "efficiency")
    args = ap.parse_args(argv)
    spawn = multiprocessing.get_context("spawn")
    ready = spawn.Queue()
    endpoint = spawn.Process(target=serve, args=(args.latency, ready), daemon=True)
    endpoint.start()
    try:
        base_url = ready.get(timeout=120)
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "hotpot_dev_distractor_v1.json"
            data.write_text(json.dumps(hotpot_records(args.n)))
            rows = [cold_run(base_url, data, Path(tmp) / "run", args.n, args.concurrency, args.latency,
                             not args.no_checkpoints)]
            if args.server:
                env = dict(os.environ, HF_HUB_OFFLINE="1", NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
                (home := Path(tmp) / "studio").mkdir()
                cmd = [sys.executable, "-m", "ragplan", "studio", "--no-browser", "--no-reload", "--n-jobs-per-worker",
                       str(args.concurrency), "--port", str(_free_port())]
                with _serving(cmd, home, home / "studio.log", {**env, "XDG_STATE_HOME": str(home / "state")}) as url:
                    before = group_cpu(SERVERS[url].pid)
                    rows.append(cold_run(base_url, data, Path(tmp) / "run-server", args.n, args.concurrency,
                                         args.latency, True, url))
                    rows[-1]["server_cpu_s"] = round(group_cpu(SERVERS[url].pid) - before, 2)
    finally:
        endpoint.kill()
    print(f"cot, {args.n} HotpotQA questions, one cold `ragplan eval` process, {args.latency:g} s per request "
          f"(endpoint in its own process), checkpoints {'off' if args.no_checkpoints else 'on'}")
    print_rows(rows, [("path", "s"), ("concurrency", "d"), ("questions", "d"), ("errors", "d"), ("calls", "d"), ("ideal_s", ".2f"),
                       ("run_s", ".2f"), ("efficiency", ".2f"), ("process_s", ".2f"), ("process_efficiency", ".2f"),
                      ("client_cpu_s", ".2f"), ("server_cpu_s", ".2f")],
               key="path", baseline=args.baseline, compare="efficiency")
    save_report(args.save, "batch", rows, n=args.n, latency=args.latency)
    return 0


if __name__ == "__main__":
    sys.exit(main())
