"""mask_reasoning: the iteration's prompt from the question and the evidence only (furthest reasoning, FuRePA §3.1.2);
earlier thoughts and queries are shown only in the masking-off ablation and the IRCoT-style :func:`keep_reasoning`."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragplan.state.furepa import EvidencePassage, FuRePAContext, FuRePAState, Iteration

__all__ = ["ANSWER_FORM", "build_prompt", "mask_reasoning", "keep_reasoning", "clip", "evidence_lines"]

ANSWER_FORM = ("as briefly as possible: a name, date, number or short phrase, or \"yes\" / \"no\" for a yes/no "
               "question; no full sentence")

_SEARCH_MANY = """Otherwise set `action` to "search" and write {n} different search queries in `queries`. Each query
goes after the fact that is still missing, and they should differ in how they go after it, so that at least one
finds it. A query must stand on its own: name the person, place or thing it is about (use the name the evidence
gives, never "it", "he" or "#1")."""

_SEARCH_ONE = """Otherwise set `action` to "search" and write one search query in `queries`: the next step of your
reasoning, the fact you need next. It must stand on its own: name the person, place or thing it is about (use the
name the evidence gives, never "it", "he" or "#1")."""


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word boundary (with " …" when cut)."""
    text = " ".join((text or "").split())
    return text if limit <= 0 or len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


def evidence_lines(evidence: list[EvidencePassage], passage_chars: int) -> str:
    """The evidence as numbered lines (title, source, clipped text); '' when there is none."""
    return "\n".join(f"[{i}] {p.title} ({p.source or 'retrieved'}): {clip(p.text, passage_chars)}"
                     for i, p in enumerate(evidence, 1))


def build_prompt(question: str, evidence: list[EvidencePassage], iterations: list[Iteration], *, masked: bool,
                 n_queries: int, passage_chars: int = 700) -> str:
    """The proposal prompt: question, evidence, (earlier thoughts and searches when not ``masked``), instruction."""
    block = evidence_lines(evidence, passage_chars)
    parts = [f"Question: {question}",
             f"Evidence gathered so far:\n{block}" if block else "Evidence gathered so far: none yet."]
    history = [] if masked else [line for it in iterations for line in (
        it.thought and f"Iteration {it.index} thought: {it.thought}",
        it.query and f"Iteration {it.index} search: {it.query}{'' if it.executed else ' (not run: a repeat)'}") if line]
    if history:
        parts.append("Your earlier reasoning and searches:\n" + "\n".join(history))
    search = _SEARCH_ONE if n_queries <= 1 else _SEARCH_MANY.format(n=n_queries)
    parts.append(
        "Reason about the question from scratch, using only the evidence above. In `thought`, work out step by step "
        "which facts the evidence establishes and which fact is still missing.\n"
        f"If the evidence is enough to answer, set `action` to \"answer\" and give the answer in `answer`, {ANSWER_FORM}.\n"
        + search)
    return "\n\n".join(parts)


def _prompt_update(state: FuRePAState, ctx: FuRePAContext, masked: bool, n_queries: int) -> dict[str, Any]:
    return {"prompt": build_prompt(state["question"], list(state.get("evidence") or []), list(state.get("iterations") or []),
                                   masked=masked, n_queries=n_queries, passage_chars=ctx.passage_chars)}


def mask_reasoning(state: FuRePAState, runtime: Runtime[FuRePAContext]) -> dict[str, Any]:
    """FuRePA: this iteration's prompt from the question and the evidence (history shown only when masking is off)."""
    ctx = runtime.context
    return _prompt_update(state, ctx, bool(ctx.mask_reasoning), max(1, ctx.n_candidates))


def keep_reasoning(state: FuRePAState, runtime: Runtime[FuRePAContext]) -> dict[str, Any]:
    """IRCoT-style: the prompt keeps every earlier thought and search, and asks for one query."""
    return _prompt_update(state, runtime.context, False, 1)
