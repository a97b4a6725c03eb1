"""State of PlanRAG and its baselines: the question in; the answer out with what a user needs to trust it (the
plan and its revisions, every query with its observation, every re-plan verdict, usage); run-time fields internal."""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field
from langgraph.managed import RemainingSteps
from typing_extensions import TypedDict

from ragplan.state.result import delta
from ragplan.state.review import ReviewedOutput, ReviewedResult
from ragplan.state.stop_reason import StopReason
from ragplan.state.trace_sections import TraceSection

__all__ = [
    "RetrievalStep", "PlanVersion", "ReplanVerdict", "PlanRAGInput", "PlanRAGOutput", "PlanRAGState", "PlanRAGResult",
]


class RetrievalStep(BaseModel):
    """One retrieval action: the thought, the tool used, the query and what came back."""

    index: int = Field(description="1-based position among all retrieval steps of the run.")
    plan_step: int | None = Field(default=None, description="1-based number of the plan step served (None without a plan).")
    plan_step_text: str = Field(default="", description="Text of the plan step served, if any.")
    thought: str = Field(default="", description="The LLM's reasoning for this action.")
    action: Literal["graph_db", "self_thinking", "finish"] = Field(description="Which tool the LLM chose.")
    query: str = Field(default="", description="The Cypher query (graph_db) or the reasoning input (self_thinking).")
    observation: str = Field(default="", description="What the tool returned (rows, or the error message).")
    ok: bool = Field(default=True, description="False when the query was refused, failed or timed out.")
    error_kind: str | None = Field(default=None, description="refused | timeout | error | llm, when not ok.")
    row_count: int = Field(default=0, description="Rows shown to the LLM.")
    total_rows: int = Field(default=0, description="Rows the query produced before the row cap.")
    query_ms: float = Field(default=0.0, description="Query wall time in milliseconds.")


class PlanVersion(BaseModel):
    """One version of the plan: the initial one, or a revision made by the replan step."""

    version: int = Field(description="0 for the initial plan, then 1, 2, … for each revision.")
    steps: list[str] = Field(description="The whole plan of this version, in order.")
    reason: str = Field(default="", description="Why the plan was made or revised.")
    after_step: int = Field(default=0, description="Retrieval steps done when this version was made.")


class ReplanVerdict(BaseModel):
    """The replan step's decision after an observation."""

    after_step: int = Field(description="The retrieval step (1-based) just observed.")
    replan: bool = Field(description="True = the remaining plan was revised; False = the plan is kept.")
    reason: str = Field(default="", description="The LLM's reason for its verdict.")
    new_steps: list[str] = Field(default_factory=list, description="The revised remaining steps, when replan is True.")
    applied: bool = Field(default=True, description="False when a revision was refused because max_replans was reached.")


class PlanRAGInput(TypedDict):
    """What a PlanRAG-family graph takes."""

    question: str
    """The decision question (for DQA: business rules + question + goal)."""


class PlanRAGOutput(ReviewedOutput, total=False):
    """What a PlanRAG-family graph returns."""

    answer: str
    """The final decision / answer ('' if the run failed before answering)."""
    rationale: str
    """The LLM's short justification of the answer from the observations."""
    plan: list[str]
    """The plan in force at the end (empty for methods without a plan)."""
    plan_history: Annotated[list[PlanVersion], delta(operator.add)]
    """Every plan version, initial first (appended by plan and replan)."""
    steps: Annotated[list[RetrievalStep], delta(operator.add)]
    """Every retrieval step in order: thought, query, observation (appended by retrieve)."""
    replans: Annotated[list[ReplanVerdict], delta(operator.add)]
    """Every re-plan verdict in order (appended by replan)."""
    stop_reason: StopReason
    """Why retrieval ended: plan_done, answered, answered_early, single_retrieval, max_steps, max_repairs,
    recursion_limit, llm_unparseable (reply not parseable after repairs), llm_error (endpoint or model
    configuration failed), store_error, plan_rejected (a reviewer rejected the plan: no answer)."""
    decision_check: dict[str, Any]
    """On DQA data: the simulator's verdict on the chosen option (chosen, best, correct, effects, text)."""


class PlanRAGState(PlanRAGInput, PlanRAGOutput, total=False):
    """Full internal state of the PlanRAG-family graphs."""

    schema_text: str
    """The graph schema as shown to the LLM, read once from the store."""
    current_step: int
    """0-based index into ``plan`` of the step being executed."""
    repairs: int
    """Failed attempts at the current step so far (reset when the step advances)."""
    next: Literal["repair", "continue", "answer", "stop"]
    """Where the retrieve node sends the run: the same step again, on (replan / next step), to answer, or to the end."""
    remaining_steps: RemainingSteps
    """Graph steps left before LangGraph's recursion limit (managed), so a run can stop gracefully."""


class PlanRAGResult(ReviewedResult):
    """A typed view of a finished PlanRAG-family run: ``PlanRAGResult.from_state(graph.invoke(...))``."""

    rationale: str = Field(default="", description="The LLM's short justification of the answer.")
    plan: list[str] = Field(default_factory=list, description="The plan in force at the end.")
    plan_history: list[PlanVersion] = Field(default_factory=list, description="Every plan version, initial first.")
    steps: list[RetrievalStep] = Field(default_factory=list, description="Every retrieval step in order.")
    replans: list[ReplanVerdict] = Field(default_factory=list, description="Every re-plan verdict in order.")
    decision_check: dict[str, Any] = Field(default_factory=dict, description="On DQA data: the simulator's verdict.")

    def retrievals(self) -> int:
        """Graph-DB queries the LLM sent (refused and failed ones included; self-thinking steps are not retrievals)."""
        return sum(1 for s in self.steps if s.action == "graph_db")

    def retrieval_errors(self) -> int:
        """Graph-DB queries that were refused, failed or timed out."""
        return sum(1 for s in self.steps if s.action == "graph_db" and not s.ok)

    def summary_lines(self) -> list[str]:
        """Rationale, stop reason, retrieval steps and applied re-plans."""
        lines = [f"Rationale: {self.rationale}"] if self.rationale else []
        return lines + [f"Stopped: {self.stop_reason or '-'}   Retrieval steps: {len(self.steps)}   "
                        f"Re-plans: {sum(1 for v in self.replans if v.replan and v.applied)}"]

    def trace_sections(self) -> list[TraceSection]:
        """Plan versions, each step (thought, query, observation), the re-plan verdicts, rationale, simulator verdict."""
        out: list[TraceSection] = []
        versions = self.plan_history or ([PlanVersion(version=0, steps=self.plan)] if self.plan else [])
        if versions:
            out.append(TraceSection(title="Plan", note=f"{len(versions)} version(s); the last is the plan in force", items=[
                TraceSection(title=f"v{v.version}" + (f" · after step {v.after_step}" if v.version else " · initial"),
                             note=v.reason, value=v.steps) for v in versions]))
        if self.steps:
            out.append(TraceSection(title="Retrieval steps", items=[
                TraceSection(title=f"Step {s.index} · {s.action}" + (f" · plan step {s.plan_step}" if s.plan_step else ""),
                             note=s.plan_step_text, status="" if s.ok else "bad",
                             fields={"thought": s.thought,
                                     **({"rows": f"{s.row_count} shown of {s.total_rows}", "query time (ms)": round(s.query_ms, 1)}
                                        if s.action == "graph_db" else {}),
                                     **({"failure": s.error_kind} if not s.ok else {}),
                                     "query": s.query, "observation": s.observation})
                for s in self.steps]))
        if self.replans:
            out.append(TraceSection(title="Re-plan verdicts", value=[
                {"after step": v.after_step, "re-plan": v.replan, "applied": v.applied, "reason": v.reason,
                 "new steps": v.new_steps} for v in self.replans]))
        if self.rationale:
            out.append(TraceSection(title="Rationale", text=self.rationale))
        if self.decision_check:
            out.append(TraceSection(title="Decision check (simulator)", status="ok" if self.decision_check.get("correct") else "bad",
                                    fields=self.decision_check))
        return out
