"""The method steps, one LangGraph node per module, in one folder per family plus common/."""

from __future__ import annotations

from typing import Any, Protocol

from langgraph.runtime import Runtime
from langgraph.typing import ContextT, StateT_contra

__all__ = ["Node"]


class Node(Protocol[StateT_contra, ContextT]):
    """What a node factory returns (``make_retrieve``, ``make_review_plan`` …): a node of a family's state run with
    the family's context, giving a partial state update."""

    __name__: str

    def __call__(self, state: StateT_contra, runtime: Runtime[ContextT]) -> dict[str, Any]:
        """Run the step on ``state``; return the fields it changes."""
        ...
