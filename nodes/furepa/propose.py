"""propose: a fresh chain of thought and N candidate queries, or the final answer (FuRePA §3.1, §3.2.1), sampled at the
state's temperature (``tp0``, raised after a repeat); the IRCoT-style baseline asks for one query."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, model_validator

from ragplan.llm import Decision, chat_model_for, decide, failure_update, load_chat_model
from ragplan.llm_cache import memo, model_with
from ragplan.nodes import Node
from ragplan.state.furepa import Candidate, FuRePAContext, FuRePAState, Iteration
from ragplan.state.usage import Usage

__all__ = ["Proposal", "SYSTEM_PROMPT", "chat_model_at", "ask_proposal", "make_propose", "normalize_query", "distinct_queries"]

SYSTEM_PROMPT = "You answer multi-hop questions by searching a text collection one fact at a time."


class Proposal(BaseModel):
    """One iteration's proposal: a fresh chain of thought, then candidate queries or the answer."""

    thought: str = Field(description="Step-by-step reasoning from the question and the evidence: what is known, what is missing.")
    action: Literal["search", "answer"] = Field(description="search = more evidence is needed; answer = the evidence suffices.")
    queries: list[str] = Field(default_factory=list, description="action = search: the candidate search queries.")
    answer: str = Field(default="", description="action = answer: the short answer.")

    @model_validator(mode="after")
    def _complete(self) -> "Proposal":
        if self.action == "search" and not any(q.strip() for q in self.queries):
            raise ValueError("action 'search' needs at least one non-empty query in `queries`")
        if self.action == "answer" and not self.answer.strip():
            raise ValueError("action 'answer' needs the answer in `answer`")
        return self


def normalize_query(query: str) -> str:
    """A query compared for exact repeats: lower case, punctuation dropped, spaces collapsed."""
    return " ".join("".join(c if c.isalnum() else " " for c in query.lower()).split())


def distinct_queries(queries: list[str], limit: int) -> list[str]:
    """Non-empty queries without exact repeats (by :func:`normalize_query`), at most ``limit``, in order."""
    out: dict[str, str] = {}
    for q in queries:
        q = " ".join(q.split())
        key = normalize_query(q)
        if key and key not in out:
            out[key] = q
    return list(out.values())[: max(1, limit)]


def chat_model_at(ctx: Any, temperature: float) -> BaseChatModel:
    """The run's chat model sampling at ``temperature`` (an object is copied with it when it has the field, else used
    as it is); raises on a bad configuration."""
    obj = getattr(ctx, "chat_model", None)
    if obj is None:
        return load_chat_model(ctx.model, base_url=ctx.base_url, temperature=temperature, timeout_s=ctx.llm_timeout_s,
                               max_retries=ctx.llm_max_retries, cache_dir=ctx.llm_cache_dir, replay=ctx.llm_replay)
    model = chat_model_for(ctx)  # checks the object is a chat model
    if "temperature" not in type(model).model_fields:
        return model
    t = round(float(temperature), 6)  # one copy per live model and temperature (its cache keys by the temperature)
    return memo(model, ("temperature", t), lambda: model_with(model, temperature=t))


def ask_proposal(ctx: Any, prompt: str, temperature: float) -> Decision[Proposal]:
    """One :class:`Proposal` for ``prompt`` at ``temperature`` with the run's model and repair bound; never raises."""
    try:
        model = chat_model_at(ctx, temperature)
    except Exception as exc:  # no endpoint configured, a wrong object
        return Decision(None, Usage(), f"no usable chat model: {exc}", 0, "config")
    return decide(model, [SystemMessage(SYSTEM_PROMPT), HumanMessage(prompt)], Proposal, method=ctx.structured_output,
                  max_repairs=ctx.max_repairs, max_reply_chars=ctx.max_reply_chars)


def make_propose(single_query: bool = False) -> Node[FuRePAState, FuRePAContext]:
    """FuRePA's propose node (N candidates), or with ``single_query`` the IRCoT-style step (one query, picked as is)."""

    def propose(state: FuRePAState, runtime: Runtime[FuRePAContext]) -> dict[str, Any]:
        """Ask the LLM for a fresh chain of thought and candidate queries, or the answer."""
        ctx = runtime.context
        index = len(state.get("iterations") or []) + 1
        temperature = float(ctx.temperature if single_query else state.get("temperature", ctx.tp0))
        it = Iteration(index=index, temperature=temperature, masked=False if single_query else bool(ctx.mask_reasoning))
        d = ask_proposal(ctx, state["prompt"], temperature)
        if not d.ok:
            return {**failure_update(d, "propose"), "iterations": [it]}
        p = d.value
        it.thought = p.thought.strip()
        if p.action == "answer":
            it.answer = p.answer.strip()
            return {"iterations": [it], "answer": it.answer, "reasoning": it.thought, "stop_reason": "answered",
                    "usage": d.usage}
        queries = distinct_queries(p.queries, 1 if single_query else max(1, ctx.n_candidates))
        it.candidates = [Candidate(query=q) for q in queries]
        if single_query:
            it.pick, it.query, it.assessor = 0, queries[0], "single"
        return {"iterations": [it], "reasoning": it.thought, "usage": d.usage}

    return propose
