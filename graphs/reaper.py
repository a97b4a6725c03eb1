"""REAPER (Joshi et al., CIKM 2024) and its agent baseline, as LangGraph graphs.

* ``reaper``: plan_retrieval (one planner call writes the whole plan) → validate_plan (⇄ one repair
  round with the errors shown) → execute_plan (dependency order, independent steps in parallel) →
  respond (the responder model answers from the evidence only). A zero-step plan skips execution.
* ``agent_planner``: agent_step ⇄ (one LLM call per retrieval step, ReAct-style) → respond. The same
  tools, executor and responder: the difference is the number of planning calls and their latency.

* ``classifier_planner``: classify_question (a trained classifier routes the question to one retrieval
  class: a tool, no retrieval, or a fixed multi-step workflow) → fill_arguments (an LLM fills that
  class's arguments) → execute_plan → respond — the paper's question-pairing baseline.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph

from ragplan.nodes.reaper.agent_step import agent_step
from ragplan.nodes.reaper.classify_question import classify_question
from ragplan.nodes.reaper.execute_plan import execute_plan
from ragplan.nodes.reaper.fill_arguments import fill_arguments
from ragplan.nodes.reaper.plan_retrieval import plan_retrieval
from ragplan.nodes.reaper.respond import respond
from ragplan.nodes.reaper.validate_plan import validate_plan
from ragplan.state.context import ReaperContext
from ragplan.state.reaper import ReaperInput, ReaperOutput, ReaperState

__all__ = ["build_reaper", "build_agent_planner", "build_classifier_planner", "reaper", "agent_planner",
           "classifier_planner", "GRAPHS"]


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


def route_after_classify(state: ReaperState) -> Literal["fill_arguments", "__end__"]:
    """Fill the routed class's arguments; a classifier that cannot be loaded ends the run."""
    return END if state.get("stop_reason") == "classifier_error" else "fill_arguments"


def route_after_fill(state: ReaperState) -> Literal["execute_plan", "respond", "__end__"]:
    """Execute a valid non-empty plan; respond at once for no retrieval or an invalid plan; end on an LLM failure."""
    if state.get("stop_reason") == "llm_error":
        return END
    if state.get("plan_errors") or state.get("stop_reason") == "invalid_plan" or not state.get("plan_text"):
        return "respond"
    return "execute_plan"


def build_classifier_planner() -> StateGraph:
    """Classifier baseline: route to a retrieval class, fill its arguments with an LLM, execute, respond."""
    g = StateGraph(ReaperState, context_schema=ReaperContext, input_schema=ReaperInput, output_schema=ReaperOutput)
    g.add_node("classify_question", classify_question)
    g.add_node("fill_arguments", fill_arguments)
    g.add_node("execute_plan", execute_plan)
    g.add_node("respond", respond)
    g.add_edge(START, "classify_question")
    g.add_conditional_edges("classify_question", route_after_classify, ["fill_arguments", END])
    g.add_conditional_edges("fill_arguments", route_after_fill, ["execute_plan", "respond", END])
    g.add_edge("execute_plan", "respond")
    g.add_edge("respond", END)
    return g


reaper = build_reaper().compile(name="reaper")
agent_planner = build_agent_planner().compile(name="agent_planner")
classifier_planner = build_classifier_planner().compile(name="classifier_planner")

#: Graph name -> (builder, one-line summary), for the CLI and the evaluation runner.
GRAPHS: dict[str, tuple[Any, str]] = {
    "reaper": (build_reaper, "REAPER: a small planner writes the whole retrieval plan in one call; validated, executed in parallel, answered by a large responder"),
    "agent_planner": (build_agent_planner, "Agent baseline for REAPER: one LLM call per retrieval step over the same tools"),
    "classifier_planner": (build_classifier_planner, "Classifier baseline for REAPER: a trained classifier routes to a retrieval class, an LLM fills its arguments"),
}
