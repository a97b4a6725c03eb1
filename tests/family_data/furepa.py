"""FuRePA family: the shared three-passage local index, one HotpotQA record, and a plan assessor trained on a
small synthetic multi-hop corpus (so ``furepa`` runs with its default, trained assessor)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.family_data import FamilyData, once

SYNTHETIC = "furepa_synthetic.jsonl"
"""The synthetic multi-hop corpus the assessor is trained on (beside its folder; tests/test_furepa_graphs.py reads it)."""


def _proposal(req: Any) -> dict[str, Any]:
    """Search once (three candidates), then answer from the evidence."""
    if "Evidence gathered so far: none yet." in req.prompt_text:
        return {"thought": "I need the film's director.", "action": "search",
                "queries": ["Who directed Alien?", "Alien film director", "Ridley Scott"], "answer": ""}
    return {"thought": "The evidence says Ridley Scott directed Alien.", "action": "answer", "queries": [],
            "answer": "Ridley Scott"}


def make(root: Path) -> FamilyData:
    """Flags and data of the FuRePA family."""
    from ragplan.methods.furepa.pipeline import assessor_from_data
    from ragplan.methods.furepa.synthetic import write_synthetic
    from tests.family_data.think_then_act import local_index
    from tests.test_datasets import HOTPOT, write_json

    index = local_index(root)
    hotpot = once(root / "furepa_hotpot.json", lambda p: write_json(p, HOTPOT[:1]))
    assessor = once(root / "furepa_assessor", lambda d: assessor_from_data(
        write_synthetic(root / SYNTHETIC, 40, seed=0), d, context_only=True, n_trees=50, progress=False))
    trained = lambda m: m == "furepa"  # noqa: E731
    return FamilyData(
        cli=lambda m: ["--retriever", "local", "--index", str(index)] + (["--assessor", str(assessor)] if trained(m) else []),
        api=lambda m: {"retriever": "local", "index_dir": str(index), **({"assessor_dir": str(assessor)} if trained(m) else {})},
        eval=lambda m: ["--benchmark", "hotpotqa", "--data", str(hotpot), "--context-only",
                        *(["--set", f"assessor_dir={assessor}"] if trained(m) else [])],
        question="Who directed Alien?",
        overrides={"Proposal": _proposal, "EvidenceAnswer": {"answer": "Ridley Scott"}},
        endless={"Proposal": {"thought": "Still missing the director.", "action": "search", "queries": ["Alien director"],
                              "answer": ""}},
        text="Ridley Scott directed it.")
