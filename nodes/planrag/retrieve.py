"""retrieve: the LLM writes one action (a Cypher query, or self-thinking) and the tool runs it; ``mode`` is the
variant: ``plan`` (PlanRAG), ``react`` (IterRAG) or ``single`` (SingleRAG). A failed query comes back as the
observation for a bounded repair; ``next`` says where the run goes (repair, continue, answer, stop)."""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.messages import BaseMessage
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from ragplan.llm import decide_for, failure_update
from ragplan.nodes import Node
from ragplan.nodes.planrag.prompt import messages, plan_block, store_for, trace_block
from ragplan.state.context import PlanRAGContext
from ragplan.state.planrag import PlanRAGState, RetrievalStep
from ragplan.tools.graphdb import make_graph_db_tool

__all__ = ["RetrievalAction", "make_retrieve", "RetrieveMode"]

RetrieveMode = Literal["plan", "react", "single"]

#: Graph steps kept in reserve below LangGraph's recursion limit for replan + answer.
RECURSION_MARGIN = 3

FORMAT = """Reply with:
- thought: your reasoning for this action;
- action: "graph_db" to query the database, or "self_thinking" to reason without it{finish};
- action_input: for graph_db one syntactically correct, read-only Cypher statement that uses only the
  labels, relationship types and properties of the schema; for self_thinking your reasoning{finish_input}."""

INSTRUCTIONS: dict[str, str] = {
    "plan": (
        "Carry out the current step of the plan. Think only about what this step needs (the plan already "
        "decided what to analyse), then write the action for it."
    ),
    "react": (
        "Decide what to do next. Think about what data is still missing to choose the best decision, then "
        "retrieve it, or reason over what you have. When the observations are enough to answer, choose "
        "\"finish\"."
    ),
    "single": (
        "You may query the database once. Write a single query that retrieves everything needed to choose "
        "the best decision (joins, aggregations and computed columns are allowed)."
    ),
}

REPAIR_HINT = (
    "The previous attempt at this step failed (see its observation). Fix the query: check labels, relationship "
    "directions, property names and Cypher syntax against the schema."
)


class RetrievalAction(BaseModel):
    """One action of the retriever."""

    thought: str = Field(description="Your reasoning for this action.")
    action: Literal["graph_db", "self_thinking", "finish"] = Field(
        description="graph_db = run a Cypher query; self_thinking = reason without the database; finish = enough data to answer."
    )
    action_input: str = Field(default="", description="The Cypher query (graph_db) or your reasoning (self_thinking).")


def _prompt(state: PlanRAGState, mode: RetrieveMode, ctx: PlanRAGContext) -> list[BaseMessage]:
    steps: list[RetrievalStep] = state.get("steps") or []
    parts = [f"Question: {state['question']}"]
    if mode == "plan":
        parts.append(plan_block(state.get("plan") or [], state.get("current_step", 0)))
    parts += [trace_block(steps), INSTRUCTIONS[mode]]
    if steps and not steps[-1].ok and state.get("repairs", 0) > 0:
        parts.append(REPAIR_HINT)
    finish = mode == "react"
    parts.append(FORMAT.format(finish=', or "finish" when you can answer' if finish else "",
                               finish_input="; for finish leave it empty" if finish else ""))
    return messages(state, ctx.row_cap, *parts)


def make_retrieve(mode: RetrieveMode) -> Node[PlanRAGState, PlanRAGContext]:
    """Build the retrieve node for ``mode`` (plan / react / single)."""

    def retrieve(state: PlanRAGState, runtime: Runtime[PlanRAGContext]) -> dict[str, Any]:
        """Ask for one action, run it, record the step, and say where to go next."""
        ctx = runtime.context
        index = len(state.get("steps") or []) + 1
        plan = state.get("plan") or []
        cur = state.get("current_step", 0)
        plan_step = cur + 1 if mode == "plan" and cur < len(plan) else None
        base: dict[str, Any] = {"index": index, "plan_step": plan_step, "plan_step_text": plan[cur] if plan_step else ""}

        d = decide_for(ctx, _prompt(state, mode, ctx), RetrievalAction)
        if not d.ok:
            failed = failure_update(d, "retrieve")
            return {**failed, "next": "answer" if failed["stop_reason"] == "llm_unparseable" else "stop"}
        act = d.value
        if act.action == "finish":  # outside ReAct too: the LLM says it knows enough, retrieval ends
            step = RetrievalStep(**base, thought=act.thought, action="finish")
            stop = "answered" if mode == "react" else "answered_early"
            return {"steps": [step], "usage": d.usage, "stop_reason": stop, "next": "answer"}
        if act.action == "self_thinking":
            step = RetrievalStep(**base, thought=act.thought, action="self_thinking", query=act.action_input,
                                 observation=act.action_input or act.thought)
        else:
            tool = make_graph_db_tool(store_for(ctx), row_cap=ctx.row_cap, timeout_s=ctx.query_timeout_s)
            msg = tool.invoke({"type": "tool_call", "name": "graph_db", "args": {"query": act.action_input}, "id": f"step-{index}"})
            out = msg.artifact
            step = RetrievalStep(**base, thought=act.thought, action="graph_db", query=act.action_input,
                                 observation=out.observation, ok=out.ok, error_kind=out.error_kind,
                                 row_count=out.row_count, total_rows=out.total_rows, query_ms=out.elapsed_ms)
        repairs = 0 if step.ok else state.get("repairs", 0) + 1
        update: dict[str, Any] = {"steps": [step], "usage": d.usage, "repairs": repairs}
        if index >= ctx.max_steps:
            update.update(stop_reason="max_steps", next="answer")
        elif state.get("remaining_steps", RECURSION_MARGIN + 1) <= RECURSION_MARGIN:
            update.update(stop_reason="recursion_limit", next="answer")
        elif not step.ok and repairs <= (ctx.single_rag_repairs if mode == "single" else ctx.max_query_repairs):
            update["next"] = "repair"
        elif mode == "single":
            update.update(stop_reason="single_retrieval" if step.ok else "max_repairs", next="answer")
        else:
            update["next"] = "continue"
        return update

    return retrieve
