"""Calling the method graphs from Python.

    from ragplan.api import ask
    result = ask("Which trade node …?", method="planrag", model=my_chat_model, store="q1.cql")
    result.answer, result.plan, result.steps, result.usage, result.wall_time_s

``model`` is a LangChain chat model object or a ``provider:name`` string; ``store`` a
:class:`~ragplan.tools.graphdb.GraphStore` or the path of a ``.cql`` script; other keyword arguments
are fields of the method's context (``max_steps=8``, ``row_cap=50`` …). The compiled graphs
themselves (``ragplan.graphs.planrag.planrag`` …) can equally be invoked directly with
``context=PlanRAGContext(chat_model=…, graph_store=…)``.
"""

from __future__ import annotations

import time
from dataclasses import fields
from typing import Any, Callable, Iterator

from pydantic import Field

from ragplan.graphs.planrag import recursion_limit_for
from ragplan.registry import graph_registry
from ragplan.state.context import PlanRAGContext
from ragplan.state.planrag import PlanRAGResult

__all__ = ["ask", "stream_run", "make_context", "RunResult"]


class RunResult(PlanRAGResult):
    """A finished run: the method's typed output plus the method name and wall time."""

    method: str = ""
    wall_time_s: float = Field(default=0.0, description="Wall time of the whole run in seconds.")


def make_context(*, model: Any = None, store: Any = None, **settings: Any) -> PlanRAGContext:
    """A context from a model (object or name), a store (object or script path) and setting overrides."""
    names = {f.name for f in fields(PlanRAGContext)}
    unknown = set(settings) - names
    if unknown:
        raise TypeError(f"unknown setting(s): {', '.join(sorted(unknown))}; known: {', '.join(sorted(names))}")
    kw = {k: v for k, v in settings.items() if v is not None}
    if isinstance(model, str):
        kw["model"] = model
    elif model is not None:
        kw["chat_model"] = model
    if isinstance(store, str) or hasattr(store, "__fspath__"):
        kw["graph_path"] = str(store)
    elif store is not None:
        kw["graph_store"] = store
    return PlanRAGContext(**kw)


def stream_run(method: str, question: str, context: PlanRAGContext) -> Iterator[tuple[str, dict[str, Any]]]:
    """Run ``method`` and yield ``(node, update)`` as each node finishes, then ``("__final__", state)``."""
    registry = graph_registry()
    if method not in registry:
        raise KeyError(f"unknown method {method!r}; known: {', '.join(registry)}")
    graph = registry[method][0]().compile(name=method)
    config = {"recursion_limit": recursion_limit_for(context)}
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream({"question": question}, context=context, config=config, stream_mode=["updates", "values"]):
        if mode == "values":
            final = chunk
        else:
            for node, update in chunk.items():
                yield node, update or {}
    yield "__final__", final


def ask(question: str, method: str = "planrag", *, model: Any = None, store: Any = None,
        context: PlanRAGContext | None = None, on_update: Callable[[str, dict[str, Any]], None] | None = None,
        **settings: Any) -> RunResult:
    """Answer ``question`` with ``method`` and return the typed result (see the module docstring).

    ``context`` may be given whole instead of ``model`` / ``store`` / settings; ``on_update`` is called
    with ``(node, update)`` as each node finishes (the CLI prints the trace with it).
    """
    ctx = context if context is not None else make_context(model=model, store=store, **settings)
    t0 = time.perf_counter()
    final: dict[str, Any] = {}
    for node, update in stream_run(method, question, ctx):
        if node == "__final__":
            final = update
        elif on_update is not None:
            on_update(node, update)
    res = RunResult.from_state(final)
    res.method, res.wall_time_s = method, round(time.perf_counter() - t0, 3)
    return res
