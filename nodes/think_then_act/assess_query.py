"""assess_query: Think-then-Act's query assessment (paper §3.1): CLEAR AND COMPLETE, INCOMPLETE (completed into one
query) or AMBIGUOUS (decomposed into sub-queries that may refer to earlier answers as ``#1``, ``#2`` …)."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from ragplan.llm import decide_for, failure_update
from ragplan.nodes.think_then_act.answer_subquery import qa_prompt
from ragplan.nodes.think_then_act.in_context_examples import ASSESSMENT_EXAMPLES
from ragplan.state.context import ThinkThenActContext
from ragplan.state.think_then_act import MultiStepState, SubQuery, references

__all__ = ["QueryAssessment", "assess_query", "ASSESS_INSTRUCTION"]

ASSESS_INSTRUCTION = ("""Before answering, judge the question itself.
- CLEAR AND COMPLETE: it asks one precise thing and has everything needed to answer it.
- INCOMPLETE: it leaves out something needed (a missing subject, time or object that can be inferred); write
  one complete, self-contained version of it as `rewritten`.
- AMBIGUOUS: answering it takes several facts, or it can be read several ways; break it into simple
  sub-questions in `sub_queries`, in the order they should be answered. A sub-question may use the answer of an
  earlier one by writing #1, #2, … for it.

"""
+ ASSESSMENT_EXAMPLES)
"""The assessment instruction with the shared in-context examples (one per category; see ``in_context_examples``)."""


class QueryAssessment(BaseModel):
    """The assessment of the input query."""

    category: Literal["CLEAR AND COMPLETE", "INCOMPLETE", "AMBIGUOUS"] = Field(description="How clear and complete the question is.")
    reason: str = Field(default="", description="One sentence on why.")
    rewritten: str = Field(default="", description="INCOMPLETE: the completed question.")
    sub_queries: list[str] = Field(default_factory=list, description="AMBIGUOUS: the simple sub-questions, in order (#k refers to the k-th).")


def assess_query(state: MultiStepState, runtime: Runtime[ThinkThenActContext]) -> dict[str, Any]:
    """Classify the question and produce the query (or sub-queries) to answer."""
    ctx = runtime.context
    question = state["question"]
    d = decide_for(ctx, qa_prompt(state, question, f"{ASSESS_INSTRUCTION}\n\n"), QueryAssessment)
    if not d.ok:
        return failure_update(d, "assess_query")
    a = d.value
    texts = [question]
    if a.category == "INCOMPLETE" and a.rewritten.strip():
        texts = [a.rewritten.strip()]
    elif a.category == "AMBIGUOUS":
        texts = [s.strip() for s in a.sub_queries if s.strip()][: max(1, ctx.max_subqueries)] or [question]
    queries = [SubQuery(index=i, text=t, depends_on=[r for r in references(t) if r < i]) for i, t in enumerate(texts, 1)]
    return {"assessment": a.category, "assessment_reason": a.reason, "queries": queries, "usage": d.usage}
