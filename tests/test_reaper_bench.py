"""The reaper-retail benchmark: items from a tiny shop's gold set, grading hand-written planner outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragplan.eval import registry
from ragplan.eval.registry import get_benchmark, register
from ragplan.methods.reaper.benchmark import BENCHMARKS
from ragplan.methods.reaper.benchmark import GOLDSET_FILE, ReaperBenchmark, predicted_plans
from ragplan.methods.reaper.metrics import aggregate
from ragplan.methods.reaper.plan import format_plan, parse_plan
from ragplan.tools.retail import generate_shop


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_shop(tmp_path_factory.mktemp("shop"), seed=0, n_products=80, n_orders=40)


def test_factory_options(shop: Path) -> None:
    assert BENCHMARKS["reaper-retail"] is ReaperBenchmark
    with pytest.raises(ValueError, match="'reaper-retail' has no option bogus; options: limit, year, split, remove_tool"):
        get_benchmark("reaper-retail", str(shop), bogus=1)
    with pytest.raises(ValueError, match="no option group_by"):  # a fixed attribute, not an option
        get_benchmark("reaper-retail", str(shop), group_by=("split",))
    with pytest.raises(ValueError, match="split"):
        get_benchmark("reaper-retail", str(shop), split="dev")
    b = get_benchmark("reaper-retail", str(shop), limit=5, year=None)
    assert b.metrics == ("tool_accuracy", "argument_accuracy", "plan_valid", "tool_accuracy_first_call",
                         "argument_accuracy_first_call", "plan_valid_first_call") and b.group_by == ("category",)


def test_registry_checks_a_registered_factorys_options(tmp_path: Path) -> None:
    """A user's factory without ``**options`` gets the same clear error for an option it lacks (not a TypeError)."""
    register("test-mine", lambda data, limit=None: ReaperBenchmark(data, limit=limit))
    try:
        with pytest.raises(ValueError, match="'test-mine' has no option split; options: limit"):
            get_benchmark("test-mine", str(tmp_path), split="all")
        assert get_benchmark("test-mine", str(tmp_path), limit=2).limit == 2
    finally:
        registry._REGISTRY.pop("test-mine")


def test_items_generate_goldset_and_carry_context(shop: Path) -> None:
    b = ReaperBenchmark(str(shop))
    items = b.items()
    assert (shop / GOLDSET_FILE).is_file()
    assert items and all(i.meta["split"] == "test" for i in items)
    assert len(items) + len(ReaperBenchmark(str(shop), split="train").items()) == len(
        ReaperBenchmark(str(shop), split="all").items())
    it = next(i for i in items if i.meta["category"] == "context_qna")
    ctx = it.inputs["page_context"]  # the page context is a graph input beside the question
    assert ctx == it.meta["page_context"] and ctx["product_id"] and ctx["product_title"]
    assert it.question == it.meta["raw_question"]
    assert it.context == {"shop_dir": str(shop.resolve())}
    assert it.gold == it.meta["_gold_plan"]
    assert len(ReaperBenchmark(str(shop), limit=3).items()) == 3
    # a gold-set file path works too (its folder is the shop)
    assert [i.id for i in ReaperBenchmark(str(shop / GOLDSET_FILE)).items()] == [i.id for i in items]


def test_grade_hand_written_outputs(shop: Path) -> None:
    b = ReaperBenchmark(str(shop), split="all")
    it = next(i for i in b.items() if i.meta["category"] == "date_shipment" and "keywords=" in i.gold)
    done = {"answer": "", "stop_reason": "answered"}
    g = b.grade(it, {**done, "plan_text": it.gold})
    assert g["correct"] and g["tool_accuracy"] == 1.0 and g["argument_accuracy"] == 1.0 and g["plan_valid"] == 1.0
    assert g["chosen"] == "date_math > shipment_status" and g["plan_status"] == "valid"
    assert g["correct_first_call"] and g["first_call"]["correct"]  # no planner calls recorded: the first is the final
    # the same plan given only as step dicts (positional args, other case) still scores right
    steps = [{"tool": s.tool, "args": [a.value for a in [*s.args, *s.kwargs.values()]]}
             for s in parse_plan(it.gold).plan.steps]
    steps[1]["args"] = [steps[1]["args"][0].upper(), "#E1"]
    g2 = b.grade(it, {**done, "plan": steps})
    assert g2["correct"], g2
    # wrong keyword: tools right, arguments wrong
    bad = it.gold.replace("keywords=\"", "keywords=\"blue ")
    g3 = b.grade(it, {**done, "plan_text": bad})
    assert g3["tool_accuracy"] == 1.0 and g3["argument_accuracy"] == 0.0 and not g3["correct"]
    # one step only, and an invalid call
    g4 = b.grade(it, {**done, "plan_text": '#E1 = shipment_status(date_range="tomorrow")'})
    assert g4["tool_accuracy"] == 0.0 and g4["plan_valid"] == 0.0 and g4["pred_errors"] and g4["chosen"] == "invalid"
    assert g4["pred_tools"] == ["shipment_status"] and g4["gold_tools"] == ["date_math", "shipment_status"]
    # no retrieval
    nr = next(i for i in b.items() if i.meta["category"] == "no_retrieval")
    assert b.grade(nr, {**done, "plan_text": "No retrieval needed."})["correct"]
    assert b.grade(nr, {**done, "plan": []})["correct"]
    assert not b.grade(nr, {**done, "plan_text": it.gold})["correct"]
    # intentionally changed: a missing output is a failed run — wrong, never an empty (no-retrieval) success
    for out in ({}, None, {"answer": ""}, {**done, "error": "boom"}, {"stop_reason": "llm_error", "error": "429"},
                {"stop_reason": "crash", "error": "KeyError"}, {**done, "answer": "Hi!"}):
        f = b.grade(nr, out)
        assert f["correct"] is False and f["plan_status"] == "failed" and f["plan_valid"] == 0.0, out
        assert f["pred_classes"] == ["no_valid_plan"] and not f["correct_first_call"]
    m = aggregate([g, g2, g3, g4])
    assert m.tool_accuracy == 0.75 and m.argument_accuracy == 0.5


def test_plan_from_output_fallbacks() -> None:
    done = {"stop_reason": "answered"}
    assert predicted_plans({})[1].plan.steps == []
    first, final = predicted_plans({**done, "plan": [{"no_tool": 1}]})
    assert final.status == "invalid" and final.plan.steps == [] and "unreadable" in final.errors[0]
    assert format_plan(predicted_plans({**done, "plan": [{"tool": "date_math", "args": ["tomorrow"]}]})[1].plan) == \
        'Step 1: #E1 = date_math("tomorrow")'


def test_missing_goldset_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ReaperBenchmark(str(tmp_path / "nope.jsonl")).items()
