"""replan: after each observation the LLM keeps the plan or revises the remaining steps (PlanRAG §5.2, "Re-plan:
Y/N"); past ``max_replans`` revisions the plan is kept without asking. ``advance_plan`` is the same move without
the LLM, for ``planrag_no_replan`` (the paper's "w/o RP")."""

from __future__ import annotations

from typing import Any, cast

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from ragplan.llm import decide_for, failure_update
from ragplan.nodes.planrag.prompt import messages, plan_block, trace_block
from ragplan.state.context import PlanRAGContext
from ragplan.state.planrag import PlanRAGState, PlanVersion, ReplanVerdict, RetrievalStep

__all__ = ["ReplanDecision", "replan", "advance_plan", "REPLAN_INSTRUCTION"]

REPLAN_INSTRUCTION = """You have just observed the result of the current step. Decide whether the rest of the plan
still leads to the best decision.
- If it does, keep it: replan = false.
- If the observation shows the plan is wrong or incomplete (data missing or shaped differently than assumed,
  a step that failed and needs another approach, a later step made unnecessary or a new analysis needed),
  revise it: replan = true, and give the complete list of steps that should follow from now on (an empty list
  means the data already observed is enough to answer).
Always give the reason for your verdict."""


class ReplanDecision(BaseModel):
    """The re-plan verdict."""

    replan: bool = Field(description="true to replace the remaining steps, false to keep the plan.")
    reason: str = Field(description="Why the plan is kept or revised.")
    new_steps: list[str] = Field(default_factory=list, description="When replan is true: the steps to run from now on, in order.")


def advance_plan(state: PlanRAGState) -> dict[str, Any]:
    """Go to the next plan step without re-planning (PlanRAG w/o RP, and replan when it keeps the plan); mark the
    plan done when it runs out."""
    nxt = state.get("current_step", 0) + 1
    update: dict[str, Any] = {"current_step": nxt, "repairs": 0}
    if nxt >= len(state.get("plan") or []):
        update["stop_reason"] = "plan_done"
    return update


def replan(state: PlanRAGState, runtime: Runtime[PlanRAGContext]) -> dict[str, Any]:
    """Ask for the re-plan verdict on the latest observation and apply it within ``max_replans``."""
    ctx = runtime.context
    steps: list[RetrievalStep] = state.get("steps") or []
    after = len(steps)
    applied = sum(1 for v in state.get("replans") or [] if v.replan and v.applied)
    if applied >= ctx.max_replans:
        verdict = ReplanVerdict(after_step=after, replan=False, reason=f"max_replans ({ctx.max_replans}) reached: plan kept without asking")
        return {**advance_plan(state), "replans": [verdict]}
    plan = state.get("plan") or []
    cur = state.get("current_step", 0)
    prompt = messages(state, ctx.row_cap, f"Question: {state['question']}", plan_block(plan, cur), trace_block(steps),
                      REPLAN_INSTRUCTION)
    d = decide_for(ctx, prompt, ReplanDecision)
    if not d.ok:
        return failure_update(d, "replan")
    v = d.value
    new_steps = [s.strip() for s in v.new_steps if s.strip()]
    verdict = ReplanVerdict(after_step=after, replan=v.replan, reason=v.reason, new_steps=new_steps if v.replan else [])
    update: dict[str, Any] = {"replans": [verdict], "usage": d.usage}
    if v.replan:  # the revised plan keeps the steps up to the current one; the run goes on with the next as usual
        plan = update["plan"] = plan[: cur + 1] + new_steps
        update["plan_history"] = [PlanVersion(version=len(state.get("plan_history") or []), steps=plan, reason=v.reason,
                                              after_step=after)]
    return {**advance_plan(cast(PlanRAGState, {**state, "plan": plan})), **update}
