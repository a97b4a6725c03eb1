"""Think-then-Act family: a three-passage local index, one HotpotQA record."""

from __future__ import annotations

import json
from pathlib import Path

from tests.family_data import FamilyData, once

PASSAGES = [
    ("Ed Wood", "Edward Davis Wood Jr. was an American filmmaker."),
    ("Scott Derrickson", "Scott Derrickson is an American director."),
    ("Alien (film)", "Alien is a 1979 film directed by Ridley Scott."),
]


def local_index(root: Path) -> Path:
    """A small local index (built once per test module; shared by the text families)."""
    from ragplan.tools.textindex import build_index

    index = root / "index"
    if not (index / "meta.json").exists():
        passages = root / "passages.jsonl"
        passages.write_text("".join(json.dumps({"id": str(i), "title": t, "text": x}) + "\n"
                                    for i, (t, x) in enumerate(PASSAGES)))
        build_index(passages, index, progress=False)
    return index


def make(root: Path) -> FamilyData:
    """Flags and data of the Think-then-Act family."""
    from tests.test_datasets import HOTPOT, write_json

    index = local_index(root)
    hotpot = once(root / "hotpot.json", lambda p: write_json(p, HOTPOT[:1]))
    return FamilyData(
        cli=lambda m: ["--retriever", "local", "--index", str(index)],
        api=lambda m: {"retriever": "local", "index_dir": str(index)},
        eval=lambda m: ["--benchmark", "hotpotqa", "--data", str(hotpot), "--context-only"],
        question="Who directed Alien?",
        overrides={"Confidence": {"probability": 0.1}, "ShortAnswer": {"answer": "Ridley Scott"},
                   "ChainOfThought": {"answer": "Ridley Scott"}},
        text="Ridley Scott directed it.")
