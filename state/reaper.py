"""State of REAPER and its baselines: the plan (as printed and as parsed), its validation, the evidence.

The input is the customer question and its page context; the output is the answer plus what a user
needs to trust it: the plan the planner wrote (canonical text and typed steps), any validation errors
and repairs, every tool call with its arguments, output and timing, the planner's latency and usage.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

from pydantic import Field
from typing_extensions import TypedDict

from ragplan.state.result import GraphResult
from ragplan.state.usage import Usage, add_usage

__all__ = ["ReaperInput", "ReaperOutput", "ReaperState", "ReaperResult"]


class ReaperInput(TypedDict, total=False):
    """What a REAPER-family graph takes."""

    question: str
    """The customer's question (may also carry a `Context: {...}` line, the paper's input format)."""
    page_context: dict[str, Any]
    """Page context: product_id, product_title, history, date (empty on non-product pages)."""


class ReaperOutput(TypedDict, total=False):
    """What a REAPER-family graph returns."""

    question: str
    """The question asked."""
    answer: str
    """The responder's answer from the evidence."""
    plan_text: str
    """The executed plan in the canonical paper format ('' for a zero-step plan)."""
    plan: list[dict[str, Any]]
    """The executed plan's steps: index, evidence variable, tool, arguments."""
    plan_raw: str
    """The planner's last output as printed."""
    plan_errors: list[str]
    """Validation errors of the last plan ('' list when valid)."""
    plan_attempts: int
    """Planner calls made (1 + repairs)."""
    evidence: list[dict[str, Any]]
    """Every tool call: step, tool, resolved arguments, output or error, timing."""
    planner_latency_s: Annotated[float, operator.add]
    """Wall time of the planner's LLM calls (the paper's planner latency)."""
    usage: Annotated[Usage, add_usage]
    """LLM calls, tokens and LLM time of the whole run."""
    stop_reason: str
    """answered, invalid_plan (no valid plan after the repair), max_steps, classifier_error, llm_error, …"""
    error: str
    """A recorded failure, empty when none."""
    route: dict[str, Any]
    """classifier_planner: the routed class, its probability, its tools and the routing time."""


class ReaperState(ReaperInput, ReaperOutput, total=False):
    """Internal state of the REAPER-family graphs."""

    agent_done: bool
    """agent_planner: the agent chose to stop retrieving."""


def _status(e: Any) -> str:
    return str(e.get("status", "") if isinstance(e, dict) else getattr(e, "status", ""))


class ReaperResult(GraphResult):
    """A typed view of a finished REAPER-family run."""

    plan_text: str = Field(default="", description="The executed plan in the canonical paper format.")
    plan: list[dict[str, Any]] = Field(default_factory=list, description="The executed plan's steps.")
    plan_raw: str = Field(default="", description="The planner's last output as printed.")
    plan_errors: list[str] = Field(default_factory=list, description="Validation errors of the last plan.")
    plan_attempts: int = Field(default=0, description="Planner calls made (1 + repairs).")
    evidence: list[dict[str, Any]] = Field(default_factory=list, description="Every tool call with its output or error.")
    planner_latency_s: float = Field(default=0.0, description="Wall time of the planner's LLM calls.")
    route: dict[str, Any] = Field(default_factory=dict, description="classifier_planner: the routed class.")

    def retrievals(self) -> int:
        """Tool calls executed (one per executed plan or agent step; skipped steps are not calls)."""
        return sum(1 for e in self.evidence if _status(e) != "skipped")

    def retrieval_errors(self) -> int:
        """Tool calls that failed or timed out."""
        return sum(1 for e in self.evidence if _status(e) in ("error", "timeout"))

    def summary_lines(self) -> list[str]:
        """Stop reason, plan steps, tool calls and the planner's latency."""
        lines = [f"Plan errors: {'; '.join(self.plan_errors)}"] if self.plan_errors else []
        return lines + [f"Stopped: {self.stop_reason or '-'}   Plan steps: {len(self.plan)}   Tool calls: {self.retrievals()}"
                        f"   Planner calls: {self.plan_attempts}   Planner latency: {self.planner_latency_s:.2f} s"]
