"""The in-context examples of Think-then-Act and its no-retrieval baselines (paper §4.3): one list rendered as query
assessments, as question → answer (``standard``) and as question → reasoning → answer (``cot``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Literal

__all__ = ["InContextExample", "IN_CONTEXT_EXAMPLES", "ASSESSMENT_EXAMPLES", "ANSWER_EXAMPLES", "COT_EXAMPLES"]


@dataclass(frozen=True)
class InContextExample:
    """One worked question, with what every prompt that shows it needs."""

    question: str
    """The question as a user would ask it."""
    category: Literal["CLEAR AND COMPLETE", "INCOMPLETE", "AMBIGUOUS"]
    """Its query assessment (paper §3.1)."""
    answer: str
    """The short answer (what ``standard`` and ``cot`` end with)."""
    reasoning: str
    """The chain of thought that leads to the answer (``cot``)."""
    rewritten: str = ""
    """INCOMPLETE: the completed question."""
    sub_queries: tuple[str, ...] = field(default_factory=tuple)
    """AMBIGUOUS: the sub-questions, in order (``#k`` refers to the k-th answer)."""


IN_CONTEXT_EXAMPLES: tuple[InContextExample, ...] = (
    InContextExample(
        question="Could Ada Lovelace have sent an email?", category="AMBIGUOUS", answer="no",
        reasoning="Ada Lovelace died in 1852. Email was invented in the 1970s, more than a century after her death.",
        sub_queries=("When did Ada Lovelace die?", "When was email invented?", "Is #2 earlier than #1?")),
    InContextExample(
        question="Who directed it, the 1982 film about a replicant hunter?", category="INCOMPLETE", answer="Ridley Scott",
        reasoning="The 1982 film about a replicant hunter is Blade Runner. Blade Runner was directed by Ridley Scott.",
        rewritten="Who directed the 1982 film Blade Runner?"),
    InContextExample(
        question="What is the capital of Australia?", category="CLEAR AND COMPLETE", answer="Canberra",
        reasoning="Australia's largest city is Sydney, but its capital is Canberra."),
)
"""The worked examples every Think-then-Act-family prompt with examples shows (one per assessment category)."""


def _shown(render: Callable[[InContextExample], str]) -> str:
    return "Examples (for the style only):\n" + "\n\n".join(map(render, IN_CONTEXT_EXAMPLES))


ASSESSMENT_EXAMPLES = _shown(lambda ex: f"Question: {ex.question}\nCategory: {ex.category}" + {
    "AMBIGUOUS": f"\nSub-questions: {json.dumps(list(ex.sub_queries))}",
    "INCOMPLETE": f"\nRewritten: {ex.rewritten}"}.get(ex.category, ""))
"""The examples as query assessments (``assess_query``)."""

ANSWER_EXAMPLES = _shown(lambda ex: f"Question: {ex.question}\nanswer: {ex.answer}")
"""The examples as question → short answer (``standard``)."""

COT_EXAMPLES = _shown(lambda ex: f"Question: {ex.question}\nreasoning: {ex.reasoning}\nanswer: {ex.answer}")
"""The examples as question → reasoning → answer (``cot``)."""
