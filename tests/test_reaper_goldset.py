"""The retail gold set: deterministic, large enough, every category, valid plans, a stratified split."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ragplan.methods.reaper.goldset import CATEGORIES, generate_goldset, load_goldset, write_goldset
from ragplan.methods.reaper.plan import format_plan, parse_plan
from ragplan.methods.reaper.validate import check_plan
from ragplan.tools.retail import build_retail_registry, generate_shop, load_shop


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_shop(tmp_path_factory.mktemp("shop"), seed=0, n_products=80, n_orders=40)


@pytest.fixture(scope="module")
def gold(shop: Path):
    return generate_goldset(shop, seed=0)


def test_deterministic_and_seeded(shop: Path, gold) -> None:
    again = generate_goldset(shop, seed=0)
    assert again == gold
    other = generate_goldset(shop, seed=1)
    assert [e.question for e in other] != [e.question for e in gold]


def test_size_ids_and_categories(gold) -> None:
    assert len(gold) >= 300
    assert len({e.id for e in gold}) == len(gold)
    counts = Counter(e.category for e in gold)
    assert set(counts) == set(CATEGORIES)
    assert min(counts.values()) >= 20
    assert len({e.question.lower() for e in gold}) > 0.85 * len(gold)  # phrasing varies


def test_every_gold_plan_parses_validates_and_is_canonical(gold) -> None:
    reg = build_retail_registry()
    for e in gold:
        res = parse_plan(e.gold_plan)
        assert not res.errors, (e.id, res.errors)
        assert not check_plan(res.plan, reg), (e.id, e.gold_plan)
        assert format_plan(res.plan) == e.gold_plan
        assert res.plan.tools() == e.tool_sequence
        assert set(e.context) == {"product_id", "product_title", "history", "date"}


def test_plan_shapes_by_category(gold) -> None:
    seqs = {c: {tuple(e.tool_sequence) for e in gold if e.category == c} for c in CATEGORIES}
    assert seqs["no_retrieval"] == {()}
    assert seqs["date_shipment"] == {("date_math", "shipment_status")}
    assert seqs["search_qna"] == {("prod_search", "prod_qna")}
    assert seqs["shipment_qna"] == {("shipment_status", "prod_qna")}
    assert seqs["compatible"] == {("compatible_products",)}
    assert seqs["shipment_compat"] == {("shipment_status", "compatible_products")}
    single = {t for c in CATEGORIES for s in seqs[c] if len(s) == 1 for t in s}
    assert single == set(build_retail_registry().names())  # every tool has single-step questions


def test_grounded_in_the_shop(shop: Path, gold) -> None:
    s = load_shop(shop)
    try:
        for e in gold:
            pid = e.context["product_id"]
            if pid:
                assert s.products[pid]["title"] == e.context["product_title"]
            assert e.context["date"] == s.today.isoformat()
            if e.category in ("prod_qna", "context_qna", "review_summary", "compatible"):
                assert pid and f'"{pid}"' in e.gold_plan
        keywords = " ".join(o["title"].lower() + " " + o["keywords"] for o in s.orders())
        for e in gold:
            for st in parse_plan(e.gold_plan).plan.steps:
                if "keywords" in st.kwargs:
                    assert all(w in keywords for w in st.kwargs["keywords"].value.split())
    finally:
        s.close()
    anaphora = [e for e in gold if e.category == "context_qna"]
    assert any(" it" in e.question or "this" in e.question for e in anaphora)


def test_split_stratified(gold) -> None:
    for c in CATEGORIES:
        rows = [e for e in gold if e.category == c]
        test = sum(e.split == "test" for e in rows)
        assert test == round(0.2 * len(rows)) and test >= 1
    assert {e.split for e in gold} == {"train", "test"}


def test_write_load_roundtrip(tmp_path: Path, gold) -> None:
    p = write_goldset(tmp_path / "g.jsonl", gold)
    assert len(p.read_text().splitlines()) == len(gold)
    json.loads(p.read_text().splitlines()[0])
    assert load_goldset(p) == gold


def test_gold_set_and_in_context_examples_follow_the_argument_rule(gold) -> None:
    """One rule (ragplan.methods.reaper.metrics): scored arguments are taken from the question; free text is not scored."""
    from ragplan.methods.reaper.metrics import keyword_set, normalize_text, score_plan
    from ragplan.nodes.reaper.planner_prompt import DEFAULT_EXAMPLES
    from ragplan.methods.reaper.plan import PlanArg

    reg = build_retail_registry()
    rows = [(e.question, e.context, e.plan) for e in gold]
    rows += [(x["query"], x["context"], parse_plan(x["plan"]).plan) for x in DEFAULT_EXAMPLES]
    assert len(rows) > len(gold)
    for question, context, plan in rows:
        assert not check_plan(plan, reg), (question, plan)
        words = set(keyword_set(question))
        for st in plan.steps:
            if st.tool == "prod_search":
                assert set(keyword_set(st.args[0].value)) <= words, (question, st.raw)
            if st.tool == "shipment_status" and "keywords" in st.kwargs:
                kw = keyword_set(st.kwargs["keywords"].value)
                assert kw and set(kw) <= words, (question, st.raw)
            if st.tool == "date_math":
                assert normalize_text(st.args[0].value) in normalize_text(question), (question, st.raw)
        # rephrasing the free text (prod_qna / customer_support questions) never changes the grade
        rephrased = plan.model_copy(deep=True)
        for st in rephrased.steps:
            if st.tool in ("prod_qna", "customer_support"):
                st.args[-1] = PlanArg(kind="literal", value="Could you check this for the customer, please?")
        s = score_plan(rephrased, plan, reg, today=context.get("date") or None)
        assert s.correct, (question, s)
