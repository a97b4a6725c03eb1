"""check_decision: on DQA data (the context names a ``dqa_scenario``), the answer is normalised to an option and
simulated against the best ("node_03: +1.3 % vs best node_05 +16.6 %") into ``decision_check``; a failed check is
recorded there. On other data the node does nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from langgraph.runtime import Runtime

from ragplan.state.context import PlanRAGContext
from ragplan.state.planrag import PlanRAGState

__all__ = ["check_decision"]


def check_decision(state: PlanRAGState, runtime: Runtime[PlanRAGContext]) -> dict[str, Any]:
    """Simulate the answer's decision on the DQA script and record the verdict (no LLM call)."""
    ctx = runtime.context
    scenario = (ctx.dqa_scenario or "").strip().lower()
    if not scenario or not state.get("answer"):
        return {}
    from ragplan.methods.planrag.data import CLONE_PATHS, DQAQuestion, Scenario
    from ragplan.methods.planrag.grade import grade

    if scenario not in CLONE_PATHS or not ctx.graph_path:
        return {"decision_check": {"error": "a decision check needs dqa_scenario locating|building and graph_path"}}
    q = DQAQuestion(scenario=cast(Scenario, scenario), num=0, country=ctx.dqa_country, year=None, question=state.get("question", ""),
                    business_rules="", goal="", answer="", script=Path(ctx.graph_path), home=ctx.dqa_home, goods=ctx.dqa_goods)
    try:
        return {"decision_check": grade(q, state["answer"]).to_dict()}
    except Exception as exc:  # a bad script or unknown goods: say so in the verdict
        return {"decision_check": {"error": f"{type(exc).__name__}: {exc}"}}
