"""Calling the method graphs from Python.

    from ragplan.api import ask, resume
    result = ask("Which trade node …?", method="planrag", model=my_chat_model, store="q1.cql")
    result.answer, result.plan, result.steps, result.usage, result.wall_time_s
    result = ask("Who directed Alien?", method="think_then_act", model="openai:gpt-4o-mini",
                 retriever="local", index_dir="my_index/")
    result = ask(q, "planrag", model=m, store="q1.cql", review_plan=True)   # no review callback: paused
    result = resume(result.thread_id, {"action": "edit", "plan": "1. …\n2. …"}, model=m)

``model`` is a LangChain chat model object or a ``provider:name`` string; ``store`` the PlanRAG family's graph
(a ``GraphStore`` or a ``.cql`` path); other keyword arguments are fields of the method's context. The result
is the family's typed result (:mod:`ragplan.state.result`). With ``thread_id=`` or ``checkpoint_db=``, or
with plan review on and no ``review`` callback, the run is checkpointed in the SQLite file of ``ragplan ask``
(or the PostgreSQL database a ``postgresql://`` ``checkpoint_db`` names) and ``resume(thread_id)`` continues it later (a run given a chat model object needs it again); with a
``review`` callback and neither, checkpoints stay in memory; otherwise nothing is checkpointed.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

from ragplan.registry import family_of
from ragplan.runs import NO_DECISION, OnUpdate, Review, resume_run, start_run
from ragplan.state.context import LLMContext, recursion_limit_for
from ragplan.state.planrag import PlanRAGResult
from ragplan.state.result import GraphResult
from ragplan.state.think_then_act import TextQAResult

__all__ = ["ask", "resume", "stream_run", "make_context", "context_class", "GraphResult", "RunResult", "TextRunResult",
           "recursion_limit_for"]

#: Earlier names of the PlanRAG and text-QA results (every result now carries ``method`` and ``wall_time_s``).
RunResult = PlanRAGResult
TextRunResult = TextQAResult


def context_class(method: str) -> type[LLMContext]:
    """The context (settings) dataclass of ``method``'s graph."""
    return family_of(method).context


def make_context(method: str = "planrag", *, model: Any = None, store: Any = None, **settings: Any) -> LLMContext:
    """The method's context from a model (object or name), its family's data handle and setting overrides."""
    return family_of(method).make_context(method, model=model, store=store, **settings)


def stream_run(method: str, question: str, context: Any, inputs: dict[str, Any] | None = None
               ) -> Iterator[tuple[str, dict[str, Any]]]:
    """Run ``method`` and yield ``(node, update)`` as each node finishes, then ``("__final__", state)``."""
    family = family_of(method)
    graph = family.graph(method).build().compile(name=method)
    config = {"recursion_limit": family.recursion_limit(context)}
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream(family.graph_input(question, inputs), context=context, config=config,
                                    stream_mode=["updates", "values"]):
        if mode == "values":
            final = chunk
        else:
            for node, update in (chunk or {}).items():
                yield node, update or {}
    yield "__final__", final


def ask(question: str, method: str = "planrag", *, model: Any = None, store: Any = None,
        context: Any = None, inputs: dict[str, Any] | None = None,
        on_update: Callable[[str, dict[str, Any]], None] | None = None, review: Review | None = None,
        thread_id: str | None = None, checkpoint_db: str | None = None, **settings: Any) -> GraphResult:
    """Answer ``question`` with ``method``: its family's typed result (see the module docstring). ``context`` may be
    given whole; ``inputs`` are extra graph inputs (REAPER's ``page_context``); ``on_update(node, update)`` is
    called as each node finishes; ``review(payload) -> decision`` answers plan reviews."""
    family = family_of(method)
    ctx = context if context is not None else family.make_context(method, model=model, store=store, **settings)
    reviews = bool(getattr(ctx, "review_plan", False) or getattr(ctx, "review_replans", False))
    if thread_id or checkpoint_db or reviews:  # checkpointed in the file, or (reviews by callback) in memory
        return start_run(method, question, ctx, inputs=inputs, thread_id=thread_id, checkpoint_db=checkpoint_db,
                         in_memory=not (thread_id or checkpoint_db) and review is not None, review=review,
                         on_update=on_update)
    t0 = time.perf_counter()
    final: dict[str, Any] = {}
    for node, update in stream_run(method, question, ctx, inputs):
        if node == "__final__":
            final = update
        elif on_update is not None:
            on_update(node, update)
    return family.result.from_state(final, method=method, wall_time_s=round(time.perf_counter() - t0, 3))


def resume(thread_id: str, decision: Any = NO_DECISION, *, model: Any = None, context: Any = None,
           review: Review | None = None, on_update: OnUpdate | None = None, checkpoint_db: str | None = None,
           **settings: Any) -> GraphResult:
    """Continue a checkpointed run and return its typed result: ``decision`` (``"approve"``, ``{"action": "edit",
    "plan": …}`` …) or ``review`` answers a pending plan review (with neither it stays paused); a killed run goes on
    from its last finished node. :class:`~ragplan.checkpoints.UnknownThread` (a KeyError) for an unknown thread."""
    return resume_run(thread_id, decision, checkpoint_db=checkpoint_db, ctx=context, model=model, settings=settings,
                      review=review, on_update=on_update)
