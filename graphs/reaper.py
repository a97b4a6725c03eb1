"""REAPER (Joshi et al., CIKM 2024) and its baselines: ``reaper`` (plan_retrieval → validate_plan ⇄ one repair →
review_plan → execute_plan → respond), ``agent_planner`` (agent_step ⇄ … → respond, one LLM call per step) and
``classifier_planner`` (classify_question → fill_arguments → execute_plan → respond)."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import START, StateGraph

from ragplan.family import END, Builder, Emit, GraphSpec, MethodFamily

from ragplan.nodes.common.review_plan import make_review_plan
from ragplan.nodes.reaper.agent_step import agent_step
from ragplan.nodes.reaper.classify_question import classify_question
from ragplan.nodes.reaper.execute_plan import execute_plan
from ragplan.nodes.reaper.fill_arguments import fill_arguments
from ragplan.nodes.reaper.plan_retrieval import plan_retrieval
from ragplan.nodes.reaper.respond import respond
from ragplan.nodes.reaper.review import ReaperReviewer
from ragplan.nodes.reaper.validate_plan import validate_plan
from ragplan.methods.reaper.execute import render_for_text
from ragplan.methods.reaper.plan import PlanCall, format_plan
from ragplan.state.context import ReaperContext
from ragplan.state.reaper import ReaperInput, ReaperOutput, ReaperResult, ReaperState
from ragplan.state.review import PLAN_REJECTED
from ragplan.tools.suites import suite_for

__all__ = ["build_reaper", "build_agent_planner", "build_classifier_planner", "reaper", "agent_planner",
           "classifier_planner", "FAMILY"]


def route_after_planner(state: ReaperState) -> Literal["validate_plan", "__end__"]:
    """Validate the plan; a planner call that failed (endpoint, configuration) ends the run."""
    return END if state.get("stop_reason") == "llm_error" else "validate_plan"


def route_after_validation(state: ReaperState) -> Literal["plan_retrieval", "review_plan", "respond"]:
    """Valid: to review (which passes through when review is off); invalid: repair once, then respond without evidence."""
    if state.get("plan_errors"):
        return "respond" if state.get("stop_reason") in ("invalid_plan", "tool_error") else "plan_retrieval"
    return "review_plan"


def route_to_execution(state: ReaperState) -> Literal["execute_plan", "respond", "__end__"]:
    """A rejected plan or a failed LLM call ends the run; otherwise execute the plan (respond at once for a zero-step
    plan, and for an invalid one: the classifier baseline's is left empty)."""
    if state.get("stop_reason") in (PLAN_REJECTED, "llm_error"):
        return END
    return "execute_plan" if state.get("plan") else "respond"


def route_after_agent(state: ReaperState) -> Literal["agent_step", "respond", "__end__"]:
    """Another step until the agent stops or the step bound is reached; end on an LLM failure."""
    if state.get("stop_reason") == "llm_error":
        return END
    return "respond" if state.get("agent_done") else "agent_step"


def _graph(**nodes: Any) -> Builder:
    g: Builder = StateGraph(ReaperState, context_schema=ReaperContext, input_schema=ReaperInput,
                            output_schema=ReaperOutput)
    for name, node in nodes.items():
        g.add_node(name, node)
    g.add_edge(START, next(iter(nodes)))
    g.add_edge("respond", END)  # every graph of the family ends with the responder
    return g


def build_reaper() -> Builder:
    """REAPER: a small planner writes the retrieval plan in one call; checked, run in parallel; a large LLM answers."""
    g = _graph(plan_retrieval=plan_retrieval, validate_plan=validate_plan,
               review_plan=make_review_plan("reaper", ReaperReviewer()), execute_plan=execute_plan, respond=respond)
    g.add_conditional_edges("plan_retrieval", route_after_planner, ["validate_plan", END])
    g.add_conditional_edges("validate_plan", route_after_validation, ["plan_retrieval", "review_plan", "respond"])
    g.add_conditional_edges("review_plan", route_to_execution, ["execute_plan", "respond", END])
    g.add_edge("execute_plan", "respond")
    return g


def build_agent_planner() -> Builder:
    """Agent baseline for REAPER: one LLM call per retrieval step over the same tools, then the same responder."""
    g = _graph(agent_step=agent_step, respond=respond)
    g.add_conditional_edges("agent_step", route_after_agent, ["agent_step", "respond", END])
    return g


def route_after_classify(state: ReaperState) -> Literal["fill_arguments", "__end__"]:
    """Fill the routed class's arguments; a classifier that cannot be loaded ends the run."""
    return END if state.get("stop_reason") == "classifier_error" else "fill_arguments"


def build_classifier_planner() -> Builder:
    """Classifier baseline for REAPER: a trained classifier picks a retrieval class, an LLM fills its arguments."""
    g = _graph(classify_question=classify_question, fill_arguments=fill_arguments, execute_plan=execute_plan,
               respond=respond)
    g.add_conditional_edges("classify_question", route_after_classify, ["fill_arguments", END])
    g.add_conditional_edges("fill_arguments", route_to_execution, ["execute_plan", "respond", END])
    g.add_edge("execute_plan", "respond")
    return g


reaper = build_reaper().compile(name="reaper")
agent_planner = build_agent_planner().compile(name="agent_planner")
classifier_planner = build_classifier_planner().compile(name="classifier_planner")


class ReaperFamily(MethodFamily):
    """REAPER's family: a tool registry over the retail shop as data (``--shop DIR``), the plan/tool-call trace."""

    def prepare(self, method: str, ctx: Any) -> str | None:
        """Bind the tool registry to its shop now (and check the classifier folder of classifier_planner)."""
        if ctx.tool_registry is None:
            if ctx.tool_suite == "retail" and not ctx.shop_dir:
                return f"{method} needs the retail shop: {self.data_help}"
            try:
                suite_for(ctx)
            except Exception as exc:
                return f"the tool suite {ctx.tool_suite!r} cannot be opened: {exc}"
        if method == "classifier_planner" and not ctx.classifier_dir:
            return "classifier_planner needs --classifier DIR (train one with `ragplan reaper train-classifier --shop DIR --out DIR`)"
        if method != "classifier_planner" and ctx.classifier_dir:
            return f"--classifier (classifier_dir) applies to classifier_planner only, not to {method}"
        return None

    def data_line(self, ctx: Any) -> str:
        """``Tools: retail over SHOP`` (and the planner / responder models when they differ)."""
        models = "".join(f"   {role}: {m}" for role, m in (("Planner", ctx.planner_model), ("Responder", ctx.responder_model)) if m)
        return f"Tools: {ctx.tool_suite}{' over ' + ctx.shop_dir if ctx.shop_dir else ''}{models}"

    def trace(self, node: str, update: dict[str, Any], emit: Emit) -> None:
        """The route (classifier), each plan the planner wrote, its validation, every tool call and its output."""
        if node == "classify_question" and update.get("route"):
            r = update["route"]
            emit(f"Route: {r.get('class') or '-'} (p={r.get('probability', 0):.2f})" + (f" — {r['error']}" if r.get("error") else ""))
        if node == "plan_retrieval" and "plan_raw" in update:
            emit(f"Plan (planner call {update.get('plan_attempts', 1)}, {update.get('planner_latency_s', 0):.2f} s):")
            for line in (update["plan_raw"] or "(empty)").splitlines():
                emit(f"  {line}")
        if node in ("validate_plan", "fill_arguments"):
            for c in update.get("plan_calls") or []:
                call = PlanCall.model_validate(c)
                n = len(call.steps)
                shown = node == "fill_arguments" and n  # the planner's own text is already printed
                emit(f"Plan {call.attempt} invalid:" if not call.valid else f"Plan {call.attempt} valid"
                     + (f", {n} step{'s' if n != 1 else ''}{':' if shown else '.'}" if n else ": no retrieval needed."))
                for line in [f"- {e}" for e in call.errors] or (format_plan(call.plan).splitlines() if shown else []):
                    emit(f"  {line}")
            if update.get("plan_errors") and not update.get("plan_calls"):
                emit("Plan invalid:")
                for e in update["plan_errors"]:
                    emit(f"  - {e}")
        evidence = update.get("evidence") or []
        if node == "agent_step":
            evidence = evidence[-1:]  # the agent's update carries every call so far; print the new one
        for e in evidence:
            status = e.get("status", "")
            args = ", ".join(f"{k}={render_for_text(v, 80)}" for k, v in (e.get("args") or {}).items())
            emit(f"\n[#{e.get('evidence_var', '')}] {e.get('tool', '')}({args})  {status} {e.get('elapsed_ms', 0.0):.0f} ms")
            emit(f"  Output: {render_for_text(e.get('output'), 300)}" if status == "ok" else f"  {e.get('error') or status}")
        super().trace(node, update, emit)


FAMILY = ReaperFamily(
    name="reaper",
    title="REAPER (Joshi et al., CIKM 2024)",
    order=30,
    context=ReaperContext,
    result=ReaperResult,
    graphs=(
        GraphSpec("reaper", build_reaper),
        GraphSpec("agent_planner", build_agent_planner),
        GraphSpec("classifier_planner", build_classifier_planner),
    ),
    data_help="--shop DIR (a retail shop made by `ragplan reaper make-shop --out DIR`)",
)
