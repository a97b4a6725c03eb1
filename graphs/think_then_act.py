"""Think-then-Act (Shen et al. 2024): assess_query → schedule → solve_subquery ×N in parallel (``Send``; a ``#k``
reference waits for k) → final_answer; baselines ``standard``, ``cot``, ``retrieve_then_read`` and ``flare``."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import START, StateGraph
from langgraph.types import Send

from ragplan.family import END, Builder, Emit, GraphSpec, TextRetrievalFamily
from ragplan.nodes.common.retrieve_text import retrieve_text
from ragplan.nodes.think_then_act.answer_subquery import SHOWN, answer_subquery, branch_outcome, final_answer
from ragplan.nodes.think_then_act.assess_query import assess_query
from ragplan.nodes.think_then_act.confidence_gate import confidence_gate
from ragplan.nodes.think_then_act.direct_answer import make_direct_answer
from ragplan.nodes.think_then_act.flare import flare_draft
from ragplan.state.context import ThinkThenActContext
from ragplan.state.think_then_act import (
    MultiStepState, SubQuery, SubQueryOutput, TextQAInput, TextQAOutput, TextQAResult, TextQAState,
)
from ragplan.state.trace_sections import excerpt

__all__ = ["build_subquery_graph", "build_think_then_act", "build_standard", "build_cot", "build_retrieve_then_read",
           "build_flare", "FAMILY", "think_then_act", "standard", "cot", "retrieve_then_read", "flare"]


def _graph(state: Any) -> Builder:
    return StateGraph(state, context_schema=ThinkThenActContext, input_schema=TextQAInput, output_schema=TextQAOutput)


def route_after_gate(state: MultiStepState) -> Literal["retrieve_text", "answer_subquery", "__end__"]:
    """Retrieve when the gate said so, else answer unaided; an endpoint failure ends the branch (no more calls)."""
    if any(getattr(f, "kind", None) == "llm_error" for f in state.get("failures") or []):
        return END
    return "retrieve_text" if state["query"].retrieve else "answer_subquery"


def build_subquery_graph() -> Builder:
    """One (sub-)query: confidence_gate → [retrieve_text] → answer_subquery."""
    g: Builder = StateGraph(MultiStepState, context_schema=ThinkThenActContext, output_schema=SubQueryOutput)
    then: list[Any] = [retrieve_text, answer_subquery]
    g.add_node(confidence_gate).add_sequence(then)
    g.add_conditional_edges("confidence_gate", route_after_gate, ["retrieve_text", "answer_subquery", END])
    return g.add_edge(START, "confidence_gate").add_edge("answer_subquery", END)


def schedule(state: MultiStepState) -> dict[str, Any]:
    """Count a wave of sub-query solving; an endpoint failure in a branch of the last wave ends the run."""
    outcome = branch_outcome(state)
    return {"waves": 1, **(outcome if outcome.get("stop_reason") == "llm_error" else {})}


def dispatch(state: MultiStepState) -> list[Send] | Literal["final_answer"]:
    """Send every sub-query whose references are answered to ``solve_subquery``, in parallel; else finish. At most one
    wave per sub-query (+1); when none is ready but some remain, all are sent with the references as written."""
    queries: list[SubQuery] = state.get("queries") or []
    done = {q.index for q in queries if q.done}
    pending = [q for q in queries if not q.done]
    if not pending or state.get("stop_reason") == "llm_error" or state.get("waves", 0) > len(queries) + 1:
        return "final_answer"
    ready = [q for q in pending if all(d in done or d >= q.index for d in q.depends_on)] or pending
    prior = [q.model_copy(update={"answer": excerpt(q.answer, SHOWN)}) for q in queries if q.done]  # (what prompts take)
    # the answer instructions (FEVER's labels) go only to a query whose answer is the final one
    instructions = state.get("instructions", "") if len(queries) == 1 else ""
    return [Send("solve_subquery", {"question": state["question"], "instructions": instructions, "query": q,
                                    "prior": prior}) for q in ready]


def build_think_then_act() -> Builder:
    """Think-then-Act: assess/rewrite the query, retrieve only below confidence β′, answer sub-queries in parallel."""
    first: list[Any] = [assess_query, schedule]
    g = _graph(MultiStepState).add_sequence(first)
    g.add_node("solve_subquery", build_subquery_graph().compile()).add_node(final_answer)
    g.add_conditional_edges("schedule", dispatch, ["solve_subquery", "final_answer"])
    return g.add_edge(START, "assess_query").add_edge("solve_subquery", "schedule").add_edge("final_answer", END)


def _direct(cot: bool) -> Builder:
    node = make_direct_answer(cot)
    return _graph(TextQAState).add_node(node.__name__, node).add_edge(START, node.__name__).add_edge(node.__name__, END)


def build_standard() -> Builder:
    """Standard prediction: answer directly, no retrieval."""
    return _direct(cot=False)


def build_cot() -> Builder:
    """Chain of thought: reason step by step, then answer; no retrieval."""
    return _direct(cot=True)


def as_single_query(state: MultiStepState) -> dict[str, Any]:
    """The question itself as the one query to retrieve for (Retrieve-then-Read always retrieves)."""
    q = SubQuery(index=1, text=state["question"], resolved=state["question"], retrieve=True, decision="RETRIEVAL (always)")
    return {"query": q, "queries": [q]}


def route_after_draft(state: MultiStepState) -> Literal["retrieve_text", "final_answer"]:
    """Retrieve when the draft was not trusted; otherwise the draft is the answer."""
    q = state.get("query")
    return "retrieve_text" if q is not None and q.retrieve and state.get("stop_reason") != "llm_error" else "final_answer"


def _single_query(first: Any, route: Any = None) -> Builder:
    """``first`` → [retrieve_text → answer_subquery] → final_answer; ``route`` may skip retrieval."""
    then: list[Any] = [retrieve_text, answer_subquery, final_answer]
    if route is None:
        g = _graph(MultiStepState).add_sequence([first, *then])
    else:
        g = _graph(MultiStepState).add_node(first).add_sequence(then)
        g.add_conditional_edges(first.__name__, route, ["retrieve_text", "final_answer"])
    return g.add_edge(START, first.__name__).add_edge("final_answer", END)


def build_retrieve_then_read() -> Builder:
    """Retrieve-then-Read: always retrieve top sentences for the question, then answer with the evidence."""
    return _single_query(as_single_query)


def build_flare() -> Builder:
    """FLARE-style: draft, retrieve and regenerate when token (or stated) confidence is low."""
    return _single_query(flare_draft, route_after_draft)


class ThinkThenActFamily(TextRetrievalFamily):
    """Think-then-Act's family: text retrieval as data, the gate trace."""

    def trace(self, node: str, update: dict[str, Any], emit: Emit) -> None:
        """The query assessment, then per (sub-)query its gate verdict, evidence sentences and answer."""
        queries = [SubQuery.model_validate(q) for q in update.get("queries") or []]
        if update.get("assessment"):
            emit(f"Assessment: {update['assessment']}" + (f" — {update['assessment_reason']}" if update.get("assessment_reason") else ""))
            for q in queries:
                emit(f"  ({q.index}) {q.text}")
        answered = node in ("solve_subquery", "answer_subquery", "direct_answer", "cot_answer")
        for q in [q for q in queries if q.done and answered or node == "flare_draft"]:
            emit(f"\n[{q.index}] {q.resolved or q.text}")
            evidence = [(f"Evidence ({e.get('score', 0):.2f}, {e.get('title', '')})", e.get("sentence", "")) for e in q.evidence]
            for label, text in [("Gate", q.decision), *evidence, ("Retrieval failed", q.retrieval_error), ("Answer", q.answer)]:
                if text:
                    emit(f"  {label}: {text}")
        super().trace(node, update, emit)


FAMILY = ThinkThenActFamily(
    name="think_then_act", title="Think-then-Act (Shen et al. 2024)", order=20, context=ThinkThenActContext,
    result=TextQAResult, graphs=(
        GraphSpec("think_then_act", build_think_then_act),
        GraphSpec("standard", build_standard, uses_data=False),
        GraphSpec("cot", build_cot, uses_data=False),
        GraphSpec("retrieve_then_read", build_retrieve_then_read),
        GraphSpec("flare", build_flare),
    ),
    data_help="--retriever wiki (live Wikipedia, cached) or --retriever local --index DIR",
)

think_then_act, standard, cot, retrieve_then_read, flare = (spec.build().compile(name=spec.name) for spec in FAMILY.graphs)
