"""retrieve_text: fetch passages for a (sub-)query and keep the top sentences by Sentence-BERT similarity as
evidence (Think-then-Act §4.2). A retrieval failure is recorded on the query, answered then without context."""

from __future__ import annotations

import time
from typing import Any

from langgraph.runtime import Runtime

from ragplan.state.context import TextRAGContext
from ragplan.state.think_then_act import MultiStepState, SubQuery
from ragplan.tools.retrievers import make_retriever, ranker_for, search_k

__all__ = ["retrieve_text"]


def retrieve_text(state: MultiStepState, runtime: Runtime[TextRAGContext]) -> dict[str, Any]:
    """Retrieve evidence for the branch's sub-query (its resolved text)."""
    q: SubQuery = state["query"]
    ctx, query = runtime.context, q.search_query or q.resolved or q.text
    t0 = time.perf_counter()
    evidence: list[dict[str, Any]] = []
    try:
        retriever = make_retriever(ctx)
        passages = retriever.search(query, k=search_k(ctx, retriever))
        evidence = [e.to_dict() for e in ranker_for(ctx).rank(query, passages, n=ctx.top_sentences)] if passages else []
        error = "" if passages else "no passage found"
    except Exception as exc:  # network, missing index, bad settings: recorded on the query
        error = f"{type(exc).__name__}: {str(exc)[:300]}"
    decision = (q.decision or "RETRIEVAL (always)") + f" [{len(evidence)} sentences, {time.perf_counter() - t0:.2f} s]"
    return {"query": q.model_copy(update={"retrieve": True, "evidence": evidence, "retrieval_error": error,
                                          "decision": decision})}
