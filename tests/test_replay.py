"""Record a run from the local OpenAI-compatible server, stop the server, replay it offline: the same records.

``ragplan eval … --llm-cache DIR`` records every LLM call of a PlanRAG run over a generated DQA clone and
of a Think-then-Act run over a small HotpotQA file (context-only index); then, with the server stopped
and no key or base URL, ``ragplan eval --rerun RUN --out NEW --llm-cache DIR --replay`` runs both again in
another process (another hash seed, so no set order can sneak into a prompt) and must reproduce the
answers, grades and traces exactly. A miss fails clearly.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragplan.cli import main
from ragplan.eval.runfolder import record_differences
from tests.auto_reply import auto_responder
from tests.family_data import planrag as planrag_data
from tests.family_data import think_then_act as tta_data
from tests.openai_server import OpenAIStub

ROOT = Path(__file__).resolve().parents[1]
MODEL = "openai:stub-model"


@pytest.fixture(autouse=True)
def _offline(monkeypatch, local_endpoint):
    """No key and no base URL from the environment (and no proxy for 127.0.0.1): replay must need neither."""
    for k in ("RAGPLAN_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(k, raising=False)


@pytest.fixture(scope="module")
def tta(tmp_path_factory):
    """The Think-then-Act family's test data (its small index built once for the module)."""
    return tta_data.make(tmp_path_factory.mktemp("tta"))


def _think_then_act_data(root: Path, d: Any) -> tuple[list[str], Any]:
    from tests.test_datasets import HOTPOT, write_json

    root.mkdir(parents=True, exist_ok=True)
    hotpot = write_json(root / "hotpot_two.json", HOTPOT[:2])
    return ["--method", "think_then_act", "--benchmark", "hotpotqa", "--data", str(hotpot), "--context-only"], d


def _planrag_data(root: Path) -> tuple[list[str], Any]:
    from ragplan.methods.planrag.generate import generate_clone

    clone = root / "dqa"
    generate_clone(clone, "locating", 2, seed=3)
    d = planrag_data.make(root / "family")
    return ["--method", "planrag", "--benchmark", "dqa-locating", "--data", str(clone)], d


#: The timing fields these two families' records have (the rest must match exactly).
TIMING = {"latency_s", "llm_seconds", "finished_at", "invocation", "query_ms"}


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return re.sub(r"\d+\.\d\d s\]", "(t) s]", value) if isinstance(value, str) else value


def _records(run: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in (json.loads(x) for x in (run / "results.jsonl").read_text().splitlines())}


def _replay(*args: str, seed: str = "7") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONHASHSEED": seed, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "ragplan", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("family", ["planrag", "think_then_act"])
def test_a_recorded_run_replays_exactly_offline(family, tmp_path, capsys, request):
    flags, d = (_planrag_data(tmp_path / "data") if family == "planrag"
                else _think_then_act_data(tmp_path / "data", request.getfixturevalue("tta")))
    cache, run, again = tmp_path / "cache", tmp_path / "run", tmp_path / "replayed"
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
        code = main(["eval", *flags, "--model", MODEL, "--base-url", stub.base_url, "--out", str(run),
                     "--llm-cache", str(cache), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    sent = len(stub.requests)
    recorded = _records(run)
    assert len(recorded) == 2 and all(r["answer"] and r["error"] == "" for r in recorded.values())
    assert sum(r["llm_calls"] for r in recorded.values()) == sent > 0
    settings = json.loads((run / "settings.json").read_text())
    assert settings["llm_cache_dir"] == str(cache.resolve()) and settings["llm_replay"] is False
    used = json.loads((run / "llm_cache.json").read_text())
    entries = sorted(p.stem for p in cache.glob("??/??/*.json"))
    assert used["digests"] == entries and used["entries"] == len(entries) > 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["llm_cache"] == {k: used[k] for k in ("dir", "replay", "entries", "fingerprint")}
    assert f"LLM cache: {cache.resolve()}   entries used: {len(entries)}" in out

    # the server is gone: replay in another process, with no endpoint configured at all
    proc = _replay("eval", "--rerun", str(run), "--out", str(again), "--llm-cache", str(cache), "--replay",
                   "--no-progress")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"replay check: 2 of 2 records identical to {run} (timing fields aside)" in proc.stdout
    replayed = _records(again)
    assert record_differences(run, again) == (2, {})
    assert set(replayed) == set(recorded)
    for qid, rec in recorded.items():  # answers, grades, tokens and the whole trace are the same
        assert _untimed(replayed[qid]) == _untimed(rec)
        assert replayed[qid]["answer"] == rec["answer"] and replayed[qid]["input_tokens"] == rec["input_tokens"]
    again_summary = json.loads((again / "summary.json").read_text())
    assert again_summary["overall"] == summary["overall"]
    assert again_summary["llm_cache"]["fingerprint"] == used["fingerprint"] and again_summary["llm_cache"]["replay"] is True
    assert json.loads((again / "settings.json").read_text())["llm_replay"] is True
    assert sorted(p.stem for p in cache.glob("??/??/*.json")) == entries  # replay wrote nothing


def test_a_replay_miss_fails_clearly(tmp_path, capsys, tta):
    flags, d = _think_then_act_data(tmp_path / "data", tta)
    cache, empty, run = tmp_path / "cache", tmp_path / "empty", tmp_path / "run"
    empty.mkdir()
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
        assert main(["eval", *flags, "--limit", "1", "--model", MODEL, "--base-url", stub.base_url, "--out", str(run),
                     "--llm-cache", str(cache), "--no-progress"]) == 0
    capsys.readouterr()
    # re-executing from a cache that lacks the run's entries is refused before anything runs
    code = main(["eval", "--rerun", str(run), "--out", str(tmp_path / "r1"), "--llm-cache", str(empty), "--replay"])
    err = capsys.readouterr().err
    assert code == 2 and "lacks or cannot serve 3 of the 3 responses" in err and not (tmp_path / "r1").exists()
    assert err.count(": missing") == 3
    used = run / "llm_cache.json"  # the run's own list of entries torn: named, not a traceback
    whole = used.read_text()
    used.write_text(whole[:20])
    code = main(["eval", "--rerun", str(run), "--out", str(tmp_path / "r1"), "--llm-cache", str(cache), "--replay"])
    err = capsys.readouterr().err
    assert code == 2 and re.search(rf"{re.escape(str(used))}: line \d+ column \d+: not valid JSON", err)
    assert not (tmp_path / "r1").exists()
    used.write_text(whole)
    # damaged entries are named before anything runs: torn, a folder in its place, another request under its name
    import shutil

    damaged = tmp_path / "damaged"
    shutil.copytree(cache, damaged)
    torn, folder, altered = sorted(damaged.glob("??/??/*.json"))
    torn.write_text(torn.read_text()[:50])
    folder.unlink()
    folder.mkdir()
    entry = json.loads(altered.read_text())
    entry["llm_string"] += " "
    altered.write_text(json.dumps(entry))
    code = main(["eval", "--rerun", str(run), "--out", str(tmp_path / "r1"), "--llm-cache", str(damaged), "--replay"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot serve 3 of the 3 responses" in err and not (tmp_path / "r1").exists()
    assert f"{torn}: unreadable" in err and f"{folder}: not a file" in err and "IsADirectoryError" not in err
    assert f"{altered}: the recorded request does not hash to its name" in err
    # a run recorded without a cache has nothing to replay: refused, not re-run and compared
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("settings.json", "results.jsonl"):
        (plain / name).write_text((run / name).read_text())
    code = main(["eval", "--rerun", str(plain), "--out", str(tmp_path / "r0"), "--llm-cache", str(cache), "--replay"])
    assert code == 2 and "recorded without --llm-cache" in capsys.readouterr().err
    # a fresh run replayed from the empty cache: every question is a recorded llm_error naming the miss
    code = main(["eval", *flags, "--limit", "1", "--model", MODEL, "--out", str(tmp_path / "r2"),
                 "--llm-cache", str(empty), "--replay", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "error: every question failed (1 of 1); the first: " in err and "LLMCacheMiss" in err
    (rec,) = _records(tmp_path / "r2").values()
    assert rec["stop_reason"] == "llm_error" and rec["answer"] == "" and rec["attempts"] == 1
    assert rec["llm_calls"] == 0  # nothing was sent
    assert "LLMCacheMiss: replay: no recorded response for this openai:stub-model request" in rec["error"]
    assert list(empty.rglob("*")) == []
    # --replay without a cache, or with a folder that does not exist
    capsys.readouterr()
    assert main(["eval", *flags, "--model", MODEL, "--replay", "--out", str(tmp_path / "r3")]) == 2
    assert "--replay needs --llm-cache DIR" in capsys.readouterr().err
    assert main(["ask", "--method", "standard", "--question", "q", "--model", MODEL, "--replay"]) == 2
    assert "--replay needs --llm-cache DIR" in capsys.readouterr().err
    assert main(["ask", "--method", "standard", "--question", "q", "--model", MODEL, "--replay",
                 "--llm-cache", str(tmp_path / "nowhere")]) == 2
    assert "no such folder, nothing to replay" in capsys.readouterr().err


def test_ask_records_then_replays_without_an_endpoint(tmp_path, capsys):
    d = planrag_data.make(tmp_path / "data")
    cache = tmp_path / "cache"
    args = ["ask", "--method", "planrag", "--question", d.question, *d.cli("planrag"), "--model", MODEL,
            "--llm-cache", str(cache)]
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
        assert main([*args, "--base-url", stub.base_url]) == 0
    first = capsys.readouterr().out
    n = len(stub.requests)
    assert f"LLM cache: {cache}   entries used: {n} (0 replayed, {n} recorded)" in first
    assert main([*args, "--replay"]) == 0  # no server, no key, no base URL
    second = capsys.readouterr().out
    assert f"LLM cache: {cache} (replay)   entries used: {n} ({n} replayed, 0 recorded)" in second

    def answer(text: str) -> list[str]:
        return [ln for ln in text.splitlines() if ln.startswith(("Answer: ", "LLM calls: "))]

    assert [a.split("   Wall time")[0] for a in answer(second)] == [a.split("   Wall time")[0] for a in answer(first)]


def test_compare_and_sweep_record_and_replay(tmp_path, capsys):
    """`ragplan compare` and `ragplan eval sweep` take --llm-cache / --replay too: replayed offline, the same answers."""
    flags, d = _planrag_data(tmp_path / "data")
    data = flags[flags.index("--benchmark"):]
    cache = tmp_path / "cache"
    compare = ["compare", *data, "--methods", "planrag,iter_rag", "--limit", "1", "--model", MODEL, "--no-progress",
               "--llm-cache", str(cache)]
    sweep = ["eval", "sweep", "--method", "planrag", *data, "--limit", "1", "--sweep", "max_replans=0,1", "--model", MODEL,
             "--no-progress", "--llm-cache", str(cache)]
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
        assert main([*compare, "--base-url", stub.base_url, "--out", str(tmp_path / "c1")]) == 0
        assert main([*sweep, "--base-url", stub.base_url, "--out", str(tmp_path / "s1")]) == 0
    assert len(stub.requests) > 0
    capsys.readouterr()
    assert main([*compare, "--replay", "--out", str(tmp_path / "c2")]) == 0
    assert main([*sweep, "--replay", "--out", str(tmp_path / "s2")]) == 0
    for a, b in [(tmp_path / "c1" / m, tmp_path / "c2" / m) for m in ("planrag", "iter_rag")] + [
            (p, tmp_path / "s2" / p.name) for p in sorted((tmp_path / "s1").iterdir()) if (p / "results.jsonl").exists()]:
        assert record_differences(a, b) == (1, {}), (a, b)
        (rec,) = _records(b).values()
        assert rec["answer"] and rec["error"] == ""
        assert json.loads((b / "settings.json").read_text())["llm_replay"] is True
    assert len(list((tmp_path / "s2").iterdir())) >= 2
    assert main(["compare", *data, "--methods", "planrag", "--model", MODEL, "--replay"]) == 2
    assert "--replay needs --llm-cache DIR" in capsys.readouterr().err
