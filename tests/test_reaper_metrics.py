"""Plan metrics on small hand-computed examples: per-class P/R/F1, tool accuracy, the argument rule, validity."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ragplan.methods.reaper.metrics import (
    NO_RETRIEVAL, NO_VALID_PLAN, SCORED_ARGS, aggregate, class_prf, keyword_set, normalize_text, render_comparison,
    render_table, score_plan,
)
from ragplan.tools.retail import build_retail_registry

REG = build_retail_registry()
TODAY = "2026-11-22"  # a Sunday
GOLD_SHIP = ('Step 1: Fetch the date range - #E1 = date_math("tomorrow")\n'
             'Step 2: Fetch shipment status - #E2 = shipment_status(keywords="sheet pan", date_range=#E1)')
PRED_SHIP = '#E1 = date_math("Tomorrow")\n#E2 = shipment_status("Sheet  pans!", #E1)'  # positional, other case, plural
GOLD_TWO = 'Step 1: a - #E1 = prod_qna("AAAA000001", "what colour is it?")\nStep 2: b - #E2 = review_summary("AAAA000001")'
PRED_TWO = 'Step 1: b - #E1 = review_summary("aaaa000001")\nStep 2: a - #E2 = prod_qna("AAAA000001", "What colour is it")'

PAIRS = [
    (PRED_SHIP, GOLD_SHIP),                                                  # right tools, right scored args
    ("", ""),                                                                # no retrieval, right (args not scored)
    ('#E1 = customer_support("hi")', ""),                                    # retrieval where none is needed
    (PRED_TWO, GOLD_TWO),                                                    # reordered: tools wrong (args not scored)
    ('#E1 = prod_search("red phone cases")', '#E1 = prod_search("blue phone case")'),  # scored argument wrong
    ('#E1 = prod_qna("AAAA000001", "Which colour is this shirt?")',         # free text rephrased: right
     '#E1 = prod_qna("AAAA000001", "what colour is it?")'),
]


def test_normalize_and_classes() -> None:
    assert normalize_text("  What's   the COLOUR?! ") == "whats the colour"
    assert keyword_set("Show me some waterproof backpacks for hiking!") == ("backpack", "hiking", "waterproof")
    assert keyword_set("my sheet pan order") == keyword_set("Sheet pans") == ("pan", "sheet")
    assert keyword_set("the package") == ()
    assert SCORED_ARGS == {"prod_search": ("query",), "shipment_status": ("keywords", "date_range")}


def test_single_scores() -> None:
    s = score_plan(PRED_SHIP, GOLD_SHIP, REG)
    assert s.tools_correct and s.args_correct and s.valid and s.correct and s.args_matched == 1 == s.args_scored
    s = score_plan(PRED_TWO, GOLD_TWO, REG)
    assert not s.tools_correct and s.args_correct is None and not s.correct  # no scored tool in the gold plan
    s = score_plan("", "", REG)
    assert s.correct and s.valid and s.args_scored == 0 and s.pred_classes == [NO_RETRIEVAL]
    s = score_plan('#E1 = customer_support("hi")', "", REG)
    assert not s.tools_correct and s.args_correct is None and not s.correct


def test_free_text_arguments_may_be_rephrased() -> None:
    """The gold set copies the customer's words, the paper's plans and our examples rewrite them: both are right."""
    gold = '#E1 = prod_qna("J6FLBNBQ31", "is the tread depth between 0.15 inches and 0.25 inches")'
    paper = ('Step 1: Fetches specific information for a product relevant to a particular attribute - #E1 = '
             'prod_qna("J6FLBNBQ31", "What is the tread depth of the MICHELIN Defender LTX M/S All-Season Radial Car Tire?")')
    s = score_plan(paper, gold, REG, today=TODAY)
    assert s.correct and s.args_correct is None
    s = score_plan('#E1 = customer_support("How can I cancel my Subscribe & Save items?")',
                   '#E1 = customer_support("how do i cancel all subscribe and save items")', REG, today=TODAY)
    assert s.correct
    gold2 = '#E1 = prod_search("nut free chocolate coins")\n#E2 = prod_qna(#E1, "does it contain nuts?")'
    pred2 = ('#E1 = prod_search("Nut-free chocolate coin")\n'
             '#E2 = prod_qna(product_id=#E1, question="Are these chocolate coins free of tree nuts and peanuts?")')
    s = score_plan(pred2, gold2, REG, today=TODAY)
    assert s.correct and s.args_correct and s.args_matched == 1


def test_wrong_prod_search_and_shipment_status_arguments_fail() -> None:
    wrong = [
        ('#E1 = prod_search("chocolate coins")', '#E1 = prod_search("nut free chocolate coins")'),   # a word dropped
        ('#E1 = prod_search("show me some options for nut free chocolate coins and bars")',
         '#E1 = prod_search("nut free chocolate coins")'),                                           # a word added
        ('#E1 = shipment_status(keywords="blue sheet pan")', '#E1 = shipment_status(keywords="sheet pan")'),
        ('#E1 = shipment_status(keywords="phone")', '#E1 = shipment_status(keywords="sheet pan")'),
        ('#E1 = shipment_status()', '#E1 = shipment_status(keywords="sheet pan")'),                  # keywords missing
        ('#E1 = date_math("yesterday")\n#E2 = shipment_status(keywords="sheet pan", date_range=#E1)', GOLD_SHIP),
        ('#E1 = shipment_status(keywords="sheet pan")', '#E1 = date_math("tomorrow")\n'
         '#E2 = shipment_status(date_range=#E1)'),                                                   # no date filter
        ('#E1 = date_math("tomorrow")\n#E2 = shipment_status(keywords="sheet pan", date_range=#E1)',
         '#E1 = date_math("tomorrow")\n#E2 = shipment_status(date_range=#E1)'),                      # keywords added
    ]
    for pred, gold in wrong:
        s = score_plan(pred, gold, REG, today=TODAY)
        assert s.valid and s.args_correct is False and not s.correct, (pred, gold, s)


def test_scored_arguments_are_normalised() -> None:
    right = [
        ('#E1 = prod_search("Waterproof backpacks for hiking!")', '#E1 = prod_search("waterproof hiking backpacks")'),
        ('#E1 = shipment_status(keywords="my Sheet-Pan order")', '#E1 = shipment_status(keywords="sheet pan")'),
        # date ranges compare as the dates they resolve to (today is Sunday 2026-11-22)
        ('#E1 = date_math("in 2 days")\n#E2 = shipment_status(date_range=#E1, keywords="sheet pan")',
         '#E1 = date_math("day after tomorrow")\n#E2 = shipment_status(keywords="sheet pan", date_range=#E1)'),
        ('#E1 = date_math("tomorrow")\n#E2 = shipment_status(keywords="sheet pan", date_range="2026-11-23..2026-11-23")',
         GOLD_SHIP),
        ('#E1 = date_math("next week")\n#E2 = shipment_status(date_range={"start": "2026-11-23", "end": "2026-11-29"})',
         '#E1 = date_math("next week")\n#E2 = shipment_status(date_range=#E1)'),
    ]
    for pred, gold in right:
        s = score_plan(pred, gold, REG, today=TODAY)
        assert s.valid and s.args_correct and s.correct, (pred, gold, s)
    # without the question's date, expressions compare as text
    assert score_plan(PRED_SHIP, GOLD_SHIP, REG).args_correct
    assert not score_plan(PRED_SHIP.replace("Tomorrow", "in 1 day"), GOLD_SHIP, REG).args_correct
    assert score_plan(PRED_SHIP.replace("Tomorrow", "in 1 day"), GOLD_SHIP, REG, today=TODAY).args_correct
    # an optional argument given as null counts as absent
    assert score_plan('#E1 = shipment_status(keywords="pan", date_range=null)', '#E1 = shipment_status(keywords="pan")',
                      REG).correct


def test_invalid_and_failed_predictions_are_wrong_never_no_retrieval() -> None:
    s = score_plan('#E1 = order_tracker("where is it")', "", REG)  # an invented tool against a no-retrieval question
    assert s.status == "invalid" and not s.valid and not s.tools_correct and not s.correct
    assert s.pred_classes == [NO_VALID_PLAN] and s.args_correct is None and "order_tracker" in s.errors[0]
    s = score_plan('#E1 = order_tracker("sheet pan")', '#E1 = shipment_status(keywords="sheet pan")', REG)
    assert s.args_correct is False and not s.correct
    assert not score_plan('#E1 = prod_serch("x")', '#E1 = prod_search("x")', REG).valid  # unknown tool
    assert not score_plan('#E1 = shipment_status(date_range="tomorrow")', "", REG).valid  # needs date_math
    bad = score_plan('#E1 = prod_search("x"', '#E1 = prod_search("x")', REG)  # unclosed call
    assert not bad.valid and bad.errors and bad.pred_tools == [] and not bad.correct
    # what the run reports wins over a plan that happens to look fine
    s = score_plan("", "", REG, status="invalid", errors=["step 1: unknown tool"])
    assert s.status == "invalid" and not s.correct and s.pred_classes == [NO_VALID_PLAN]
    s = score_plan(None, "", REG, status="failed", errors=["llm_error"])
    assert s.status == "failed" and not s.correct and not s.tools_correct and s.errors == ["llm_error"]
    with pytest.raises(ValueError):
        score_plan("", "", REG, status="fine")


def test_class_prf_hand_computed() -> None:
    prf = class_prf([(["customer_support"], []), ([], []), (["prod_qna"], ["prod_qna", "review_summary"]),
                     ([NO_VALID_PLAN], [])])
    assert list(prf)[0] == NO_RETRIEVAL and list(prf)[-1] == NO_VALID_PLAN
    assert prf[NO_RETRIEVAL] == pytest.approx({"precision": 1.0, "recall": 1 / 3, "f1": 0.5, "support": 3,
                                               "tp": 1, "fp": 0, "fn": 2})
    assert prf["customer_support"]["precision"] == 0 and prf["customer_support"]["support"] == 0
    assert prf["review_summary"]["recall"] == 0 and prf["review_summary"]["fn"] == 1
    assert prf["prod_qna"]["f1"] == 1.0


def test_aggregate_hand_computed() -> None:
    m = aggregate([score_plan(p, g, REG) for p, g in PAIRS])
    assert m.n == 6
    assert m.tool_accuracy == pytest.approx(4 / 6)                # pairs 1, 2, 5, 6
    assert m.argument_n == 2 and m.argument_accuracy == pytest.approx(1 / 2)  # scored: pairs 1 (right) and 5 (wrong)
    assert m.plan_accuracy == pytest.approx(3 / 6)                # pairs 1, 2, 6
    assert m.plan_valid == 1.0
    assert m.step_argument_accuracy == pytest.approx(1 / 2)
    pc = m.per_class
    assert pc[NO_RETRIEVAL]["precision"] == 1.0 and pc[NO_RETRIEVAL]["recall"] == 0.5
    assert pc["customer_support"]["f1"] == 0.0
    for c in ("date_math", "shipment_status", "prod_qna", "review_summary", "prod_search"):
        assert pc[c]["f1"] == 1.0
    assert m.macro_f1 == pytest.approx((2 / 3 + 0 + 5) / 7)
    # the same from graded records (what the benchmark writes), with latency
    recs = [{**score_plan(p, g, REG).to_dict(), "latency": 0.5 * (i + 1)} for i, (p, g) in enumerate(PAIRS)]
    m2 = aggregate(recs)
    assert replace(m2, latency_mean=None) == replace(m, latency_mean=None)
    assert m2.latency_mean == pytest.approx(1.75)
    table = render_table(m2, title="test")
    assert "| no_retrieval | 1.000 | 0.500 | 0.667 | 2 |" in table and "tool accuracy | 0.667" in table
    assert "argument accuracy (prod_search, shipment_status; 2 plans) | 0.500" in table and "planner latency" in table
    both = render_comparison({"first call": m, "after repair": m2})
    assert "| metric | first call | after repair |" in both and "| tool accuracy | 0.667 | 0.667 |" in both


def test_aggregate_counts_invalid_plans_against_no_retrieval() -> None:
    m = aggregate([score_plan('#E1 = order_tracker("x")', "", REG), score_plan("", "", REG)])
    assert m.tool_accuracy == 0.5 and m.plan_accuracy == 0.5 and m.plan_valid == 0.5
    assert m.per_class[NO_RETRIEVAL] == pytest.approx({"precision": 1.0, "recall": 0.5, "f1": 2 / 3, "support": 2,
                                                       "tp": 1, "fp": 0, "fn": 1})
    assert m.per_class[NO_VALID_PLAN]["fp"] == 1 and m.argument_accuracy is None


def test_aggregate_empty() -> None:
    m = aggregate([])
    assert m.n == 0 and m.tool_accuracy == 0.0 and m.per_class == {} and m.argument_accuracy is None
