"""REAPER (Joshi et al., CIKM 2024) and its agent baseline, as LangGraph graphs.

* ``reaper``: plan_retrieval (one planner call writes the whole plan) → validate_plan (⇄ one repair
  round with the errors shown) → execute_plan (dependency order, independent steps in parallel) →
  respond (the responder model answers from the evidence only). A zero-step plan skips execution.
* ``agent_planner``: agent_step ⇄ (one LLM call per retrieval step, ReAct-style) → respond. The same
  tools, executor and responder: the difference is the number of planning calls and their latency.

The paper's third system, a trained classifier that routes the question to a retrieval class, is the
``classifier_planner`` graph (not built yet: see the README's status).
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph

from ragplan.nodes.agent_step import agent_step
from ragplan.nodes.execute_plan import execute_plan
from ragplan.nodes.plan_retrieval import plan_retrieval
from ragplan.nodes.respond import respond
from ragplan.nodes.validate_plan import validate_plan
from ragplan.state.context import ReaperContext
from ragplan.state.reaper import ReaperInput, ReaperOutput, ReaperState

__all__ = ["build_reaper", "build_agent_planner", "reaper", "agent_planner", "GRAPHS"]


def route_after_planner(state: ReaperState) -> Literal["validate_plan", "__end__"]:
    """Validate the plan; a planner call that failed (endpoint, configuration) ends the run."""
    return END if state.get("stop_reason") == "llm_error" else "validate_plan"


def route_after_validation(state: ReaperState) -> Literal["plan_retrieval", "execute_plan", "respond"]:
    """Valid: execute (or respond at once for a zero-step plan); invalid: repair once, then respond without evidence."""
    if state.get("plan_errors"):
        return "respond" if state.get("stop_reason") in ("invalid_plan", "tool_error") else "plan_retrieval"
    return "execute_plan" if state.get("plan_text") else "respond"


def route_after_agent(state: ReaperState) -> Literal["agent_step", "respond", "__end__"]:
    """Another step until the agent stops or the step bound is reached; end on an LLM failure."""
    if state.get("stop_reason") == "llm_error":
        return END
    return "respond" if state.get("agent_done") else "agent_step"


def build_reaper() -> StateGraph:
    """REAPER: one-call plan, validation with one repair, parallel execution, response from evidence."""
    g = StateGraph(ReaperState, context_schema=ReaperContext, input_schema=ReaperInput, output_schema=ReaperOutput)
    g.add_node("plan_retrieval", plan_retrieval)
    g.add_node("validate_plan", validate_plan)
    g.add_node("execute_plan", execute_plan)
    g.add_node("respond", respond)
    g.add_edge(START, "plan_retrieval")
    g.add_conditional_edges("plan_retrieval", route_after_planner, ["validate_plan", END])
    g.add_conditional_edges("validate_plan", route_after_validation, ["plan_retrieval", "execute_plan", "respond"])
    g.add_edge("execute_plan", "respond")
    g.add_edge("respond", END)
    return g


def build_agent_planner() -> StateGraph:
    """Agent baseline: one LLM call per retrieval step over the same tools, then the same responder."""
    g = StateGraph(ReaperState, context_schema=ReaperContext, input_schema=ReaperInput, output_schema=ReaperOutput)
    g.add_node("agent_step", agent_step)
    g.add_node("respond", respond)
    g.add_edge(START, "agent_step")
    g.add_conditional_edges("agent_step", route_after_agent, ["agent_step", "respond", END])
    g.add_edge("respond", END)
    return g


reaper = build_reaper().compile(name="reaper")
agent_planner = build_agent_planner().compile(name="agent_planner")

#: Graph name -> (builder, one-line summary), for the CLI and the evaluation runner.
GRAPHS: dict[str, tuple[Any, str]] = {
    "reaper": (build_reaper, "REAPER: a small planner writes the whole retrieval plan in one call; validated, executed in parallel, answered by a large responder"),
    "agent_planner": (build_agent_planner, "Agent baseline for REAPER: one LLM call per retrieval step over the same tools"),
}
