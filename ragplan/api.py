"""Calling the method graphs from Python.

    from ragplan.api import ask
    result = ask("Which trade node …?", method="planrag", model=my_chat_model, store="q1.cql")
    result.answer, result.plan, result.steps, result.usage, result.wall_time_s

    result = ask("Who directed Alien?", method="think_then_act", model=my_chat_model,
                 retriever="local", index_dir="my_index/")
    result.answer, result.assessment, result.queries, result.retrieval_ratio

    result = ask("where is my blender?", method="reaper", model="openai:gpt-4o-mini", shop_dir="shop/",
                 inputs={"page_context": {"product_id": "B0…"}})
    result.answer, result.plan_text, result.evidence, result.planner_latency_s

``model`` is a LangChain chat model object or a ``provider:name`` string; ``store`` the PlanRAG
family's graph (a :class:`~ragplan.tools.graphdb.GraphStore` or the path of a ``.cql`` script); other
keyword arguments are fields of the method's context (``max_steps=8``, ``beta_threshold=0.3``,
``shop_dir=…``). The result is the method family's typed result (:mod:`ragplan.state.result`). The
compiled graphs themselves (``ragplan.graphs.planrag.planrag`` …) can equally be invoked directly with
their context object.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

from ragplan.registry import family_of
from ragplan.state.context import LLMContext, recursion_limit_for
from ragplan.state.planrag import PlanRAGResult
from ragplan.state.result import GraphResult
from ragplan.state.think_then_act import TextQAResult

__all__ = ["ask", "stream_run", "make_context", "context_class", "GraphResult", "RunResult", "TextRunResult",
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
        on_update: Callable[[str, dict[str, Any]], None] | None = None, **settings: Any) -> GraphResult:
    """Answer ``question`` with ``method`` and return its family's typed result (see the module docstring).

    ``context`` may be given whole instead of ``model`` / ``store`` / settings; ``inputs`` are extra graph
    inputs (REAPER's ``page_context``); ``on_update`` is called with ``(node, update)`` as each node
    finishes (the CLI prints the trace with it).
    """
    family = family_of(method)
    ctx = context if context is not None else family.make_context(method, model=model, store=store, **settings)
    t0 = time.perf_counter()
    final: dict[str, Any] = {}
    for node, update in stream_run(method, question, ctx, inputs):
        if node == "__final__":
            final = update
        elif on_update is not None:
            on_update(node, update)
    return family.result.from_state(final, method=method, wall_time_s=round(time.perf_counter() - t0, 3))
