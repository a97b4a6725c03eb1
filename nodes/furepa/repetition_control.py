"""repetition_control: a pick repeating an executed query (exactly, or by Sentence-BERT cosine ≥ ``repeat_similarity``)
is not run and raises the next proposal's temperature by ``delta_tp`` (FuRePA §3.2.2); a fresh pick resets it."""

from __future__ import annotations

from typing import Any, Sequence

from langgraph.runtime import Runtime

from ragplan.nodes.furepa.propose import normalize_query
from ragplan.state.furepa import FuRePAContext, FuRePAState, Iteration, TemperatureChange
from ragplan.state.result import changes

__all__ = ["raised_temperature", "find_repeat", "repetition_control"]


def raised_temperature(current: float, delta: float, ceiling: float) -> float:
    """The temperature after one raise: ``current + delta``, at most ``ceiling``."""
    return round(min(float(ceiling), float(current) + float(delta)), 6)


def find_repeat(query: str, executed: Sequence[str], threshold: float, embedder: Any = None) -> tuple[str, float | None]:
    """The executed query ``query`` repeats ('' when none) and its cosine to the closest executed one: exact
    repeats (by :func:`normalize_query`) with 1.0; a cosine ≥ ``threshold`` < 1 when an ``embedder`` is given."""
    if not executed:
        return "", None
    key = normalize_query(query)
    for q in executed:
        if normalize_query(q) == key:
            return q, 1.0
    if embedder is None or threshold >= 1.0:
        return "", None
    vecs = embedder.encode([query, *executed])
    sims = vecs[1:] @ vecs[0]
    best = int(sims.argmax())
    sim = round(float(sims[best]), 4)
    return (executed[best] if sim >= threshold else ""), sim


def repetition_control(state: FuRePAState, runtime: Runtime[FuRePAContext]) -> dict[str, Any]:
    """Check the pick against the executed queries; raise the temperature, stop, or let it run."""
    ctx = runtime.context
    iterations: list[Iteration] = list(state.get("iterations") or [])
    it = iterations[-1].model_copy(deep=True)
    executed = [i.query for i in iterations if i.executed]
    try:
        embedder = None
        if executed and ctx.repeat_similarity < 1.0:
            from ragplan.tools.embeddings import get_embedder

            embedder = get_embedder(ctx.embedding_model or "")
        repeat_of, it.similarity = find_repeat(it.query, executed, ctx.repeat_similarity, embedder)
    except Exception as exc:  # a missing or broken embedding model: exact repeats only, recorded, never raised
        repeat_of, it.similarity = find_repeat(it.query, executed, ctx.repeat_similarity, None)
        it.repeat_check_error = (f"similarity check failed ({type(exc).__name__}: {str(exc)[:300]}); "
                                 "exact repeats only")
    temperature = float(state.get("temperature", ctx.tp0))
    raises = int(state.get("raises", 0))
    it.repeated, it.repeat_of = bool(repeat_of), repeat_of
    out: dict[str, Any] = {"iterations": [changes(it, "similarity", "repeat_check_error", "repeated", "repeat_of")]}
    if repeat_of:
        if raises >= ctx.max_temperature_raises:
            return {**out, "stop_reason": "repetition"}
        if len(iterations) >= ctx.max_iterations:  # no proposal follows: a raise would change nothing
            return {**out, "stop_reason": "max_iterations"}
        after = raised_temperature(temperature, ctx.delta_tp, ctx.max_temperature)
        out.update(temperature=after, raises=raises + 1, temperature_changes=[TemperatureChange(
            iteration=it.index, before=temperature, after=after, reason=f"the pick repeats the executed query {repeat_of!r}")])
        return out
    if temperature != ctx.tp0 or raises:
        out.update(temperature=ctx.tp0, raises=0, temperature_changes=[TemperatureChange(
            iteration=it.index, before=temperature, after=ctx.tp0, reason="a fresh query: back to tp0")])
    return out
