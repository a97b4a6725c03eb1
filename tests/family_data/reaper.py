"""REAPER family: a small generated retail shop, a route classifier trained on its gold set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.family_data import FamilyData, once


def _agent_call(req: Any) -> dict[str, Any]:
    """REAPER's agent baseline: one help-centre call, then done."""
    if "Evidence: none" not in req.prompt_text:
        return {"thought": "enough", "done": True, "tool": "", "args": {}}
    return {"thought": "ask the help centre", "done": False, "tool": "customer_support", "args": {"question": "returns"}}


def make(root: Path) -> FamilyData:
    """Flags and data of the REAPER family."""
    from ragplan.methods.reaper.goldset import generate_goldset
    from ragplan.tools.retail import generate_shop
    from ragplan.methods.reaper.classifier import train_classifier

    shop = once(root / "shop", lambda d: generate_shop(d, seed=0, n_products=60, n_orders=30))
    classifier = once(root / "classifier", lambda d: train_classifier(generate_goldset(shop, n=200), seed=0, out_dir=d))
    clf = lambda m: m == "classifier_planner"  # noqa: E731
    return FamilyData(
        cli=lambda m: ["--shop", str(shop)] + (["--classifier", str(classifier)] if clf(m) else []),
        api=lambda m: {"shop_dir": str(shop), **({"classifier_dir": str(classifier)} if clf(m) else {})},
        eval=lambda m: ["--benchmark", "reaper-retail", "--data", str(shop), "--benchmark-option", "split=all",
                        "--set", f"shop_dir={shop}", *(["--set", f"classifier_dir={classifier}"] if clf(m) else [])],
        question="how do I return a blender I bought?",
        overrides={"Response": {"answer": "You can return it within 30 days."}, "AgentAction": _agent_call,
                   "FilledArguments": {"steps": {"1": {"question": "how do I return an item"}}}},
        text='Step 1: Ask the help centre - #E1 = customer_support("how do I return an item")',
        endless={"AgentAction": {"thought": "ask again", "done": False, "tool": "customer_support",
                                 "args": {"question": "returns"}},
                 "text": 'Step 1: Look it up - #E1 = web_search("blender returns")'})
