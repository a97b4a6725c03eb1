"""The classification baseline: route classifier training, save/load, CLI, and the classify → fill-arguments nodes."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

from ragplan.methods.reaper.cli import add_classifier_parser, run_classifier
from ragplan.nodes.reaper.fill_arguments import FilledArguments, build_skeleton
from ragplan.nodes.reaper.respond import Response
from ragplan.methods.reaper.plan import parse_plan
from ragplan.methods.reaper.validate import check_plan
from ragplan.methods.reaper.classifier import class_tools, load_classifier, route_class, train_classifier
from ragplan.methods.reaper.goldset import generate_goldset, write_goldset
from ragplan.methods.reaper.validate import bind_args
from ragplan.state.context import ReaperContext
from ragplan.tools.retail import build_retail_registry, generate_shop
from tests.scripted import ScriptedChatModel


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Any]:
    """A small shop, its gold set, and one classifier trained on it (the embedding model loads once here)."""
    root = tmp_path_factory.mktemp("clf")
    shop = root / "shop"
    generate_shop(shop, seed=0, n_products=80, n_orders=40)
    gold = generate_goldset(shop, n=300)
    report = train_classifier(gold, seed=0, out_dir=root / "model")
    return {"root": root, "shop": str(shop), "gold": gold, "report": report, "model": str(root / "model")}


def test_route_classes_from_tool_sequences():
    assert route_class([]) == "no_retrieval" and route_class(["prod_search"]) == "prod_search"
    assert route_class(["date_math", "shipment_status"]) == "workflow:date_math>shipment_status"
    assert class_tools("workflow:date_math>shipment_status") == ["date_math", "shipment_status"]
    assert class_tools("no_retrieval") == [] and class_tools("prod_qna") == ["prod_qna"]
    assert build_skeleton("workflow:date_math>shipment_status") == [("date_math", {}), ("shipment_status", {"date_range": 1})]


def test_training_beats_the_majority_class_and_is_deterministic(data, tmp_path):
    r = data["report"]
    assert r.n_test > 0 and r.n_train > r.n_test
    assert "no_retrieval" in r.classes and "workflow:date_math>shipment_status" in r.classes
    assert r.accuracy > r.majority_rate + 0.4, (r.accuracy, r.majority_rate)
    assert set(r.per_class) >= set(r.classes) and all(0 <= m["f1"] <= 1 for m in r.per_class.values())
    again = train_classifier(data["gold"], seed=0, out_dir=tmp_path / "again")
    assert again.predictions == r.predictions and again.per_class == r.per_class and again.accuracy == r.accuracy
    meta = json.loads((tmp_path / "again" / "meta.json").read_text())
    assert meta["classes"] == r.classes and meta["seed"] == 0 and meta["metrics"]["accuracy"] == r.accuracy
    assert meta["chains"]["workflow:date_math>shipment_status"] == [{}, {"date_range": 1}]


def test_a_model_is_written_whole_and_weights_from_another_save_are_refused(data, tmp_path):
    """Each file goes through a temporary file and a rename; the metadata names its weights' digest, so weights
    that are not the ones it was saved with (a kill between the two writes, a copied file) are refused on load."""
    import shutil

    import numpy as np

    copy = tmp_path / "model"
    shutil.copytree(data["model"], copy)
    assert not [p.name for p in copy.iterdir() if p.name.endswith(".tmp")]
    with np.load(copy / "weights.npz") as z:
        weights = {k: z[k] for k in z.files}
    weights["intercept"] = weights["intercept"] + 1.0
    np.savez(copy / "weights.npz", **weights)
    with pytest.raises(ValueError, match="is not the one meta.json was saved with"):
        load_classifier(copy)


def test_save_load_round_trip_predicts_the_same(data):
    clf = load_classifier(data["model"])
    test = [e for e in data["gold"] if e.split == "test"]
    got = clf.predict_many([e.question for e in test], [e.context for e in test])
    assert [c for c, _ in got] == data["report"].predictions
    assert all(0 < p <= 1 for _, p in got)
    cls, p = clf.predict(test[0].question, test[0].context)
    assert cls == got[0][0] and abs(p - got[0][1]) < 1e-9
    with pytest.raises(ValueError):
        load_classifier(data["root"])  # not a classifier folder


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    add_classifier_parser(parser.add_subparsers(dest="cmd"))
    return run_classifier(parser.parse_args(argv))


def test_cli_trains_and_reports(data, tmp_path, capsys):
    path = write_goldset(tmp_path / "gold.jsonl", data["gold"])
    assert _cli(["train-classifier", "--shop", data["shop"], "--goldset", str(path), "--out", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert "precision" in out and "majority-class rate" in out and "workflow:date_math>shipment_status" in out
    assert (tmp_path / "m" / "weights.npz").exists()
    assert _cli(["train-classifier", "--shop", data["shop"], "--goldset", str(path), "--out", str(tmp_path / "j"),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == data["report"].accuracy
    assert _cli(["train-classifier", "--shop", str(tmp_path / "nope"), "--out", str(tmp_path / "x")]) == 2
    (tmp_path / "bad.jsonl").write_text("not json\n")
    assert _cli(["train-classifier", "--shop", data["shop"], "--goldset", str(tmp_path / "bad.jsonl"),
                 "--out", str(tmp_path / "x")]) == 2
    assert "error:" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- nodes

ClassifierContext = ReaperContext  # classifier_dir is a ReaperContext setting


def _graph():
    from ragplan.graphs.reaper import build_classifier_planner

    return build_classifier_planner().compile()


def _gold_args(example) -> FilledArguments:
    """The gold plan's literal arguments, by step, as the planner model would fill them."""
    reg = build_retail_registry()
    steps = {}
    for s in example.plan.steps:
        bound, _, _ = bind_args(s, reg)
        steps[str(s.index)] = {k: a.value for k, a in bound.items() if a.kind != "ref"}
    return FilledArguments(steps=steps)


def _run(data, example, planner_replies, answer="ok", classifier_dir=None):
    planner = ScriptedChatModel(replies=planner_replies)
    responder = ScriptedChatModel(replies=[Response(answer=answer)])
    ctx = ClassifierContext(model="-", planner_chat_model=planner, responder_chat_model=responder,
                            shop_dir=data["shop"], classifier_dir=data["model"] if classifier_dir is None else classifier_dir)
    out = _graph().invoke({"question": example.question, "page_context": example.context}, context=ctx)
    return out, planner, responder


def _routed_example(data, cls: str):
    clf = load_classifier(data["model"])
    return next(e for e in data["gold"] if route_class(e.tool_sequence) == cls
                and clf.predict(e.question, e.context)[0] == cls)


def test_workflow_route_fills_arguments_into_a_valid_canonical_plan(data):
    ex = _routed_example(data, "workflow:date_math>shipment_status")
    out, planner, _ = _run(data, ex, [_gold_args(ex)])
    assert out["route"]["class"] == "workflow:date_math>shipment_status" and 0 < out["route"]["probability"] <= 1
    assert out["plan_text"] == ex.gold_plan and out["plan_errors"] == []
    assert check_plan(parse_plan(out["plan_text"]).plan, build_retail_registry()) == []
    # typed steps in state (what execute_plan runs)
    assert [s.call_text() for s in out["plan"]] == [s.call_text() for s in parse_plan(ex.gold_plan).plan.steps]
    assert [c.valid for c in out["plan_calls"]] == [True] and out["plan_calls"][0].latency_s > 0
    assert [e["tool"] for e in out["evidence"]] == ["date_math", "shipment_status"]
    assert out["evidence"][1]["args"]["date_range"] == out["evidence"][0]["output"]
    prompt = planner.prompts[0][-1].content
    assert "date_range=#E1" in prompt and ex.question in prompt and out["planner_latency_s"] > 0


def test_single_tool_route_takes_product_id_from_the_page(data):
    ex = _routed_example(data, "review_summary")
    out, _, _ = _run(data, ex, [FilledArguments(steps={})])  # the model leaves product_id out
    assert out["plan_text"] == ex.gold_plan and out["evidence"][0]["status"] == "ok"


def test_no_retrieval_route_makes_no_planner_call(data):
    ex = _routed_example(data, "no_retrieval")
    out, planner, responder = _run(data, ex, [], answer="Hello!")
    assert out["plan_text"] == "" and out.get("evidence") in (None, []) and planner.prompts == []
    assert out["answer"] == "Hello!" and "Evidence: none" in responder.prompts[0][1].content


def test_missing_required_argument_is_recorded_and_answered_without_evidence(data):
    ex = _routed_example(data, "customer_support")
    out, _, responder = _run(data, ex, [FilledArguments(steps={"1": {}})], answer="Sorry.")
    assert out["stop_reason"] == "invalid_plan" and any("question" in e for e in out["plan_errors"])
    assert not out.get("evidence") and "Evidence: none" in responder.prompts[0][1].content
    assert out["plan"] == [] and [c.valid for c in out["plan_calls"]] == [False]
    assert out["plan_calls"][0].steps[0].tool == "customer_support"


def test_invalid_filled_plan_is_graded_wrong_never_no_retrieval(data):
    """Issue 8: a filled plan that fails validation used to grade as an empty plan (right for no-retrieval gold)."""
    from ragplan.methods.reaper.benchmark import ReaperBenchmark

    bench = ReaperBenchmark(data["shop"], split="all")
    items = bench.items()
    ex = _routed_example(data, "customer_support")
    out, _, _ = _run(data, ex, [FilledArguments(steps={"1": {}})], answer="Sorry.")
    for item in (next(i for i in items if i.meta["category"] == "customer_support"),
                 next(i for i in items if i.meta["category"] == "no_retrieval")):
        g = bench.grade(item, out)
        assert g["correct"] is False and g["plan_status"] == "invalid" and g["plan_valid"] == 0.0
        assert g["tool_accuracy"] == 0.0 and g["pred_classes"] == ["no_valid_plan"] and not g["correct_first_call"]
    # the no-retrieval route is a valid zero-step plan, graded right on a no-retrieval question
    nr = _routed_example(data, "no_retrieval")
    out, _, _ = _run(data, nr, [], answer="Hello!")
    assert out["plan"] == [] and [(c.valid, c.steps) for c in out["plan_calls"]] == [(True, [])]
    g = bench.grade(next(i for i in items if i.meta["category"] == "no_retrieval"), out)
    assert g["correct"] and g["plan_status"] == "valid" and g["chosen"] == "none"


def test_missing_classifier_stops_with_an_error(data, tmp_path):
    ex = data["gold"][0]
    out, _, _ = _run(data, ex, [], classifier_dir=str(tmp_path))
    assert out["stop_reason"] == "classifier_error" and "classify_question" in out["error"]


def test_train_classifier_then_eval_classifier_planner(data, tmp_path, capsys, monkeypatch):
    """`ragplan eval --method classifier_planner --benchmark reaper-retail` with a trained classifier and the stub LLM."""
    from ragplan.cli import main
    from ragplan.methods.reaper.benchmark import ReaperBenchmark
    from tests.openai_server import OpenAIStub

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    from pathlib import Path

    shop = Path(data["shop"])
    clf = tmp_path / "clf"
    assert main(["reaper", "train-classifier", "--shop", str(shop), "--out", str(clf)]) == 0
    table = capsys.readouterr().out
    assert "majority" in table.lower()
    items = [i for i in ReaperBenchmark(str(shop), split="test").items() if i.meta["category"] == "no_retrieval"][:2]
    gold = tmp_path / "gold.jsonl"
    src = [json.loads(x) for x in (shop / "goldset.jsonl").read_text().splitlines()]
    gold.write_text("".join(json.dumps(r) + "\n" for r in src if r["id"] in {i.id for i in items}))
    with OpenAIStub(responder=lambda req: Response(answer="Happy to help!")) as stub:
        assert main(["eval", "--method", "classifier_planner", "--benchmark", "reaper-retail", "--data", str(gold),
                     "--model", "openai:stub-model", "--base-url", stub.base_url, "--set", f"shop_dir={shop}",
                     "--set", f"classifier_dir={clf}", "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    recs = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert len(recs) == len(items) and all(r["error"] == "" for r in recs)
    assert "REAPER plan metrics" in (tmp_path / "run" / "summary.md").read_text()
