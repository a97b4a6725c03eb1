"""plan: PlanRAG's planning step (§5.2) — an ordered list of data analyses from the question and the schema,
made once before any retrieval; retrieve follows it step by step and replan may revise it."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from ragplan.llm import decide_for, failure_update
from ragplan.nodes.planrag.prompt import messages
from ragplan.state.context import PlanRAGContext
from ragplan.state.planrag import PlanRAGState, PlanVersion

__all__ = ["Plan", "plan", "PLAN_INSTRUCTION"]

PLAN_INSTRUCTION = """Before you touch the database, plan the data analysis.
Read the question and the schema, then write an ordered list of steps. Each step names one piece of data
to retrieve from the Graph DB (or one computation over data already retrieved) and what it is for.
Order the steps so that every step only needs the results of the steps before it, and so that after the
last step the best decision can be chosen. Keep to the labels, relationship types and properties of the
schema; do not write the queries yet."""


class Plan(BaseModel):
    """A plan of data analyses."""

    steps: list[str] = Field(min_length=1, description="The data-analysis steps, in the order they should run.")
    reason: str = Field(default="", description="One or two sentences on why this plan answers the question.")


def plan(state: PlanRAGState, runtime: Runtime[PlanRAGContext]) -> dict[str, Any]:
    """Ask the LLM for the initial plan; record it as plan version 0."""
    ctx = runtime.context
    d = decide_for(ctx, messages(state, ctx.row_cap, f"Question: {state['question']}", PLAN_INSTRUCTION), Plan)
    if not d.ok:
        return {**failure_update(d, "plan"), "plan": []}
    steps = [s.strip() for s in d.value.steps if s.strip()]
    return {"plan": steps, "current_step": 0, "repairs": 0, "usage": d.usage,
            "plan_history": [PlanVersion(version=0, steps=steps, reason=d.value.reason, after_step=0)]}
