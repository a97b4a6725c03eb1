"""plan_retrieval: REAPER's planner writes the whole retrieval plan in one LLM call (paper §4.1); on a repair round
the last plan and its errors are given back. The planner's latency is recorded."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from ragplan.llm import chat_model_for, failure_update, generate, message_text
from ragplan.methods.reaper.plan import PlanCall
from ragplan.methods.reaper.validate import repair_prompt
from ragplan.nodes.reaper.planner_prompt import build_planner_messages, examples_for
from ragplan.state.context import ReaperContext
from ragplan.state.reaper import ReaperState
from ragplan.tools.suites import suite_for
from ragplan.state.failure import failed

__all__ = ["plan_retrieval"]


def plan_retrieval(state: ReaperState, runtime: Runtime[ReaperContext]) -> dict[str, Any]:
    """One planner call (plus the repair context when the last plan was invalid)."""
    ctx = runtime.context
    attempts = state.get("plan_attempts", 0) + 1
    try:
        registry = suite_for(ctx)
        model = chat_model_for(ctx, "planner")
    except Exception as exc:
        return failed("config", "plan_retrieval", f"plan_retrieval: {exc}", plan_attempts=attempts, stop_reason="llm_error",
                      answer="")
    system, user = build_planner_messages(registry, examples_for(registry), state["question"], state.get("page_context") or {})
    messages: list[Any] = [SystemMessage(system), HumanMessage(user)]
    calls = state.get("plan_calls") or []
    last = PlanCall.model_validate(calls[-1]) if calls else None
    if last is not None and not last.valid:  # the repair round: the faulty plan and its typed errors, line by line
        messages += [AIMessage(last.raw), HumanMessage(repair_prompt(last.errors, registry=registry, plan_text=last.raw))]
    g = generate(model, messages, max_reply_chars=ctx.max_reply_chars)
    latency = {"plan_attempts": attempts, "planner_latency_s": g.usage.llm_seconds, "planner_call_s": g.usage.llm_seconds,
               "usage": g.usage}
    if not g.ok:
        return {**latency, **failure_update(g, "plan_retrieval")}
    return {**latency, "plan_raw": message_text(g.value)}
