"""The in-context examples of Think-then-Act and its no-retrieval baselines (paper §4.3).

The paper gives its Standard baseline "the same number of in-context learning examples as our
framework". One list, :data:`IN_CONTEXT_EXAMPLES`, is therefore rendered three ways, so the count
cannot drift apart:

* ``assess_query`` (Think-then-Act's first decision) shows each as a query assessment
  (:func:`assessment_examples`: one example per category);
* ``standard`` shows each as question → short answer (:func:`answer_examples`);
* ``cot`` shows each as question → reasoning → answer (:func:`cot_examples`).

The examples are for the style only; they are written in our own words (the paper's appendix has
StrategyQA-style decompositions such as the first one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["InContextExample", "IN_CONTEXT_EXAMPLES", "assessment_examples", "answer_examples", "cot_examples"]


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


def assessment_examples(examples: tuple[InContextExample, ...] = IN_CONTEXT_EXAMPLES) -> str:
    """The examples as query assessments (``assess_query``)."""
    blocks = []
    for ex in examples:
        lines = [f"Question: {ex.question}", f"Category: {ex.category}"]
        if ex.category == "AMBIGUOUS":
            lines.append(f"Sub-questions: {json.dumps(list(ex.sub_queries))}")
        elif ex.category == "INCOMPLETE":
            lines.append(f"Rewritten: {ex.rewritten}")
        blocks.append("\n".join(lines))
    return "Examples (for the style only):\n" + "\n\n".join(blocks)


def answer_examples(examples: tuple[InContextExample, ...] = IN_CONTEXT_EXAMPLES) -> str:
    """The examples as question → short answer (``standard``)."""
    return "Examples (for the style only):\n" + "\n\n".join(f"Question: {ex.question}\nanswer: {ex.answer}" for ex in examples)


def cot_examples(examples: tuple[InContextExample, ...] = IN_CONTEXT_EXAMPLES) -> str:
    """The examples as question → reasoning → answer (``cot``)."""
    return "Examples (for the style only):\n" + "\n\n".join(
        f"Question: {ex.question}\nreasoning: {ex.reasoning}\nanswer: {ex.answer}" for ex in examples)
