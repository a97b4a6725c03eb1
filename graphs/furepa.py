"""FuRePA (arXiv 2309.12767): mask_reasoning → propose → assess_plan → review_plan → repetition_control → retrieve → …
until the LLM answers or a bound hits (then ``answer``); ``ircot`` keeps earlier reasoning, one query per step.
Ablations are settings of ``furepa``: ``mask_reasoning = False`` and ``assessor_mode = first | random``."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import START, StateGraph

from ragplan.family import END, Builder, Emit, GraphSpec, TextRetrievalFamily
from ragplan.nodes.common.review_plan import make_review_plan
from ragplan.nodes.furepa.answer import answer_from_evidence
from ragplan.nodes.furepa.assess_plan import assess_plan, assessor_problem
from ragplan.nodes.furepa.mask_reasoning import keep_reasoning, mask_reasoning
from ragplan.nodes.furepa.propose import make_propose
from ragplan.nodes.furepa.repetition_control import repetition_control
from ragplan.nodes.furepa.retrieve import retrieve_passages
from ragplan.nodes.furepa.review import FuRePAReviewer
from ragplan.state.furepa import (
    EvidencePassage, FuRePAContext, FuRePAInput, FuRePAOutput, FuRePAResult, FuRePAState, Iteration, TemperatureChange,
)
from ragplan.state.review import PLAN_REJECTED

__all__ = ["build_furepa", "build_ircot", "FAMILY", "FuRePAFamily", "furepa", "ircot", "route_after_propose",
           "route_after_assessment", "route_after_pick_review", "route_after_repetition", "route_after_retrieval",
           "route_ircot_after_propose", "route_ircot_after_retrieval"]

_ENDED = ("answered", "llm_error", "assessor_error")


def _after_propose(state: FuRePAState) -> Literal["answer", "__end__"] | None:
    """END when the LLM answered or a call failed; answer after an unparseable reply; None to go on."""
    reason = state.get("stop_reason")
    return END if reason in _ENDED else "answer" if reason else None


def route_after_propose(state: FuRePAState) -> Literal["assess_plan", "answer", "__end__"]:
    """Assess the candidates; END when the LLM answered or the endpoint failed; answer after an unparseable reply."""
    return _after_propose(state) or "assess_plan"


def route_after_assessment(state: FuRePAState) -> Literal["review_plan", "__end__"]:
    """The pick goes to review (which passes through when review is off); END when no assessor could pick."""
    return END if state.get("stop_reason") in _ENDED else "review_plan"


def route_after_pick_review(state: FuRePAState) -> Literal["repetition_control", "__end__"]:
    """Check the (approved or edited) pick for repetition; END when the reviewer rejected it."""
    return END if state.get("stop_reason") == PLAN_REJECTED else "repetition_control"


def route_after_repetition(state: FuRePAState) -> Literal["retrieve", "mask_reasoning", "answer"]:
    """Run a fresh pick; re-propose (at the raised temperature) after a repeat; answer when a bound was reached."""
    if state.get("stop_reason"):
        return "answer"
    its = state.get("iterations") or []
    return "mask_reasoning" if its and its[-1].repeated else "retrieve"


def route_after_retrieval(state: FuRePAState) -> Literal["mask_reasoning", "answer"]:
    """The next iteration, or the answer once the iterations are used up."""
    return "answer" if state.get("stop_reason") else "mask_reasoning"


def route_ircot_after_propose(state: FuRePAState) -> Literal["retrieve", "answer", "__end__"]:
    """IRCoT-style: run the one query; END when answered or the endpoint failed; answer after an unparseable reply."""
    return _after_propose(state) or "retrieve"


def route_ircot_after_retrieval(state: FuRePAState) -> Literal["keep_reasoning", "answer"]:
    """IRCoT-style: the next step, or the answer once the iterations are used up."""
    return "answer" if state.get("stop_reason") else "keep_reasoning"


def _graph() -> Builder:
    return StateGraph(FuRePAState, context_schema=FuRePAContext, input_schema=FuRePAInput, output_schema=FuRePAOutput)


def build_furepa() -> Builder:
    """FuRePA: masked reasoning, N candidate queries, trained plan assessor, temperature raise on repeats."""
    g = _graph().add_sequence((mask_reasoning, make_propose()))
    g.add_node(assess_plan).add_node("review_plan", make_review_plan("furepa", FuRePAReviewer()))
    g.add_node(repetition_control).add_node("retrieve", retrieve_passages).add_node("answer", answer_from_evidence)
    g.add_edge(START, "mask_reasoning")
    g.add_conditional_edges("propose", route_after_propose, ["assess_plan", "answer", END])
    g.add_conditional_edges("assess_plan", route_after_assessment, ["review_plan", END])
    g.add_conditional_edges("review_plan", route_after_pick_review, ["repetition_control", END])
    g.add_conditional_edges("repetition_control", route_after_repetition, ["retrieve", "mask_reasoning", "answer"])
    g.add_conditional_edges("retrieve", route_after_retrieval, ["mask_reasoning", "answer"])
    g.add_edge("answer", END)
    return g


def build_ircot() -> Builder:
    """IRCoT-style loop: earlier reasoning kept in the prompt, one query per step, run as proposed."""
    g = _graph().add_sequence((keep_reasoning, make_propose(single_query=True)))
    g.add_node("retrieve", retrieve_passages).add_node("answer", answer_from_evidence)
    g.add_edge(START, "keep_reasoning")
    g.add_conditional_edges("propose", route_ircot_after_propose, ["retrieve", "answer", END])
    g.add_conditional_edges("retrieve", route_ircot_after_retrieval, ["keep_reasoning", "answer"])
    g.add_edge("answer", END)
    return g


furepa = build_furepa().compile(name="furepa")
ircot = build_ircot().compile(name="ircot")


class FuRePAFamily(TextRetrievalFamily):
    """FuRePA's family: text retrieval as data, the trained plan assessor checked before a run, the iteration trace."""

    def prepare(self, method: str, ctx: Any) -> str | None:
        """Check the assessor (``furepa`` in trained mode) and the retriever before any LLM call."""
        return (assessor_problem(ctx) if method == "furepa" else None) or super().prepare(method, ctx)

    def recursion_limit(self, ctx: Any) -> int:
        """Six graph steps per iteration (prompt, propose, assess, review, repetition check, retrieve), the answer, margin."""
        return 6 * max(1, int(getattr(ctx, "max_iterations", 1) or 1)) + 10

    def data_line(self, ctx: Any) -> str:
        """``Retriever: …`` and, for the trained assessor, its folder."""
        trained = ctx.assessor_mode == "trained" and ctx.assessor_dir
        return super().data_line(ctx) + f"   Assessor: {ctx.assessor_dir if trained else ctx.assessor_mode}"

    def trace(self, node: str, update: dict[str, Any], emit: Emit) -> None:
        """Per iteration: the thought, the candidates with scores and the pick, repeats and temperature, retrieval."""
        its = update.get("iterations") or []
        it = Iteration.model_validate(its[-1]) if its else None
        if node == "propose" and it is not None:
            emit(f"\n[iteration {it.index}] temperature {it.temperature:g}{'' if it.masked else ', earlier reasoning shown'}")
            if it.thought:
                emit(f"  Thought: {it.thought}")
            if it.answer:
                emit(f"  Answer: {it.answer}")
            elif it.pick is not None:
                emit(f"  Query: {it.query}")
            else:
                for c in it.candidates:
                    emit(f"  Candidate: {c.query}")
        elif node == "assess_plan" and it is not None and it.pick is not None:
            emit(f"  Assessor ({it.assessor}):")
            for line in it.candidate_lines():
                emit(f"    {line}")
        elif node == "repetition_control" and it is not None and (it.repeated or it.repeat_check_error):
            if it.repeat_check_error:
                emit(f"  Repeat check: {it.repeat_check_error}")
            if it.repeated:
                sim = f" (cosine {it.similarity:.2f})" if it.similarity is not None and it.similarity < 1 else ""
                emit(f"  Repeats the executed query {it.repeat_of!r}{sim}: not run again")
        elif node == "retrieve" and it is not None:
            if it.retrieval_error:
                emit(f"  Retrieval failed: {it.retrieval_error}")
            for p in map(EvidencePassage.model_validate, update.get("evidence") or []):
                emit(f"  Evidence [{p.rank}] {p.title} ({p.source}, {p.score:.2f}): {p.text[:160]}")
            if not it.retrieval_error and not it.new_evidence:
                emit(f"  Nothing new retrieved ({len(it.retrieved)} passages already held)")
        elif node == "answer" and update.get("answer"):
            emit(f"\nAnswer from the evidence: {update['answer']}")
        for change in map(TemperatureChange.model_validate, update.get("temperature_changes") or []):
            emit(f"  Temperature {change.before:g} → {change.after:g}: {change.reason}")
        if update.get("stop_reason") and update.get("stop_reason") != "answered" and node != "answer":
            emit(f"  Stop: {update['stop_reason']}")
        super().trace(node, update, emit)


FAMILY = FuRePAFamily(
    name="furepa", title="FuRePA (arXiv 2309.12767)", order=40, context=FuRePAContext, result=FuRePAResult, graphs=(
        GraphSpec("furepa", build_furepa),
        GraphSpec("ircot", build_ircot),
    ),
    data_help="--retriever wiki|local --index DIR, and for furepa --assessor DIR (or --assessor-mode first|random)",
)
