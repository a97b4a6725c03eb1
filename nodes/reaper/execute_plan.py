"""execute_plan: run the typed ``plan``'s tool calls (REAPER and the classifier baseline) in dependency order,
independent steps in parallel, each time-boxed; a failure is recorded and its dependants skipped."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragplan.methods.reaper.execute import run_plan
from ragplan.methods.reaper.plan import RetrievalPlan, as_steps
from ragplan.state.context import ReaperContext
from ragplan.state.reaper import ReaperState
from ragplan.tools.suites import suite_for
from ragplan.state.failure import failed

__all__ = ["execute_plan"]


def execute_plan(state: ReaperState, runtime: Runtime[ReaperContext]) -> dict[str, Any]:
    """Execute the typed ``plan`` against the bound tool registry; record every call as evidence."""
    ctx = runtime.context
    try:
        plan = RetrievalPlan(steps=as_steps(state.get("plan")))
    except Exception as exc:  # a state that does not hold plan steps: recorded, the responder still answers
        return failed("error", "execute_plan", f"execute_plan: the plan in state is not a list of plan steps: {exc}", evidence=[])
    if not plan.steps:
        return {"evidence": []}
    try:
        result = run_plan(plan, suite_for(ctx), timeout_s=ctx.step_timeout_s, max_parallel=ctx.max_parallel)
    except Exception as exc:  # the registry could not be bound (no shop): recorded, the responder still answers
        return failed("tool_error", "execute_plan", f"execute_plan: {type(exc).__name__}: {exc}", evidence=[])
    return {"evidence": [e.model_dump(mode="json") for e in result.evidence]}
