"""REAPER plan validation against a tool registry: every error kind, and the repair prompt."""

from __future__ import annotations

import pytest

from ragplan.methods.reaper.plan import parse_plan
from ragplan.methods.reaper.validate import repair_prompt, check_plan
from ragplan.methods.reaper.validate import is_date_range_literal
from ragplan.tools.registry import ArgSpec, ToolRegistry, ToolSpec


def retail_like_registry() -> ToolRegistry:
    """The retail tools' names and signatures (specs only), as the paper's prompt lists them."""
    return ToolRegistry([
        ToolSpec("prod_search", "Searches the catalog for products matching a query.",
                 [ArgSpec("query")], '#E1 = prod_search("nut free chocolate coins")'),
        ToolSpec("prod_qna", "Fetches specific information for a particular aspect or attribute of a product.",
                 [ArgSpec("product_id"), ArgSpec("question")],
                 '#E1 = prod_qna("J6FLBNBQ31", "What is the tread depth?")', aliases=["product_information"]),
        ToolSpec("review_summary", "Summarises the customer reviews of a product.",
                 [ArgSpec("product_id")], '#E1 = review_summary("J6FLBNBQ31")', aliases=["review_summ"]),
        ToolSpec("shipment_status", "The customer's orders and their delivery status.",
                 [ArgSpec("keywords", required=False), ArgSpec("date_range", "date_range", required=False)],
                 '#E2 = shipment_status(date_range=#E1, keywords="sheet pan")'),
        ToolSpec("customer_support", "Help pages for account, order and policy questions.",
                 [ArgSpec("question")], '#E1 = customer_support("how do i cancel subscribe and save")'),
        ToolSpec("date_math", "Turns a date expression into a date range, or formats a date.",
                 [ArgSpec("expr"), ArgSpec("operation", required=False), ArgSpec("fmt", required=False)],
                 '#E1 = date_math("tomorrow")'),
        ToolSpec("compatible_products", "Products of a type compatible with a base product.",
                 [ArgSpec("base_product_id"), ArgSpec("product_type")],
                 '#E1 = compatible_products("B0135KI4X8", "ink cartridge")'),
    ], name="retail")


@pytest.fixture
def reg() -> ToolRegistry:
    return retail_like_registry()


def check(text: str, reg: ToolRegistry):
    r = parse_plan(text)
    assert not r.errors, r.errors
    return check_plan(r.plan, reg)


def kinds(errors) -> list[str]:
    return [e.kind for e in errors]


def test_paper_figure2_plans_are_valid(reg):
    from tests.test_reaper_plan import FIGURE_2, FIGURE_5, examples

    for text in examples(FIGURE_2) + examples(FIGURE_5):
        assert check(text, reg) == [], text


def test_invented_tool_suggests_the_closest_name(reg):
    errs = check('Step 1: a - #E1 = prod_serch("mug")', reg)
    assert kinds(errs) == ["unknown_tool"]
    assert 'unknown tool "prod_serch"' in errs[0].message and "did you mean prod_search?" in errs[0].message
    assert errs[0].line == 1 and errs[0].step == 1
    errs = check('Step 1: a - #E1 = decontextualizer("text", "q")', reg)
    assert kinds(errs) == ["unknown_tool"] and "available: prod_search, prod_qna" in errs[0].message
    # an alias (a TEvo name variant) is not accepted, but named
    errs = check('Step 1: a - #E1 = prod_search("mug")\nStep 2: b - #E2 = review_summ(#E1)', reg)
    assert kinds(errs) == ["unknown_tool"] and "another name for review_summary" in errs[0].message
    assert errs[0].line == 2


def test_unknown_keyword_argument_paper_figure6(reg):
    from tests.test_reaper_plan import FIGURE_6

    errs = check_plan(parse_plan(FIGURE_6).plan, reg)
    assert kinds(errs) == ["unknown_arg", "missing_arg"]
    assert 'no argument "compatible_product_type" (did you mean product_type?)' in errs[0].message
    assert 'needs the argument "product_type"' in errs[1].message
    assert all(e.line == 5 for e in errs)


def test_missing_required_and_too_many_positional(reg):
    errs = check('#E1 = prod_qna("B01")', reg)
    assert kinds(errs) == ["missing_arg"] and '"question"' in errs[0].message
    errs = check('#E1 = prod_search("a", "b")', reg)
    assert kinds(errs) == ["too_many_args"] and "prod_search(query)" in errs[0].message
    errs = check('#E1 = prod_qna("B01", product_id="B02")', reg)
    assert "duplicate_arg" in kinds(errs)
    assert check("#E1 = shipment_status()", reg) == []  # every argument optional
    assert check('#E1 = date_math("tomorrow", fmt="%Y")', reg) == []


def test_duplicate_evidence_variables_and_numbering(reg):
    errs = check('Step 1: a - #E1 = prod_search("a")\nStep 2: b - #E1 = prod_search("b")', reg)
    assert kinds(errs) == ["duplicate_var"] and errs[0].line == 2 and "already assigned by step 1" in errs[0].message
    errs = check('Step 1: a - #E1 = prod_search("a")\nStep 3: b - #E3 = prod_search("b")', reg)
    assert kinds(errs) == ["numbering"] and "numbered 1, 3" in errs[0].message and errs[0].line == 2
    errs = check('Step 1: a - #E1 = prod_search("a")\nStep 2: b - #E5 = prod_search("b")', reg)
    assert kinds(errs) == ["numbering"] and "Step 2 assigns #E5" in errs[0].message
    errs = check('#E2 = prod_search("a")', reg)  # unnumbered: position 1 must assign #E1
    assert kinds(errs) == ["numbering"]


def test_references_missing_self_later_and_cycles(reg):
    errs = check('#E1 = prod_qna(#E4, "q")', reg)
    assert kinds(errs) == ["missing_ref"] and "no step assigns #E4" in errs[0].message
    errs = check('#E1 = prod_qna("B01", "is #E1 ok?")', reg)
    assert kinds(errs) == ["self_ref"]
    errs = check('#E1 = prod_qna(#E2, "q")\n#E2 = prod_search("mug")', reg)
    assert kinds(errs) == ["forward_ref"] and errs[0].line == 1 and "(step 2)" in errs[0].message
    errs = check('#E1 = prod_qna(#E2, "q")\n#E2 = review_summary(#E1)', reg)
    assert sorted(kinds(errs)) == ["cycle", "forward_ref"]
    cyc = next(e for e in errs if e.kind == "cycle")
    assert "#E1, #E2" in cyc.message and cyc.line == 1


def test_date_range_literals(reg):
    errs = check('#E1 = shipment_status(keywords="pan", date_range="tomorrow")', reg)
    assert kinds(errs) == ["arg_type"]
    assert 'date_math("tomorrow")' in errs[0].message
    errs = check('#E1 = shipment_status("pan", 42)', reg)  # by position too
    assert kinds(errs) == ["arg_type"]
    for ok in ['"2024-05-01"', '"2024-05-01..2024-05-07"', '"2024-05-01 to 2024-05-07"',
               '{"start": "2024-05-01", "end": "2024-05-02T10:00:00Z"}', '["2024-05-01", "2024-05-02"]', "#E1",
               '"from #E1"']:
        plan = f'#E1 = date_math("today")\n#E2 = shipment_status(date_range={ok})'
        assert check(plan, reg) == [], ok
    assert not is_date_range_literal("yesterday") and not is_date_range_literal(["2024-05-01"])
    assert not is_date_range_literal({"from": "2024-05-01"}) and not is_date_range_literal("2024-05-01 - 2024-05-02")
    # date_math's own output, passed on as a literal (agent_planner does): shipment_status reads its start and end
    assert is_date_range_literal({"start": "2024-05-01", "end": "2024-05-01", "expression": "today", "today": "2024-05-01"})
    assert not is_date_range_literal({"start": "soon", "expression": "today"})


def test_other_typed_literals_are_checked_where_possible():
    reg = ToolRegistry([ToolSpec("top", "", [ArgSpec("k", "int"), ArgSpec("w", "float", False),
                                             ArgSpec("b", "bool", False)], "")])
    assert check("#E1 = top(3, 0.5, true)", reg) == []
    assert check('#E1 = top("3", "0.5", "false")', reg) == []
    assert kinds(check('#E1 = top("three", w="x", b=1)', reg)) == ["arg_type"] * 3


def test_errors_are_sorted_by_line_and_a_zero_step_plan_is_valid(reg):
    errs = check('Step 1: a - #E1 = prod_serch("a")\nStep 2: b - #E2 = prod_qna(#E9)', reg)
    assert [e.line for e in errs] == sorted(e.line for e in errs)
    assert check_plan(parse_plan("No retrieval needed").plan, reg) == []


def test_repair_prompt_lists_problems_tools_and_format(reg):
    text = 'Step 1: a - #E1 = prod_serch("mug")\nStep 2: b - #E2 = prod_qna(#E1)'
    errs = check(text, reg)
    prompt = repair_prompt(errs, reg, plan_text=text)
    assert prompt.count("\n- line ") == len(errs)
    assert "line 1: step 1: unknown tool" in prompt and "did you mean prod_search?" in prompt
    assert "- prod_qna(product_id, question)" in prompt and "- shipment_status(keywords=…, date_range=…)" in prompt
    assert "Step k: <purpose> - #Ek = tool_name(" in prompt
    assert text in prompt
    bare = repair_prompt(errs)
    assert "The only tools" not in bare and "unknown tool" in bare
