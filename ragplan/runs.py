"""A method graph as a checkpointed, resumable run (SQLite, ``durability="sync"``) that may pause at a plan review
(LangGraph's ``interrupt``): :func:`start_run` answers it with ``review`` or stays paused (``awaiting_review``);
:func:`resume_run` answers a pending review, continues a killed run, or returns a finished one."""

from __future__ import annotations

import time
from typing import Any, Callable

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ragplan.checkpoints import REDACTED, RunInfo, RunStore, checkpoint_serde, context_settings, new_thread_id, open_saver
from ragplan.family import MethodFamily
from ragplan.registry import family_of
from ragplan.state.result import GraphResult
from ragplan.state.review import AWAITING_REVIEW

__all__ = ["Review", "OnUpdate", "ReviewDeferred", "drive", "start_run", "resume_run", "thread_status", "rebuild_context", "NO_DECISION"]

Review = Callable[[dict[str, Any]], Any]
"""Answers a plan review: ``(payload) -> decision`` (``"approve"``, ``{"action": "edit", "plan": …}`` …)."""

OnUpdate = Callable[[str, dict[str, Any]], None]
"""Called with ``(node, update)`` as each node finishes."""

NO_DECISION: Any = object()
"""``resume_run``'s default: no decision given for a pending review."""

_CHAT_MODELS = "__chat_models__"


class ReviewDeferred(Exception):
    """Raised by a ``review`` callback that has no answer now (e.g. no terminal): the run stays paused."""


def drive(graph: Any, value: Any, *, context: Any, config: dict[str, Any], review: Review | None = None,
          on_update: OnUpdate | None = None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Stream ``graph`` from ``value`` (an input, None or a Command), answering reviews with ``review``: the thread's
    state and the review payload it is paused at (None when the run ended)."""
    while True:
        pending: dict[str, Any] | None = None
        for chunk in graph.stream(value, context=context, config=config, stream_mode="updates", durability="sync"):
            for node, update in (chunk or {}).items():
                if node == "__interrupt__":
                    pending = dict(update[0].value) if update else {}
                elif on_update is not None:
                    on_update(node, update or {})
        if pending is None or review is None:
            return dict(graph.get_state(config).values), pending
        try:
            value = Command(resume=review(pending))
        except ReviewDeferred:
            return dict(graph.get_state(config).values), pending


def _result(family: MethodFamily, method: str, values: dict[str, Any], pending: dict[str, Any] | None,
            thread_id: str, t0: float) -> GraphResult:
    extra: dict[str, Any] = {"stop_reason": AWAITING_REVIEW, "pending_review": pending} if pending is not None else {}
    return family.result.from_state(values, method=method, thread_id=thread_id,
                                    wall_time_s=round(time.perf_counter() - t0, 3), **extra)


def _config(family: MethodFamily, ctx: Any, thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}, "recursion_limit": family.recursion_limit(ctx)}


def start_run(method: str, question: str, ctx: Any, *, inputs: dict[str, Any] | None = None, thread_id: str | None = None,
              checkpoint_db: str | None = None, in_memory: bool = False, review: Review | None = None,
              on_update: OnUpdate | None = None) -> GraphResult:
    """Run ``method`` on ``question`` as thread ``thread_id`` (fresh when None; one in the file is a ValueError);
    ``in_memory`` keeps the checkpoints in this process only (reviews answered by ``review``)."""
    family = family_of(method)
    graph_input = family.graph_input(question, inputs)
    thread_id = thread_id or new_thread_id()
    t0 = time.perf_counter()
    if in_memory:
        graph = family.graph(method).build().compile(checkpointer=InMemorySaver(serde=checkpoint_serde()), name=method)
        values, pending = drive(graph, graph_input, context=ctx, config=_config(family, ctx, thread_id), review=review,
                                on_update=on_update)
        return _result(family, method, values, pending, "", t0)
    settings = context_settings(ctx)
    settings[_CHAT_MODELS] = [k for k in ("chat_model", "planner_chat_model", "responder_chat_model")
                              if getattr(ctx, k, None) is not None]
    info = RunInfo(thread_id=thread_id, method=method, question=question, inputs=graph_input, settings=settings)
    return _continue(family, method, thread_id, graph_input, ctx, checkpoint_db, review, on_update, t0, new=info)


def _continue(family: MethodFamily, method: str, thread_id: str, value: Any, ctx: Any, checkpoint_db: str | None,
              review: Review | None, on_update: OnUpdate | None, t0: float, new: RunInfo | None = None) -> GraphResult:
    """Drive the thread on one connection to the checkpoint file (its run record, then the graph's checkpoints)."""
    with open_saver(checkpoint_db) as saver:
        store = RunStore(checkpoint_db, conn=saver.conn)
        if new is not None:
            store.add(new)
        store.set_status(thread_id, "running")  # stays so when the run is killed or interrupted
        graph = family.graph(method).build().compile(checkpointer=saver, name=method)
        values, pending = drive(graph, value, context=ctx, config=_config(family, ctx, thread_id), review=review,
                                on_update=on_update)
        store.set_status(thread_id, "paused" if pending is not None else "finished")
    return _result(family, method, values, pending, thread_id, t0)


def rebuild_context(info: RunInfo, *, model: Any = None, **overrides: Any) -> Any:
    """The run's context from its recorded settings, ``overrides`` and ``model`` on top; ValueError when the run
    was given chat model objects (Python only) and they are missing."""
    family = family_of(info.method)
    kw = {k: v for k, v in info.settings.items() if k in family.context_fields()} | overrides
    if model is not None:
        kw["model" if isinstance(model, str) else "chat_model"] = model
    if hidden := [k for k, v in kw.items() if isinstance(v, str) and REDACTED in v and k not in overrides]:
        raise ValueError(f"thread {info.thread_id} was kept without its credentials ({', '.join(hidden)}); give them "
                         f"again, e.g. --{hidden[0].replace('_', '-')} VALUE")
    if missing := [k for k in info.settings.get(_CHAT_MODELS) or [] if kw.get(k) is None]:
        raise ValueError(f"thread {info.thread_id} ran with Python chat model objects ({', '.join(missing)}); pass them "
                         "again, e.g. ragplan.api.resume(ID, model=my_chat_model)")
    return family.context(**kw)


def thread_status(thread_id: str, checkpoint_db: str | None = None) -> tuple[RunInfo, str, dict[str, Any] | None, dict[str, Any]]:
    """``(run, status, pending review payload, state values)``; status is ``finished``, ``paused`` (a plan waits for
    review), ``unfinished`` (killed or interrupted: it continues from its last finished node) or ``not_started``."""
    with open_saver(checkpoint_db) as saver:
        info = RunStore(checkpoint_db, conn=saver.conn).get(thread_id)
        family = family_of(info.method)
        graph = family.graph(info.method).build().compile(checkpointer=saver, name=info.method)
        snap = graph.get_state({"configurable": {"thread_id": thread_id}})
    values = dict(snap.values or {})
    if snap.interrupts:
        return info, "paused", dict(snap.interrupts[0].value), values
    if snap.created_at is None:
        return info, "not_started", None, values
    # (tasks left: a kill can land after a step's writes were saved and before the next checkpoint was, which leaves
    # no next node but that step's writes still to apply)
    return info, ("unfinished" if snap.tasks else "finished"), None, values


def resume_run(thread_id: str, decision: Any = NO_DECISION, *, model: Any = None, context: Any = None,
               review: Review | None = None, on_update: OnUpdate | None = None, checkpoint_db: str | None = None,
               **settings: Any) -> GraphResult:
    """Continue a checkpointed run, its typed result (``ragplan.api.resume``): ``decision`` (``"approve"``,
    ``{"action": "edit", "plan": …}`` …) or ``review`` answers a pending plan review (with neither it stays paused);
    a killed run goes on from its last finished node. ``context`` defaults to :func:`rebuild_context` with ``model``
    and ``settings``. :class:`~ragplan.checkpoints.UnknownThread` (a KeyError) for an unknown thread."""
    t0 = time.perf_counter()
    info, status, pending, values = thread_status(thread_id, checkpoint_db)
    family = family_of(info.method)
    if status == "finished":
        return _result(family, info.method, values, None, thread_id, t0)
    ctx = context if context is not None else rebuild_context(info, model=model, **settings)
    value: Any = None
    if status == "not_started":
        value = info.inputs
    elif status == "paused":
        try:
            decision = review(pending or {}) if decision is NO_DECISION and review is not None else decision
        except ReviewDeferred:
            decision = NO_DECISION
        if decision is NO_DECISION:  # no answer now: it stays paused
            return _result(family, info.method, values, pending, thread_id, t0)
        value = Command(resume=decision)
    return _continue(family, info.method, thread_id, value, ctx, checkpoint_db, review, on_update, t0)
