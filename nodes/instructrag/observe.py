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


_PAGE = ("page_title", "page_sentences", "lookup_keyword", "lookup_next")
"""The docstore's current page and lookup walk, kept in the state."""


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
    kept: dict[str, Any] = {f: v for f, v in state.items() if f in _PAGE}
    store = ReActDocstore(retriever, k=search_k(ctx, retriever), **kept)
    r = store.execute(step.action, step.argument)
    steps[-1] = step.model_copy(update={"observation": r.observation, "title": r.title, "error": r.error})
    page = {f: getattr(store, f) for f in _PAGE if getattr(store, f) != kept.get(f)}  # the page only when it changed
    return {"steps": [changes(steps[-1], "observation", "title", "error")], **page, **_bound(steps, ctx)}


def _bound(steps: list[TAOStep], ctx: InstructRAGContext) -> dict[str, Any]:
    """``stop_reason = max_steps`` once the step bound is reached (the loop then answers)."""
    return {"stop_reason": "max_steps"} if len(steps) >= max(1, ctx.max_steps) else {}
