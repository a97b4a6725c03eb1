"""How far the plan assessor's held-out figures carry: the trained pick's MRR per seed in three candidate pools
(``all``, ``no gold title``, ``noisy context``) and the share of picks that are a gold title.
Usage: python benchmarks/furepa_assessor.py --data FILE [--seeds 0,1,2] [--limit N] [--save FILE.json]."""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.common import add_report_flags, load_baseline, print_rows, save_report  # noqa: E402
from ragplan.datasets import load_qa  # noqa: E402
from ragplan.eval.retrieval import title_key  # noqa: E402
from ragplan.tools.textindex import TextIndex  # noqa: E402
from ragplan.methods.furepa.data import HopGroup, build_groups, label_groups  # noqa: E402
from ragplan.methods.furepa.pipeline import context_index  # noqa: E402
from ragplan.methods.furepa.scorer import load_assessor  # noqa: E402
from ragplan.methods.furepa.train import pick_mrr, split_by_question, train_assessor  # noqa: E402


def _without_gold_titles(groups: list[HopGroup]) -> list[HopGroup]:
    out = []
    for g in groups:
        gold = {title_key(t) for t in g.targets}
        keep = [(c, y) for c, y in zip(g.candidates, g.labels) if title_key(c) not in gold]
        if len(keep) >= 2:
            out.append(replace(g, candidates=[c for c, _ in keep], labels=[y for _, y in keep]))
    return out


def _with_distractors(groups: list[HopGroup], paragraphs: dict[str, list[tuple[str, str]]], seed: int) -> list[HopGroup]:
    out = []
    for g in groups:
        held = {title_key(t) for t in g.targets} | {title_key(t) for t, _ in g.context}
        pool = [p for p in paragraphs.get(g.qid, []) if title_key(p[0]) not in held]
        extra = random.Random(f"{seed}:{g.qid}:{g.hop}").sample(pool, min(2, len(pool)))
        out.append(replace(g, context=list(g.context) + extra, candidates=list(g.candidates), labels=[]))
    return out


def _row(seed: int, pool: str, groups: list[HopGroup], assessor: Any) -> dict[str, Any]:
    scores = [assessor.score(g.question, g.context, g.candidates) for g in groups]
    picks = [max(range(len(s)), key=lambda i: (s[i], -i)) for s in scores]
    gold_pick = sum(1 for g, i in zip(groups, picks) if title_key(g.candidates[i]) in {title_key(t) for t in g.targets})
    return {"key": f"{seed}/{pool}", "seed": seed, "pool": pool, "points": len(groups), **pick_mrr(groups, scores),
            "gold_title_picked": round(gold_pick / len(groups), 4) if groups else 0.0}


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Train per seed and measure the three pools (see the module docstring); the table's rows."""
    examples = load_qa(args.data, limit=args.limit)
    paragraphs = {ex.id: [(t, " ".join(s.strip() for s in sents if s.strip())) for t, sents in ex.contexts]
                  for ex in examples}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        index_dir = context_index(examples, Path(tmp) / "context_index", progress=False)
        with TextIndex.open(str(index_dir)) as index:
            for seed in args.seeds:
                groups = build_groups(examples, seed=seed, n_candidates=6)
                label_groups(groups, index.search_many, k=20)
                out = Path(tmp) / f"assessor-{seed}"
                train_assessor(groups, out, seed=seed, progress=False)
                usable = [g for g in groups if len(g.labels) == len(g.candidates) and len(g.candidates) >= 2]
                _, test = split_by_question(usable, 0.25, seed)
                assessor = load_assessor(out)
                rows.append(_row(seed, "all", test, assessor))
                reduced = _without_gold_titles(test)
                rows.append(_row(seed, "no gold title", reduced, assessor))
                noisy = _with_distractors(test, paragraphs, seed)
                label_groups(noisy, index.search_many, k=20)
                rows.append(_row(seed, "noisy context", noisy, assessor))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, run, print the table (and save / compare)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="QA data with gold supporting passages (e.g. `ragplan furepa make-data`)")
    ap.add_argument("--seeds", default="0,1,2", type=lambda s: [int(x) for x in s.split(",") if x.strip()],
                    help="seeds, comma-separated (default 0,1,2)")
    ap.add_argument("--limit", type=int, default=None, help="read the first N questions only")
    add_report_flags(ap, "trained MRR")
    args = ap.parse_args(argv)
    rows = run(args)
    print_rows(rows, [("seed", "d"), ("pool", "s"), ("points", "d"), ("trained", ".3f"), ("first", ".3f"),
                      ("random", ".3f"), ("oracle", ".3f"), ("gold_title_picked", ".3f")],
               key="key", baseline=load_baseline(args.baseline), compare="trained")
    save_report(args.save, "furepa_assessor", rows, data=str(args.data), seeds=args.seeds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
