"""How PlanRAG's plan is reviewed by a person (the family part of :mod:`ragplan.nodes.common.review_plan`): after a
re-plan only the revised remaining steps are reviewed; an edit is one step per line, validated like the LLM's
:class:`~ragplan.nodes.planrag.plan.Plan`, and becomes a new version in ``plan_history``."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from ragplan.nodes.common.review_plan import PlanEdit, PlanEditError, PlanReviewer, PlanView
from ragplan.nodes.planrag.plan import Plan
from ragplan.state.context import PlanRAGContext
from ragplan.state.planrag import PlanRAGState, PlanVersion

__all__ = ["PlanRAGReviewer", "EDITED_REASON"]

EDITED_REASON = "edited by the reviewer"
"""The reason recorded on a plan version a reviewer wrote."""

_LEAD = re.compile(r"^\s*(?:step\s*\d+\s*[:.)\-]|\(?\d+\s*[.):]|[-*•])\s*", re.I)
"""A step's numbering or bullet, dropped from an edited plan's lines."""


def _numbered(steps: list[str], start: int = 1) -> list[str]:
    return [f"{i}. {s}" for i, s in enumerate(steps, start)]


class PlanRAGReviewer(PlanReviewer[PlanRAGState, PlanRAGContext]):
    """The first plan (kind plan) and each applied revision (kind replan) of PlanRAG."""

    def pending(self, state: PlanRAGState, ctx: PlanRAGContext) -> PlanView | None:
        """The plan after ``plan`` (no retrieval yet), or the remaining steps after an applied re-plan."""
        if not state.get("plan_history"):
            return None
        plan: list[str] = list(state.get("plan") or [])
        fmt = "one step per line, in order (numbering optional)"
        if not state.get("steps"):
            return PlanView(kind="plan", plan="\n".join(_numbered(plan)) or "(empty plan: answer at once)", steps=plan,
                            format=fmt)
        cur = int(state.get("current_step", 0) or 0)
        done, rest = plan[:cur], plan[cur:]
        text = ["Steps done:", *(f"  {s}" for s in _numbered(done)), "Remaining steps (revised):",
                *((f"  {s}" for s in _numbered(rest, cur + 1)) if rest else ["  (none: answer from the data observed)"])]
        return PlanView(kind="replan", plan="\n".join(text), steps=rest, format=fmt + "; they replace the remaining steps")

    def apply_edit(self, state: PlanRAGState, ctx: PlanRAGContext, text: str) -> PlanEdit:
        """The edited steps in force: the whole plan (first plan) or the remaining steps (re-plan)."""
        try:
            steps = [s for s in (_LEAD.sub("", line).strip() for line in (text or "").splitlines()) if s]
            edited = Plan(steps=steps, reason=EDITED_REASON).steps
        except ValidationError:
            raise PlanEditError("the plan needs at least one step (one per line)") from None
        done_steps = len(state.get("steps") or [])
        cur = int(state.get("current_step", 0) or 0) if done_steps else 0
        plan = list(state.get("plan") or [])[:cur] + edited
        version = PlanVersion(version=len(state.get("plan_history") or []), steps=plan, reason=EDITED_REASON,
                              after_step=done_steps)
        update: dict[str, Any] = {"plan": plan, "current_step": cur, "repairs": 0, "plan_history": [version]}
        if done_steps:
            update["stop_reason"] = ""  # a revision that ended the plan (plan_done) goes on with the edited steps
        return PlanEdit(update=update, text="\n".join(_numbered(edited, cur + 1)))
