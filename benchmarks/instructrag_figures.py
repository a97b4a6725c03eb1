"""InstructRAG's LLM-free figures on published ReAct trajectories (Reflexion's HotpotQA logs): the selected path of
held-out questions against their own successful path, trained agents beside untrained ones and one-line baselines.
Usage: python benchmarks/instructrag_figures.py --logs LOG… [--epochs 20] [--seeds 0 1 2] [--json FILE]"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragplan.methods.instructrag.figures import format_selection_rows, selection_quality  # noqa: E402
from ragplan.methods.instructrag.graph import build_instruction_graph, embedder_for_graph  # noqa: E402
from ragplan.methods.instructrag.meta import MetaSettings, meta_train  # noqa: E402
from ragplan.methods.instructrag.paths import read_paths  # noqa: E402
from ragplan.methods.instructrag.reward import PathMatchReward  # noqa: E402


def part(question: str) -> str:
    """The fixed split, decided before any feature was designed: sha1 of the question text modulo 5 — 0, 1 held out;
    2 the training (query) questions; 3, 4 the questions whose paths build the instruction graph."""
    r = int(hashlib.sha1(question.encode("utf-8")).hexdigest(), 16) % 5
    return "held_out" if r < 2 else "query" if r == 2 else "graph"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--logs", nargs="+", required=True, metavar="LOG", help="ReAct/Reflexion trajectory logs")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--json", default="", help="also write the rows to this JSON file")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rep = read_paths(args.logs)
    sets: dict[str, list] = {"graph": [], "query": [], "held_out": []}
    for p in rep.successful:
        sets[part(p.question)].append(p)
    print(f"{len(rep.successful)} successful paths of {len({p.question for p in rep.successful})} questions in "
          f"{', '.join(Path(f).name for f in args.logs)}; " + ", ".join(
              f"{k}: {len(v)} paths / {len({p.question for p in v})} questions" for k, v in sets.items()))
    emb = embedder_for_graph()
    g = build_instruction_graph(sets["graph"], embedder=emb)
    st = g.stats()
    print(f"graph: {st.nodes} nodes, {st.instructions} instructions, δ = {st.delta}, calibrated threshold {st.threshold}")
    out: dict = {"split": {k: len(v) for k, v in sets.items()}, "runs": []}
    for seed in args.seeds:
        t0 = time.perf_counter()
        rl, ml, report = meta_train(g, sets["query"], emb, PathMatchReward(emb), MetaSettings(epochs=args.epochs, seed=seed))
        curve = " ".join(f"{m:.3f}±{d:.3f}" for m, d in zip(report.curves["reward"], report.curves["reward_sd"]))
        print(f"\nseed {seed}: trained {time.perf_counter() - t0:.1f} s; path-match reward per epoch (mean±sd): {curve}")
        for name, query in (("held-out", sets["held_out"]), ("training", sets["query"])):
            rows = selection_quality(g, rl, ml, query, emb, seed=seed)
            print(f"{name} questions ({len(query)} paths):\n{format_selection_rows(rows)}")
            out["runs"].append({"seed": seed, "questions": name, "rows": [r.__dict__ for r in rows]})
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
