"""PlanRAG and its baselines (Lee et al., NAACL 2024, §5 and Appendix C), as four LangGraph graphs.

All four share the same nodes — ``read_schema``, ``retrieve``, ``answer``, ``check_decision`` (the
simulator's verdict on DQA data) and the graph-DB tool — and differ only in wiring:

* ``planrag``: read_schema → plan → retrieve ⇄ (repair) → replan → … → answer
* ``planrag_no_replan``: the same with ``advance`` (no LLM) instead of ``replan`` (the paper's "w/o RP")
* ``iter_rag``: read_schema → retrieve (ReAct: reason what to retrieve, or finish) ⇄ … → answer
* ``single_rag``: read_schema → retrieve (one retrieval, repairs allowed) → answer

Each module-level name is a compiled graph for ``langgraph.json``; ``build_*`` return the uncompiled
``StateGraph`` so tests and the evaluation runner can compile their own copy with a checkpointer.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph

from ragplan.nodes.planrag.answer import answer
from ragplan.nodes.planrag.check_decision import check_decision
from ragplan.nodes.planrag.plan import plan
from ragplan.nodes.planrag.read_schema import read_schema
from ragplan.nodes.planrag.replan import advance_plan, replan
from ragplan.nodes.planrag.retrieve import make_retrieve
from ragplan.state.context import PlanRAGContext, recursion_limit_for
from ragplan.state.planrag import PlanRAGInput, PlanRAGOutput, PlanRAGState

__all__ = [
    "build_planrag", "build_planrag_no_replan", "build_iter_rag", "build_single_rag",
    "planrag", "planrag_no_replan", "iter_rag", "single_rag", "GRAPHS",
]


def route_after_schema(state: PlanRAGState) -> Literal["start", "__end__"]:
    """Stop at once when the store could not be opened."""
    return END if state.get("error") else "start"


def route_after_plan(state: PlanRAGState) -> Literal["retrieve", "answer", "__end__"]:
    """Retrieve along the plan; an empty plan answers at once; a failed planning call ends the run."""
    if state.get("error"):
        return END
    return "retrieve" if state.get("plan") else "answer"


def route_after_retrieve(state: PlanRAGState) -> Literal["repair", "continue", "answer", "stop"]:
    """Follow the retrieve node's ``next``: the same step again, on, answer, or stop (endpoint failed)."""
    return state.get("next", "answer")


def route_after_step(state: PlanRAGState) -> Literal["retrieve", "answer", "__end__"]:
    """After replan / advance: answer when the plan is done or a bound ended it, else retrieve; end on an LLM failure."""
    if state.get("stop_reason") == "llm_error":
        return END
    return "answer" if state.get("stop_reason") else "retrieve"


def _base() -> StateGraph:
    g = StateGraph(PlanRAGState, context_schema=PlanRAGContext, input_schema=PlanRAGInput, output_schema=PlanRAGOutput)
    g.add_node("read_schema", read_schema)
    g.add_node("answer", answer)
    g.add_node("check_decision", check_decision)
    g.add_edge(START, "read_schema")
    g.add_edge("answer", "check_decision")
    g.add_edge("check_decision", END)
    return g


def build_planrag(*, with_replan: bool = True) -> StateGraph:
    """PlanRAG: plan, then retrieve step by step with a re-plan verdict after each observation."""
    g = _base()
    g.add_node("plan", plan)
    g.add_node("retrieve", make_retrieve("plan"))
    step = "replan" if with_replan else "advance"
    g.add_node(step, replan if with_replan else advance_plan)
    g.add_conditional_edges("read_schema", route_after_schema, {"start": "plan", END: END})
    g.add_conditional_edges("plan", route_after_plan, {"retrieve": "retrieve", "answer": "answer", END: END})
    g.add_conditional_edges("retrieve", route_after_retrieve, {"repair": "retrieve", "continue": step, "answer": "answer", "stop": END})
    g.add_conditional_edges(step, route_after_step, {"retrieve": "retrieve", "answer": "answer", END: END})
    return g


def build_planrag_no_replan() -> StateGraph:
    """PlanRAG without re-planning (the paper's "w/o RP" ablation)."""
    return build_planrag(with_replan=False)


def build_iter_rag() -> StateGraph:
    """IterRAG: ReAct-style iterative retrieval without a plan; the LLM decides when it knows enough."""
    g = _base()
    g.add_node("retrieve", make_retrieve("react"))
    g.add_conditional_edges("read_schema", route_after_schema, {"start": "retrieve", END: END})
    g.add_conditional_edges("retrieve", route_after_retrieve, {"repair": "retrieve", "continue": "retrieve", "answer": "answer", "stop": END})
    return g


def build_single_rag() -> StateGraph:
    """SingleRAG: one retrieval (a failed query may be repaired), then the answer."""
    g = _base()
    g.add_node("retrieve", make_retrieve("single"))
    g.add_conditional_edges("read_schema", route_after_schema, {"start": "retrieve", END: END})
    g.add_conditional_edges("retrieve", route_after_retrieve, {"repair": "retrieve", "continue": "answer", "answer": "answer", "stop": END})
    return g


#: Default recursion limit of the compiled graphs (for Studio and the SDK, where no limit is passed).
_DEFAULT_LIMIT = {"recursion_limit": recursion_limit_for(PlanRAGContext(model="-"))}

planrag = build_planrag().compile(name="planrag").with_config(_DEFAULT_LIMIT)
planrag_no_replan = build_planrag_no_replan().compile(name="planrag_no_replan").with_config(_DEFAULT_LIMIT)
iter_rag = build_iter_rag().compile(name="iter_rag").with_config(_DEFAULT_LIMIT)
single_rag = build_single_rag().compile(name="single_rag").with_config(_DEFAULT_LIMIT)

#: Graph name -> (builder, one-line summary), for the CLI and the evaluation runner.
GRAPHS: dict[str, tuple[Any, str]] = {
    "planrag": (build_planrag, "PlanRAG: plan data analyses from the schema, retrieve step by step with Cypher, re-plan after each observation, answer"),
    "planrag_no_replan": (build_planrag_no_replan, "PlanRAG without re-planning (the paper's w/o RP ablation)"),
    "iter_rag": (build_iter_rag, "IterRAG: ReAct-style iterative Cypher retrieval, no plan; answers when it knows enough"),
    "single_rag": (build_single_rag, "SingleRAG: one Cypher retrieval, then the answer"),
}
