"""PlanRAG and its baselines (Lee et al., NAACL 2024, §5 and Appendix C): ``planrag``, ``planrag_no_replan`` (the
paper's "w/o RP"), ``iter_rag`` (ReAct, no plan) and ``single_rag`` (one retrieval), which share read_schema,
retrieve, answer, check_decision and the graph-DB tool and differ only in wiring."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import fields
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph

from ragplan.family import END, Builder, Emit, GraphSpec, MethodFamily
from ragplan.nodes.planrag.answer import answer
from ragplan.nodes.planrag.check_decision import check_decision
from ragplan.nodes.planrag.plan import plan
from ragplan.nodes.planrag.prompt import store_for
from ragplan.nodes.planrag.read_schema import read_schema
from ragplan.nodes.planrag.replan import advance_plan, replan
from ragplan.nodes.planrag.retrieve import RetrieveMode, make_retrieve
from ragplan.nodes.planrag.review import PlanRAGReviewer
from ragplan.nodes.common.review_plan import make_review_plan
from ragplan.state.context import PlanRAGContext, recursion_limit_for
from ragplan.state.planrag import PlanRAGInput, PlanRAGOutput, PlanRAGResult, PlanRAGState, ReplanVerdict, RetrievalStep
from ragplan.state.review import PLAN_REJECTED
from ragplan.tools.graphdb import StoreSpec
from ragplan.tools.graphdb.script import ScriptError

__all__ = [
    "build_planrag", "build_planrag_no_replan", "build_iter_rag", "build_single_rag",
    "planrag", "planrag_no_replan", "iter_rag", "single_rag", "FAMILY",
]


def route_unless_failed(state: PlanRAGState) -> Literal["start", "__end__"]:
    """Stop at once when the store could not be opened (after read_schema) or planning failed (after plan); else
    go on (a plan goes to review, which passes through when review is off)."""
    return END if state.get("error") else "start"


def route_after_plan_review(state: PlanRAGState) -> Literal["retrieve", "answer", "__end__"]:
    """A rejected plan ends the run; a plan that is done (or empty) answers; otherwise retrieve its next step."""
    if state.get("stop_reason") == PLAN_REJECTED:
        return END
    if state.get("stop_reason") or int(state.get("current_step", 0) or 0) >= len(state.get("plan") or []):
        return "answer"
    return "retrieve"


def route_after_retrieve(state: PlanRAGState) -> Literal["repair", "continue", "answer", "stop"]:
    """Follow the retrieve node's ``next``: the same step again, on, answer, or stop (endpoint failed)."""
    return state.get("next", "answer")


def route_after_step(state: PlanRAGState) -> Literal["review_plan", "retrieve", "answer", "__end__"]:
    """After replan / advance: a revision just applied goes to review; answer when the plan is done or a bound
    ended it, else retrieve; end on an LLM failure."""
    if state.get("stop_reason") == "llm_error":
        return END
    verdicts = state.get("replans") or []
    last = ReplanVerdict.model_validate(verdicts[-1]) if verdicts else None
    if last is not None and last.replan and last.applied and last.after_step == len(state.get("steps") or []):
        return "review_plan"
    return "answer" if state.get("stop_reason") else "retrieve"


def _base(mode: RetrieveMode, first: str, then: str) -> Builder:
    """What all four share: read_schema → ``first`` … retrieve in ``mode`` ⇄ (repair) → ``then`` … → answer →
    check_decision."""
    g: Builder = StateGraph(PlanRAGState, context_schema=PlanRAGContext, input_schema=PlanRAGInput, output_schema=PlanRAGOutput)
    g.add_node(read_schema).add_sequence([answer, check_decision]).add_node("retrieve", make_retrieve(mode))
    g.add_edge(START, "read_schema").add_edge("check_decision", END)
    g.add_conditional_edges("read_schema", route_unless_failed, {"start": first, END: END})
    g.add_conditional_edges("retrieve", route_after_retrieve,
                            {"repair": "retrieve", "continue": then, "answer": "answer", "stop": END})
    return g


def build_planrag(*, with_replan: bool = True) -> Builder:
    """PlanRAG: plan analyses from the schema, retrieve step by step with Cypher, re-plan after each observation."""
    step = "replan" if with_replan else "advance"
    g = _base("plan", "plan", step)
    g.add_node("plan", plan)
    g.add_node("review_plan", make_review_plan("planrag" if with_replan else "planrag_no_replan", PlanRAGReviewer()))
    g.add_node(step, replan if with_replan else advance_plan)
    g.add_conditional_edges("plan", route_unless_failed, {"start": "review_plan", END: END})
    g.add_conditional_edges("review_plan", route_after_plan_review, {"retrieve": "retrieve", "answer": "answer", END: END})
    review: dict[Hashable, str] = {"review_plan": "review_plan"} if with_replan else {}
    g.add_conditional_edges(step, route_after_step, {**review, "retrieve": "retrieve", "answer": "answer", END: END})
    return g


def build_planrag_no_replan() -> Builder:
    """PlanRAG without re-planning (the paper's w/o RP ablation)."""
    return build_planrag(with_replan=False)


def build_iter_rag() -> Builder:
    """IterRAG: ReAct-style iterative Cypher retrieval, no plan; the LLM answers when it knows enough."""
    return _base("react", "retrieve", "retrieve")


def build_single_rag() -> Builder:
    """SingleRAG: one Cypher retrieval, then the answer (``single_rag_repairs`` > 0 lets a failed query be repaired)."""
    return _base("single", "retrieve", "answer")


OBS_LINES = 12
"""Observation lines shown per step in the trace (the rest is counted)."""


class PlanRAGFamily(MethodFamily):
    """PlanRAG's family: a graph store as data (``--graph FILE.cql`` or Neo4j), the plan/step/re-plan trace."""

    def store_settings(self, method: str, store: Any) -> dict[str, Any]:
        """``store=`` is a ``.cql`` script path or a ``GraphStore`` object."""
        path = isinstance(store, str) or hasattr(store, "__fspath__")
        return {"graph_path": str(store)} if path else {"graph_store": store}

    def prepare(self, method: str, ctx: Any) -> str | None:
        """Open the graph store once (a bad script or an unreachable server is reported before any LLM call)."""
        if ctx.graph_store is not None:
            return None
        if not ctx.graph_path and not ctx.neo4j_uri:
            return f"{method} needs a graph: {self.data_help}"
        try:
            ctx.graph_store = store_for(ctx)
        except ScriptError as exc:
            return f"the graph script does not load: {exc}"
        except Exception as exc:  # driver / connection errors
            return f"the graph store could not be opened: {type(exc).__name__}: {exc}"
        return None

    def check_run(self, method: str, ctx: Any) -> str | None:
        """Nothing run-wide: each DQA question brings its own graph, opened (and, if broken, failed) per question."""
        return None

    def data_key(self, settings: dict[str, Any]) -> str:
        """The graph a question reads (its script or server): questions on one script share its loaded store."""
        return repr(tuple(settings.get(f.name) for f in fields(StoreSpec)))

    def data_line(self, ctx: Any) -> str:
        """``Graph: <script or server>``."""
        return f"Graph: {getattr(ctx.graph_store, 'source', None) or ctx.graph_path or ctx.neo4j_uri}"

    def trace(self, node: str, update: dict[str, Any], emit: Emit) -> None:
        """The schema read, the plan, each step's thought, query and observation, each re-plan verdict."""
        if node == "read_schema" and update.get("schema_text"):
            emit(f"Schema read ({update['schema_text'].count(chr(10)) - 1} lines).")
        if node == "plan" and update.get("plan"):
            emit("Plan:")
            for i, s in enumerate(update["plan"], 1):
                emit(f"  Step {i}: {s}")
        for step in update.get("steps") or []:
            step = RetrievalStep.model_validate(step)
            where = f" (plan step {step.plan_step}: {step.plan_step_text})" if step.plan_step else ""
            emit(f"\n[{step.index}]{where}")
            if step.thought:
                emit(f"  Thought: {step.thought}")
            if step.action == "finish":
                emit("  Action: finish (enough data to answer)")
                continue
            emit(f"  Action: {'Graph DB' if step.action == 'graph_db' else 'Self-thinking'}")
            emit(f"  {'Query' if step.action == 'graph_db' else 'Input'}: {step.query}")
            lines = step.observation.splitlines() or [""]
            shown = lines[:OBS_LINES] + ([f"… ({len(lines) - OBS_LINES} more lines)"] if len(lines) > OBS_LINES else [])
            status = "" if step.ok else f" [{step.error_kind}]"
            emit(f"  Observation{status}:" + ("" if len(shown) > 1 else f" {shown[0]}"))
            for ln in shown if len(shown) > 1 else []:
                emit(f"    {ln}")
        for v in update.get("replans") or []:
            v = ReplanVerdict.model_validate(v)
            emit(f"  Re-plan: {'Y' if v.replan else 'N'} — {v.reason}")
            if v.replan and v.new_steps:
                emit("  New remaining steps:")
                for s in v.new_steps:
                    emit(f"    - {s}")
        check = update.get("decision_check")
        if check:
            emit(f"\nDecision check (simulator): {check.get('text') or check.get('error')}")
        super().trace(node, update, emit)


FAMILY = PlanRAGFamily(
    name="planrag", title="PlanRAG (Lee et al., NAACL 2024)", order=10, context=PlanRAGContext, result=PlanRAGResult,
    graphs=(
        GraphSpec("planrag", build_planrag),
        GraphSpec("planrag_no_replan", build_planrag_no_replan),
        GraphSpec("iter_rag", build_iter_rag, splits_retrievals=True),
        GraphSpec("single_rag", build_single_rag),
    ),
    data_help="--graph FILE.cql (or --neo4j-uri / NEO4J_URI for a Neo4j server)",
)

#: Default recursion limit of the compiled graphs (for Studio and the SDK, where no limit is passed).
_DEFAULT_LIMIT: RunnableConfig = {"recursion_limit": recursion_limit_for(PlanRAGContext(model="-"))}
planrag, planrag_no_replan, iter_rag, single_rag = (
    spec.build().compile(name=spec.name).with_config(_DEFAULT_LIMIT) for spec in FAMILY.graphs)
