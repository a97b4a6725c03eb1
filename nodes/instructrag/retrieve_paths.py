"""retrieve_paths: candidate instruction paths for the question (InstructRAG §4.3), and the RAP-style baseline.

* ``rl_agent``: the RL-Agent walks the instruction graph and proposes K paths;
* ``threshold``: the same walk with a similarity threshold instead of the RL-Agent (Table 5's ablation);
* ``stored`` (:func:`retrieve_stored_paths`): no graph walk — the stored paths of the most similar past
  questions, as RAP retrieves past trajectories.

The question's task comes from the input, else the ``task`` setting, else the question's wording
(:func:`~ragplan.methods.instructrag.tasks.question_type`); it picks the task's adapted agents. A
``given_path`` in the input skips retrieval. A graph or agents folder that cannot be loaded ends the
run as ``setup_error`` (``prepare`` reports it before any run from the CLI).
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from ragplan.methods.instructrag.selection import graph_candidates, load_parts, stored_candidates
from ragplan.nodes import Node
from ragplan.state.instructrag import InstructRAGContext, InstructRAGState, PlannedPath
from ragplan.methods.instructrag.tasks import question_type, task_split
from ragplan.state.failure import failed

__all__ = ["make_retrieve_paths", "retrieve_stored_paths", "task_of"]


def task_of(state: InstructRAGState, ctx: InstructRAGContext) -> str:
    """The question's task: the input's, the setting's, or the one its wording asks for."""
    return str(state.get("task") or ctx.task or question_type(state["question"]))


def _given(state: InstructRAGState, task: str) -> dict[str, Any] | None:
    given = state.get("given_path")
    if not given:
        return None
    path = PlannedPath(instructions=list(given), source="given")
    return {"task": task, "task_split": task_split(task), "candidate_paths": [path], "selected_path": path, "selection": "given"}


def make_retrieve_paths(mode: str, *, pick_first: bool = False) -> Node[InstructRAGState, InstructRAGContext]:
    """The node for graph walks (``rl_agent`` or ``threshold``); ``pick_first`` selects the first path (no ML-Agent)."""

    def retrieve_paths(state: InstructRAGState, runtime: Runtime[InstructRAGContext]) -> dict[str, Any]:
        """K candidate paths from the instruction graph."""
        ctx = runtime.context
        task = task_of(state, ctx)
        given = _given(state, task)
        if given is not None:
            return given
        try:
            parts = load_parts(ctx.instruction_graph_dir, ctx.agents_dir, ctx.embedding_model)
            cands = graph_candidates(parts, state["question"], task, mode=mode, k=ctx.candidate_paths,
                                     threshold=ctx.traversal_threshold, max_len=ctx.max_path_len, adapted=ctx.use_adapted)
        except Exception as exc:  # missing or damaged graph / agents
            return failed("setup", "retrieve_paths", f"retrieve_paths: {exc}", task=task, stop_reason="setup_error", answer="")
        update: dict[str, Any] = {"task": task, "task_split": task_split(task), "candidate_paths": cands}
        if pick_first:
            update.update(selected_path=cands[0] if cands else None, selection="first" if cands else "none")
        return update

    return retrieve_paths


def retrieve_stored_paths(state: InstructRAGState, runtime: Runtime[InstructRAGContext]) -> dict[str, Any]:
    """RAP-style: the paths of the most similar stored questions; the most similar one is used."""
    ctx = runtime.context
    task = task_of(state, ctx)
    given = _given(state, task)
    if given is not None:
        return given
    try:
        parts = load_parts(ctx.instruction_graph_dir, ctx.agents_dir, ctx.embedding_model)
        cands = stored_candidates(parts, state["question"], k=ctx.candidate_paths)
    except Exception as exc:
        return failed("setup", "retrieve_stored_paths", f"retrieve_stored_paths: {exc}", task=task, stop_reason="setup_error",
                      answer="")
    return {"task": task, "task_split": task_split(task), "candidate_paths": cands,
            "selected_path": cands[0] if cands else None, "selection": "stored" if cands else "none"}
