"""answer: when the planning loop ended without ``Finish`` (step bound, unparseable step), one more call asks for the
best short answer the observations support; ``stop_reason`` keeps why."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from ragplan.llm import decide_for, failure_update
from ragplan.nodes.instructrag.prompt import scratchpad
from ragplan.state.instructrag import InstructRAGContext, InstructRAGState

__all__ = ["PlannedAnswer", "answer_from_steps"]


class PlannedAnswer(BaseModel):
    """The best short answer the steps support."""

    answer: str = Field(description="A short answer: a name, a date, a number, yes or no.")


def answer_from_steps(state: InstructRAGState, runtime: Runtime[InstructRAGContext]) -> dict[str, Any]:
    """One LLM call for the answer from the steps taken."""
    ctx = runtime.context
    steps = list(state.get("steps") or [])
    reason = state.get("stop_reason") or "max_steps"
    prompt = (f"Question: {state['question']}\n\nThe search ended before an answer was given ({reason}). The steps taken:\n"
              f"{scratchpad(steps) or '(none)'}\n\nGive the best short answer these observations support.")
    d = decide_for(ctx, [SystemMessage("You answer questions briefly from the evidence you are shown."), HumanMessage(prompt)],
                   PlannedAnswer)
    if not d.ok:
        return failure_update(d, "answer")
    return {"answer": d.value.answer.strip(), "usage": d.usage, "stop_reason": reason}
