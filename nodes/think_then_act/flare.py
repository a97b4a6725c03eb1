"""flare_draft: FLARE-style generate-then-check (§5.1): a draft whose least likely token (or stated confidence) is
below ``flare_threshold`` is not trusted, and the question plus its confident tokens is searched."""

from __future__ import annotations

import math
from typing import Any

from langgraph.runtime import Runtime

from ragplan.llm import chat_model_for, decide_for, failure_update, generate, message_text
from ragplan.nodes.think_then_act.answer_subquery import ANSWER_STYLE, qa_prompt
from ragplan.nodes.think_then_act.confidence_gate import KNOWS_LIMITS, Confidence
from ragplan.state.context import ThinkThenActContext
from ragplan.state.failure import failed
from ragplan.state.think_then_act import MultiStepState, SubQuery
from ragplan.state.trace_sections import excerpt

__all__ = ["flare_draft", "token_probabilities"]


def token_probabilities(message: Any) -> list[tuple[str, float]]:
    """(token, probability) pairs from an AIMessage's OpenAI-style ``logprobs`` metadata; [] when absent."""
    meta = getattr(message, "response_metadata", None) or {}
    content = (meta.get("logprobs") or {}).get("content") if isinstance(meta.get("logprobs"), dict) else None
    out = []
    for item in content or []:
        try:
            out.append((str(item["token"]), math.exp(float(item["logprob"]))))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def flare_draft(state: MultiStepState, runtime: Runtime[ThinkThenActContext]) -> dict[str, Any]:
    """Draft an answer, measure its confidence, and prepare the query that retrieval would use."""
    ctx = runtime.context
    question = state["question"]
    messages = qa_prompt(state, question, after=f"\n{ANSWER_STYLE}")
    try:
        model = chat_model_for(ctx)
    except Exception as exc:
        return failed("config", "flare_draft", f"flare_draft: no usable chat model: {exc}", stop_reason="llm_error", answer="")
    g = generate(model, messages, options={"logprobs": True}, max_reply_chars=ctx.max_reply_chars)
    if not g.ok:
        return failure_update(g, "flare_draft")
    msg, usage = g.value, g.usage
    draft = message_text(msg)
    if probs := token_probabilities(msg):
        source, confidence = "logprobs", min(p for _, p in probs)
        masked = " ".join(tok.strip() for tok, p in probs if p >= ctx.flare_threshold and tok.strip())
    else:
        after = (f"Your draft answer: {draft}\n\nHow likely is the draft to be correct? Give `probability` between 0.0 "
                 "and 1.0 and a short reason.")
        d = decide_for(ctx, qa_prompt(state, question, after=after, role=KNOWS_LIMITS), Confidence)
        usage = usage + d.usage
        if not d.ok:
            return {**failure_update(d, "flare_draft"), "usage": usage}
        source, confidence, masked = "stated", float(d.value.probability), ""
    low = confidence < ctx.flare_threshold
    q = SubQuery(index=1, text=question, resolved=question, search_query=f"{question} {masked}".strip() if low else "",
                 beta=round(confidence, 4), retrieve=low, answer="" if low else draft, done=not low,
                 decision=f"{'RETRIEVAL' if low else 'NO RETRIEVAL'}: draft {excerpt(draft)!r}, {source} confidence "
                          f"{confidence:.2f} {'<' if low else '≥'} {ctx.flare_threshold:g}")
    return {"query": q, "queries": [q], "confidence_source": source, "usage": usage}
