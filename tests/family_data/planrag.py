"""PlanRAG family: the example trade network, a generated DQA clone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.family_data import FamilyData, once

ROOT = Path(__file__).resolve().parents[2]


def _count_query(req: Any) -> dict[str, Any]:
    """PlanRAG / IterRAG: one real query, then finish."""
    if "\nObservation" in req.prompt_text:
        return {"thought": "enough", "action": "finish", "action_input": ""}
    return {"thought": "count them", "action": "graph_db", "action_input": "MATCH (t:Trade_node) RETURN count(t) AS n"}


def make(root: Path) -> FamilyData:
    """Flags and data of the PlanRAG family."""
    from ragplan.methods.planrag.generate import generate_clone

    cql = str(ROOT / "examples" / "trade_network.cql")
    clone = once(root / "dqa", lambda d: generate_clone(d, "locating", 1, seed=0))
    return FamilyData(
        cli=lambda m: ["--graph", cql], api=lambda m: {"store": cql},
        eval=lambda m: ["--benchmark", "dqa-locating", "--data", str(clone)],
        question="Which trade node should Sweden's merchant go to?",
        overrides={"Plan": {"steps": ["Count the trade nodes"]}, "RetrievalAction": _count_query,
                   "ReplanDecision": {"replan": False, "reason": "fine"}, "FinalAnswer": {"answer": "lubeck"}},
        endless={"RetrievalAction": {"thought": "look again", "action": "graph_db",
                                     "action_input": "MATCH (t:Trade_node) RETURN count(t) AS n"},
                 "ReplanDecision": {"replan": True, "reason": "not sure yet", "new_steps": ["Count the trade nodes again"]}})
