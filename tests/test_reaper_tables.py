"""REAPER's tables as commands (issue 9 §4): Table 1 across methods in `ragplan eval report`, Table 2's
instruction following as the `remove_tool` benchmark option, Table 3's TTG task subset in `reaper datagen`.

Runs are real evaluation runs over a small generated shop and gold set, with scripted planners.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ragplan.cli import main
from ragplan.methods.reaper.cli import add_datagen_parser, run_datagen
from ragplan.methods.reaper.benchmark import ReaperBenchmark
from ragplan.methods.reaper.metrics import aggregate
from ragplan.eval.runfolder import RunSettings
from ragplan.eval.runner import evaluate
from ragplan.nodes.reaper.fill_arguments import FilledArguments
from ragplan.nodes.reaper.respond import Response
from ragplan.methods.reaper.plan import parse_plan
from ragplan.methods.reaper import ttg
from ragplan.methods.reaper.classifier import train_classifier
from tests.scripted import ScriptedChatModel
from tests.test_reaper_datagen import SEEDS, write_seeds
from tests.test_reaper_grading import _agent_replies

CATEGORIES = ("no_retrieval", "customer_support", "prod_search", "context_qna", "shipment_status", "review_summary")


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> Path:
    from ragplan.tools.retail import generate_shop

    return generate_shop(tmp_path_factory.mktemp("shop") / "shop", seed=0, n_products=60, n_orders=30)


@pytest.fixture(scope="module")
def gold(shop, tmp_path_factory) -> tuple[Path, list[Any]]:
    """Two test-split questions of each category, as a gold-set file of the shop's format."""
    items, seen = [], set()
    for i in ReaperBenchmark(str(shop), split="all").items():  # distinct question texts (the planners look them up)
        if i.question not in seen:
            seen.add(i.question)
            items.append(i)
    picked = [i for c in CATEGORIES for i in [i for i in items if i.meta["category"] == c][:2]]
    keep = {i.id for i in picked}
    rows = [json.loads(x) for x in (shop / "goldset.jsonl").read_text().splitlines()]
    path = tmp_path_factory.mktemp("gold") / "gold.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["id"] in keep))
    return path, picked


def _run(method: str, shop: Path, gold: Path, run: Path, model: Any, **options: Any) -> list[dict[str, Any]]:
    settings = RunSettings(method=method, benchmark="reaper-retail", data=str(gold), context={"shop_dir": str(shop)},
                           benchmark_options={"split": "all", **options}, concurrency=2)
    asyncio.run(evaluate(settings, run, chat_model=model))
    return [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]


def _question(messages) -> str:
    return json.loads(messages[1].content.split("### Input:")[-1].split("Question: ", 1)[1].split("\n")[0])


def _planner(golds: dict[str, str], wrong: set[str] = frozenset()):
    """REAPER's planner writing the gold plan (a no-retrieval plan for the questions in ``wrong``)."""

    def reply(messages, schema):
        if schema == "Response":
            return Response(answer="ok")
        q = _question(messages)
        return "No retrieval needed." if q in wrong else (golds[q] or "No retrieval needed.")

    return reply


def _row(out: str, name: str) -> list[str]:
    line = next(x for x in out.splitlines() if x.startswith(f"| {name} |"))
    return [c.strip() for c in line.strip("|").split("|")][1:]


def test_report_puts_three_planners_side_by_side_as_table_one(shop, gold, tmp_path, capsys):
    gold_path, items = gold
    golds = {i.question: i.gold for i in items}
    wrong = {items[2].question, items[4].question}  # two retrieval questions planned as no retrieval
    recs = {"reaper": _run("reaper", shop, gold_path, tmp_path / "reaper", ScriptedChatModel(responder=_planner(golds, wrong))),
            "agent_planner": _run("agent_planner", shop, gold_path, tmp_path / "agent",
                                  ScriptedChatModel(responder=_agent_replies({q: parse_plan(g).plan for q, g in golds.items()})))}
    # the classifier baseline with a route classifier trained on the shop's own gold set
    clf = tmp_path / "clf"
    train_classifier(ReaperBenchmark(str(shop), split="all").examples(), seed=0, out_dir=clf)

    def filler(messages, schema):  # fills no argument: steps that need one are invalid, as the validator says
        return Response(answer="ok") if schema == "Response" else FilledArguments(steps={})

    settings = RunSettings(method="classifier_planner", benchmark="reaper-retail", data=str(gold_path),
                           context={"shop_dir": str(shop), "classifier_dir": str(clf)},
                           benchmark_options={"split": "all"}, concurrency=2)
    asyncio.run(evaluate(settings, tmp_path / "classifier", chat_model=ScriptedChatModel(responder=filler)))
    recs["classifier_planner"] = [json.loads(x) for x in (tmp_path / "classifier" / "results.jsonl").read_text().splitlines()]

    assert main(["eval", "report", str(tmp_path / "reaper"), str(tmp_path / "agent"), str(tmp_path / "classifier")]) == 0
    out = capsys.readouterr().out
    assert "### REAPER plan metrics by method (paper Table 1)" in out
    head = next(x for x in out.splitlines() if x.startswith("| tool class |"))
    assert [c.strip() for c in head.strip("|").split("|")][:8] == [
        "tool class", "support", "reaper P", "reaper R", "reaper F1", "agent_planner P", "agent_planner R", "agent_planner F1"]
    assert "classifier_planner F1" in head
    m = {k: aggregate(v, latency_key="planner_latency_s") for k, v in recs.items()}
    labels = ["reaper", "agent_planner", "classifier_planner"]
    assert _row(out, "tool accuracy") == [f"{m[k].tool_accuracy:.3f}" for k in labels]
    assert _row(out, "tool accuracy")[:2] == [f"{10 / 12:.3f}", "1.000"]
    assert _row(out, "argument accuracy") == [f"{m[k].argument_accuracy:.3f}" if m[k].argument_accuracy is not None else "-"
                                              for k in labels]
    assert _row(out, "planner latency (s, mean per question)") == [f"{m[k].latency_mean:.3f}" for k in labels]
    calls = [sum(r["llm_calls"] for r in recs[k]) / len(recs[k]) for k in labels]
    assert _row(out, "LLM calls per question") == [f"{c:.3f}" for c in calls]
    assert calls[1] > calls[0]  # the agent plans with one call per step
    ps = m["reaper"].per_class["prod_search"]
    assert _row(out, "prod_search")[:4] == ["2", f"{ps['precision']:.3f}", f"{ps['recall']:.3f}", f"{ps['f1']:.3f}"]
    assert _row(out, "no_retrieval")[0] == "2"
    assert "instruction following" not in out  # no run removed a tool


def test_remove_tool_measures_instruction_following(shop, gold, tmp_path, capsys):
    gold_path, items = gold
    golds = {i.question: i.gold for i in items}
    uses = {q for q, g in golds.items() if "prod_qna" in g}
    assert len(uses) == 2
    prompts: list[str] = []

    def planner(messages, schema):
        if schema == "Response":
            return Response(answer="ok")
        prompts.append(messages[1].content)
        q = _question(messages)
        repair = "cannot be run" in messages[-1].content and len(messages) > 2
        if q in uses:  # ignores the instruction first, follows it on the repair round
            return f'Step 1: Ask support - #E1 = customer_support({json.dumps(q)})' if repair else golds[q]
        return golds[q] or "No retrieval needed."

    recs = _run("reaper", shop, gold_path, tmp_path / "removed", ScriptedChatModel(responder=planner), remove_tool="prod_qna")
    # the tool is gone from the planner's prompt: neither listed nor in an example
    assert prompts and all("prod_qna" not in p for p in prompts)
    by_q = {r["question"]: r for r in recs}
    for q, r in by_q.items():
        assert r["removed_tools"] == ["prod_qna"]
        assert r["instruction_following_first_call"] == (0.0 if q in uses else 1.0)
        assert r["instruction_following"] == 1.0
    assert all(by_q[q]["plan_calls"][0]["valid"] is False for q in uses)  # the validator refused the removed tool
    s = json.loads((tmp_path / "removed" / "summary.json").read_text())
    assert s["overall"]["instruction_following_first_call"] == round(1 - 2 / 12, 4)
    assert s["overall"]["instruction_following"] == 1.0
    md = (tmp_path / "removed" / "summary.md").read_text()
    assert "### Instruction following (paper Table 2): prod_qna removed" in md
    assert "| plans that still use prod_qna | 2 | 0 |" in md and f"| {1 - 2 / 12:.3f} | 1.000 |" in md
    # a failed run has no plan: left out of the score
    crash = _run("reaper", shop, gold_path, tmp_path / "crash", ScriptedChatModel(replies=[]), remove_tool="prod_qna")
    assert all(r["instruction_following"] is None for r in crash)
    # beside a run with every tool, the report adds the Table 2 rows
    _run("reaper", shop, gold_path, tmp_path / "full", ScriptedChatModel(responder=_planner(golds)))
    assert main(["eval", "report", str(tmp_path / "full"), str(tmp_path / "removed")]) == 0
    out = capsys.readouterr().out
    assert _row(out, "removed tools (Table 2)") == ["-", "prod_qna"]
    assert _row(out, "instruction following, first planner call") == ["-", f"{1 - 2 / 12:.3f}"]
    assert "| metric | reaper (full) | reaper (removed) |" in out
    # an unknown tool is refused by name
    with pytest.raises(ValueError, match="prod_qan is not a retail tool"):
        ReaperBenchmark(str(gold_path), remove_tool="prod_qan")


def _datagen(tmp_path: Path, name: str, *extra: str) -> int:
    p = argparse.ArgumentParser()
    add_datagen_parser(p.add_subparsers())
    args = p.parse_args(["datagen", "--seed-plans", str(write_seeds(tmp_path, SEEDS)), "--out", str(tmp_path / name),
                         "--no-dqs", "--per-example", "1", *extra])
    return run_datagen(args)


def test_datagen_ttg_task_subset(tmp_path, capsys):
    assert _datagen(tmp_path, "all") == 0
    assert _datagen(tmp_path, "three", "--ttg-tasks", "1,identify_tools,4") == 0
    stats = json.loads((tmp_path / "three" / "stats.json").read_text())
    assert list(stats["tasks"]) == ["plan", "query_from_plan", "identify_tools", "masked_step"]
    assert stats["ttg_tasks"] == ["query_from_plan", "identify_tools", "masked_step"]
    files = {p.name for p in (tmp_path / "three").iterdir()}
    assert "reorder_steps.jsonl" not in files and "masked_step.jsonl" in files
    # a chosen task's records are the same as in the all-task set (each task draws from its own stream)
    for task in ("plan", "identify_tools"):
        assert (tmp_path / "three" / f"{task}.jsonl").read_bytes() == (tmp_path / "all" / f"{task}.jsonl").read_bytes()
    train = [json.loads(x) for x in (tmp_path / "three" / "train.jsonl").read_text().splitlines()]
    assert {r["task"] for r in train} == set(stats["tasks"]) and len(train) == stats["total"]
    assert _datagen(tmp_path, "none", "--ttg-tasks", "none") == 0
    assert list(json.loads((tmp_path / "none" / "stats.json").read_text())["tasks"]) == ["plan"]
    assert _datagen(tmp_path, "bad", "--ttg-tasks", "1,shuffle") == 2
    assert "unknown TTG task 'shuffle'" in capsys.readouterr().err and not (tmp_path / "bad").exists()
    assert ttg.parse_ttg_tasks("7,1") == ["query_from_plan", "use_provided_tools"]
    with pytest.raises(ValueError):
        ttg.parse_ttg_tasks("8")
