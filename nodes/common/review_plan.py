"""review_plan: pause after planning until a person approves, edits or rejects the plan, one node for every family
that writes a plan (its :class:`PlanReviewer` says which plan waits and how an edit validates). An invalid edit is
asked again up to ``max_review_rounds`` times, then the plan counts as rejected (docs/reliability.md, "Plan review")."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, Literal, TypeVar

from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.types import interrupt

from ragplan.family import context_settings
from ragplan.nodes import Node
from ragplan.state.furepa import FuRePAState
from ragplan.state.instructrag import InstructRAGState
from ragplan.state.planrag import PlanRAGState
from ragplan.state.reaper import ReaperState
from ragplan.state.review import PLAN_REJECTED, REVIEW_ANSWERS, PlanReview, PlanReviewSettings

__all__ = ["PlanView", "PlanEdit", "PlanEditError", "PlanReviewer", "ReviewDecision", "parse_decision",
           "make_review_plan", "PlannedState", "ResumeContextMismatch"]

PlannedState = PlanRAGState | ReaperState | FuRePAState | InstructRAGState
"""The state of a family that writes a plan: what the review node reads and updates."""

S = TypeVar("S", bound=PlannedState)
C = TypeVar("C", bound=PlanReviewSettings)


@dataclass
class PlanView:
    """A plan waiting for review, as the family shows it."""

    kind: Literal["plan", "replan"]
    """plan = the first plan of the run; replan = a revision (reviewed only with ``review_replans``)."""
    plan: str
    """The plan as text (what a person reads and edits)."""
    steps: list[str] = field(default_factory=list)
    """The plan's steps (or candidates' texts), one string each."""
    format: str = ""
    """How to write an edited plan (shown to the reviewer)."""


@dataclass
class PlanEdit:
    """An edited plan that validated: the state update that puts it in force, and its printed form."""

    update: dict[str, Any]
    """Fields to write (the family's plan fields)."""
    text: str
    """The plan as the family prints it (kept in the review record)."""


class PlanEditError(ValueError):
    """An edited plan that does not validate; its message is shown to the reviewer."""


class PlanReviewer(Generic[S, C]):
    """The waiting plan and how an edit is parsed; subclass per family (``PlanReviewer[PlanRAGState, …]``)."""

    def pending(self, state: S, ctx: C) -> PlanView | None:
        """The plan waiting for review in ``state`` (None when there is none at this point)."""
        raise NotImplementedError

    def apply_edit(self, state: S, ctx: C, text: str) -> PlanEdit:
        """Parse and validate ``text`` as the family's plan; raise :class:`PlanEditError` when it is not one."""
        raise NotImplementedError


@dataclass(frozen=True)
class ReviewDecision:
    """A reviewer's answer, read from a resume value."""

    action: Literal["approve", "edit", "reject"]
    """What to do with the plan."""
    plan: str = ""
    """The new plan (edit)."""
    reason: str = ""
    """Why (reject; optional)."""


def parse_decision(value: Any) -> ReviewDecision:
    """Read a resume value (see ``REVIEW_ANSWERS``); ValueError with what is accepted otherwise."""
    if isinstance(value, str) and value.strip().lower() in ("approve", "reject"):
        value = {"action": value}
    if not isinstance(value, dict):
        raise ValueError(f"unreadable answer {value!r}: expected one of {', '.join(REVIEW_ANSWERS)}")
    action = str(value.get("action") or "").strip().lower()
    if action in ("approve", "reject"):
        return ReviewDecision(action=action, reason=str(value.get("reason") or "").strip())  # type: ignore[arg-type]
    if action != "edit":
        raise ValueError(f"unknown action {action or value!r}: expected one of {', '.join(REVIEW_ANSWERS)}")
    plan = value.get("plan")
    if isinstance(plan, list):
        plan = "\n".join(str(p) for p in plan)
    if not isinstance(plan, str) or not plan.strip():
        raise ValueError('an edit needs the new plan: {"action": "edit", "plan": "<text>"}')
    return ReviewDecision(action="edit", plan=plan)


class ResumeContextMismatch(ValueError):
    """A paused run was resumed with other settings than it ran with (on a LangGraph server: no ``context=``)."""


PAUSED_CONTEXTS = ("ragplan", "paused_context")
"""The store namespace where a paused review keeps its run's settings (LangGraph server, Studio, SDK)."""


def check_resume_context(runtime: Runtime[Any], plan: str, keep: bool) -> str:
    """With a store (the LangGraph server gives one): refuse to go on from a pause under other settings than the
    paused run's (the thread stays paused); ``keep``: keep this run's JSON settings at its first pause, under a key of
    thread and plan. The key ("" without a store)."""
    if runtime.store is None:
        return ""  # ragplan ask / resume and ragplan.api keep the settings with the thread themselves
    thread = str(get_config().get("configurable", {}).get("thread_id", ""))
    key = hashlib.sha256(f"{thread}\n{plan}".encode()).hexdigest()
    now = context_settings(runtime.context)  # (credentials redacted: none in the store)
    kept = runtime.store.get(PAUSED_CONTEXTS, key)
    if kept is None:
        if keep:
            runtime.store.put(PAUSED_CONTEXTS, key, now)
        return key
    if changed := [f"{k}={v!r} (resumed with {now.get(k)!r})" for k, v in kept.value.items() if now.get(k) != v]:
        raise ResumeContextMismatch("this run paused for review under other settings: " + ", ".join(changed)
                                    + "; resume it with the context it ran with (context=…), so the same model "
                                    "and endpoint execute the plan. It stays paused.")
    return key


def make_review_plan(method: str, reviewer: PlanReviewer[S, C]) -> Node[S, C]:
    """The review node of graph ``method``, showing and editing plans the way ``reviewer`` says."""

    def review_plan(state: S, runtime: Runtime[C]) -> dict[str, Any]:
        """Pause for a person's verdict on the waiting plan (pass through when review is off or nothing waits)."""
        ctx = runtime.context
        view = reviewer.pending(state, ctx)
        if view is None:
            return {}
        on = bool(getattr(ctx, "review_plan" if view.kind == "plan" else "review_replans", False))
        key = check_resume_context(runtime, view.plan, keep=on)  # (a resume without context has review off)
        if not on:
            return {}
        update = review_rounds(state, ctx, view)
        if key and runtime.store is not None:  # answered: the kept settings are no longer needed
            runtime.store.delete(PAUSED_CONTEXTS, key)
        return update

    def review_rounds(state: S, ctx: C, view: PlanView) -> dict[str, Any]:
        """Ask until an acceptable answer or ``max_review_rounds``; the state update."""
        rounds = max(1, int(getattr(ctx, "max_review_rounds", 3) or 1))
        review = partial(PlanReview, kind=view.kind, plan=view.plan)
        records: list[PlanReview] = []
        error = ""
        for rnd in range(1, rounds + 1):
            answer = interrupt({"method": method, "kind": view.kind, "question": str(state.get("question", "")),
                                "plan": view.plan, "steps": list(view.steps), "format": view.format, "round": rnd,
                                "max_rounds": rounds, "error": error, "accepts": list(REVIEW_ANSWERS)})
            try:
                decision = parse_decision(answer)
                edit = reviewer.apply_edit(state, ctx, decision.plan) if decision.action == "edit" else None
            except ValueError as exc:  # PlanEditError included: shown again with the error
                error = str(exc)
                records.append(review(round=rnd, action="invalid", error=error))
                continue
            records.append(review(round=rnd, action=decision.action, reason=decision.reason,
                                  edited=edit.text if edit else ""))
            if decision.action == "reject":
                return {"plan_reviews": records, "stop_reason": PLAN_REJECTED, "answer": ""}
            return {**(edit.update if edit else {}), "plan_reviews": records}
        return {"plan_reviews": records, "stop_reason": PLAN_REJECTED, "answer": "",
                "error": f"plan review: no acceptable answer in {rounds} rounds (last: {error})"}

    return review_plan
