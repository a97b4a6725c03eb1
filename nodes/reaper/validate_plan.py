"""validate_plan: parse the planner's output and check it against the tool registry (REAPER).

Invented tools, unknown or missing arguments, references to later or missing steps and cycles are
errors. With errors and a repair left, the planner is asked again with the errors shown; without one,
the failure is recorded (``invalid_plan``) and the responder answers without evidence.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragplan.reaper import format_plan, parse_plan, check_plan
from ragplan.state.context import ReaperContext
from ragplan.tools.suites import suite_for

__all__ = ["validate_plan"]


def validate_plan(state: dict[str, Any], runtime: Runtime[ReaperContext]) -> dict[str, Any]:
    """Parse and validate ``plan_raw``; record the typed plan or the errors."""
    ctx = runtime.context
    parsed = parse_plan(state.get("plan_raw", ""))
    errors = [str(e) for e in parsed.errors]
    if not errors:
        try:
            errors = [str(e) for e in check_plan(parsed.plan, suite_for(ctx))]
        except Exception as exc:  # an unknown suite or a shop that cannot be opened
            return {"plan_errors": [f"tool registry unavailable: {exc}"], "error": f"validate_plan: {exc}",
                    "stop_reason": "tool_error"}
    if len(parsed.plan.steps) > ctx.max_steps and not errors:
        errors = [f"the plan has {len(parsed.plan.steps)} steps; at most {ctx.max_steps} are allowed"]
    update: dict[str, Any] = {"plan_errors": errors}
    if not errors:
        update["plan_text"] = format_plan(parsed.plan) if parsed.plan.steps else ""
        update["plan"] = [{"index": s.index, "evidence_var": s.evidence_var, "tool": s.tool, "purpose": s.purpose,
                           "args": [a.model_dump() for a in s.args], "kwargs": {k: v.model_dump() for k, v in s.kwargs.items()}}
                          for s in parsed.plan.steps]
    elif state.get("plan_attempts", 0) > ctx.max_plan_repairs:
        update["stop_reason"] = "invalid_plan"
    return update
