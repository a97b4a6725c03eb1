"""InstructRAG (SIGIR 2025) as ``instructrag`` (retrieve_paths → select_path → review_plan → plan_step ⇄ observe →
[answer_from_steps]) and its ablations ``instructrag_threshold``, ``instructrag_no_ml``, ``instructrag_rap`` and
``react`` (no path, or a ``given_path``). Training ablations are agents trained with a loss off."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import START, StateGraph

from ragplan.family import END, Builder, Emit, GraphSpec, TextRetrievalFamily
from ragplan.nodes.common.review_plan import make_review_plan
from ragplan.nodes.instructrag.answer import answer_from_steps
from ragplan.nodes.instructrag.observe import observe
from ragplan.nodes.instructrag.plan_step import plan_step
from ragplan.nodes.instructrag.retrieve_paths import make_retrieve_paths, retrieve_stored_paths
from ragplan.nodes.instructrag.review import InstructRAGReviewer
from ragplan.nodes.instructrag.select_path import select_path
from ragplan.state.instructrag import (
    InstructRAGContext, InstructRAGInput, InstructRAGOutput, InstructRAGResult, InstructRAGState, PlannedPath, TAOStep,
)
from ragplan.state.review import PLAN_REJECTED

__all__ = ["build_instructrag", "build_instructrag_threshold", "build_instructrag_no_ml", "build_instructrag_rap",
           "build_react", "FAMILY", "instructrag", "instructrag_threshold", "instructrag_no_ml", "instructrag_rap", "react"]


def route_to_planning(state: InstructRAGState) -> Literal["review_plan", "__end__"]:
    """The path goes to review (a pass-through when review is off), unless the graph or agents could not be loaded."""
    return END if state.get("stop_reason") == "setup_error" else "review_plan"


def route_after_path_review(state: InstructRAGState) -> Literal["plan_step", "__end__"]:
    """Plan with the (approved or edited) path; END when the reviewer rejected it."""
    return END if state.get("stop_reason") == PLAN_REJECTED else "plan_step"


def route_after_plan_step(state: InstructRAGState) -> Literal["observe", "answer_from_steps", "__end__"]:
    """Finish and endpoint failures end the run; an unparseable step goes to the answer; else observe."""
    reason = state.get("stop_reason")
    if reason in ("answered", "llm_error"):
        return END
    return "answer_from_steps" if reason == "llm_unparseable" else "observe"


def route_after_observe(state: InstructRAGState) -> Literal["plan_step", "answer_from_steps"]:
    """Next step, or the answer once ``observe`` found the step bound (``max_steps``) reached."""
    return "answer_from_steps" if state.get("stop_reason") == "max_steps" else "plan_step"


def _build(find: tuple[str, Any] | None = None, method: str = "", *, select: bool = False) -> Builder:
    """The planning loop, after a path-finding node ``(name, node)``, the ML-Agent's pick (``select``) and review."""
    g = StateGraph(InstructRAGState, context_schema=InstructRAGContext, input_schema=InstructRAGInput,
                   output_schema=InstructRAGOutput)
    if find:
        g.add_node(*find)
        if select:
            g.add_node(select_path)
    g.add_node(plan_step).add_node(observe).add_node(answer_from_steps)
    g.add_conditional_edges("plan_step", route_after_plan_step, ["observe", "answer_from_steps", END])
    g.add_conditional_edges("observe", route_after_observe, ["plan_step", "answer_from_steps"])
    g.add_edge("answer_from_steps", END)
    if not find:
        g.add_edge(START, "plan_step")
        return g
    g.add_node("review_plan", make_review_plan(method, InstructRAGReviewer()))
    g.add_conditional_edges("review_plan", route_after_path_review, ["plan_step", END])
    g.add_edge(START, find[0])
    if select:
        g.add_edge(find[0], "select_path")
    g.add_conditional_edges("select_path" if select else find[0], route_to_planning, ["review_plan", END])
    return g


def build_instructrag() -> Builder:
    """InstructRAG: RL-Agent walks the instruction graph for K paths, ML-Agent picks one, the LLM plans with it."""
    return _build(("retrieve_paths", make_retrieve_paths("rl_agent")), "instructrag", select=True)


def build_instructrag_threshold() -> Builder:
    """InstructRAG ablation: a similarity threshold walks the graph instead of the RL-Agent; the ML-Agent picks."""
    return _build(("retrieve_paths", make_retrieve_paths("threshold")), "instructrag_threshold", select=True)


def build_instructrag_no_ml() -> Builder:
    """InstructRAG ablation: the RL-Agent's first path, no ML-Agent."""
    return _build(("retrieve_paths", make_retrieve_paths("rl_agent", pick_first=True)), "instructrag_no_ml")


def build_instructrag_rap() -> Builder:
    """RAP-style baseline: the most similar past question's stored path, no instruction graph."""
    return _build(("retrieve_stored_paths", retrieve_stored_paths), "instructrag_rap")


def build_react() -> Builder:
    """ReAct: Thought/Action/Observation with Search/Lookup/Finish over the same docstore, no path (or a given one)."""
    return _build()


class InstructRAGFamily(TextRetrievalFamily):
    """InstructRAG's family: an instruction graph and trained agents besides the text retriever."""

    def prepare(self, method: str, ctx: Any) -> str | None:
        """Open the retriever, the instruction graph and the agents the graph needs; say what is missing."""
        from ragplan.methods.instructrag.selection import load_parts

        if (problem := super().prepare(method, ctx)) or method == "react":  # react needs only the retriever
            return problem
        agents = method != "instructrag_rap"
        try:
            parts = load_parts(ctx.instruction_graph_dir, ctx.agents_dir if agents else "", ctx.embedding_model)
            if agents and ctx.path_selection in ("agents", "untrained"):  # the baselines need no agents
                parts.agents("", False, ctx.path_selection == "untrained")
        except Exception as exc:  # a missing folder or setting, a damaged graph or agent file
            return f"{method} cannot run: {exc}"
        return None

    def data_line(self, ctx: Any) -> str:
        """``Retriever: …   Instruction graph: …   Agents: …``."""
        return super().data_line(ctx) + (f"   Instruction graph: {ctx.instruction_graph_dir}"
                                         if ctx.instruction_graph_dir else "") + (f"   Agents: {ctx.agents_dir}" if ctx.agents_dir else "")

    def trace(self, node: str, update: dict[str, Any], emit: Emit) -> None:
        """The task, the candidate paths, the pick, then every Thought / Action / Observation."""
        cands = [PlannedPath.model_validate(p) for p in update.get("candidate_paths") or []]
        if node in ("retrieve_paths", "retrieve_stored_paths"):  # each candidate once, with the past questions it combines
            if update.get("task"):
                emit(f"Task: {update['task']} ({update.get('task_split', '-')})")
            for i, p in enumerate(cands, start=1):
                emit(p.line(i))
                if p.derived_from:
                    emit(f"    from: {' | '.join(p.derived_from)}")
        if node == "select_path" and cands:  # the ML-Agent's scores of the candidates listed above
            emit("ML-Agent scores: " + "  ".join(f"{i}: {p.score:.3f}" for i, p in enumerate(cands, start=1) if p.score is not None))
        if update.get("selected_path") is not None:
            path = PlannedPath.model_validate(update["selected_path"])
            emit(f"Selected ({update.get('selection', '-')}): {path.text}")
        if node in ("plan_step", "observe") and update.get("steps"):
            s = TAOStep.model_validate(update["steps"][-1])
            if node == "plan_step":
                emit(f"\nThought {s.index}: {s.thought}")
                emit(f"Action {s.index}: {s.action}[{s.argument}]")
            else:
                emit(f"Observation {s.index}: {s.observation[:400]}")
        super().trace(node, update, emit)


FAMILY = InstructRAGFamily(
    name="instructrag", title="InstructRAG (Wang et al., SIGIR 2025)", order=50, context=InstructRAGContext,
    result=InstructRAGResult, graphs=(
        GraphSpec("instructrag", build_instructrag),
        GraphSpec("instructrag_threshold", build_instructrag_threshold),
        GraphSpec("instructrag_no_ml", build_instructrag_no_ml),
        GraphSpec("instructrag_rap", build_instructrag_rap),
        GraphSpec("react", build_react),
    ),
    data_help="--retriever wiki|local --index DIR, and --instruction-graph DIR --agents DIR (react needs only the retriever)",
)

instructrag, instructrag_threshold, instructrag_no_ml, instructrag_rap, react = (
    spec.build().compile(name=spec.name) for spec in FAMILY.graphs)
