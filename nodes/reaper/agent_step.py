"""agent_step: REAPER's agent baseline, one LLM call per retrieval step (ReAct-style, §3.1): run one tool through the
executor, or stop; the calls made form the typed ``plan``, graded like REAPER's."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from ragplan.llm import decide_for, failure_update
from ragplan.nodes.reaper.respond import evidence_block
from ragplan.methods.reaper.execute import run_plan
from ragplan.methods.reaper.plan import PlanArg, PlanStep, RetrievalPlan, as_steps, format_plan
from ragplan.state.context import ReaperContext
from ragplan.state.reaper import ReaperState
from ragplan.tools.suites import suite_for
from ragplan.state.failure import failed

__all__ = ["AgentAction", "agent_step"]

AGENT_ROLE = ("You help a sales associate in a large online shop by gathering the information needed to answer a "
              "customer's question, one tool call at a time.")


class AgentAction(BaseModel):
    """The agent's next move."""

    thought: str = Field(description="What is still missing and why this call gets it.")
    done: bool = Field(default=False, description="True when the evidence so far is enough (or none is needed).")
    tool: str = Field(default="", description="The tool to call next (one of the listed tools).")
    args: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments by name.")


def agent_step(state: ReaperState, runtime: Runtime[ReaperContext]) -> dict[str, Any]:
    """Decide and run the next tool call (or stop)."""
    ctx = runtime.context
    evidence = state.get("evidence") or []
    try:
        registry = suite_for(ctx)
    except Exception as exc:
        return failed("tool_error", "agent_step", f"agent_step: {exc}", agent_done=True, stop_reason="tool_error")
    page = state.get("page_context") or {}
    prompt = (f"Tools:\n{registry.prompt_block()}\n\n"
              f"{'Page context: ' + json.dumps(page, ensure_ascii=False) + chr(10) if page else ''}"
              f"Customer question: {state['question']}\n\n{evidence_block(evidence)}\n\n"
              "Call ONE tool that gets information still missing (tool + args by name), or set done=true.")
    d = decide_for(ctx, [SystemMessage(AGENT_ROLE), HumanMessage(prompt)], AgentAction, role="planner")
    if not d.ok:
        return {**failure_update(d, "agent_step"), "agent_done": True}
    act = d.value
    latency = {"planner_latency_s": d.usage.llm_seconds, "usage": d.usage}
    if act.done or not act.tool:  # an agent that retrieves nothing still says so: its plan is empty
        return {"agent_done": True, **latency, **({"plan": [], "plan_text": ""} if state.get("plan") is None else {})}
    done_so_far = as_steps(state.get("plan"))
    index = len(done_so_far) + 1
    step = PlanStep(index=index, purpose=" ".join(act.thought.split())[:120], evidence_var=f"E{index}", tool=act.tool,
                    kwargs={k: PlanArg(kind="literal", value=v) for k, v in act.args.items()})
    result = run_plan(RetrievalPlan(steps=[step]), registry, timeout_s=ctx.step_timeout_s, max_parallel=1)
    plan = RetrievalPlan(steps=[*done_so_far, step])
    done = index >= ctx.max_steps
    return {"evidence": evidence + [e.model_dump(mode="json") for e in result.evidence], "agent_done": done,
            "plan": plan.steps, "plan_text": format_plan(plan),
            **({"stop_reason": "max_steps"} if done else {}), **latency}
