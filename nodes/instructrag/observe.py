"""observe: run the step's Search or Lookup on the ReAct docstore (whose page and lookup walk live in the state) and
record the observation."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragplan.state.instructrag import InstructRAGContext, InstructRAGState, TAOStep
from ragplan.state.result import changes
from ragplan.tools.react_docstore import ReActDocstore
from ragplan.tools.retrievers import make_retriever, search_k

__all__ = ["observe"]


def observe(state: InstructRAGState, runtime: Runtime[InstructRAGContext]) -> dict[str, Any]:
    """Execute the last step's action (a retriever that cannot be built is recorded on the step); mark the step bound."""
    ctx = runtime.context
    steps: list[TAOStep] = list(state.get("steps") or [])
    if not steps:
        return {}
    step = steps[-1]
    try:
        retriever = make_retriever(ctx)
    except Exception as exc:
        steps[-1] = step.model_copy(update={"observation": f"Search failed: {exc}", "error": str(exc)[:300]})
        return {"steps": [changes(steps[-1], "observation", "error")], **_bound(steps, ctx)}
    store = ReActDocstore(retriever, k=search_k(ctx, retriever), page_title=state.get("page_title", ""),
                          page_sentences=list(state.get("page_sentences") or []),
                          lookup_keyword=state.get("lookup_keyword", ""), lookup_next=int(state.get("lookup_next", 0)))
    r = store.execute(step.action, step.argument)
    steps[-1] = step.model_copy(update={"observation": r.observation, "title": r.title, "error": r.error})
    return {"steps": [changes(steps[-1], "observation", "title", "error")], "page_title": store.page_title,
            "page_sentences": store.page_sentences, "lookup_keyword": store.lookup_keyword,
            "lookup_next": store.lookup_next, **_bound(steps, ctx)}


def _bound(steps: list[TAOStep], ctx: InstructRAGContext) -> dict[str, Any]:
    """``stop_reason = max_steps`` once the step bound is reached (the loop then answers)."""
    return {"stop_reason": "max_steps"} if len(steps) >= max(1, ctx.max_steps) else {}
