"""Plan metrics on small hand-computed examples: per-class P/R/F1, tool and argument accuracy, validity."""

from __future__ import annotations

import pytest

from ragplan.eval.plan_metrics import (
    NO_RETRIEVAL, aggregate, class_prf, normalize_text, render_table, score_plan, tool_classes,
)
from ragplan.tools.retail import build_retail_registry

REG = build_retail_registry()
GOLD_SHIP = ('Step 1: Fetch the date range - #E1 = date_math("tomorrow")\n'
             'Step 2: Fetch shipment status - #E2 = shipment_status(keywords="sheet pan", date_range=#E1)')
PRED_SHIP = '#E1 = date_math("Tomorrow")\n#E2 = shipment_status("Sheet  pan!", #E1)'  # positional, other case
GOLD_TWO = 'Step 1: a - #E1 = prod_qna("AAAA000001", "what colour is it?")\nStep 2: b - #E2 = review_summary("AAAA000001")'
PRED_TWO = 'Step 1: b - #E1 = review_summary("aaaa000001")\nStep 2: a - #E2 = prod_qna("AAAA000001", "What colour is it")'

PAIRS = [
    (PRED_SHIP, GOLD_SHIP),                                                  # right tools, right args
    ("", ""),                                                                # no retrieval, right
    ('#E1 = customer_support("hi")', ""),                                    # retrieval where none is needed
    (PRED_TWO, GOLD_TWO),                                                    # reordered: tools wrong, args right
    ('#E1 = prod_qna("AAAA000001", "what size?")', '#E1 = prod_qna("AAAA000001", "what color?")'),  # wrong arg
]


def test_normalize_and_classes() -> None:
    assert normalize_text("  What's   the COLOUR?! ") == "whats the colour"
    assert tool_classes("") == {NO_RETRIEVAL}
    assert tool_classes(GOLD_SHIP) == {"date_math", "shipment_status"}


def test_single_scores() -> None:
    s = score_plan(PRED_SHIP, GOLD_SHIP, REG)
    assert s.tools_correct and s.args_correct and s.valid and s.correct and s.args_matched == 2
    s = score_plan(PRED_TWO, GOLD_TWO, REG)
    assert not s.tools_correct and s.args_correct and not s.correct
    s = score_plan("", "", REG)
    assert s.correct and s.valid and s.gold_steps == 0
    s = score_plan('#E1 = customer_support("hi")', "", REG)
    assert not s.tools_correct and not s.args_correct


def test_refs_compare_by_referenced_tool() -> None:
    gold = '#E1 = prod_search("red phone case")\n#E2 = prod_qna(#E1, "is it rugged?")'
    same = 'Step 1: x - #E1 = prod_search("Red phone case.")\nStep 2: y - #E2 = prod_qna(product_id=#E1, question="Is it rugged")'
    other = '#E1 = customer_support("red phone case")\n#E2 = prod_qna(#E1, "is it rugged?")'
    assert score_plan(same, gold, REG).args_correct
    s = score_plan(other, gold, REG)
    assert not s.tools_correct and not s.args_correct and s.args_matched == 0  # #E1 now means customer_support
    # an optional argument given as null counts as absent; a missing required one does not match
    assert score_plan('#E1 = shipment_status(keywords="pan", date_range=null)', '#E1 = shipment_status(keywords="pan")',
                      REG).args_correct


def test_validity() -> None:
    assert not score_plan('#E1 = prod_serch("x")', '#E1 = prod_search("x")', REG).valid  # unknown tool
    assert not score_plan('#E1 = shipment_status(date_range="tomorrow")', "", REG).valid  # needs date_math
    bad = score_plan('#E1 = prod_search("x"', '#E1 = prod_search("x")', REG)  # unclosed call
    assert not bad.valid and bad.errors and bad.pred_tools == []


def test_class_prf_hand_computed() -> None:
    prf = class_prf([(["customer_support"], []), ([], []), (["prod_qna"], ["prod_qna", "review_summary"])])
    assert list(prf)[0] == NO_RETRIEVAL
    assert prf[NO_RETRIEVAL] == pytest.approx({"precision": 1.0, "recall": 0.5, "f1": 2 / 3, "support": 2,
                                               "tp": 1, "fp": 0, "fn": 1})
    assert prf["customer_support"]["precision"] == 0 and prf["customer_support"]["support"] == 0
    assert prf["review_summary"]["recall"] == 0 and prf["review_summary"]["fn"] == 1
    assert prf["prod_qna"]["f1"] == 1.0


def test_aggregate_hand_computed() -> None:
    m = aggregate(PAIRS, REG)
    assert m.n == 5
    assert m.tool_accuracy == pytest.approx(3 / 5)
    assert m.argument_accuracy == pytest.approx(3 / 5)
    assert m.plan_accuracy == pytest.approx(2 / 5)
    assert m.plan_valid == 1.0
    assert m.step_argument_accuracy == pytest.approx(4 / 5)  # gold steps 2+0+0+2+1, matched 2+0+0+2+0
    pc = m.per_class
    assert pc[NO_RETRIEVAL]["precision"] == 1.0 and pc[NO_RETRIEVAL]["recall"] == 0.5
    assert pc["customer_support"]["f1"] == 0.0
    for c in ("date_math", "shipment_status", "prod_qna", "review_summary"):
        assert pc[c]["f1"] == 1.0
    assert m.macro_f1 == pytest.approx((2 / 3 + 0 + 4) / 6)
    # the same from graded records (what the benchmark writes), with latency
    recs = [{**score_plan(p, g, REG).to_dict(), "latency": 0.5 * (i + 1)} for i, (p, g) in enumerate(PAIRS)]
    m2 = aggregate(recs)
    assert m2.to_dict() | {"latency_mean": None} == m.to_dict() | {"latency_mean": None}
    assert m2.latency_mean == pytest.approx(1.5)
    table = render_table(m2, title="test")
    assert "| no_retrieval | 1.000 | 0.500 | 0.667 | 2 |" in table and "tool accuracy | 0.600" in table
    assert "planner latency" in table


def test_aggregate_empty() -> None:
    m = aggregate([])
    assert m.n == 0 and m.tool_accuracy == 0.0 and m.per_class == {}
