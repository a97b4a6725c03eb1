"""retrieve_paths: K candidate instruction paths (InstructRAG §4.3) by the RL-Agent's walk (``rl_agent``), a similarity
threshold (``threshold``) or RAP-style stored paths (``stored``), unless ``path_selection`` is a one-line baseline (the
majority path, the constant plan); an unloadable graph ends the run (``setup_error``)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragplan.methods.instructrag.tasks import question_type, task_split
from ragplan.nodes import Node
from ragplan.state.failure import failed
from ragplan.state.instructrag import InstructRAGContext, InstructRAGState, PlannedPath

__all__ = ["make_retrieve_paths", "retrieve_stored_paths"]


def make_retrieve_paths(mode: str, *, pick_first: bool = False) -> Node[InstructRAGState, InstructRAGContext]:
    """The node for ``mode`` (``rl_agent``, ``threshold`` or ``stored``); ``pick_first`` selects the first path."""
    name = "retrieve_stored_paths" if mode == "stored" else "retrieve_paths"
    pick_first = pick_first or mode == "stored"

    def retrieve_paths(state: InstructRAGState, runtime: Runtime[InstructRAGContext]) -> dict[str, Any]:
        """K candidate paths from the instruction graph (or its store)."""
        ctx = runtime.context
        task = str(state.get("task") or ctx.task or question_type(state["question"]))
        update: dict[str, Any] = {"task": task, "task_split": task_split(task)}
        if state.get("given_path"):
            path = PlannedPath(instructions=list(state["given_path"]), source="given")
            return {**update, "candidate_paths": [path], "selected_path": path, "selection": "given"}
        from ragplan.methods.instructrag.selection import graph_candidates, load_parts, stored_candidates  # torch

        how = ctx.path_selection if ctx.path_selection in ("majority", "constant") else mode
        try:
            parts = load_parts(ctx.instruction_graph_dir, ctx.agents_dir, ctx.embedding_model)
            if how in ("stored", "majority", "constant"):
                cands = stored_candidates(parts, state["question"], k=ctx.candidate_paths, how=how)
            else:
                untrained = ctx.path_selection == "untrained"
                rl = parts.agents(task, ctx.use_adapted, untrained)[0] if mode == "rl_agent" else None
                cands = graph_candidates(parts, state["question"], rl, k=ctx.candidate_paths,
                                         threshold=ctx.traversal_threshold, max_len=ctx.max_path_len)
        except Exception as exc:  # missing or damaged graph / agents
            return failed("setup", name, f"{name}: {exc}", task=task, stop_reason="setup_error", answer="")
        update["candidate_paths"] = cands
        if pick_first or how != mode:  # the majority path and the constant plan are used as they are
            picked = how if how != "rl_agent" else "first"
            update.update(selected_path=cands[0] if cands else None, selection=picked if cands else "none")
        if not cands and how in ("rl_agent", "threshold"):
            thr = parts.graph.threshold if ctx.traversal_threshold < 0 else ctx.traversal_threshold
            why = f"no node reached the walk's threshold {thr:.3f}" if mode == "threshold" else \
                "the RL-Agent excluded every start node"
            update["selection"] = f"none: no path found in the instruction graph ({why}); planning without one, as react"
        return update

    return retrieve_paths


retrieve_stored_paths = make_retrieve_paths("stored")
"""RAP-style: the paths of the most similar stored questions; the most similar one is used."""
