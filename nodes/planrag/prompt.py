"""Prompt pieces shared by the PlanRAG-family nodes (PlanRAG Appendix C: role, tools with the schema,
question, trace so far; each node adds its instruction), and the store a run uses."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from ragplan.state.planrag import PlanRAGState, RetrievalStep
from ragplan.tools.graphdb import GraphStore, StoreSpec, open_store

__all__ = ["store_for", "messages", "plan_block", "trace_block"]

ROLE = (
    "You are a decision-making agent. You answer a decision question by analysing data that is stored "
    "in a property graph. You cannot see the data directly: you obtain it by sending Cypher queries to "
    "the Graph DB tool. The question may need the database several times."
)

TOOLS = """Tools you can use:
- Graph DB: runs one read-only Cypher query (Neo4j dialect) and returns the result rows (at most {row_cap}
  rows are shown; aggregate or sort on the server instead of listing everything). The graph follows this schema:
{schema}
- Self-thinking: no database access; use it to reason or compute from values you have already observed.
  Its input is your reasoning, which is recorded as the observation."""


def store_for(ctx: Any) -> GraphStore:
    """The run's graph store: the context's ``graph_store`` object, or the cached store its settings name."""
    if getattr(ctx, "graph_store", None) is not None:
        return ctx.graph_store
    return open_store(StoreSpec.from_env(**{f.name: getattr(ctx, f.name, None) for f in fields(StoreSpec)}))


def messages(state: PlanRAGState, row_cap: int, *parts: str) -> list[BaseMessage]:
    """The system frame every PlanRAG-family prompt starts with (role, tools over the state's schema), then ``parts``
    (blank-line separated) as the human message."""
    schema = "\n".join("    " + line for line in state.get("schema_text", "").splitlines())
    frame = ROLE + "\n\n" + TOOLS.format(row_cap=row_cap, schema=schema)
    return [SystemMessage(frame), HumanMessage("\n\n".join(parts))]


SHORT = 600
"""Characters of an older step's block (and of one plan step) kept in a prompt when the text is longer."""


def plan_block(plan: list[str], current: int | None = None) -> str:
    """The plan as numbered lines, marking done steps and the current one (a step over :data:`SHORT` characters
    cut to them)."""
    if not plan:
        return "Plan: (none)"
    lines = ["Plan:"]
    for i, step in enumerate(plan):
        mark = ""
        if current is not None:
            mark = "  [done]" if i < current else ("  <- current step" if i == current else "")
        lines.append(f"  Step {i + 1}: {_cut(step, SHORT)}{mark}")
    return "\n".join(lines)


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + "…(shortened)"


def _block(s: RetrievalStep, room: int | None = None) -> str:
    """One step of the trace; with ``room``, its thought and input cut to :data:`SHORT`, its observation to ``room``."""
    head = f"[{s.index}]" + (f" (plan step {s.plan_step})" if s.plan_step else "")
    action = "Graph DB" if s.action == "graph_db" else "Self-thinking" if s.action == "self_thinking" else s.action
    thought, query, obs = (s.thought, s.query, s.observation) if room is None else (
        _cut(s.thought, SHORT), _cut(s.query, SHORT), _cut(s.observation, max(SHORT, room)))
    return f"{head}\nThought: {thought}\nAction: {action}\nAction input: {query}\nObservation: {obs}"


def trace_block(steps: list[RetrievalStep], max_chars: int = 24_000) -> str:
    """The retrieval trace so far, oldest first; past ``max_chars`` the oldest steps are cut to :data:`SHORT`
    characters first, then the newest one's thought and input to :data:`SHORT` and its observation to what is left
    (a long reply reaches the next prompt bounded, and later ones as an older step)."""
    if not steps:
        return "Retrieval so far: nothing yet."
    blocks = [_block(s) for s in steps]
    total = sum(len(b) for b in blocks)
    i = 0
    while total > max_chars and i < len(blocks) - 1:
        cut = blocks[i][:SHORT] + "\n…(observation shortened)"
        total -= len(blocks[i]) - len(cut)
        blocks[i] = cut
        i += 1
    if total > max_chars:  # the newest step alone is over the budget
        blocks[-1] = _block(steps[-1], max_chars - (total - len(blocks[-1])) - 2 * SHORT)
    return "Retrieval so far:\n" + "\n\n".join(blocks)
