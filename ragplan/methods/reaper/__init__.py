"""REAPER (Joshi et al., CIKM 2024): retrieval plans made in one LLM call, checked, then executed.

The names below are imported on first use, so ``ragplan reaper --help`` loads neither pydantic nor LangChain.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragplan.methods.reaper.execute import ExecutionResult, StepEvidence, run_plan, run_plan_async
    from ragplan.methods.reaper.plan import (ParseResult, PlanArg, PlanCall, PlanError, PlanStep, RetrievalPlan,
                                             as_steps, format_plan, parse_plan)
    from ragplan.methods.reaper.validate import check_plan, repair_prompt

_MODULE = {**dict.fromkeys(["StepEvidence", "ExecutionResult", "run_plan_async", "run_plan"], "execute"),
           **dict.fromkeys(["RetrievalPlan", "PlanStep", "PlanArg", "PlanError", "ParseResult", "PlanCall", "parse_plan",
                            "format_plan", "as_steps"], "plan"),
           **dict.fromkeys(["check_plan", "repair_prompt"], "validate")}
__all__ = list(_MODULE)


def __getattr__(name: str) -> Any:
    if name not in _MODULE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_MODULE[name]}"), name)
