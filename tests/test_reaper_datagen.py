"""REAPER data generation: prompt builder, TEvo, the seven TTG tasks, DQS and the ``datagen`` CLI."""

from __future__ import annotations

import argparse
import json
import random

import numpy as np
import pytest

from ragplan.tools import embeddings
from ragplan.methods.reaper.cli import add_datagen_parser, run_datagen
from ragplan.methods.reaper import datagen as dg, ttg
from ragplan.methods.reaper.plan import parse_plan
from ragplan.methods.reaper.ttg import NO_PLAN_POSSIBLE, TASKS
from ragplan.methods.reaper.validate import check_plan
from ragplan.nodes.reaper.planner_prompt import NO_RETRIEVAL, build_planner_messages
from ragplan.tools.retail import build_retail_registry

EMPTY = {"product_id": "", "product_title": ""}
TIRE = {"product_id": "K7TRAILG01", "product_title": "Kestrel TrailGuard LTX All-Season Radial Tire, 235/65R18"}
SEEDS = [
    {"query": "how do i cancel all subscribe and save items", "context": EMPTY,
     "plan": 'Step 1: Ask customer support - #E1 = customer_support("how do i cancel all subscribe and save items")'},
    {"query": "is the tread depth between 0.15 inches and 0.25 inches", "context": TIRE,
     "plan": 'Step 1: Retrieve the tread depth - #E1 = prod_qna("K7TRAILG01", "What is the tread depth of the '
             'Kestrel TrailGuard LTX tire?")'},
    {"query": "What time will my sheet pan arrive tomorrow?", "context": EMPTY,
     "plan": 'Step 1: Fetch the date range - #E1 = date_math("tomorrow")\n'
             'Step 2: Fetch shipment status - #E2 = shipment_status(date_range=#E1, keywords="sheet pan")'},
    {"query": "show me some options for nut free chocolate coins", "context": EMPTY,
     "plan": 'Step 1: Perform a product search - #E1 = prod_search("nut free chocolate coins")\n'
             'Step 2: Summarise reviews of the results - #E2 = review_summary(#E1)\n'
             'Step 3: Check allergen information - #E3 = prod_qna(#E1, "is this product free of nuts?")'},
    {"query": "what is your favorite color", "context": EMPTY, "plan": "No retrieval needed."},
]


@pytest.fixture
def registry():
    return build_retail_registry()


def write_seeds(tmp_path, rows, name="seeds.jsonl"):
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


@pytest.fixture
def seeds(tmp_path, registry):
    return dg.load_seed_examples(write_seeds(tmp_path, SEEDS), registry)


class FakeEmbedder:
    """``encode`` returns fixed vectors looked up by text (unknown texts: a fixed fallback)."""

    def __init__(self, table):
        self.table = table

    def encode(self, texts):
        return np.array([self.table[t] for t in texts], dtype=np.float32)


# ---------------------------------------------------------------------------------------------- prompt / loading

def test_prompt_builder_has_the_papers_sections(registry, seeds):
    prompt = "\n\n".join(build_planner_messages(registry, seeds[:2], "where is my blender", EMPTY))
    for part in ("### Role:", "### System Instruction:", "1. prod_search(query) - ", "Example: #E1 = prod_search(",
                 "# Input:\nContext:", "# Answer:\nStep 1: Ask customer support", "### Input:"):
        assert part in prompt
    assert prompt.endswith('Context: {"product_id": "", "product_title": ""}\nQuestion: "where is my blender"')
    system, user = build_planner_messages(registry, [], "q", {}, role="R", instructions="I")
    assert system == "### Role:\nR" and "I" in user and "### Examples:" not in user


def test_seed_errors_name_file_and_line(tmp_path, registry):
    bad = write_seeds(tmp_path, [SEEDS[0], {**SEEDS[1], "plan": 'Step 1: x - #E1 = prod_qna("a"'}])
    with pytest.raises(dg.DatagenError, match=r"seeds.jsonl:2: plan .*not closed"):
        dg.load_seed_examples(bad, registry)
    unknown = write_seeds(tmp_path, [{**SEEDS[0], "plan": '#E1 = general_knowledge("x")'}])
    with pytest.raises(dg.DatagenError, match=r"seeds.jsonl:1: plan .*general_knowledge"):
        dg.load_seed_examples(unknown, registry)
    (tmp_path / "j.jsonl").write_text('{"query": "a", "plan": ""}\nnot json\n')
    with pytest.raises(dg.DatagenError, match=r"j.jsonl:2: not valid JSON"):
        dg.load_seed_examples(tmp_path / "j.jsonl", registry)


# ---------------------------------------------------------------------------------------------- TEvo

def test_tevo_renames_consistently_and_adds_irrelevant_tools(registry, seeds):
    renamed_seen = irrelevant_seen = 0
    ex = seeds[3]  # prod_search, review_summary, prod_qna
    for k in range(40):
        system, user, target = TASKS["plan"](ex, seeds, registry, random.Random(k))
        res = parse_plan(target)
        assert not res.errors and len(res.plan.steps) == 3
        tool_list = user.split("### Examples:")[0]
        shown = [line.split(". ", 1)[1].split("(", 1)[0] for line in tool_list.splitlines()
                 if line[:1].isdigit() and ". " in line]
        for t in res.plan.tools():
            assert t in shown, (t, shown)
        assert not {"prod_search", "review_summary", "prod_qna"} & set(res.plan.tools()) - set(shown)
        renamed_seen += any(t not in registry for t in res.plan.tools())
        irrelevant_seen += len(set(shown) - set(res.plan.tools())) > 0
    assert renamed_seen > 5 and irrelevant_seen > 5


def test_evolve_tools_view(registry):
    view = dg.evolve_tools(registry, ["prod_qna", "date_math"], random.Random(3), rename_prob=1.0, paraphrase_prob=1.0)
    names = [s.name for s in view.specs]
    assert view.mapping["prod_qna"] in names and view.mapping["date_math"] in names
    assert all(n not in registry for n in names)                      # every tool renamed
    assert len(set(view.mapping.values())) == len(view.mapping)       # never two tools with one name
    qna = next(s for s in view.specs if s.name == view.mapping["prod_qna"])
    assert qna.description in dg.DESCRIPTION_PARAPHRASES["prod_qna"]
    assert qna.example.startswith(f"#E1 = {view.mapping['prod_qna']}(")
    plan = parse_plan('Step 1: use prod_qna - #E1 = prod_qna("X", "q")').plan
    out = dg.rename_plan(plan, view.mapping)
    assert out.steps[0].tool == view.mapping["prod_qna"] and view.mapping["prod_qna"] in out.steps[0].purpose
    # the renamed plan is valid against a registry of the shown specs
    from ragplan.tools.registry import ToolRegistry
    assert check_plan(out, ToolRegistry(view.specs)) == []


# ---------------------------------------------------------------------------------------------- TTG

def test_every_ttg_task_present(registry, seeds):
    records = ttg.generate_dataset(seeds, registry, seed=1, per_example=1)
    tasks = {r["task"] for r in records}
    assert tasks == set(TASKS) and len(TASKS) == 8
    for r in records:
        assert [m["role"] for m in r["messages"]] == ["system", "user", "assistant"]
        assert r["messages"][2]["content"].strip()


def test_ttg_targets(registry, seeds):
    rng = lambda: random.Random(7)  # noqa: E731
    ex = seeds[3]
    _, _, q = TASKS["query_from_plan"](ex, seeds, registry, rng())
    assert q == ex.query
    _, user, full = TASKS["complete_partial_plan"](ex, seeds, registry, rng())
    assert "### Partial plan:" in user and len(parse_plan(full).plan.steps) == 3
    _, _, tools = TASKS["identify_tools"](ex, seeds, registry, rng())
    assert len(tools.split(", ")) == 3
    assert TASKS["identify_tools"](seeds[4], seeds, registry, rng())[2] == "none"
    _, user, step = TASKS["masked_step"](ex, seeds, registry, rng())
    assert "= [MASK]" in user and step.startswith("Step ") and step.split(" - #E")[1] not in user
    _, user, plan = TASKS["reorder_steps"](ex, seeds, registry, rng())
    shuffled = user.split("### Shuffled steps:\n")[1].splitlines()
    assert [s[2:] for s in shuffled] != [ln.split(": ", 1)[1] for ln in plan.splitlines()]
    assert sorted(s[2:] for s in shuffled) == sorted(ln.split(": ", 1)[1] for ln in plan.splitlines())
    _, user, answers = TASKS["masked_params"](ex, seeds, registry, rng())
    assert "[MASK1]" in user and answers.startswith("[MASK1] = ")
    assert TASKS["reorder_steps"](seeds[0], seeds, registry, rng()) is None
    assert TASKS["masked_step"](seeds[4], seeds, registry, rng()) is None
    assert TASKS["plan"](seeds[4], seeds, registry, rng())[2] == NO_RETRIEVAL


def test_use_provided_tools_both_outcomes(registry, seeds):
    ex = seeds[2]  # date_math, shipment_status
    outcomes = set()
    for k in range(20):
        _, user, target = TASKS["use_provided_tools"](ex, seeds, registry, random.Random(k))
        listed = user.split("### Provided tools:\n")[1].split("\n\n### Input:")[0]
        shown = [ln.split(". ", 1)[1].split("(", 1)[0] for ln in listed.splitlines() if ln[:1].isdigit()]
        if target.startswith(NO_PLAN_POSSIBLE):
            outcomes.add("none")
            assert len([t for t in shown if t]) < len(registry)
        else:
            outcomes.add("plan")
            assert set(parse_plan(target).plan.tools()) <= set(shown)
    assert outcomes == {"none", "plan"}


# ---------------------------------------------------------------------------------------------- DQS

def test_dqs_keeps_pool_size_and_drops_extremes():
    initial = ["a", "b"]
    table = {"a": [1, 0, 0], "b": [0, 1, 0]}
    large = [f"q{i}" for i in range(10)]
    # max similarity to the initial pool rises with i: q0 is orthogonal, q9 is a duplicate of "a"
    for i, q in enumerate(large):
        angle = (np.pi / 2) * (1 - i / 9)
        table[q] = [np.cos(angle), 0, np.sin(angle)]
    for s in range(20):
        kept, report = dg.diverse_query_sample(initial, large, FakeEmbedder(table), random.Random(s), trim=0.1)
        assert len(kept) == len(initial)
        assert report["dropped_similar"] == [9] and report["dropped_dissimilar"] == [0]
        assert not {0, 9} & set(kept)
    kept, report = dg.diverse_query_sample(initial, large, FakeEmbedder(table), random.Random(0), trim=0.2)
    assert report["dropped_similar"] == [8, 9] and report["dropped_dissimilar"] == [0, 1]


# ---------------------------------------------------------------------------------------------- output / CLI

def test_generation_is_deterministic(tmp_path, registry, seeds):
    a = ttg.write_dataset(ttg.generate_dataset(seeds, registry, seed=5), tmp_path / "a", seed=5)
    b = ttg.write_dataset(ttg.generate_dataset(seeds, registry, seed=5), tmp_path / "b", seed=5)
    assert a == b
    for f in sorted(p.name for p in (tmp_path / "a").iterdir()):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    c = ttg.generate_dataset(seeds, registry, seed=6)
    assert [json.dumps(r) for r in c] != [json.dumps(r) for r in ttg.generate_dataset(seeds, registry, seed=5)]


def parser():
    p = argparse.ArgumentParser(prog="ragplan")
    sub = p.add_subparsers(dest="command")
    reaper = sub.add_parser("reaper")
    add_datagen_parser(reaper.add_subparsers(dest="reaper_command", required=True))
    return p


class HashEmbedder:
    """A deterministic stand-in for Sentence-BERT (bag of hashed character trigrams)."""

    def encode(self, texts):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            for j in range(len(t) - 2):
                out[i, sum(map(ord, t[j:j + 3])) % 64] += 1
        return out


def test_cli_round_trip(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(embeddings, "get_embedder", lambda model_path="": HashEmbedder())
    seeds = write_seeds(tmp_path, SEEDS[:3])
    outs = []
    for name in ("o1", "o2"):
        args = parser().parse_args(["reaper", "datagen", "--seed-plans", str(seeds), "--out", str(tmp_path / name),
                                    "--seed", "3", "--per-example", "2"])
        assert args.reaper_command == "datagen"
        assert run_datagen(args) == 0
        outs.append(tmp_path / name)
    assert "wrote" in capsys.readouterr().out
    files = sorted(p.name for p in outs[0].iterdir())
    assert {"train.jsonl", "stats.json", "plan.jsonl", "use_provided_tools.jsonl"} <= set(files)
    for f in files:
        assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes()
    stats = json.loads((outs[0] / "stats.json").read_text())
    train = [json.loads(ln) for ln in (outs[0] / "train.jsonl").read_text().splitlines()]
    assert stats["total"] == len(train) == sum(stats["tasks"].values())
    assert stats["dqs"]["sampled"] == 3 and stats["dqs"]["annotated"] == 3
    assert any(r["source_id"].startswith("dqs:") for r in train)
    for r in train:
        if r["task"] == "plan":
            assert not parse_plan(r["messages"][2]["content"]).errors
    # a bad seed file is exit 2 with file:line
    bad = write_seeds(tmp_path, [{"query": "x", "context": {}, "plan": "#E1 = nope(1)"}], name="bad.jsonl")
    args = parser().parse_args(["reaper", "datagen", "--seed-plans", str(bad), "--out", str(tmp_path / "o3")])
    assert run_datagen(args) == 2
    assert "bad.jsonl:1:" in capsys.readouterr().err


def test_cli_extra_queries_without_plans(tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings, "get_embedder", lambda model_path="": HashEmbedder())
    seeds = write_seeds(tmp_path, SEEDS[:3])
    extra = write_seeds(tmp_path, [{"query": f"where is my order number {i} of {w}", "context": EMPTY}
                                   for i, w in enumerate(["socks", "a kettle", "paint", "dog food", "tea", "lamps",
                                                          "ink", "pens", "bikes", "tape"])], name="extra.jsonl")
    args = parser().parse_args(["reaper", "datagen", "--seed-plans", str(seeds), "--out", str(tmp_path / "o"),
                                "--extra-queries", str(extra), "--per-example", "1"])
    assert run_datagen(args) == 0
    picked = (tmp_path / "o" / "dqs_queries.jsonl").read_text().splitlines()
    assert len(picked) == 3
    assert json.loads((tmp_path / "o" / "stats.json").read_text())["dqs"]["unannotated"] == 3
