"""How FuRePA's plan (the assessor's pick) is reviewed by a person (:mod:`ragplan.nodes.common.review_plan`): an edit
is one search query on one line, becomes the pick and is checked for repetition like any pick."""

from __future__ import annotations

from typing import Literal

from ragplan.nodes.common.review_plan import PlanEdit, PlanEditError, PlanReviewer, PlanView
from ragplan.nodes.furepa.propose import normalize_query
from ragplan.state.furepa import Candidate, FuRePAContext, FuRePAState, Iteration
from ragplan.state.result import changes

__all__ = ["FuRePAReviewer", "MAX_QUERY_CHARS"]

MAX_QUERY_CHARS = 300
"""Longest edited query accepted (a search query, not a passage)."""


class FuRePAReviewer(PlanReviewer[FuRePAState, FuRePAContext]):
    """The assessor's pick of the current iteration."""

    def pending(self, state: FuRePAState, ctx: FuRePAContext) -> PlanView | None:
        """The current iteration's picked query (None when it answered or picked nothing)."""
        its: list[Iteration] = list(state.get("iterations") or [])
        if not its or its[-1].pick is None:
            return None
        it = its[-1]
        kind: Literal["plan", "replan"] = "replan" if any(i.pick is not None for i in its[:-1]) else "plan"
        lines = [f"Query (iteration {it.index}): {it.query}", f"Candidates ({it.assessor or '-'}):",
                 *(f"  {line}" for line in it.candidate_lines())]
        return PlanView(kind=kind, plan="\n".join(lines), steps=[it.query], format="one search query on one line")

    def apply_edit(self, state: FuRePAState, ctx: FuRePAContext, text: str) -> PlanEdit:
        """The edited query as this iteration's pick."""
        lines = [ln for ln in (text or "").splitlines() if ln.strip()]
        if len(lines) != 1:
            raise PlanEditError(f"write one search query on one line (got {len(lines)} lines)")
        query = " ".join(lines[0].split())
        if not (key := normalize_query(query)):
            raise PlanEditError("the query has no words")
        if len(query) > MAX_QUERY_CHARS:
            raise PlanEditError(f"the query is {len(query)} characters long; at most {MAX_QUERY_CHARS}")
        it = list(state.get("iterations") or [])[-1].model_copy(deep=True)
        pick = next((i for i, c in enumerate(it.candidates) if normalize_query(c.query) == key), None)
        if pick is None:
            it.candidates.append(Candidate(query=query))
            pick = len(it.candidates) - 1
        it.pick, it.query, it.assessor = pick, it.candidates[pick].query, "edited"
        return PlanEdit(update={"iterations": [changes(it, "candidates", "pick", "query", "assessor")]}, text=it.query)
