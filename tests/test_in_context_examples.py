"""Think-then-Act §4.3: Standard and CoT get the same in-context examples as Think-then-Act.

Checked on the prompts the graphs really send (scripted model), not on the constants alone.
"""

from __future__ import annotations

import re

from ragplan.graphs.think_then_act import build_cot, build_standard, build_think_then_act
from ragplan.nodes.think_then_act.answer_subquery import ShortAnswer
from ragplan.nodes.think_then_act.assess_query import QueryAssessment
from ragplan.nodes.think_then_act.direct_answer import ChainOfThought
from ragplan.nodes.think_then_act.in_context_examples import IN_CONTEXT_EXAMPLES
from ragplan.state.context import ThinkThenActContext
from tests.scripted import ScriptedChatModel

QUESTION = "Which river flows through the town of Orvale?"


def _reply(messages, schema):
    if schema == "QueryAssessment":
        return QueryAssessment(category="CLEAR AND COMPLETE")
    if schema == "ChainOfThought":
        return ChainOfThought(reasoning="Orvale lies on the Aun.", answer="Aun")
    return ShortAnswer(answer="Aun")


def _first_prompt(builder) -> str:
    model = ScriptedChatModel(responder=_reply)
    # β′ = 0: Think-then-Act never retrieves, so no store is needed; the gate makes no call
    ctx = ThinkThenActContext(model="-", chat_model=model, beta_threshold=0.0)
    out = builder().compile().invoke({"question": QUESTION}, context=ctx)
    assert out["answer"] == "Aun"
    return model.prompts[0][-1].content


def _examples_shown(prompt: str) -> list[str]:
    """The worked questions a prompt shows (every ``Question:`` line but the one asked)."""
    return [q for q in re.findall(r"^Question: (.+)$", prompt, re.M) if q != QUESTION]


def test_standard_and_cot_show_as_many_examples_as_think_then_act():
    tta, standard, cot = (_first_prompt(b) for b in (build_think_then_act, build_standard, build_cot))
    questions = [ex.question for ex in IN_CONTEXT_EXAMPLES]
    assert len(questions) == 3
    assert _examples_shown(tta) == _examples_shown(standard) == _examples_shown(cot) == questions
    for ex in IN_CONTEXT_EXAMPLES:
        assert f"Category: {ex.category}" in tta
        assert f"Question: {ex.question}\nanswer: {ex.answer}" in standard
        assert f"Question: {ex.question}\nreasoning: {ex.reasoning}\nanswer: {ex.answer}" in cot
    assert "reasoning:" not in standard  # Standard predicts directly
