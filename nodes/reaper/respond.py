"""respond: the responder model answers the customer from the retrieved evidence only (REAPER); a zero-step plan
(no retrieval needed) is answered directly."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from ragplan.llm import decide_for, failure_update
from ragplan.state.context import ReaperContext
from ragplan.state.reaper import ReaperState

__all__ = ["Response", "respond", "evidence_block"]

RESPONDER_ROLE = (
    "You are a shopping assistant at a large online store. Answer the customer's question using only the "
    "evidence gathered for it. If the evidence does not contain the answer, say what you could not find rather "
    "than guessing. Be brief and concrete (names, numbers, dates)."
)


class Response(BaseModel):
    """The answer to the customer."""

    answer: str = Field(description="The reply to the customer.")


def evidence_block(evidence: list[dict[str, Any]], limit: int = 6000) -> str:
    """The tool calls and their outputs as prompt text (each output cut to a fair share of ``limit``)."""
    if not evidence:
        return "Evidence: none (no retrieval was needed or possible)."
    share = max(400, limit // max(1, len(evidence)))
    lines = ["Evidence:"]
    for e in evidence:
        call = f"#{e.get('evidence_var', '?')} = {e.get('tool')}({json.dumps(e.get('args', {}), ensure_ascii=False)})"
        if e.get("status") == "ok":
            out = json.dumps(e.get("output"), ensure_ascii=False, default=str)
            lines.append(f"{call}\n  -> {out[:share]}{' …' if len(out) > share else ''}")
        else:
            lines.append(f"{call}\n  -> {e.get('status')}: {e.get('error')}")
    return "\n".join(lines)


def respond(state: ReaperState, runtime: Runtime[ReaperContext]) -> dict[str, Any]:
    """Answer from the evidence with the responder model."""
    page = state.get("page_context") or {}
    page_text = f"Page context: {json.dumps(page, ensure_ascii=False)}\n" if page else ""
    messages = [SystemMessage(RESPONDER_ROLE),
                HumanMessage(f"{page_text}Customer question: {state['question']}\n\n{evidence_block(state.get('evidence') or [])}")]
    d = decide_for(runtime.context, messages, Response, role="responder")
    if not d.ok:
        return failure_update(d, "respond")
    return {"answer": d.value.answer.strip(), "usage": d.usage,
            **({} if state.get("stop_reason") else {"stop_reason": "answered"})}
