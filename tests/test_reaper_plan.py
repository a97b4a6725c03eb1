"""REAPER plan parser and printer: the paper's own plans (Figures 2–6 of reaper.md, copied verbatim),
malformed plans with line-numbered errors, tolerance for what planners print, and round trips."""

from __future__ import annotations

import re

import pytest

from ragplan.methods.reaper.plan import RetrievalPlan, PlanArg, PlanStep, format_plan, parse_plan

# ------------------------------------------------------------------------------------ the paper's figures

FIGURE_2 = '''# Input:
Context: {"product_id": "", "product_title": ""}
Question: "how do i cancel all subscribe and save items"
# Answer:
Step 1: Ask customer support - #E1 = customer_support("how do i cancel all subscribe and save items")

# Input:
Context: {"product_id": "J6FLBNBQ31", "product_title": "MICHELIN Defender LTX M/S All-Season Radial Car Tire for SUVs and Crossovers, 235/65R18 106T"}
Question: "is the tread depth between 0.15 inches and 0.25 inches"
# Answer:
Step 1: Fetches specific information for a product relevant to a particular attribute - #E1 = prod_qna("J6FLBNBQ31", "What is the tread depth of the MICHELIN Defender LTX M/S All-Season Radial Car Tire?")

# Input:
Context: {"product_id": "", "product_title": ""}
Question: "show me some options for nut free chocolate coins"
# Answer:
Step 1: Fetch product search results - #E1 = prod_search("nut free chocolate coins")

# Input:
Context: {"product_id": "", "product_title": ""}
Question: "What time will my sheet pan arrive tomorrow?"
# Answer:
Step 1: Fetch the date range - #E1 = date_math("tomorrow")
Step 2: Fetch shipment status - #E2 = shipment_status(date_range=#E1, keywords="sheet pan")
'''

FIGURE_3 = '''
# Input:
Context: {"product_id": "", "product_title": ""}
Question: "how do i cancel all subscribe and save items"
# Answer:
Step 1: Ask customer support for cancelling all subscribe and save items -
#E1 = customer_support("how do I cancel all subscribe and save items")

# Input:
Context: {"product_id": "J6FLBNBQ31", "product_title": "MICHELIN Defender LTX M/S
All-Season Radial Car Tire for SUVs and Crossovers, 235/65R18 106T"}
Question: "is the tread depth between 0.15 inches and 0.25 inches"
# Answer:
Step 1: Retrieve information regarding the tire -
#E1 = prod_qna("Q1E0AR1GR7", "What is the tread depth of MICHELIN Defender LTX
M/S All-Season Radial Car Tire for SUVs and Crossovers, 235/65R18 106T?")
Step 2: Check tread depth -
#E2 = decontextualizer("#E1", "What is the tread depth of the tire?")
Step 3: Compare tread depth with given range -
#E3 = prod_qna("Q1E0AR1GR7", "Does the tread depth of MICHELIN Defender LTX
M/S All-Season Radial Car Tire for SUVs and Crossovers, 235/65R18 106T fall
between 0.15 inches and 0.25 inches?")
Step 4: Compare #E2 with #E3 -
If #E2 = #E3 then "Yes, the tread depth is between 0.15 inches and 0.25 inches"
else "No, the tread depth is not between 0.15 inches and 0.25 inches"

# Input:
Context: {"product_id": "", "product_title": ""}
Question: "show me some options for nut free chocolate coins"
# Answer:
Step 1: Fetch product search results - #E1 = prod_search("nut free chocolate coins")

# Input:
Context: {"product_id": "", "product_title": ""}
Question: "What time will my sheet pan arrive tomorrow?"
# Answer:
Step 1: Fetch the date range - #E1 = date_math("tomorrow")
Step 2: Fetch shipment status - #E2 = shipment_status(keywords="sheet pan",
date_range=#E1)
Step 3: Extract the estimated delivery time from the shipment status -
#E3 = decontextualizer(#E2, "Estimated delivery time:")
Step 4: Convert the estimated delivery time to a readable format -
#E4 = date_math(#E3, "format_date_time", "%I:%M %p")

# Output:
[["date_math", "tomorrow"], ["shipment_status", "sheet pan"],
["decontextualizer", ""], ["date_math", "format_date_time"], [""]]

'''

FIGURE_4 = ['''# Input:
Context: {"product_id": "", "product_title": ""}
Question: "how do i cancel all subscribe and save items"
# Answer:
Here is a step-by-step plan to answer the question
"how do i cancel all subscribe and save items":
Step 1: Ask customer support -
#E1 = customer_support("how do i cancel all subscribe and save items")
The customer support tool can fetch the relevant help page from Amazon.com
to provide instructions on canceling Subscribe and Save subscriptions.
''', '''# Input:
Context: {"product_id": "J6FLBNBQ31", "product_title": "MICHELIN Defender LTX M/S
All-Season Radial Car Tire for SUVs and Crossovers, 235/65R18 106T"}
Question: "is the tread depth between 0.15 inches and 0.25 inches"
# Answer:
Step 1: Retrieve information regarding the product tread depth -
#E1 = prod_qna("J6FLBNBQ31","what is the tread depth of product J6FLBNBQ31 MICHELIN
Defender LTX M/S All-Season Radial Car Tire for SUVs and Crossovers,
235/65R18 106T?")
Step 2: Check if tread depth is between 0.15 and 0.25 inches -
#E2 = general_knowledge("Is tread depth #E1 between 0.15 and 0.25 inches?")
''', '''# Input:
Context: {"product_id": "", "product_title": ""}
Question: "show me some options for nut free chocolate coins"
# Answer:
Here is a step by step plan to find information to answer the customer's
question using the available tools:
Step 1: Perform a product search - #E1 = prod_search("nut free chocolate coins")
Step 2: Get review summary for top search results -
#E2 = review_summ(<top product ID from #E1>)
Step 3: If review summary does not provide enough information, retrieve additional
details - #E3 = prod_qna(<top product ID from #E1>,
"what are the ingredients and allergen information for this product?")
This plan first searches for nut-free chocolate coin products on Amazon using
the prod_search tool. It then retrieves review summaries for the top results to
see what customers are saying about being nut-free using review_summ.
If more specific ingredient and allergen details are needed, it uses prod_qna to get
that information directly for the top product.
''', '''# Input:
Context: {"product_id": "", "product_title": ""}
Question: "What time will my sheet pan arrive tomorrow?"
# Answer:
Step 1: Fetch the date range for tomorrow - #E1 = date_math("tomorrow")
Step 2: Fetch shipment status for "sheet pan" orders within the date range
#E1 - #E2 = shipment_status(keywords="sheet pan", date_range=#E1)
''']

FIGURE_5 = '''# Input:
Context: {"product_id": "", "product_title": ""}
Question: "Which battery is compatible with my camera that I ordered yesterday"
# Answer:
Step 1: Fetch the date range - #E1 = date_math("yesterday")
Step 2: Fetch shipment status - #E2 = shipment_status(keywords="camera",
date_range=#E1)
Step 3: Fetch information regarding the camera battery - #E3 = prod_qna("B09GW671M2",
"What battery is compatible with the camera B09GW671M2 that was ordered yesterday?")

# Input:
Context: {"product_id": "", "product_title": ""}
Question: "Is my desk made of real wood?"
# Answer:
Step 1: Fetch shipment status - #E1 = shipment_status(keywords="desk")
Step 2: Retrieve information regarding desk material - #E2 = prod_qna(#E1,
"Is my desk made of real wood?")
'''

FIGURE_6 = '''# Input:
Context: {"product_id": "", "product_title": ""}
Question: "ink cartridge for HP 4650"
# Answer:
Step 1: Fetch product search results - #E1 = compatible_products(base_product_id=
"B0135KI4X8", compatible_product_type = "ink cartridge")
'''


def examples(figure: str) -> list[str]:
    """One text per ``# Input:`` example of a figure (each parsed on its own, as a planner output would be)."""
    return [p for p in re.split(r"(?m)^(?=# Input:)", figure) if p.strip()]


def lit(v):
    return PlanArg(kind="literal", value=v)


def ref(n):
    return PlanArg(kind="ref", value=f"#E{n}", refs=[n])


def calls(plan: RetrievalPlan) -> list[tuple]:
    """(index, var, tool, positional values, keyword values) per step."""
    val = lambda a: a.value  # noqa: E731
    return [(s.index, s.evidence_var, s.tool, [val(a) for a in s.args], {k: val(a) for k, a in s.kwargs.items()})
            for s in plan.steps]


def strip_source(plan: RetrievalPlan) -> list[dict]:
    return [s.model_dump(exclude={"raw", "line"}) for s in plan.steps]


PAPER_PLANS = examples(FIGURE_2) + examples(FIGURE_3) + FIGURE_4 + examples(FIGURE_5) + examples(FIGURE_6)


# ------------------------------------------------------------------------------------------------ Figure 2

def test_figure2_reaper_plans_parse_exactly():
    got = [parse_plan(t) for t in examples(FIGURE_2)]
    assert all(not r.errors and not r.notes for r in got)
    assert calls(got[0].plan) == [(1, "E1", "customer_support", ["how do i cancel all subscribe and save items"], {})]
    assert calls(got[1].plan) == [(1, "E1", "prod_qna", ["J6FLBNBQ31", "What is the tread depth of the MICHELIN "
                                                         "Defender LTX M/S All-Season Radial Car Tire?"], {})]
    assert got[1].plan.steps[0].purpose == ("Fetches specific information for a product relevant to a "
                                            "particular attribute")
    assert calls(got[2].plan) == [(1, "E1", "prod_search", ["nut free chocolate coins"], {})]
    sheet = got[3].plan
    assert calls(sheet) == [(1, "E1", "date_math", ["tomorrow"], {}),
                            (2, "E2", "shipment_status", [], {"date_range": "#E1", "keywords": "sheet pan"})]
    assert sheet.steps[1].kwargs["date_range"] == ref(1)
    assert list(sheet.steps[1].kwargs) == ["date_range", "keywords"]  # the order written
    assert sheet.steps[1].refs == [1]
    assert sheet.steps[0].line == 5 and sheet.steps[1].line == 6  # line numbers in the example text
    assert sheet.tools() == ["date_math", "shipment_status"]


# ------------------------------------------------------------------------------------------------ Figure 3

def test_figure3_wrapped_lines_quoted_refs_and_invented_steps():
    ex = examples(FIGURE_3)
    first = parse_plan(ex[0])
    assert not first.errors
    assert first.plan.steps[0].purpose == "Ask customer support for cancelling all subscribe and save items"
    assert first.plan.steps[0].args == [lit("how do I cancel all subscribe and save items")]

    tread = parse_plan(ex[1])
    assert [s.tool for s in tread.plan.steps] == ["prod_qna", "decontextualizer", "prod_qna"]
    # a string wrapped over lines is joined with one space
    assert tread.plan.steps[0].args[1].value == ("What is the tread depth of MICHELIN Defender LTX M/S All-Season "
                                                 "Radial Car Tire for SUVs and Crossovers, 235/65R18 106T?")
    assert tread.plan.steps[1].args[0] == ref(1)  # "#E1" quoted is still a reference
    assert tread.plan.steps[2].args[1].value.endswith("106T fall between 0.15 inches and 0.25 inches?")
    # the hallucinated "Compare" step has no tool call: an error on its line
    assert len(tread.errors) == 1
    err = tread.errors[0]
    lines = ex[1].splitlines()
    assert lines[err.line - 1].startswith("Step 4: Compare #E2 with #E3")
    assert err.step == 4 and "no tool call" in err.message

    sheet = parse_plan(ex[3])
    assert not sheet.errors
    assert calls(sheet.plan)[1:] == [
        (2, "E2", "shipment_status", [], {"keywords": "sheet pan", "date_range": "#E1"}),
        (3, "E3", "decontextualizer", ["#E2", "Estimated delivery time:"], {}),
        (4, "E4", "date_math", ["#E3", "format_date_time", "%I:%M %p"], {}),
    ]
    # the echoed "# Output:" section after the plan is ignored, with a note
    assert len(sheet.notes) == 1 and "after the plan" in sheet.notes[0].message
    assert ex[3].splitlines()[sheet.notes[0].line - 1] == "# Output:"


# ------------------------------------------------------------------------------------------------ Figure 4

def test_figure4_claude_plans_prose_templates_and_bad_arguments():
    chat = parse_plan(FIGURE_4[0])
    assert not chat.errors and calls(chat.plan) == [(1, "E1", "customer_support",
                                             ["how do i cancel all subscribe and save items"], {})]
    assert [n.line for n in chat.notes] == [5, 6, 9, 10]  # the explanation around the step

    tread = parse_plan(FIGURE_4[1])
    assert not tread.errors
    assert tread.plan.steps[0].args[1].value.endswith("for SUVs and Crossovers, 235/65R18 106T?")
    gk = tread.plan.steps[1].args[0]
    assert gk.kind == "template" and gk.refs == [1] and gk.value == "Is tread depth #E1 between 0.15 and 0.25 inches?"
    assert tread.plan.steps[1].refs == [1]

    coins = parse_plan(FIGURE_4[2])
    assert calls(coins.plan) == [(1, "E1", "prod_search", ["nut free chocolate coins"], {})]
    assert [(e.line, e.step) for e in coins.errors] == [(9, 2), (11, 3)]  # where the bad argument is
    assert all("<top product ID from #E1>" in e.message for e in coins.errors)

    sheet = parse_plan(FIGURE_4[3])
    assert not sheet.errors
    assert sheet.plan.steps[1].purpose == 'Fetch shipment status for "sheet pan" orders within the date range #E1'
    assert sheet.plan.steps[1].evidence_var == "E2" and sheet.plan.steps[1].line == 6


# ---------------------------------------------------------------------------------------- Figures 5 and 6

def test_figure5_and_6_new_use_cases():
    camera, desk = (parse_plan(t) for t in examples(FIGURE_5))
    assert not camera.errors and not desk.errors
    assert calls(camera.plan) == [
        (1, "E1", "date_math", ["yesterday"], {}),
        (2, "E2", "shipment_status", [], {"keywords": "camera", "date_range": "#E1"}),
        (3, "E3", "prod_qna", ["B09GW671M2", "What battery is compatible with the camera B09GW671M2 that was "
                                             "ordered yesterday?"], {}),
    ]
    assert desk.plan.steps[1].args == [ref(1), lit("Is my desk made of real wood?")]
    ink = parse_plan(FIGURE_6)
    assert not ink.errors
    assert calls(ink.plan) == [(1, "E1", "compatible_products", [],
                                {"base_product_id": "B0135KI4X8", "compatible_product_type": "ink cartridge"})]


@pytest.mark.parametrize("text", PAPER_PLANS)
def test_paper_plans_round_trip(text):
    first = parse_plan(text)
    canon = format_plan(first.plan)
    again = parse_plan(canon)
    assert not again.errors and not again.notes
    assert strip_source(again.plan) == strip_source(first.plan)
    assert format_plan(again.plan) == canon
    assert len(canon.splitlines()) == len(first.plan.steps)


def test_canonical_format_is_the_papers():
    plan = parse_plan(examples(FIGURE_2)[3]).plan
    assert format_plan(plan) == ('Step 1: Fetch the date range - #E1 = date_math("tomorrow")\n'
                                 'Step 2: Fetch shipment status - #E2 = shipment_status(date_range=#E1, '
                                 'keywords="sheet pan")')


# --------------------------------------------------------------------------------------------- tolerance

def test_bare_lines_fences_answer_header_trailing_commas_and_literals():
    text = """```
# Answer:
#E1 = prod_qna('J6FLBNBQ31', 'Is it \\'all-season\\'?\\n',)
#E2 = date_math(#E1, operation="add_days", n=-3, f=1.5e2, flag=true, other=False, none=null,
  ids=["a", "b"], opts={"k": 1},
)
- #E3 = customer_support(“curly quotes”),
```"""
    r = parse_plan(text)
    assert not r.errors and not r.notes, (r.errors, r.notes)
    s1, s2, s3 = r.plan.steps
    assert [s.index for s in r.plan.steps] == [1, 2, 3]
    assert s1.purpose == "" and s1.args == [lit("J6FLBNBQ31"), lit("Is it 'all-season'?\n")]
    assert s2.args == [ref(1)]
    assert {k: a.value for k, a in s2.kwargs.items()} == {
        "operation": "add_days", "n": -3, "f": 150.0, "flag": True, "other": False, "none": None,
        "ids": ["a", "b"], "opts": {"k": 1}}
    assert s2.line == 4 and s3.args == [lit("curly quotes")]
    assert parse_plan(format_plan(r.plan)).plan.model_dump(exclude={"steps": {"__all__": {"raw", "line"}}}) == \
        r.plan.model_dump(exclude={"steps": {"__all__": {"raw", "line"}}})


def test_markdown_step_headers_and_purpose_without_dash():
    r = parse_plan("**Step 1:** Look it up - #E1 = prod_search(\"mug\")\nStep 2. #E2 = review_summary(#E1)\n"
                   "Fetch the answer: #E3 = prod_qna(#E1, \"size?\")")
    assert not r.errors
    assert [(s.index, s.purpose) for s in r.plan.steps] == [(1, "Look it up"), (2, ""), (3, "Fetch the answer")]


@pytest.mark.parametrize("text", ["", "   \n\n", "No retrieval needed", "# Answer:\nNo retrieval needed.", None])
def test_zero_step_plans(text):
    r = parse_plan(text)
    assert not r.errors and r.plan.steps == []
    assert format_plan(r.plan) == ""


def test_references_in_strings():
    r = parse_plan('#E3 = f("#E1", " #E2 ", "cmp #E1 and #E2 and #E1 again", "#E", "E1", "#E12x")')
    a = r.plan.steps[0].args
    assert [x.kind for x in a] == ["ref", "ref", "template", "literal", "literal", "template"]
    assert a[2].refs == [1, 2] and a[5].refs == [12]
    assert r.plan.steps[0].refs == [1, 2, 12]


# -------------------------------------------------------------------------------------------- malformed

@pytest.mark.parametrize("text, line, fragment", [
    ('Step 1: a - #E1 = prod_search("nut free\n\nStep 2: b - #E2 = prod_qna(#E1, "x")', 1, "not closed"),
    ('#E1 = prod_search("mug"\n#E2 = prod_qna(#E1, "x")', 1, "not closed"),
    ('Step 1: x - #E1 = prod_search(mug)', 1, "cannot read the argument"),
    ('Step 1: x - #E1 = prod_qna(product_id="a", "q")', 1, "positional argument follows a keyword"),
    ('Step 1: x - #E1 = prod_qna(question="a", question="b")', 1, "given twice"),
    ('Step 1: x - #E1 = prod_qna("a" "b")', 1, "expected ',' or ')'"),
    ('Step 1: x - #E1 = prod_search("mug") and then more', 1, "unexpected text after the call"),
    ('Step 1: x - #E1 = prod_search("a")\nStep 2: just words here\nStep 3: y - #E3 = prod_search("b")', 2,
     "no tool call"),
    ('Step 1: x - #E1 = prod_search("a")\n\nStep 2: y - #E2 = f(\n  "ok",\n  #E1.title)', 5, "cannot read"),
    ('#E1 = f({"a": 1,)', 1, "malformed JSON"),
])
def test_malformed_lines_become_errors_with_line_numbers(text, line, fragment):
    r = parse_plan(text)
    assert len(r.errors) == 1, r.errors
    assert r.errors[0].line == line and fragment in r.errors[0].message
    assert r.errors[0].kind == "syntax"
    assert str(r.errors[0]).startswith(f"line {line}: ")


def test_good_steps_survive_around_bad_ones():
    text = ('Step 1: a - #E1 = date_math("tomorrow")\n'
            'Step 2: b - #E2 = shipment_status(date_range=#E1, keywords=\n'
            'Step 3: c - #E3 = prod_search("pan")')
    r = parse_plan(text)
    assert [s.index for s in r.plan.steps] == [1, 3]
    assert [(e.line, e.step) for e in r.errors] == [(2, 2)]


def test_parser_never_raises_on_junk():
    for junk in ["#E1 = (", "#E1 = f(\"\\", "Step 999999999999999999999: #E1 = f()", ")))(((", "#E1 = f(#E1=2)",
                 "\x00\x01 #E1 = f('\\u12')", "#E1 = f(" + "[" * 2000, "Step 1:\n" * 50, "#E1 = f(-)",
                 "#E1 = f(1.2.3)", "#E1 = f(1e)", "# Input:\n# Answer:\n# Output:\n"]:
        r = parse_plan(junk)
        assert isinstance(r.plan, RetrievalPlan)


def test_round_trip_of_a_built_plan_with_awkward_strings():
    plan = RetrievalPlan(steps=[
        PlanStep(index=1, purpose="Odd  text", evidence_var="E1", tool="prod_search",
                 args=[lit('say "hi" \\ back\nslash ünïcode – #Equal')]),
        PlanStep(index=2, purpose="Use it - carefully", evidence_var="E2", tool="prod_qna",
                 args=[ref(1), PlanArg(kind="template", value="Is #E1 ok?", refs=[1])],
                 kwargs={"n": lit(3), "x": lit(0.25), "b": lit(False), "z": lit(None)}),
    ])
    text = format_plan(plan)
    back = parse_plan(text)
    assert not back.errors
    assert back.plan.steps[0].purpose == "Odd text"  # whitespace in a purpose is normalised
    assert strip_source(back.plan)[1] == plan.steps[1].model_dump(exclude={"raw", "line"})
    assert back.plan.steps[0].args == plan.steps[0].args
