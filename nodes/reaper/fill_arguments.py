"""fill_arguments: the classification baseline's argument writer (REAPER paper §3.1, §5.2). The routed class fixes
the skeleton; one planner-role call fills the open arguments (``product_id`` may come from the page context); the
plan is validated and recorded as the run's one :class:`PlanCall` (invalid: ``invalid_plan``, no repair round)."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from ragplan.llm import decide_for, failure_update
from ragplan.methods.reaper.plan import PlanArg, PlanCall, PlanStep, RetrievalPlan, format_plan
from ragplan.methods.reaper.validate import check_plan
from ragplan.state.context import ReaperContext
from ragplan.state.reaper import ReaperState
from ragplan.tools.retail.tools import PURPOSES
from ragplan.tools.suites import suite_for
from ragplan.state.failure import failed

__all__ = ["FilledArguments", "fill_arguments", "build_skeleton", "skeleton_prompt"]

_CONTEXT_ARGS = ("product_id", "base_product_id")

SYSTEM = (
    "You fill in the arguments of a fixed retrieval workflow for an online store's shopping assistant. The "
    "tools and their order are already chosen; arguments shown as #Ej are the output of step j and are already "
    "set. Give a value for each open argument, taken from the customer's question and page context: product "
    "ids from the page context, search phrases and keywords in the customer's words, date expressions as the "
    "customer said them (e.g. \"tomorrow\"). Leave out an optional argument that the question does not call for."
)


class FilledArguments(BaseModel):
    """The open arguments of every workflow step."""

    steps: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description='Step number as a string ("1", "2", …) → {argument name: value} for that step\'s open arguments.')


def build_skeleton(cls: str, known: list[dict[str, int]] | None = None) -> list[tuple[str, dict[str, int]]]:
    """The skeleton of a route class: ``[(tool, {argument: referenced step}), …]`` (empty for no retrieval), with the
    argument chain the classifier learnt for it (``known``) or else :data:`DEFAULT_CHAINS`."""
    from ragplan.methods.reaper.classifier import DEFAULT_CHAINS, class_tools

    tools = class_tools(cls)
    if known is not None and len(known) == len(tools):
        return [(t, dict(r)) for t, r in zip(tools, known)]
    chained = [None, *(DEFAULT_CHAINS.get(pair) for pair in zip(tools, tools[1:]))]  # argument taking the last output
    return [(tool, {arg: k} if arg else {}) for k, (tool, arg) in enumerate(zip(tools, chained))]


def skeleton_prompt(skeleton: list[tuple[str, dict[str, int]]], registry: Any) -> str:
    """The skeleton as prompt lines: each step's call with its fixed references and open arguments."""
    lines = []
    for k, (tool, refs) in enumerate(skeleton, 1):
        spec = registry.get(tool)
        args = spec.args if spec is not None else []
        call = ", ".join(f"{a.name}=#E{refs[a.name]}" if a.name in refs else f"{a.name}=?" for a in args)
        lines.append(f"Step {k}: #E{k} = {tool}({call})" + (f" — {spec.description}" if spec is not None else ""))
        for a in args:
            if a.name not in refs:
                lines.append(f"    {a.name} ({a.type}, {'required' if a.required else 'optional'}): {a.description}")
    return "\n".join(lines)


def _assemble(skeleton: list[tuple[str, dict[str, int]]], filled: dict[str, dict[str, Any]], registry: Any,
              page: dict[str, Any]) -> RetrievalPlan:
    """The plan: required arguments by position, optional ones by name (the gold plans' canonical style)."""
    steps = []
    for k, (tool, refs) in enumerate(skeleton, 1):
        spec = registry.get(tool)
        given = {str(n): v for n, v in (filled.get(str(k)) or {}).items()}
        args, kwargs, positional = [], {}, True
        for a in (spec.args if spec is not None else []):
            v = f"#E{refs[a.name]}" if a.name in refs else given.get(a.name)
            if (v is None or v == "") and a.name in _CONTEXT_ARGS and page.get("product_id"):
                v = page["product_id"]
            if v is None or v == "":
                positional = False
            elif positional and a.required:
                args.append(PlanArg.of(v))
            else:
                positional = False
                kwargs[a.name] = PlanArg.of(v)
        steps.append(PlanStep(index=k, purpose=PURPOSES.get(tool, tool.replace("_", " ")), evidence_var=f"E{k}",
                              tool=tool, args=args, kwargs=kwargs))
    return RetrievalPlan(steps=steps)


def fill_arguments(state: ReaperState, runtime: Runtime[ReaperContext]) -> dict[str, Any]:
    """Build the routed class's skeleton, ask the planner model for its open arguments, validate the plan."""
    ctx = runtime.context
    route = state.get("route") or {}
    cls = route.get("class", "")
    page = state.get("page_context") or {}
    skeleton = build_skeleton(cls, route.get("chain")) if cls else []
    route_s = float(route.get("latency_s") or 0.0)
    if not skeleton:  # no retrieval: a valid zero-step plan, no LLM call
        return {"plan": [], "plan_text": "", "plan_raw": "", "plan_errors": [], "plan_attempts": 0,
                "plan_calls": [PlanCall(attempt=1, raw="", steps=[], valid=True, latency_s=route_s)]}
    try:
        registry = suite_for(ctx)
    except Exception as exc:  # an unknown suite or a shop that cannot be opened
        return failed("tool_error", "fill_arguments", f"fill_arguments: {exc}", plan_errors=[f"tool registry unavailable: {exc}"],
                      stop_reason="tool_error", plan_attempts=0, plan=[], plan_text="")
    user = (f"Page context: {json.dumps(page, ensure_ascii=False)}\n"
            f"Customer question: {state['question']}\n\n"
            f"Workflow ({cls}):\n{skeleton_prompt(skeleton, registry)}\n\n"
            "Give the open arguments (the ones shown as ?) of each step.")
    d = decide_for(ctx, [SystemMessage(SYSTEM), HumanMessage(user)], FilledArguments, role="planner")
    latency = round(d.usage.llm_seconds, 4)
    if not d.ok:
        return {**failure_update(d, "fill_arguments"), "plan_attempts": 1, "planner_latency_s": latency}
    plan = _assemble(skeleton, d.value.steps, registry, page)
    errors = check_plan(plan, registry)
    raw = json.dumps(d.value.model_dump(), ensure_ascii=False)
    update: dict[str, Any] = {"plan_raw": raw, "plan_attempts": 1, "plan_errors": [str(e) for e in errors],
                              "usage": d.usage, "planner_latency_s": latency,
                              "plan_calls": [PlanCall(attempt=1, raw=raw, steps=plan.steps, valid=not errors,
                                                      errors=errors, latency_s=round(route_s + latency, 4))]}
    if errors:
        return {**update, "plan": [], "plan_text": "", "stop_reason": "invalid_plan"}
    return {**update, "plan": list(plan.steps), "plan_text": format_plan(plan)}
