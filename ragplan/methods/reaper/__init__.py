"""REAPER (Joshi et al., CIKM 2024): retrieval plans made in one LLM call, checked, then executed."""

from ragplan.methods.reaper.execute import ExecutionResult, StepEvidence, run_plan_async, run_plan
from ragplan.methods.reaper.plan import (ParseResult, PlanArg, PlanCall, PlanError, PlanStep, RetrievalPlan, as_steps, format_plan,
                                 parse_plan)
from ragplan.methods.reaper.validate import repair_prompt, check_plan

__all__ = [
    "RetrievalPlan", "PlanStep", "PlanArg", "PlanError", "ParseResult", "PlanCall", "parse_plan", "format_plan", "as_steps",
    "check_plan", "repair_prompt",
    "StepEvidence", "ExecutionResult", "run_plan_async", "run_plan",
]
