"""plan_step: one Thought and Action (a typed :class:`TAODecision`) of the planning loop, with the selected path in the
prompt (InstructRAG §4.4); ``Finish`` ends the run with its answer."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from ragplan.llm import decide_for, failure_update
from ragplan.nodes.instructrag.prompt import planning_prompt
from ragplan.state.instructrag import InstructRAGContext, InstructRAGState, PlannedPath, TAOStep

__all__ = ["TAODecision", "plan_step"]


class TAODecision(BaseModel):
    """The next step of the plan."""

    thought: str = Field(description="Your reasoning about what you know and what to do next.")
    action: Literal["Search", "Lookup", "Finish"] = Field(description="Search an entity's page, Lookup a keyword in it, or Finish.")
    argument: str = Field(description="The entity to search, the keyword to look up, or the final answer.")


def plan_step(state: InstructRAGState, runtime: Runtime[InstructRAGContext]) -> dict[str, Any]:
    """Ask for the next Thought and Action; record it as a step (observed by ``observe``)."""
    ctx = runtime.context
    steps: list[TAOStep] = list(state.get("steps") or [])
    path: PlannedPath | None = state.get("selected_path")
    extra: dict[str, Any] = {}
    if path is None and state.get("given_path"):  # react given a path (training rewards, experiments)
        path = PlannedPath(instructions=list(state["given_path"]), source="given")
        extra = {"selected_path": path, "candidate_paths": [path], "selection": "given"}
    prompt = planning_prompt(state["question"], path, steps, ctx.demonstrations)
    d = decide_for(ctx, [SystemMessage("You are a careful research agent that answers questions step by step."),
                         HumanMessage(prompt)], TAODecision)
    if not d.ok:
        return failure_update(d, "plan_step")
    v = d.value
    step = TAOStep(index=len(steps) + 1, thought=v.thought.strip(), action=v.action, argument=" ".join(v.argument.split()))
    update: dict[str, Any] = {"steps": [step], "usage": d.usage, **extra}
    if v.action == "Finish":
        update.update(answer=step.argument, stop_reason="answered")
    return update
