"""InstructRAG's settings, state and result: the task (seen or unseen in training), the K candidate paths, the
path put into the prompt and every Thought / Action / Observation step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, Field
from typing_extensions import NotRequired, Required, TypedDict

from ragplan.state.context import TextRAGContext, env_field, setting
from ragplan.state.result import delta, merge_by_index
from ragplan.state.review import PlanReviewSettings, ReviewedOutput, ReviewedResult
from ragplan.state.stop_reason import StopReason
from ragplan.state.trace_sections import TraceSection

__all__ = ["InstructRAGContext", "PlannedPath", "TAOStep", "InstructRAGInput", "InstructRAGOutput", "InstructRAGState",
           "InstructRAGResult"]


@dataclass(kw_only=True)
class InstructRAGContext(PlanReviewSettings, TextRAGContext):
    """Settings of InstructRAG and its baselines (instructrag_rap, instructrag_threshold, instructrag_no_ml, react)."""

    instruction_graph_dir: str = env_field(
        "RAGPLAN_INSTRUCTION_GRAPH", flag="--instruction-graph",
        description="The instruction graph folder (`ragplan instructrag build-graph`, or an adapted graph of "
        "`ragplan instructrag adapt`).")
    agents_dir: str = env_field(
        "RAGPLAN_INSTRUCTRAG_AGENTS", flag="--agents",
        description="The trained RL-Agent and ML-Agent folder (`ragplan instructrag train`, or `adapt`'s output "
        "with per-task agents).")
    candidate_paths: int = setting(3, "K: candidate paths the RL-Agent proposes (paper: 3).")
    max_path_len: int = setting(8, "Most instructions in one candidate path.")
    traversal_threshold: float = setting(
        -1.0, "instructrag_threshold: include a node when its mean state feature reaches this; negative = the "
        "graph's own threshold, calibrated on its similarities at build time.")
    task: str = setting("", "The question's task (a HotpotQA answer type); empty = derived from the question.")
    use_adapted: bool = setting(True, "Use the task's few-shot adapted agents when the agents folder has them.")
    path_selection: Literal["agents", "untrained", "majority", "constant"] = setting(
        "agents", "How the path is found: agents = the trained agents; untrained = the same agents freshly initialised "
        "(the agents folder's training seed); majority = the nearest stored question's path among those with the "
        "commonest action sequence; constant = Search → Search → Finish. The last three are baselines.")
    max_steps: int = setting(7, "Most Thought/Action/Observation steps before answering (ReAct: 7).")
    demonstrations: int = setting(2, "Worked examples in the planning prompt (0-2).")


class PlannedPath(BaseModel):
    """One instruction path offered to the planner."""

    instructions: list[str] = Field(description="The instructions, e.g. ['Search[Ed Wood]', 'Lookup[nationality]'].")
    source: str = Field(default="", description="rl_agent, threshold, stored (RAP-style), majority, constant or given.")
    nodes: list[int] = Field(default_factory=list, description="The instruction-graph nodes it walks (empty for stored paths).")
    derived_from: list[str] = Field(default_factory=list, description="Past questions whose paths it combines (edge tasks).")
    score: float | None = Field(default=None, description="The ML-Agent's cosine (or the stored question's similarity).")

    @property
    def text(self) -> str:
        """``Search[A] → Lookup[b] → …``."""
        return " → ".join(self.instructions)

    def line(self, i: int) -> str:
        """``  Candidate i (score): path``, as traces and reviews list the candidates."""
        return f"  Candidate {i}{f' ({self.score:.3f})' if self.score is not None else ''}: {self.text}"


class TAOStep(BaseModel):
    """One Thought / Action / Observation step."""

    index: int = Field(description="1-based step number.")
    thought: str = Field(default="", description="The LLM's thought.")
    action: str = Field(default="", description="Search, Lookup or Finish.")
    argument: str = Field(default="", description="The entity, keyword or answer.")
    observation: str = Field(default="", description="What the docstore returned ('' for Finish).")
    title: str = Field(default="", description="The page the action read.")
    error: str = Field(default="", description="A retrieval failure, '' otherwise.")


class InstructRAGInput(TypedDict):
    """What the InstructRAG graphs take."""

    question: Required[str]
    """The question."""
    task: NotRequired[str]
    """Its task label (overrides the context's and the derived one)."""
    given_path: NotRequired[list[str]]
    """A path to plan with instead of selecting one (training rewards, experiments)."""


class InstructRAGOutput(ReviewedOutput, total=False):
    """What the InstructRAG graphs return."""

    answer: str
    """The final answer (Finish's argument)."""
    task: str
    """The task the question was planned as."""
    task_split: str
    """seen / unseen / other: whether that task was a training task."""
    candidate_paths: list[PlannedPath]
    """The K candidate paths (RL-Agent, threshold walk or stored paths)."""
    selected_path: PlannedPath | None
    """The path put into the planning prompt (None for react)."""
    selection: str
    """How it was chosen: ml_agent, first (no ML-Agent), stored (RAP-style), majority, constant, given, none."""
    steps: Annotated[list[TAOStep], delta(merge_by_index(TAOStep))]
    """Every Thought / Action / Observation step (a delta channel; ``observe`` writes only the observation)."""
    stop_reason: StopReason
    """answered (Finish), max_steps (bound reached, answered from the steps), setup_error, llm_error, llm_unparseable,
    plan_rejected (a reviewer rejected the path: no answer)."""


class InstructRAGState(InstructRAGInput, InstructRAGOutput, total=False):
    """Internal state: the docstore's current page and lookup walk (so a checkpointed run resumes)."""

    page_title: str
    """The current page."""
    page_sentences: list[str]
    """Its sentences."""
    lookup_keyword: str
    """The Lookup walk's keyword."""
    lookup_next: int
    """Sentences of that walk already shown."""


class InstructRAGResult(ReviewedResult):
    """A typed view of a finished InstructRAG run."""

    task: str = Field(default="", description="The task the question was planned as.")
    task_split: str = Field(default="", description="seen / unseen / other.")
    candidate_paths: list[PlannedPath] = Field(default_factory=list, description="The K candidate paths.")
    selected_path: PlannedPath | None = Field(default=None, description="The path in the planning prompt.")
    selection: str = Field(default="", description="ml_agent, first, stored, majority, constant, given or none.")
    steps: list[TAOStep] = Field(default_factory=list, description="Every Thought / Action / Observation step.")

    def retrievals(self) -> int:
        """Search and Lookup actions executed."""
        return sum(1 for s in self.steps if s.action in ("Search", "Lookup") and s.observation)

    def retrieval_errors(self) -> int:
        """Actions whose retrieval failed."""
        return sum(1 for s in self.steps if s.error)

    def executed_queries(self) -> list[str]:
        """The entities searched for."""
        return [s.argument for s in self.steps if s.action == "Search" and s.observation]

    def summary_lines(self) -> list[str]:
        """The selected path, then stop reason, steps and the task."""
        path = self.selected_path.text if self.selected_path else "(none)"
        return [f"Path ({self.selection or '-'}): {path}",
                f"Stopped: {self.stop_reason or '-'}   Steps: {len(self.steps)}   Retrievals: {self.retrievals()}   "
                f"Task: {self.task or '-'} ({self.task_split or '-'})"]

    def trace_sections(self) -> list[TraceSection]:
        """The task, the candidate paths, the path put into the prompt and every Thought / Action / Observation step."""
        out = [TraceSection(title=f"Task: {self.task or '-'}", note=self.task_split)] if self.task else []
        if self.candidate_paths:
            out.append(TraceSection(title="Candidate paths", value=[
                {"path": p.text, "source": p.source, "score": p.score, "combines": p.derived_from} for p in self.candidate_paths]))
        if self.selected_path is not None or self.selection:
            out.append(TraceSection(title=f"Selected path ({self.selection or '-'})",
                                    text=self.selected_path.text if self.selected_path else "(none)"))
        if self.steps:
            out.append(TraceSection(title="Thought / Action / Observation", items=[
                TraceSection(title=f"Step {s.index} · {s.action}[{s.argument}]", status="bad" if s.error else "",
                             fields={"thought": s.thought, **({"page": s.title} if s.title else {}),
                                     **({"error": s.error} if s.error else {}), "observation": s.observation})
                for s in self.steps]))
        return out
