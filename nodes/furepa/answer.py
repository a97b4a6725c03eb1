"""answer: the best answer the evidence supports when the loop ended without the LLM answering (iteration bound,
repeats, an unparseable proposal); ``stop_reason`` keeps why."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from ragplan.llm import decide_for, failure_update
from ragplan.nodes.furepa.mask_reasoning import ANSWER_FORM, evidence_lines
from ragplan.state.failure import failed
from ragplan.state.furepa import FuRePAContext, FuRePAState

__all__ = ["EvidenceAnswer", "answer_from_evidence", "STOP_EXPLANATIONS"]

STOP_EXPLANATIONS = {
    "max_iterations": "the search budget is used up",
    "repetition": "the searches kept repeating queries that were already run",
    "llm_unparseable": "the last search step failed",
}


class EvidenceAnswer(BaseModel):
    """The answer the evidence best supports."""

    reasoning: str = Field(description="Short reasoning from the evidence to the answer.")
    answer: str = Field(description="The short answer only.")


def answer_from_evidence(state: FuRePAState, runtime: Runtime[FuRePAContext]) -> dict[str, Any]:
    """Answer from the evidence gathered (one LLM call at the context's temperature)."""
    ctx = runtime.context
    block = evidence_lines(list(state.get("evidence") or []), ctx.passage_chars) or "none"
    why = STOP_EXPLANATIONS.get(state.get("stop_reason") or "", "searching stopped")
    messages = [SystemMessage("You answer multi-hop questions from retrieved evidence."),
                HumanMessage(f"Question: {state['question']}\n\nEvidence:\n{block}\n\nSearching has stopped: {why}. "
                             f"Give the answer the evidence best supports; where it does not settle the question, give "
                             f"your best guess. Answer {ANSWER_FORM}.")]
    d = decide_for(ctx, messages, EvidenceAnswer)
    if not d.ok:
        update = failure_update(d, "answer")
        if state.get("error"):
            update = {**update, **failed(d.kind or "error", "answer", f"{state['error']}; {update['error']}")}
        return update
    return {"answer": d.value.answer.strip(), "reasoning": d.value.reasoning.strip(), "usage": d.usage}
