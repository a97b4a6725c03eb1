"""The typed view every graph family's result shares: built from a graph's output dict."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["GraphResult"]


class GraphResult(BaseModel):
    """Base of the typed results (PlanRAGResult, TextQAResult, ReaperResult)."""

    @classmethod
    def from_state(cls, state: dict[str, Any]):
        """Build from a graph's output dict (objects, or plain dicts from a LangGraph server)."""
        return cls.model_validate({k: v for k, v in state.items() if k in cls.model_fields and v is not None})
