"""answer_subquery answers one (sub-)query with its evidence sentences when it retrieved (``LM([D, q])``), else unaided;
final_answer composes the sub-answers (a single query's answer is already final)."""

from __future__ import annotations

import re
from typing import Any, Mapping

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from ragplan.llm import decide_for, failure_update
from ragplan.state.context import ThinkThenActContext
from ragplan.state.failure import failed
from ragplan.state.think_then_act import BranchFailure, MultiStepState, SubQuery, TextQAState, failure_of
from ragplan.state.trace_sections import excerpt

__all__ = ["branch_outcome", "ShortAnswer", "answer_subquery", "final_answer", "resolve_text", "ANSWER_STYLE",
           "qa_prompt"]

ANSWER_STYLE = """Answer as briefly as possible: a name, date, number or short phrase; "yes" or "no" for a yes/no
question; for a claim to verify, exactly one of SUPPORTS, REFUTES, NOT ENOUGH INFO. No full sentence."""


class ShortAnswer(BaseModel):
    """A short answer."""

    answer: str = Field(description="The short answer only.")
    reasoning: str = Field(default="", description="One or two sentences of reasoning (optional).")


def qa_prompt(state: Mapping[str, object], question: str, before: str = "", after: str = "",
        role: str = "You are a careful question-answering assistant.") -> list[BaseMessage]:
    """The prompt of a Think-then-Act step: ``before``, the question, the ``instructions`` input (e.g. FEVER's labels;
    retrieval never sees them) and ``after``."""
    text = str(state.get("instructions") or "").strip()
    line = f"Instructions: {text}\n" if text else ""
    return [SystemMessage(role), HumanMessage(f"{before}Question: {question}\n{line}{after}".rstrip("\n"))]


SHOWN = 300
"""Characters of a sub-answer that later sub-queries (their ``prior``, #k references) and the composition take
(answers are short; a longer reply is cut)."""


def resolve_text(q: SubQuery, prior: list[SubQuery]) -> str:
    """The sub-query with #k replaced by the answer of sub-query k (unknown references kept)."""
    answers = {p.index: p.answer for p in prior if p.answer}
    return re.sub(r"#(\d+)", lambda m: answers.get(int(m.group(1)), m.group(0)), q.text)


def _evidence_block(q: SubQuery) -> str:
    if not q.retrieve:
        return ""
    if not q.evidence:
        return f"Context: (retrieval found nothing{': ' + q.retrieval_error if q.retrieval_error else ''})\n"
    return "Context:\n" + "".join(f"- {e['sentence']} ({e.get('title', '')})\n" for e in q.evidence)


def answer_subquery(state: MultiStepState, runtime: Runtime[ThinkThenActContext]) -> dict[str, Any]:
    """Answer the branch's (sub-)query and hand it back to the parent graph as done."""
    q: SubQuery = state["query"]
    prior = [p for p in state.get("prior") or [] if p.answer]
    known = "".join(f"- {p.resolved or p.text} -> {p.answer}\n" for p in prior)
    known = f"Answers found so far:\n{known}\n" if known else ""
    use = "Use the context if it helps; otherwise rely on what you know." if q.retrieve else "Answer from what you know."
    text = q.resolved or resolve_text(q, prior)
    messages = qa_prompt(state, text, f"{_evidence_block(q)}{known}(Overall question: {state['question']})\n",
                   f"\n{use}\n{ANSWER_STYLE}")
    d = decide_for(runtime.context, messages, ShortAnswer)
    done = q.model_copy(update={"resolved": text, "done": True, "answer": d.value.answer.strip() if d.ok else ""})
    out: dict[str, Any] = {"queries": [done], "usage": d.usage}
    if not d.ok:
        out["failures"] = [failure_of(failure_update(d, "answer_subquery"), q.index)]
    return out


def branch_outcome(state: TextQAState) -> dict[str, Any]:
    """What the branches' failures mean for the run: ``llm_error`` ends it (the endpoint is not called again);
    unparseable replies are recorded in ``error`` while the answer step still tries. Empty when none failed."""
    failures = [f if isinstance(f, BranchFailure) else BranchFailure.model_validate(f) for f in state.get("failures") or []]
    if not failures:
        return {}
    message = "; ".join(dict.fromkeys(f"{f.node} (sub-query {f.query}): {f.message}" for f in failures))
    if state.get("error"):
        message = f"{state['error']}; {message}"
    first = next((f for f in failures if f.kind == "llm_error"), failures[0])
    ends: dict[str, Any] = {"stop_reason": "llm_error", "answer": ""} if first.kind == "llm_error" else {}
    return failed(first.cause, first.node, message, **ends)


def final_answer(state: MultiStepState, runtime: Runtime[ThinkThenActContext]) -> dict[str, Any]:
    """The final answer: the single query's answer, or the sub-answers composed by the LLM."""
    queries: list[SubQuery] = state.get("queries") or []
    ran = [q for q in queries if q.retrieve]  # the retrieval ratio counts successful retrievals only
    ok = sum(1 for q in ran if not q.retrieval_error)
    stats = {"retrieval_count": len(ran), "retrieval_ratio": round(ok / len(queries), 4) if queries else 0.0}
    outcome = {} if state.get("stop_reason") == "llm_error" else branch_outcome(state)
    if state.get("stop_reason") == "llm_error" or outcome.get("stop_reason") == "llm_error":
        return {**stats, "answer": "", **outcome}
    if len(queries) == 1:
        return {**stats, **outcome, "answer": queries[0].answer, "stop_reason": "answered" if queries[0].answer else "no_answer"}
    steps = "\n".join(f"Sub-question {q.index}: {q.resolved or q.text}\nSub-answer: {excerpt(q.answer, SHOWN) or '(none)'}"
                      for q in queries)
    after = f"\n{steps}\n\nUsing the sub-answers, give the final answer to the question.\n{ANSWER_STYLE}"
    d = decide_for(runtime.context, qa_prompt(state, state["question"], after=after), ShortAnswer)
    if not d.ok:
        return {**stats, **failure_update(d, "final_answer")}
    return {**stats, **outcome, "answer": d.value.answer.strip(), "reasoning": d.value.reasoning.strip(), "usage": d.usage,
            "stop_reason": "answered"}
