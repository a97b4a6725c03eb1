"""LLM usage accounting carried in graph state (calls, tokens, LLM time), merged by a reducer."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["Usage", "add_usage"]


class Usage(BaseModel):
    """How much LLM work a run (or one node) cost."""

    llm_calls: int = Field(default=0, description="Requests sent to the chat model (repairs included).")
    input_tokens: int = Field(default=0, description="Prompt tokens reported by the endpoint.")
    output_tokens: int = Field(default=0, description="Completion tokens reported by the endpoint.")
    llm_seconds: float = Field(default=0.0, description="Wall time spent waiting for the chat model.")

    def __add__(self, other: "Usage") -> "Usage":
        # sums of valid counts are valid: built without re-validation (usage is added up at every node and call)
        return Usage.model_construct(**{k: round(getattr(self, k) + getattr(other, k), 4) for k in Usage.model_fields})


def add_usage(left: Any, right: Any) -> Usage:
    """Reducer: sum two usage records (either may be None, or a dict after a checkpoint round-trip)."""
    return Usage.model_validate(left or {}) + Usage.model_validate(right or {})
