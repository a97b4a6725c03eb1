"""State, settings and result of FuRePA and its IRCoT-style baseline: the answer plus the evidence, every iteration,
every temperature change and the stop reason (earlier thoughts stay in state; ``mask_reasoning`` hides them)."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from langgraph.channels import DeltaChannel
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from ragplan.state.context import TextRAGContext, env_field, setting
from ragplan.state.result import delta, merge_by_index
from ragplan.state.review import PlanReviewSettings, ReviewedOutput, ReviewedResult
from ragplan.state.stop_reason import StopReason
from ragplan.state.trace_sections import TraceSection

__all__ = ["FuRePAContext", "Candidate", "Iteration", "EvidencePassage", "TemperatureChange", "merge_evidence",
           "FuRePAInput", "FuRePAOutput", "FuRePAState", "FuRePAResult"]


@dataclass(kw_only=True)
class FuRePAContext(PlanReviewSettings, TextRAGContext):
    """Settings of FuRePA and its baselines (``ircot``; masking off and assessor first/random are settings)."""

    max_iterations: int = setting(6, "Most proposals (LLM iterations) before answering from the evidence gathered.")
    n_candidates: int = setting(
        3, "Candidate queries the LLM proposes per iteration (ircot always uses 1).", flag="--candidates")
    assessor_mode: Literal["trained", "first", "random"] = setting(
        "trained", "How the plan assessor picks a candidate: trained = the query scorer at assessor_dir; first = the "
        "LLM's first candidate; random = a seeded random one (the paper's ablations).")
    assessor_dir: str = env_field(
        "RAGPLAN_FUREPA_ASSESSOR", flag="--assessor",
        description="The trained plan assessor (`ragplan furepa train-assessor --out DIR`); needed when assessor_mode = trained.")
    assessor_seed: int = setting(0, "Seed of the random assessor (per question and iteration).")
    mask_reasoning: bool = setting(
        True, "Furthest reasoning: the prompt holds only the question and the evidence. False = earlier thoughts and "
        "executed queries are shown too (the masking-off ablation: --no-masking).", flag="--masking")
    tp0: float = setting(0.2, "Temperature of a proposal before any repetition (paper: 0.2 or 1.0).")
    delta_tp: float = setting(
        0.8, "Temperature raise after the picked query repeats an executed one (paper: 0.8 or 0.5).")
    max_temperature_raises: int = setting(
        2, "Raises in a row before the run stops with the best answer the evidence supports.")
    max_temperature: float = setting(2.0, "Upper bound of the raised temperature.")
    repeat_similarity: float = setting(
        0.95, "A pick whose Sentence-BERT cosine to an executed query reaches this counts as a repeat (exact repeats "
        "always do); 1.0 or more = exact repeats only.")
    passage_chars: int = setting(700, "Characters of each evidence passage shown to the LLM (a Wikipedia page's lead).")


class Candidate(BaseModel):
    """One candidate query of an iteration, with the plan assessor's score."""

    query: str = Field(description="The candidate search query.")
    score: float | None = Field(default=None, description="The assessor's predicted retrieval quality (trained mode only).")


class Iteration(BaseModel):
    """One FuRePA iteration: the proposal, the assessment, the repetition check and the retrieval."""

    index: int = Field(description="1-based iteration number (one proposal each).")
    temperature: float = Field(default=0.0, description="Sampling temperature of this iteration's proposal.")
    masked: bool = Field(default=True, description="Whether earlier thoughts and queries were masked from the prompt.")
    thought: str = Field(default="", description="The chain of thought written from scratch this iteration.")
    answer: str = Field(default="", description="The answer, when the LLM judged the evidence sufficient.")
    candidates: list[Candidate] = Field(default_factory=list, description="The proposed candidate queries with their scores.")
    assessor: str = Field(default="", description="How the pick was made: trained, first, random or single (one candidate).")
    pick: int | None = Field(default=None, description="Index of the chosen candidate (None when the LLM answered).")
    query: str = Field(default="", description="The chosen query.")
    repeated: bool = Field(default=False, description="The chosen query repeats an executed one (exactly or by similarity).")
    repeat_of: str = Field(default="", description="The executed query it repeats.")
    similarity: float | None = Field(default=None, description="Cosine similarity to the closest executed query.")
    repeat_check_error: str = Field(
        default="", description="Why the similarity check could not run (e.g. no embedding model): exact repeats only.")
    executed: bool = Field(default=False, description="Whether the query was run against the retriever.")
    retrieved: list[str] = Field(default_factory=list, description="Ids of the passages retrieval returned (top-k).")
    new_evidence: int = Field(default=0, description="Passages this retrieval added to the evidence (not seen before).")
    retrieval_error: str = Field(default="", description="Why retrieval failed, if it did.")

    def candidate_lines(self) -> list[str]:
        """Each candidate as ``→ 0.123  query`` (the arrow on the pick; ``-`` without a score)."""
        return [f"{'→' if i == self.pick else ' '} {f'{c.score:.3f}' if c.score is not None else '  -  '}  {c.query}"
                for i, c in enumerate(self.candidates)]


class EvidencePassage(BaseModel):
    """A retrieved passage kept as evidence, with where it came from."""

    id: str = Field(description="The passage id in its source (a local index id, or the Wikipedia page).")
    title: str = Field(default="", description="Title of the passage's page or article.")
    text: str = Field(default="", description="The passage text (Wikipedia pages: their lead, up to passage_chars).")
    source: str = Field(default="", description="wiki or local.")
    query: str = Field(default="", description="The query that retrieved it first.")
    iteration: int = Field(default=0, description="The iteration that retrieved it first.")
    rank: int = Field(default=0, description="Its 1-based rank in that query's results.")
    score: float = Field(default=0.0, description="The retriever's score for that query.")

    @property
    def key(self) -> str:
        """What de-duplicates evidence: the source and the id."""
        return f"{self.source}:{self.id}"


class TemperatureChange(BaseModel):
    """A change of the proposal temperature (a raise after a repeat, or back to tp0 after new evidence)."""

    iteration: int = Field(description="The iteration whose pick caused the change.")
    before: float = Field(description="Temperature before.")
    after: float = Field(description="Temperature of the next proposal.")
    reason: str = Field(default="", description="Why (the repeated query, or new evidence).")


merge_iterations = merge_by_index(Iteration)
"""Reducer: iterations by index, a later version replacing an earlier one."""


def merge_evidence(left: list[Any] | None, right: list[Any] | None) -> list[EvidencePassage]:
    """Reducer: evidence appended in order, a passage already held (same source and id) not added again."""
    out: dict[str, EvidencePassage] = {}
    for p in map(EvidencePassage.model_validate, (left or []) + (right or [])):
        out.setdefault(p.key, p)
    return list(out.values())


class FuRePAInput(TypedDict):
    """What the FuRePA graphs take."""

    question: str
    """The (multi-hop) question."""


class FuRePAOutput(ReviewedOutput, total=False):
    """What the FuRePA graphs return."""

    answer: str
    """The final answer (short)."""
    reasoning: Annotated[str, DeltaChannel(lambda old, writes: writes[-1])]
    """The chain of thought that led to the answer (the last iteration's, or the fallback answer's); a delta channel."""
    evidence: Annotated[list[EvidencePassage], delta(merge_evidence)]
    """Every passage gathered, in retrieval order, de-duplicated, with its source and query."""
    iterations: Annotated[list[Iteration], delta(merge_iterations)]
    """Every iteration: thought, candidates with scores, pick, repetition check, retrieval (later nodes: changes)."""
    temperature_changes: Annotated[list[TemperatureChange], operator.add]
    """Every temperature raise (after a repeat) and reset (after new evidence)."""
    retrieval_count: int
    """Queries executed against the retriever."""
    retrieval_errors: int
    """Executed queries whose retrieval failed."""
    stop_reason: StopReason
    """Why the run ended: answered (the LLM answered); max_iterations (the iteration bound); repetition (queries kept
    repeating after every temperature raise); llm_unparseable (a reply did not parse; the answer step still tries);
    llm_error (an endpoint failure); assessor_error (no usable assessor); plan_rejected (a reviewer rejected the pick)."""


class FuRePAState(FuRePAInput, FuRePAOutput, total=False):
    """Internal state of the FuRePA graphs."""

    prompt: str
    """This iteration's prompt, written by mask_reasoning (question + evidence; history only when unmasked)."""
    temperature: float
    """Temperature of the next proposal (tp0, raised after repeats)."""
    raises: int
    """Temperature raises in a row without a fresh query (bounded by max_temperature_raises)."""


class FuRePAResult(ReviewedResult):
    """A typed view of a finished FuRePA (or IRCoT-style) run."""

    reasoning: str = Field(default="", description="The chain of thought that led to the answer.")
    evidence: list[EvidencePassage] = Field(default_factory=list, description="Every passage gathered, with source and query.")
    iterations: list[Iteration] = Field(default_factory=list, description="Every iteration: thought, candidates, scores, pick.")
    temperature_changes: list[TemperatureChange] = Field(default_factory=list, description="Temperature raises and resets.")

    def retrievals(self) -> int:
        """Queries executed against the retriever (a failed retrieval included)."""
        return sum(1 for it in self.iterations if it.executed)

    def retrieval_errors(self) -> int:
        """Executed queries whose retrieval failed."""
        return sum(1 for it in self.iterations if it.executed and it.retrieval_error)

    def executed_queries(self) -> list[str]:
        """The queries actually run, in order (what retrieval-only evaluation scores)."""
        return [it.query for it in self.iterations if it.executed]

    def repeated_query_rate(self) -> float:
        """Share of picked queries that repeated an executed one."""
        n = sum(1 for it in self.iterations if it.pick is not None)
        return round(sum(1 for it in self.iterations if it.repeated) / n, 4) if n else 0.0

    def temperature_raises(self) -> int:
        """How many times the proposal temperature was raised."""
        return sum(1 for c in self.temperature_changes if c.after > c.before)

    def record(self) -> dict[str, Any]:
        """The family's fields plus the run's counts (iterations, repeated-query rate, temperature raises)."""
        return {**super().record(), "iteration_count": len(self.iterations),
                "repeated_query_rate": self.repeated_query_rate(), "temperature_raises": self.temperature_raises()}

    @classmethod
    def run_metrics(cls, record: dict[str, Any]) -> dict[str, float]:
        """Per question: ``iterations`` (proposals), ``repeated_query_rate`` and ``temperature_raises``, from the record."""
        keys = {"iterations": "iteration_count", "repeated_query_rate": "repeated_query_rate",
                "temperature_raises": "temperature_raises"}
        return {name: float(record[k]) for name, k in keys.items()
                if isinstance(record.get(k), (int, float)) and not isinstance(record.get(k), bool)}

    def summary_lines(self) -> list[str]:
        """Stop reason, iterations, executed queries, repeats and temperature raises."""
        return [f"Stopped: {self.stop_reason or '-'}   Iterations: {len(self.iterations)}   Queries run: {self.retrievals()}   "
                f"Evidence: {len(self.evidence)} passages   Repeated picks: {self.repeated_query_rate():.0%}   "
                f"Temperature raises: {self.temperature_raises()}"]

    def trace_sections(self) -> list[TraceSection]:
        """Each iteration (thought, scored candidates, pick, repeat check, retrieval), temperatures, evidence, reasoning."""
        out: list[TraceSection] = []
        if self.iterations:
            out.append(TraceSection(
                title="Iterations", note=f"repeated picks {self.repeated_query_rate():.0%} · temperature raises "
                                         f"{self.temperature_raises()}",
                items=[TraceSection(
                    title=f"Iteration {it.index} · T={it.temperature:g}" + (" · masked" if it.masked else " · unmasked")
                          + (" · answered" if it.answer else f" · picked #{it.pick + 1} ({it.assessor})" if it.pick is not None else ""),
                    status="bad" if it.retrieval_error or it.repeated else "",
                    fields={"thought": it.thought,
                            "candidates": [{"pick": "→" if i == it.pick else "", "query": c.query, "assessor score": c.score}
                                           for i, c in enumerate(it.candidates)],
                            **({"answer": it.answer} if it.answer else {}),
                            **({"repeats": f"{it.repeat_of} (similarity {it.similarity:.2f})" if it.similarity is not None
                                else it.repeat_of} if it.repeated else {}),
                            **({"repeat check": it.repeat_check_error} if it.repeat_check_error else {}),
                            **({"retrieved": it.retrieved, "new evidence": it.new_evidence} if it.executed else {}),
                            **({"retrieval error": it.retrieval_error} if it.retrieval_error else {})})
                    for it in self.iterations]))
        if self.temperature_changes:
            out.append(TraceSection(title="Temperature changes", value=[c.model_dump() for c in self.temperature_changes]))
        if self.evidence:
            out.append(TraceSection(title="Evidence", note=f"{len(self.evidence)} passage(s) in retrieval order", value=[
                {"iteration": p.iteration, "rank": p.rank, "title": p.title, "query": p.query, "text": p.text,
                 "source": p.source, "score": round(p.score, 4)} for p in self.evidence]))
        if self.reasoning:
            out.append(TraceSection(title="Reasoning", text=self.reasoning))
        return out
