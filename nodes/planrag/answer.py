"""answer: the final decision from the observed data (PlanRAG's "answer generating" step), for all four graphs; after
a bound the prompt asks for the best decision the observations support. A failed call records ``llm_error``."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from ragplan.llm import decide_for, failure_update
from ragplan.nodes.planrag.prompt import messages, plan_block, trace_block
from ragplan.state.context import PlanRAGContext
from ragplan.state.failure import failed
from ragplan.state.planrag import PlanRAGState

__all__ = ["FinalAnswer", "answer", "ANSWER_INSTRUCTION"]

ANSWER_INSTRUCTION = """The data collection is over: give your final answer now, based only on the observed data.
- answer: the best decision, written as the option's name or id exactly as it appears in the data
  (for example a node name or a building id), with nothing else;
- rationale: a short justification that cites the observed numbers."""

EARLY_STOP = {
    "max_steps": "Retrieval stopped because the step limit was reached.",
    "max_repairs": "Retrieval stopped because the query kept failing.",
    "llm_unparseable": "Retrieval stopped because an LLM reply could not be parsed.",
    "recursion_limit": "Retrieval stopped because the run's step budget was nearly used up.",
}


class FinalAnswer(BaseModel):
    """The final answer."""

    answer: str = Field(description="The chosen option exactly as named in the data, nothing else.")
    rationale: str = Field(default="", description="A short justification citing observed numbers.")


def answer(state: PlanRAGState, runtime: Runtime[PlanRAGContext]) -> dict[str, Any]:
    """Generate the final answer; on failure record the error and leave ``answer`` empty."""
    ctx = runtime.context
    parts = [f"Question: {state['question']}"]
    if state.get("plan"):
        parts.append(plan_block(state["plan"]))
    parts.append(trace_block(state.get("steps") or []))
    if note := EARLY_STOP.get(state.get("stop_reason", "")):
        parts.append(note + " Answer with the best decision the observations support.")
    parts.append(ANSWER_INSTRUCTION)
    d = decide_for(ctx, messages(state, ctx.row_cap, *parts), FinalAnswer)
    if not d.ok:  # the run ends without an answer: why it stopped is this failure (retrieval's own reason is kept in error)
        prev = state.get("error", "")
        ended = f" (retrieval had ended: {state['stop_reason']})" if state.get("stop_reason") else ""
        return failed(d.kind or "error", "answer", "; ".join(e for e in (prev, f"answer: {d.error}{ended}") if e), usage=d.usage,
                      answer="", stop_reason=failure_update(d, "answer")["stop_reason"])
    return {"answer": d.value.answer.strip(), "rationale": d.value.rationale.strip(), "usage": d.usage}
