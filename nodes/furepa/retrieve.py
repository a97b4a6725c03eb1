"""retrieve: run the picked query against the run's retriever and append the new passages to the evidence (a failure
is recorded on the iteration); after the last iteration ``stop_reason`` is ``max_iterations``."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragplan.nodes.furepa.mask_reasoning import clip
from ragplan.state.furepa import EvidencePassage, FuRePAContext, FuRePAState, Iteration
from ragplan.state.result import changes
from ragplan.tools.retrievers import make_retriever, search_k

__all__ = ["retrieve_passages"]


def retrieve_passages(state: FuRePAState, runtime: Runtime[FuRePAContext]) -> dict[str, Any]:
    """Retrieve for the current iteration's picked query and add what is new to the evidence."""
    ctx = runtime.context
    iterations: list[Iteration] = list(state.get("iterations") or [])
    it = iterations[-1].model_copy(deep=True)
    have = {p.key for p in state.get("evidence") or []}
    new: list[EvidencePassage] = []
    try:
        retriever = make_retriever(ctx)
        passages = retriever.search(it.query, k=search_k(ctx, retriever))
        for rank, p in enumerate(passages, 1):
            e = EvidencePassage(id=str(p.id), title=p.title, text=clip(p.text, ctx.passage_chars),
                                source=p.source or getattr(retriever, "name", ""), query=it.query, iteration=it.index,
                                rank=rank, score=round(float(p.score), 4))
            it.retrieved.append(e.id)
            if e.key not in have:
                have.add(e.key)
                new.append(e)
    except Exception as exc:  # network, missing index, bad settings: recorded on the iteration
        it.retrieval_error = f"{type(exc).__name__}: {str(exc)[:300]}"
    it.executed, it.new_evidence = True, len(new)
    done = [i for i in iterations[:-1] if i.executed] + [it]
    out: dict[str, Any] = {"iterations": [changes(it, "retrieved", "retrieval_error", "executed", "new_evidence")],
                           "evidence": new, "retrieval_count": len(done),
                           "retrieval_errors": sum(1 for i in done if i.retrieval_error)}
    if len(iterations) >= ctx.max_iterations:
        out["stop_reason"] = "max_iterations"
    return out
