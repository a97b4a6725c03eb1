"""validate_plan: parse the planner's output and check it against the tool registry (REAPER); every planner call is
recorded as a :class:`PlanCall`, a valid plan becomes the typed ``plan``; invalid: one repair round, then
``invalid_plan`` and an answer without evidence."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragplan.methods.reaper.plan import ParseResult, PlanCall, PlanError, format_plan, parse_plan
from ragplan.methods.reaper.validate import check_plan
from ragplan.state.context import ReaperContext
from ragplan.state.reaper import ReaperState
from ragplan.tools.suites import suite_for
from ragplan.state.failure import failed

__all__ = ["validate_plan", "plan_errors"]


def plan_errors(parsed: ParseResult, ctx: ReaperContext) -> list[PlanError]:
    """A parsed plan's syntax errors, else its errors against the context's tool registry and its ``max_steps`` bound
    (raises when the registry cannot be opened). The planner's plans and a reviewer's edited plans are checked alike."""
    plan = parsed.plan
    errors = list(parsed.errors) or check_plan(plan, suite_for(ctx))
    if len(plan.steps) > ctx.max_steps and not errors:
        errors = [PlanError(line=0, kind="too_many_steps",
                            message=f"the plan has {len(plan.steps)} steps; at most {ctx.max_steps} are allowed")]
    return errors


def validate_plan(state: ReaperState, runtime: Runtime[ReaperContext]) -> dict[str, Any]:
    """Parse and validate ``plan_raw``; record the planner call's plan and, when valid, the typed plan to run."""
    ctx = runtime.context
    raw = state.get("plan_raw", "") or ""
    parsed = parse_plan(raw)

    def call(errs: list[PlanError]) -> PlanCall:
        return PlanCall(attempt=int(state.get("plan_attempts", 0) or 1), raw=raw, steps=parsed.plan.steps,
                        valid=not errs, errors=errs, latency_s=float(state.get("planner_call_s", 0.0) or 0.0))

    try:
        errors = plan_errors(parsed, ctx)
    except Exception as exc:  # an unknown suite or a shop that cannot be opened
        err = PlanError(line=0, kind="registry", message=f"tool registry unavailable: {exc}")
        return failed("tool_error", "validate_plan", f"validate_plan: {exc}", plan_errors=[str(err)], plan=[], plan_text="",
                      stop_reason="tool_error", plan_calls=[call([err])])
    update: dict[str, Any] = {"plan_errors": [str(e) for e in errors], "plan_calls": [call(errors)]}
    update["plan"], update["plan_text"] = ([], "") if errors else (list(parsed.plan.steps), format_plan(parsed.plan))
    if errors and state.get("plan_attempts", 0) > ctx.max_plan_repairs:
        update["stop_reason"] = "invalid_plan"
    return update
