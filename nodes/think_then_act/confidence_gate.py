"""confidence_gate: does this (sub-)query need retrieval? (Think-then-Act §3.2). ``confidence``: retrieve when the
stated β < β′ (β′ = 0 never, 1 always, without a call); ``direct``: the LLM answers RETRIEVAL or NO RETRIEVAL."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from ragplan.llm import decide_for, failure_update
from ragplan.nodes.think_then_act.answer_subquery import qa_prompt, resolve_text
from ragplan.state.context import ThinkThenActContext
from ragplan.state.think_then_act import MultiStepState, SubQuery, failure_of

__all__ = ["Confidence", "DirectDecision", "confidence_gate", "needs_retrieval"]

CONFIDENCE_INSTRUCTION = """Without looking anything up, how likely are you to answer this question correctly from your
own knowledge? Give `probability` between 0.0 (you would be guessing) and 1.0 (you are certain), and a short reason.
Examples of the scale: "What is the chemical symbol of gold?" 0.95; "How many members did a 1970s regional band
have?" 0.2; "Which year did a minor local official die?" 0.1."""

DIRECT_INSTRUCTION = """Do you need to look up information to answer this question correctly? Answer RETRIEVAL if you
need external information, NO RETRIEVAL if you can answer it reliably from your own knowledge, with a short reason."""


KNOWS_LIMITS = "You are a careful question-answering assistant who knows the limits of its knowledge."


class Confidence(BaseModel):
    """The model's confidence that it can answer unaided."""

    probability: float = Field(ge=0.0, le=1.0, description="Probability of answering correctly without retrieval, 0.0-1.0.")
    reason: str = Field(default="", description="Short reason.")


class DirectDecision(BaseModel):
    """The model's direct retrieval decision."""

    decision: Literal["RETRIEVAL", "NO RETRIEVAL"] = Field(description="Whether retrieval is needed.")
    reason: str = Field(default="", description="Short reason.")


def needs_retrieval(beta: float, threshold: float) -> bool:
    """The paper's rule: retrieve when β < β′ (β′ ≥ 1 always retrieves, β′ ≤ 0 never does)."""
    return threshold >= 1.0 or (threshold > 0.0 and beta < threshold)


def confidence_gate(state: MultiStepState, runtime: Runtime[ThinkThenActContext]) -> dict[str, Any]:
    """Decide whether the branch's sub-query retrieves; records β (or the direct decision) on it."""
    ctx = runtime.context
    t = ctx.beta_threshold
    text = resolve_text(state["query"], state.get("prior") or [])
    q: SubQuery = state["query"].model_copy(update={"resolved": text})
    if ctx.gate_mode == "confidence" and not 0.0 < t < 1.0:
        q.retrieve = needs_retrieval(0.0, t)
        q.decision = f"{'RETRIEVAL' if q.retrieve else 'NO RETRIEVAL'} (β′ = {t:g} fixes the decision)"
        return {"query": q}
    instruction = CONFIDENCE_INSTRUCTION if ctx.gate_mode == "confidence" else DIRECT_INSTRUCTION
    schema: type[Confidence | DirectDecision] = Confidence if ctx.gate_mode == "confidence" else DirectDecision
    context = f"(It is part of answering: {state['question']})\n" if text != state.get("question") else ""
    d = decide_for(ctx, qa_prompt(state, text, f"{instruction}\n\n{context}", role=KNOWS_LIMITS), schema)
    if not d.ok:
        # cannot judge: retrieving is the safe choice; the failure is recorded
        q.retrieve, q.decision = True, f"RETRIEVAL (gate failed: {d.error[:200]})"
        return {"query": q, "usage": d.usage, "failures": [failure_of(failure_update(d, "confidence_gate"), q.index)]}
    v = d.value
    if isinstance(v, Confidence):
        q.beta = float(v.probability)
        q.retrieve = needs_retrieval(q.beta, t)
        why = f"β = {q.beta:.2f} {'<' if q.retrieve else '≥'} β′ = {t:g}. {v.reason}"
    else:
        q.retrieve = v.decision == "RETRIEVAL"
        why = v.reason
    q.decision = f"{'RETRIEVAL' if q.retrieve else 'NO RETRIEVAL'}: {why}".strip()
    return {"query": q, "usage": d.usage}
