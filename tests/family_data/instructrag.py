"""InstructRAG family: a synthetic world's local index, an instruction graph and agents trained for a few seconds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.family_data import FamilyData, once


def _step(req: Any) -> dict[str, Any]:
    """One Search, then Finish (the planning loop retrieves once and answers)."""
    if "Observation 1:" in req.prompt_text.split("Now solve this task.")[-1]:
        return {"thought": "The page names the director.", "action": "Finish", "argument": "Mira Sorensen"}
    return {"thought": "I search the film.", "action": "Search", "argument": "The Distant Signal"}


def build_parts(root: Path) -> tuple[Path, Path, Path, Path]:
    """World, local index, instruction graph and agents under ``root`` (built once per test module)."""
    from ragplan.tools.textindex import build_index
    from ragplan.methods.instructrag.graph import build_instruction_graph, embedder_for_graph
    from ragplan.methods.instructrag.meta import MetaSettings, meta_train
    from ragplan.methods.instructrag.reward import PathMatchReward
    from ragplan.methods.instructrag.synth import split_paths, write_world

    world, index, graph, agents = root / "ir_world", root / "ir_index", root / "ir_graph", root / "ir_agents"
    if not (agents / "rl_agent.pt").exists():
        w = write_world(world, 60, seed=0)
        build_index(world / "passages.jsonl", index, progress=False)
        parts = split_paths(w.successful)
        emb = embedder_for_graph()
        g = build_instruction_graph(parts["support_seen"] + parts["support_unseen"], embedder=emb, failed=w.failed)
        g.save(graph)
        meta_train(g, parts["query_seen"], emb, PathMatchReward(), MetaSettings(epochs=1, questions_per_task=3), agents)
    return world, index, graph, agents


def make(root: Path) -> FamilyData:
    """Flags and data of the InstructRAG family."""
    world, index, graph, agents = build_parts(root)
    first = once(root / "ir_hotpot.json",
                 lambda p: p.write_text(json.dumps(json.loads((world / "hotpot.json").read_text())[:1])))
    return FamilyData(
        cli=lambda m: ["--retriever", "local", "--index", str(index), "--instruction-graph", str(graph), "--agents", str(agents)],
        api=lambda m: {"retriever": "local", "index_dir": str(index), "instruction_graph_dir": str(graph),
                       "agents_dir": str(agents)},
        eval=lambda m: ["--benchmark", "hotpotqa", "--data", str(first), "--context-only",
                        "--set", f"instruction_graph_dir={graph}", "--set", f"agents_dir={agents}"],
        question="Who directed The Distant Signal?",
        overrides={"TAODecision": _step, "PlannedAnswer": {"answer": "Mira Sorensen"}},
        endless={"TAODecision": {"thought": "Search once more.", "action": "Search", "argument": "The Distant Signal"}})
