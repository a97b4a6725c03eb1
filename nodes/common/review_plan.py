"""review_plan: pause after planning until a person approves, edits or rejects the plan (human in the loop).

One node for every family that writes a plan. The family says, through a :class:`PlanReviewer` given to
:func:`make_review_plan`, which plan is waiting (and whether it is the first plan or a re-plan), how it is
shown, and how an edited plan is parsed and validated — the same way the LLM's plan is (PlanRAG's steps,
REAPER's parser and validator, FuRePA's query, InstructRAG's path parser). The node itself:

* passes straight through when ``review_plan`` is off (or ``review_replans`` for a re-plan), or when no
  plan is waiting;
* otherwise calls LangGraph's ``interrupt`` with a JSON-able payload (``method``, ``kind`` plan|replan,
  ``plan`` as text, ``steps``, ``format`` of an edit, ``accepts`` the answers it takes, ``error`` of the
  last answer) and resumes with ``{"action": "approve"}``, ``{"action": "edit", "plan": "…"}``,
  ``{"action": "reject", "reason": "…"}`` or the bare strings ``"approve"`` / ``"reject"``;
* an edit that does not validate (or an unreadable answer) is shown again with its error, at most
  ``max_review_rounds`` answers; after that the plan counts as rejected, so an unapproved plan never runs;
* a rejection ends the run with ``stop_reason = "plan_rejected"`` (the family's routers go to the end:
  no answer call);
* every answer is recorded in ``plan_reviews``.

Interrupts need a checkpointer: ``ragplan ask`` / ``ragplan.api.ask`` use a SQLite one
(:mod:`ragplan.checkpoints`), ``langgraph dev`` and the LangGraph server their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from ragplan.nodes import Node
from ragplan.state.furepa import FuRePAState
from ragplan.state.instructrag import InstructRAGState
from ragplan.state.planrag import PlanRAGState
from ragplan.state.reaper import ReaperState
from ragplan.state.review import PLAN_REJECTED, REVIEW_ANSWERS, PlanReview, PlanReviewSettings

__all__ = ["PlanView", "PlanEdit", "PlanEditError", "PlanReviewer", "ReviewDecision", "parse_decision",
           "make_review_plan", "review_payload", "PlannedState"]

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
    """What a family tells the review node: the waiting plan and how an edit is parsed. Subclass per family,
    naming its state and context (``PlanReviewer[PlanRAGState, PlanRAGContext]``)."""

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
    """Read a resume value (see the module docstring); ValueError with what is accepted otherwise."""
    accepted = "expected one of " + ", ".join(REVIEW_ANSWERS)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in ("approve", "reject"):
            return ReviewDecision(action=word)  # type: ignore[arg-type]
        raise ValueError(f"unreadable answer {value!r}: {accepted}")
    if not isinstance(value, dict):
        raise ValueError(f"unreadable answer of type {type(value).__name__}: {accepted}")
    action = str(value.get("action") or "").strip().lower()
    if action == "approve":
        return ReviewDecision(action="approve")
    if action == "reject":
        return ReviewDecision(action="reject", reason=str(value.get("reason") or "").strip())
    if action == "edit":
        plan = value.get("plan")
        if isinstance(plan, list):
            plan = "\n".join(str(p) for p in plan)
        if not isinstance(plan, str) or not plan.strip():
            raise ValueError('an edit needs the new plan: {"action": "edit", "plan": "<text>"}')
        return ReviewDecision(action="edit", plan=plan)
    raise ValueError(f"unknown action {action or value!r}: {accepted}")


def review_payload(method: str, question: str, view: PlanView, *, round_: int, max_rounds: int, error: str = "") -> dict[str, Any]:
    """The JSON-able interrupt value a reviewer sees (CLI, Python callback, Studio, the SDK)."""
    return {"method": method, "kind": view.kind, "question": question, "plan": view.plan, "steps": list(view.steps),
            "format": view.format, "round": round_, "max_rounds": max_rounds, "error": error,
            "accepts": list(REVIEW_ANSWERS)}


def _wanted(kind: str, ctx: Any) -> bool:
    return bool(getattr(ctx, "review_plan" if kind == "plan" else "review_replans", False))


def make_review_plan(method: str, reviewer: PlanReviewer[S, C]) -> Node[S, C]:
    """The review node of graph ``method``, showing and editing plans the way ``reviewer`` says."""

    def review_plan(state: S, runtime: Runtime[C]) -> dict[str, Any]:
        """Pause for a person's verdict on the waiting plan (pass through when review is off or nothing waits)."""
        ctx = runtime.context
        view = reviewer.pending(state, ctx)
        if view is None or not _wanted(view.kind, ctx):
            return {}
        rounds = max(1, int(getattr(ctx, "max_review_rounds", 3) or 1))
        records: list[PlanReview] = []
        error = ""
        for rnd in range(1, rounds + 1):
            answer = interrupt(review_payload(method, str(state.get("question", "")), view, round_=rnd,
                                              max_rounds=rounds, error=error))
            try:
                decision = parse_decision(answer)
                if decision.action == "approve":
                    records.append(PlanReview(kind=view.kind, round=rnd, action="approve", plan=view.plan))
                    return {"plan_reviews": records}
                if decision.action == "reject":
                    records.append(PlanReview(kind=view.kind, round=rnd, action="reject", plan=view.plan,
                                              reason=decision.reason))
                    return {"plan_reviews": records, "stop_reason": PLAN_REJECTED, "answer": ""}
                edit = reviewer.apply_edit(state, ctx, decision.plan)
            except ValueError as exc:  # PlanEditError included: shown again with the error
                error = str(exc)
                records.append(PlanReview(kind=view.kind, round=rnd, action="invalid", plan=view.plan, error=error))
                continue
            records.append(PlanReview(kind=view.kind, round=rnd, action="edit", plan=view.plan, edited=edit.text))
            return {**edit.update, "plan_reviews": records}
        return {"plan_reviews": records, "stop_reason": PLAN_REJECTED, "answer": "",
                "error": f"plan review: no acceptable answer in {rounds} rounds (last: {error})"}

    return review_plan
