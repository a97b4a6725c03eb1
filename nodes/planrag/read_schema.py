"""read_schema: open the run's graph store and read its schema once, for every later prompt."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragplan.nodes.planrag.prompt import store_for
from ragplan.state.context import GraphDBContext
from ragplan.state.failure import failed
from ragplan.state.planrag import PlanRAGState

__all__ = ["read_schema"]


def read_schema(state: PlanRAGState, runtime: Runtime[GraphDBContext]) -> dict[str, Any]:
    """Load (or reuse) the context's store and put its schema text in state; a store that cannot be opened
    ends the run with the reason in ``error`` (never raises)."""
    try:
        schema = store_for(runtime.context).schema()
    except Exception as exc:  # ScriptError, ValueError, driver errors: all end the run with a reason
        return failed("setup", "read_schema", f"graph store unavailable: {exc}", stop_reason="store_error", answer="")
    return {"schema_text": schema.to_prompt()}
