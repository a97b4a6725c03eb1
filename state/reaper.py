"""State of REAPER and its baselines: the typed plan (``plan``, no reducer), every planner call, the evidence."""

from __future__ import annotations

import operator
from typing import Annotated, Any

from pydantic import Field
from typing_extensions import Required, TypedDict

from ragplan.methods.reaper.plan import PlanCall, PlanStep
from ragplan.state.review import ReviewedOutput, ReviewedResult
from ragplan.state.stop_reason import StopReason
from ragplan.state.trace_sections import TraceSection

__all__ = ["ReaperInput", "ReaperOutput", "ReaperState", "ReaperResult", "FINISHED"]

FINISHED: tuple[StopReason, ...] = ("answered", "invalid_plan", "max_steps")
"""Stop reasons of a run that ran to its end (any other stop reason, or an error, is a failed run)."""


class ReaperInput(TypedDict, total=False):
    """What a REAPER-family graph takes."""

    question: Required[str]
    """The customer's question (may also carry a `Context: {...}` line, the paper's input format)."""
    page_context: dict[str, Any]
    """Page context: product_id, product_title, history, date (empty on non-product pages)."""


class ReaperOutput(ReviewedOutput, total=False):
    """What a REAPER-family graph returns."""

    answer: str
    """The responder's answer from the evidence."""
    plan: list[PlanStep]
    """The plan that is executed, as typed steps ([] for no retrieval and for a plan that stayed invalid);
    agent_planner: the tool calls it made, in call order."""
    plan_text: str
    """``plan`` in the canonical paper format, for people ('' for a zero-step plan)."""
    plan_calls: Annotated[list[PlanCall], operator.add]
    """Every plan a planner call wrote, validated, in order: [0] is the first call, [-1] the final plan."""
    plan_raw: str
    """The planner's last output as printed."""
    plan_errors: list[str]
    """Validation errors of the last plan (empty when valid)."""
    plan_attempts: int
    """Planner calls made (1 + repairs)."""
    evidence: list[dict[str, Any]]
    """Every tool call: step, tool, resolved arguments, output or error, timing."""
    planner_latency_s: Annotated[float, operator.add]
    """Wall time of the planner's LLM calls (the paper's planner latency)."""
    stop_reason: StopReason
    """answered, invalid_plan (no valid plan after the repair), max_steps, classifier_error, llm_error,
    plan_rejected (a reviewer rejected the plan: nothing executed, no answer), …"""
    route: dict[str, Any]
    """classifier_planner: the routed class, its probability, its tools and the routing time."""


class ReaperState(ReaperInput, ReaperOutput, total=False):
    """Internal state of the REAPER-family graphs."""

    agent_done: bool
    """agent_planner: the agent chose to stop retrieving."""
    planner_call_s: float
    """The latency of the last planner call (plan_retrieval → validate_plan, which records it in its PlanCall)."""


class ReaperResult(ReviewedResult):
    """A typed view of a finished REAPER-family run."""

    plan: list[PlanStep] = Field(default_factory=list, description="The executed plan's typed steps (agent: its tool calls).")
    plan_text: str = Field(default="", description="The executed plan in the canonical paper format.")
    plan_calls: list[PlanCall] = Field(default_factory=list, description="Every planner call's plan, validated, in order.")
    plan_raw: str = Field(default="", description="The planner's last output as printed.")
    plan_errors: list[str] = Field(default_factory=list, description="Validation errors of the last plan.")
    plan_attempts: int = Field(default=0, description="Planner calls made (1 + repairs).")
    evidence: list[dict[str, Any]] = Field(default_factory=list, description="Every tool call with its output or error.")
    planner_latency_s: float = Field(default=0.0, description="Wall time of the planner's LLM calls.")
    route: dict[str, Any] = Field(default_factory=dict, description="classifier_planner: the routed class.")

    def retrievals(self) -> int:
        """Tool calls executed (one per executed plan or agent step; skipped steps are not calls)."""
        return sum(1 for e in self.evidence if e.get("status") != "skipped")

    def retrieval_errors(self) -> int:
        """Tool calls that failed or timed out."""
        return sum(1 for e in self.evidence if e.get("status") in ("error", "timeout"))

    def summary_lines(self) -> list[str]:
        """Stop reason, plan steps, tool calls, the planner calls (first plan valid or not) and the planner's latency."""
        lines = [f"Plan errors: {'; '.join(self.plan_errors)}"] if self.plan_errors else []
        calls = f"{self.plan_attempts}" + (f" (first plan {'valid' if self.plan_calls[0].valid else 'invalid'})"
                                           if len(self.plan_calls) > 1 else "")
        planning = (f"   Planner calls: {calls}   Planner latency: {self.planner_latency_s:.2f} s" if self.plan_attempts
                    else f"   Planning: step by step ({self.planner_latency_s:.2f} s in the agent's steps)"
                    if self.planner_latency_s else "")
        return lines + [f"Stopped: {self.stop_reason or '-'}   Plan steps: {len(self.plan)}   Tool calls: {self.retrievals()}"
                        + planning]

    def trace_sections(self) -> list[TraceSection]:
        """The route (classifier baseline), every planner call with its validation, the executed plan, the tool calls."""
        out: list[TraceSection] = []
        if self.route:
            out.append(TraceSection(title="Route (classifier)", fields=self.route))
        if self.plan_calls:
            out.append(TraceSection(
                title="Planner calls", note=f"planner latency {self.planner_latency_s:.2f} s",
                items=[TraceSection(title=f"Call {c.attempt} · {'valid' if c.valid else 'invalid'} plan · {len(c.steps)} step(s)",
                                    status="ok" if c.valid else "bad", note=f"{c.latency_s:.2f} s", text=c.raw,
                                    value=[str(e) for e in c.errors])
                       for c in self.plan_calls]))
        elif self.plan_errors:
            out.append(TraceSection(title="Plan errors", status="bad", value=self.plan_errors))
        if self.plan or self.plan_text:
            out.append(TraceSection(title="Executed plan", note="no retrieval" if not self.plan else "",
                                    text=self.plan_text or "\n".join(f"Step {p.index}: {p.call_text()}" for p in self.plan)))
        if self.evidence:
            out.append(TraceSection(title="Tool calls", items=[
                TraceSection(title=f"Step {e.get('index', '?')} · #{e.get('evidence_var', '')} = {e.get('tool', '')} · "
                             f"{e.get('status', '')}", note=str(e.get("purpose") or ""),
                             status="bad" if e.get("status") in ("error", "timeout") else "",
                             fields={"arguments": e.get("args"), "time (ms)": e.get("elapsed_ms"),
                                     **({"error": e["error"]} if e.get("error") else {}), "output": e.get("output")})
                for e in self.evidence]))
        return out
