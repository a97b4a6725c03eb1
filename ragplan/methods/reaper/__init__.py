"""REAPER (Joshi et al., CIKM 2024): retrieval plans made in one LLM call, checked, then executed.

* :mod:`ragplan.methods.reaper.plan` — the typed plan (:class:`RetrievalPlan`, :class:`PlanStep`, :class:`PlanArg`), one
  planner call's validated plan (:class:`PlanCall`), :func:`parse_plan` for what planners print,
  :func:`format_plan` for the canonical form and :func:`as_steps` to load steps from state or records;
* :mod:`ragplan.methods.reaper.validate` — :func:`check_plan` against a tool registry and the
  :func:`repair_prompt` for one repair round;
* :mod:`ragplan.methods.reaper.execute` — :func:`run_plan_async` / :func:`run_plan`: steps in dependency order,
  independent ones in parallel, ``#Ej`` replaced by earlier outputs.
"""

from ragplan.methods.reaper.execute import ExecutionResult, StepEvidence, run_plan_async, run_plan
from ragplan.methods.reaper.plan import (ParseResult, PlanArg, PlanCall, PlanError, PlanStep, RetrievalPlan, as_steps, format_plan,
                                 parse_plan)
from ragplan.methods.reaper.validate import repair_prompt, check_plan

__all__ = [
    "RetrievalPlan", "PlanStep", "PlanArg", "PlanError", "ParseResult", "PlanCall", "parse_plan", "format_plan", "as_steps",
    "check_plan", "repair_prompt",
    "StepEvidence", "ExecutionResult", "run_plan_async", "run_plan",
]
