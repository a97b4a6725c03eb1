"""State of Think-then-Act and its baselines: the assessment, every (sub-)query with its gate, evidence and answer,
the retrieval ratio and usage."""

from __future__ import annotations

import operator
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field
from typing_extensions import NotRequired, TypedDict

from ragplan.state.failure import FailureKind
from ragplan.state.result import GraphOutput, GraphResult, delta, merge_by_index
from ragplan.state.stop_reason import StopReason
from ragplan.state.trace_sections import TraceSection
from ragplan.state.usage import Usage, add_usage

__all__ = ["SubQuery", "BranchFailure", "failure_of", "TextQAInput", "TextQAOutput", "TextQAState",
           "MultiStepState", "SubQueryOutput", "TextQAResult", "references"]

_REF = re.compile(r"#(\d+)")


def references(text: str) -> list[int]:
    """The earlier sub-queries a sub-query refers to (``When was #1 invented?`` -> [1])."""
    return sorted({int(m) for m in _REF.findall(text or "")})


class SubQuery(BaseModel):
    """One (sub-)query: its text, the gate's verdict, the evidence and the answer."""

    index: int = Field(description="1-based position; sub-queries refer to earlier ones as #index.")
    text: str = Field(description="The query as written (may contain #k references).")
    resolved: str = Field(default="", description="The text with #k replaced by the answers of earlier sub-queries.")
    depends_on: list[int] = Field(default_factory=list, description="Indices of the sub-queries it refers to.")
    search_query: str = Field(default="", description="What retrieval searches for, when it differs from the resolved text (FLARE).")
    beta: float | None = Field(default=None, description="The LLM's stated confidence β in [0,1] (confidence mode).")
    decision: str = Field(default="", description="RETRIEVAL / NO RETRIEVAL, and why (the gate's verdict).")
    retrieve: bool = Field(default=False, description="Whether retrieval was done for this query.")
    evidence: list[dict[str, Any]] = Field(default_factory=list, description="Sentences used as context (sentence, title, score).")
    retrieval_error: str = Field(default="", description="Why retrieval failed, if it did (the query is answered without).")
    answer: str = Field(default="", description="The answer to this (sub-)query.")
    done: bool = Field(default=False, description="Answered.")


class BranchFailure(BaseModel):
    """A failed LLM decision inside a (parallel) sub-query branch, handed to the parent through a reducer."""

    node: str = Field(description="The node whose LLM call failed.")
    kind: Literal["llm_error", "llm_unparseable"] = Field(
        description="llm_error: the endpoint or configuration failed (the run ends); llm_unparseable: the reply did not parse.")
    message: str = Field(description="What went wrong (the client's error, with its status code).")
    query: int = Field(default=0, description="The sub-query being solved (its index).")
    cause: FailureKind = Field(default="error", description="What failed, from the exception's type (state.failure).")


def failure_of(update: dict[str, Any], query: int = 0) -> BranchFailure:
    """The :class:`BranchFailure` of a node's failed-decision update (``failure_update`` from :mod:`ragplan.llm`)."""
    typed = update["failure"]
    return BranchFailure(node=typed["node"], kind=update.get("stop_reason") or "llm_error", message=update["error"],
                         query=query, cause=typed["kind"])


merge_queries = merge_by_index(SubQuery)
"""Reducer: sub-queries by index, a later version replacing an earlier one."""


class TextQAInput(TypedDict):
    """What a text-QA graph takes."""

    question: str
    """The question (or claim) to answer; also what retrieval searches for."""
    instructions: NotRequired[str]
    """Extra answer instructions (e.g. FEVER's "answer SUPPORTS, REFUTES or NOT ENOUGH INFO"): the answer
    prompts follow them, retrieval never searches for them."""


class SubQueryOutput(TypedDict, total=False):
    """What a sub-query branch hands back to the parent: only keys that merge across parallel branches."""

    queries: list[SubQuery]
    """Every (sub-)query with its gate, evidence and answer (a branch's: the sub-query it solved); by index."""
    usage: Annotated[Usage, add_usage]
    """LLM calls, tokens and LLM time (of the whole run, or of one branch)."""
    failures: Annotated[list[BranchFailure], operator.add]
    """Failed LLM decisions of the sub-query branches (parallel branches append; a plain string could hold one)."""


class TextQAOutput(GraphOutput, SubQueryOutput, total=False):
    """What Think-then-Act and its baselines return."""

    answer: str
    """The final answer (short: an entity, yes/no, a label)."""
    reasoning: str
    """Chain of thought or the composition of sub-answers, when the method produces one."""
    assessment: Literal["CLEAR AND COMPLETE", "INCOMPLETE", "AMBIGUOUS", ""]
    """Think-then-Act's query assessment ('' for baselines that do not assess)."""
    assessment_reason: str
    """Why the query was assessed so."""
    retrieval_count: int
    """How many (sub-)queries ran a retrieval (a failed one included; see each query's ``retrieval_error``)."""
    retrieval_ratio: float
    """Share of this question's (sub-)queries that retrieved successfully (a failed retrieval is not one)."""
    confidence_source: str
    """FLARE: ``logprobs`` (token probabilities from the endpoint) or ``stated`` (the model's stated confidence)."""
    stop_reason: StopReason
    """answered, no_answer, llm_error (an endpoint failure, also inside a branch), llm_unparseable, …"""


class TextQAState(TextQAInput, TextQAOutput, total=False):
    """Internal state of the text-QA graphs (as is: of the one-step ones, standard and cot)."""

    queries: Annotated[list[SubQuery], merge_queries]
    """The (sub-)queries, by index."""

    waves: Annotated[int, operator.add]
    """Rounds of sub-query solving so far (each round solves every ready sub-query in parallel)."""


class MultiStepState(TextQAState, total=False):
    """Internal state of the multi-step text-QA graphs (think_then_act, retrieve_then_read, flare) and of a sub-query's
    branch (gate → retrieve → answer, sent in parallel per sub-query with ``question``, ``instructions``, ``query``
    and ``prior``; the instructions only when its answer is the final one)."""

    queries: Annotated[list[SubQuery], delta(merge_queries)]
    """A delta channel: checkpoints keep a marker, not a long sub-answer (one-step graphs would get an extra one)."""
    query: SubQuery
    """The (sub-)query being solved."""
    prior: list[SubQuery]
    """Sub-queries answered before (for #k references and as context; empty in the one-query graphs)."""


class TextQAResult(GraphResult):
    """A typed view of a finished text-QA run (Think-then-Act and its baselines)."""

    reasoning: str = Field(default="", description="Chain of thought or the composition of sub-answers.")
    assessment: str = Field(default="", description="Think-then-Act's query assessment ('' for baselines).")
    assessment_reason: str = Field(default="", description="Why the query was assessed so.")
    queries: list[SubQuery] = Field(default_factory=list, description="Every (sub-)query with its gate, evidence and answer.")
    retrieval_count: int = Field(default=0, description="How many (sub-)queries ran a retrieval (failed ones included).")
    retrieval_ratio: float = Field(default=0.0, description="Share of (sub-)queries that retrieved successfully.")
    confidence_source: str = Field(default="", description="FLARE: logprobs or stated.")
    failures: list[BranchFailure] = Field(default_factory=list, description="Failed LLM decisions inside sub-query branches.")

    def retrievals(self) -> int:
        """(Sub-)queries for which retrieval ran (a failed retrieval included)."""
        return sum(1 for q in self.queries if q.retrieve)

    def executed_queries(self) -> list[str]:
        """What each retrieving (sub-)query searched for (its search query, else its resolved text)."""
        return [q.search_query or q.resolved or q.text for q in self.queries if q.retrieve]

    def retrieval_errors(self) -> int:
        """(Sub-)queries whose retrieval failed."""
        return sum(1 for q in self.queries if q.retrieve and q.retrieval_error)

    def summary_lines(self) -> list[str]:
        """Reasoning, stop reason, queries and the retrieval ratio."""
        lines = [f"Reasoning: {self.reasoning}"] if self.reasoning else []
        failed = self.retrieval_errors()
        return lines + [f"Stopped: {self.stop_reason or '-'}   Queries: {len(self.queries)}   "
                        f"Retrieval ratio: {self.retrieval_ratio:.2f} ({self.retrievals() - failed} retrieved"
                        + (f", {failed} failed" if failed else "") + ")"
                        + (f"   Confidence source: {self.confidence_source}" if self.confidence_source else "")]

    def trace_sections(self) -> list[TraceSection]:
        """The query assessment, each (sub-)query with its gate, evidence and answer, the reasoning and failures."""
        out: list[TraceSection] = []
        if self.assessment:
            out.append(TraceSection(title=f"Assessment: {self.assessment}", note=self.assessment_reason))
        if self.queries:
            out.append(TraceSection(
                title="Queries", note=f"retrieval ratio {self.retrieval_ratio:.2f}"
                + (f" · confidence source {self.confidence_source}" if self.confidence_source else ""),
                items=[TraceSection(
                    title=f"#{q.index} · {'retrieved' if q.retrieve else 'no retrieval'}", note=q.decision,
                    status="bad" if q.retrieval_error else "",
                    fields={"query": q.text, **{k: v for k, v in [
                        ("resolved", "" if q.resolved == q.text else q.resolved), ("searched for", q.search_query),
                        ("confidence β", q.beta), ("retrieval error", q.retrieval_error)] if v not in ("", None)},
                            "evidence": q.evidence, "answer": q.answer})
                    for q in self.queries]))
        if self.reasoning:
            out.append(TraceSection(title="Reasoning", text=self.reasoning))
        if self.failures:
            out.append(TraceSection(title="Failures", status="bad", value=[f.model_dump() for f in self.failures]))
        return out
