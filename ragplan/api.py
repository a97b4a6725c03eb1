"""Calling the method graphs from Python.

    from ragplan.api import ask
    result = ask("Which trade node …?", method="planrag", model=my_chat_model, store="q1.cql")
    result.answer, result.plan, result.steps, result.usage, result.wall_time_s

    result = ask("Who directed Alien?", method="think_then_act", model=my_chat_model,
                 retriever="local", index_dir="my_index/")
    result.answer, result.assessment, result.queries, result.retrieval_ratio

``model`` is a LangChain chat model object or a ``provider:name`` string; ``store`` a
:class:`~ragplan.tools.graphdb.GraphStore` or the path of a ``.cql`` script (graph methods); other
keyword arguments are fields of the method's context (``max_steps=8``, ``beta_threshold=0.3`` …).
The compiled graphs themselves (``ragplan.graphs.planrag.planrag`` …) can equally be invoked
directly with their context object.
"""

from __future__ import annotations

import time
from dataclasses import fields
from typing import Any, Callable, Iterator

from pydantic import BaseModel, Field

from ragplan.registry import graph_registry
from ragplan.state.context import GraphDBContext, LLMContext, recursion_limit_for
from ragplan.state.planrag import PlanRAGResult
from ragplan.state.think_then_act import TextQAResult

__all__ = ["ask", "stream_run", "make_context", "context_class", "RunResult", "TextRunResult", "recursion_limit_for"]


class _RunInfo(BaseModel):
    method: str = ""
    wall_time_s: float = Field(default=0.0, description="Wall time of the whole run in seconds.")


class RunResult(PlanRAGResult, _RunInfo):
    """A finished graph-DB run (PlanRAG family): the typed output plus the method name and wall time."""


class TextRunResult(TextQAResult, _RunInfo):
    """A finished text-QA run (Think-then-Act family): the typed output plus the method name and wall time."""


def _builder(method: str) -> Any:
    registry = graph_registry()
    if method not in registry:
        raise KeyError(f"unknown method {method!r}; known: {', '.join(registry)}")
    return registry[method][0]


def context_class(method: str) -> type[LLMContext]:
    """The context (settings) dataclass of ``method``'s graph."""
    return _builder(method)().context_schema


def make_context(method: str = "planrag", *, model: Any = None, store: Any = None, **settings: Any) -> LLMContext:
    """The method's context from a model (object or name), a store (object or script path) and setting overrides."""
    cls = context_class(method)
    names = {f.name for f in fields(cls)}
    unknown = set(settings) - names
    if unknown:
        raise TypeError(f"unknown setting(s) for {method}: {', '.join(sorted(unknown))}; known: {', '.join(sorted(names))}")
    kw = {k: v for k, v in settings.items() if v is not None}
    if isinstance(model, str):
        kw["model"] = model
    elif model is not None:
        kw["chat_model"] = model
    if store is not None:
        if not issubclass(cls, GraphDBContext):
            raise TypeError(f"{method} does not query a graph store; pass retriever settings instead")
        if isinstance(store, str) or hasattr(store, "__fspath__"):
            kw["graph_path"] = str(store)
        else:
            kw["graph_store"] = store
    return cls(**kw)


def stream_run(method: str, question: str, context: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Run ``method`` and yield ``(node, update)`` as each node finishes, then ``("__final__", state)``."""
    graph = _builder(method)().compile(name=method)
    config = {"recursion_limit": recursion_limit_for(context)}
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream({"question": question}, context=context, config=config,
                                    stream_mode=["updates", "values"]):
        if mode == "values":
            final = chunk
        else:
            for node, update in (chunk or {}).items():
                yield node, update or {}
    yield "__final__", final


def ask(question: str, method: str = "planrag", *, model: Any = None, store: Any = None,
        context: Any = None, on_update: Callable[[str, dict[str, Any]], None] | None = None,
        **settings: Any) -> RunResult | TextRunResult:
    """Answer ``question`` with ``method`` and return the typed result (see the module docstring).

    ``context`` may be given whole instead of ``model`` / ``store`` / settings; ``on_update`` is called
    with ``(node, update)`` as each node finishes (the CLI prints the trace with it).
    """
    ctx = context if context is not None else make_context(method, model=model, store=store, **settings)
    t0 = time.perf_counter()
    final: dict[str, Any] = {}
    for node, update in stream_run(method, question, ctx):
        if node == "__final__":
            final = update
        elif on_update is not None:
            on_update(node, update)
    cls = RunResult if isinstance(ctx, GraphDBContext) else TextRunResult
    res = cls.from_state(final)
    res.method, res.wall_time_s = method, round(time.perf_counter() - t0, 3)
    return res
