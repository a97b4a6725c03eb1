"""assess_plan: the plan assessor picks one of the iteration's candidate queries (FuRePA §3.2.3): ``trained`` (the
query scorer at ``assessor_dir``, ties to the earlier), ``first``, or ``random`` (seeded per question and iteration)."""

from __future__ import annotations

import random
from typing import Any

from langgraph.runtime import Runtime

from ragplan.state.failure import failed
from ragplan.state.furepa import EvidencePassage, FuRePAContext, FuRePAState, Iteration
from ragplan.state.result import changes

__all__ = ["assess_plan", "assessor_problem", "NO_ASSESSOR"]

NO_ASSESSOR = ("assessor_mode 'trained' needs a trained plan assessor: set assessor_dir (ask: --assessor DIR; train one "
               "with `ragplan furepa train-assessor`), or choose assessor_mode first or random")


def assessor_problem(ctx: Any) -> str | None:
    """Why the context's trained assessor cannot be used (None when it can, or when the mode needs none)."""
    if getattr(ctx, "assessor_mode", "trained") != "trained":
        return None
    if not getattr(ctx, "assessor_dir", ""):
        return NO_ASSESSOR
    from ragplan.methods.furepa.scorer import AssessorError, load_assessor

    try:
        load_assessor(ctx.assessor_dir)
    except AssessorError as exc:
        return f"the plan assessor cannot be loaded: {exc}"
    return None


def assess_plan(state: FuRePAState, runtime: Runtime[FuRePAContext]) -> dict[str, Any]:
    """Score the current iteration's candidates (trained mode) and pick one."""
    ctx = runtime.context
    it: Iteration = (state.get("iterations") or [])[-1].model_copy(deep=True)
    n = len(it.candidates)
    mode = ctx.assessor_mode
    if mode == "trained":
        if problem := assessor_problem(ctx):
            return failed("setup", "assess_plan", f"assess_plan: {problem}", iterations=[it], stop_reason="assessor_error", answer="")
        from ragplan.methods.furepa.scorer import load_assessor

        evidence: list[EvidencePassage] = list(state.get("evidence") or [])
        try:
            scores = load_assessor(ctx.assessor_dir).score(state["question"], [(p.title, p.text) for p in evidence],
                                                           [c.query for c in it.candidates])
        except Exception as exc:  # an unreadable model, an embedding model that will not load: recorded, never raised
            return failed("setup", "assess_plan", f"assess_plan: scoring failed: {type(exc).__name__}: {str(exc)[:300]}",
                          iterations=[it], stop_reason="assessor_error", answer="")
        for c, s in zip(it.candidates, scores):
            c.score = round(s, 4)
        pick = max(range(n), key=lambda i: (scores[i], -i))
    elif mode == "random":
        pick = random.Random(f"{ctx.assessor_seed}:{state['question']}:{it.index}").randrange(n)
    else:
        pick = 0
    it.assessor, it.pick, it.query = mode, pick, it.candidates[pick].query
    return {"iterations": [changes(it, "candidates", "assessor", "pick", "query")]}
