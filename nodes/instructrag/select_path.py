"""select_path: the ML-Agent picks the candidate path that goes into the planning prompt (InstructRAG §4.4):
the candidate most similar to the question once both are encoded; the scores stay on the candidates."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragplan.state.failure import failed
from ragplan.state.instructrag import InstructRAGContext, InstructRAGState, PlannedPath

__all__ = ["select_path"]


def select_path(state: InstructRAGState, runtime: Runtime[InstructRAGContext]) -> dict[str, Any]:
    """Choose among ``candidate_paths`` with the ML-Agent (a path already chosen is kept: given, majority, constant)."""
    if state.get("selected_path") is not None or state.get("stop_reason") == "setup_error":
        return {}
    ctx = runtime.context
    cands: list[PlannedPath] = list(state.get("candidate_paths") or [])
    if not cands:
        return {"selected_path": None, "selection": state.get("selection") or "none"}
    from ragplan.methods.instructrag.selection import load_parts, ml_pick  # numpy and torch: only when a run selects

    try:
        parts = load_parts(ctx.instruction_graph_dir, ctx.agents_dir, ctx.embedding_model)
        ml = parts.agents(state.get("task", ""), ctx.use_adapted, ctx.path_selection == "untrained")[1]
        best, scores = ml_pick(parts, state["question"], ml, cands)
    except Exception as exc:
        return failed("setup", "select_path", f"select_path: {exc}", stop_reason="setup_error", answer="")
    scored = [c.model_copy(update={"score": s}) for c, s in zip(cands, scores)]
    return {"candidate_paths": scored, "selected_path": scored[best], "selection": "ml_agent"}
