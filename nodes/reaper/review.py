"""How REAPER's validated plan is reviewed by a person (the family part of :mod:`ragplan.nodes.common.review_plan`):
an edit is parsed and validated like the planner's and becomes the ``plan`` to execute."""

from __future__ import annotations

from ragplan.nodes.common.review_plan import PlanEdit, PlanEditError, PlanReviewer, PlanView
from ragplan.nodes.reaper.validate_plan import plan_errors
from ragplan.methods.reaper.plan import RetrievalPlan, as_steps, format_plan, parse_plan
from ragplan.state.context import ReaperContext
from ragplan.state.reaper import ReaperState

__all__ = ["ReaperReviewer"]

NO_RETRIEVAL = "(no retrieval: the responder answers without evidence)"


class ReaperReviewer(PlanReviewer[ReaperState, ReaperContext]):
    """REAPER's validated plan, before execution."""

    def pending(self, state: ReaperState, ctx: ReaperContext) -> PlanView | None:
        """The validated plan (the node is reached only when validation passed)."""
        if state.get("plan_errors"):
            return None
        plan = RetrievalPlan(steps=as_steps(state.get("plan")))
        text = format_plan(plan)
        return PlanView(kind="plan", plan=text or NO_RETRIEVAL, steps=text.splitlines(),
                        format="REAPER's plan format, one step per line: Step k: purpose - #Ek = tool(arg=value, …); "
                               "a later step may take #Ej as an argument")

    def apply_edit(self, state: ReaperState, ctx: ReaperContext, text: str) -> PlanEdit:
        """Parse and validate the edited plan like the planner's; it becomes the plan to execute."""
        parsed = parse_plan(text)
        try:
            errors = plan_errors(parsed, ctx)
        except Exception as exc:  # the registry cannot be opened: the edit cannot be checked, so it is refused
            raise PlanEditError(f"the tool registry is unavailable, the plan cannot be checked: {exc}") from None
        if errors:
            raise PlanEditError("the plan does not validate: " + "; ".join(str(e) for e in errors))
        printed = format_plan(parsed.plan)
        return PlanEdit(update={"plan": list(parsed.plan.steps), "plan_text": printed}, text=printed or NO_RETRIEVAL)
