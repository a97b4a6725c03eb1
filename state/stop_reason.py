"""Why a run stopped: the one ``stop_reason`` type every family's state uses."""

from __future__ import annotations

from typing import Literal

__all__ = ["StopReason"]

StopReason = Literal[
    "",  # not stopped (a reviewer's edit that resumes a finished plan clears it)
    # ran to its end
    "answered", "answered_early", "plan_done", "single_retrieval", "no_answer",
    # a bound ended retrieval (the answer step still runs)
    "max_steps", "max_repairs", "max_iterations", "recursion_limit", "repetition", "invalid_plan",
    # a failure (the reason is in ``error``)
    "llm_error", "llm_unparseable", "store_error", "setup_error", "classifier_error", "assessor_error", "tool_error",
    # a reviewer rejected the plan
    "plan_rejected",
]
"""Every reason a graph sets in ``stop_reason``; each family's state docstring says which of them it uses."""
