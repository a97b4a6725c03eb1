"""direct_answer: the no-retrieval baselines of Think-then-Act (paper §4.3): ``standard`` answers directly, ``cot``
reasons step by step first; both show the query assessment's in-context examples (``in_context_examples``)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from ragplan.llm import decide_for, failure_update
from ragplan.nodes import Node
from ragplan.nodes.think_then_act.answer_subquery import ANSWER_STYLE, ShortAnswer, qa_prompt
from ragplan.nodes.think_then_act.in_context_examples import ANSWER_EXAMPLES, COT_EXAMPLES
from ragplan.state.context import ThinkThenActContext
from ragplan.state.think_then_act import SubQuery, TextQAState

__all__ = ["ChainOfThought", "make_direct_answer"]

COT_INSTRUCTION = "Think step by step: first the facts you need and how they combine, then the answer."
"""The chain-of-thought instruction (after the question; the examples, worked with their reasoning, come first)."""


class ChainOfThought(BaseModel):
    """Reasoning, then the answer."""

    reasoning: str = Field(description="Step-by-step reasoning.")
    answer: str = Field(description="The short answer only.")


def make_direct_answer(cot: bool) -> Node[TextQAState, ThinkThenActContext]:
    """The ``standard`` (cot=False) or ``cot`` (cot=True) answer node."""

    def direct_answer(state: TextQAState, runtime: Runtime[ThinkThenActContext]) -> dict[str, Any]:
        """Answer the question without retrieval."""
        # the examples first and the question last, as few-shot prompts are laid out (a small model shown an example
        # last tends to answer that example's question)
        examples, how = (COT_EXAMPLES, f"\n{COT_INSTRUCTION}") if cot else (ANSWER_EXAMPLES, "")
        messages = qa_prompt(state, state["question"], before=f"{examples}\n\nNow this one.\n",
                             after=f"\n{ANSWER_STYLE}{how}")
        d = decide_for(runtime.context, messages, ChainOfThought if cot else ShortAnswer)
        if not d.ok:
            return {**failure_update(d, "direct_answer"), "retrieval_count": 0, "retrieval_ratio": 0.0}
        q = SubQuery(index=1, text=state["question"], resolved=state["question"], decision="NO RETRIEVAL (baseline)",
                     answer=str(getattr(d.value, "answer", "")).strip(), done=True)
        return {"answer": q.answer, "reasoning": getattr(d.value, "reasoning", "").strip(), "queries": [q],
                "retrieval_count": 0, "retrieval_ratio": 0.0, "usage": d.usage, "stop_reason": "answered"}

    direct_answer.__name__ = "cot_answer" if cot else "direct_answer"
    return direct_answer
