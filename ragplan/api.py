"""Calling the method graphs from Python: ``ask(question, method, model=…, store=…, **settings)`` returns the
family's typed result; ``resume(thread_id, decision)`` continues a checkpointed run (README, "Python")."""

from __future__ import annotations

from typing import Any

from ragplan.registry import family_of
from ragplan.runs import OnUpdate, Review, start_run
from ragplan.runs import resume_run as resume
from ragplan.state.result import GraphResult

__all__ = ["ask", "resume", "GraphResult"]


def ask(question: str, method: str = "planrag", *, model: Any = None, store: Any = None,
        context: Any = None, inputs: dict[str, Any] | None = None,
        on_update: OnUpdate | None = None, review: Review | None = None,
        thread_id: str | None = None, checkpoint_db: str | None = None, **settings: Any) -> GraphResult:
    """Answer ``question`` with ``method``: its family's typed result. ``model`` is a chat model object or a
    ``provider:name`` string, ``store`` PlanRAG's graph (a ``GraphStore`` or a ``.cql`` path), other keyword arguments
    fields of the context (or ``context`` given whole); ``inputs`` are extra graph inputs (REAPER's ``page_context``);
    ``on_update(node, update)`` is called as each node finishes; ``review(payload) -> decision`` answers plan reviews.
    With ``thread_id=`` or ``checkpoint_db=``, or with plan review on and no ``review`` callback, the run is
    checkpointed in ``ragplan ask``'s SQLite file or the PostgreSQL database a ``postgresql://`` ``checkpoint_db``
    names (``resume`` continues it); otherwise in memory, for this call only."""
    family = family_of(method)
    ctx = context if context is not None else family.make_context(method, model=model, store=store, **settings)
    reviews = bool(getattr(ctx, "review_plan", False) or getattr(ctx, "review_replans", False))
    in_file = bool(thread_id or checkpoint_db or (reviews and review is None))  # else in memory, for this call only
    return start_run(method, question, ctx, inputs=inputs, thread_id=thread_id, checkpoint_db=checkpoint_db,
                     in_memory=not in_file, review=review, on_update=on_update)
