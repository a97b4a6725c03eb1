"""The plan assessor in-domain and cross-dataset: per seed, train each scorer (boosted trees, cross-encoder) on each
dataset, then report each trained pick's MRR beside the one-line baselines on a validation part of the training
questions (trained on the rest; this row chooses the default scorer), on the held-out questions and on every question
of the other dataset.
Usage: python benchmarks/furepa_assessor.py --data A --data B [--queries-from LOG ...] [--seeds 0,1,2] [--scorers trees]."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.common import add_report_flags, print_rows, save_report  # noqa: E402
from ragplan.methods.furepa.pipeline import labelled_groups  # noqa: E402
from ragplan.methods.furepa.scorer import load_assessor  # noqa: E402
from ragplan.methods.furepa.train import BASELINES, evaluate_assessor, split_by_question, train_assessor  # noqa: E402

SCORERS = {"trees": "trees", "cross": "cross-encoder"}


def _row(seed: int, trained_on: str, measured_on: str, points: int, mrr: dict[str, dict[str, float]]) -> dict[str, Any]:
    base = next(iter(mrr.values()))  # the baselines: the same for every scorer
    best = max(BASELINES, key=lambda b: base[b])
    row = {"key": f"{seed}/{trained_on}/{measured_on}", "seed": seed, "trained_on": trained_on, "measured_on": measured_on,
           "points": points, **{k: base[k] for k in base if k != "trained"}, "best": best,
           **{s: m["trained"] for s, m in mrr.items()},
           **{f"{s}_margin": round(m["trained"] - base[best], 4) for s, m in mrr.items()}}
    print(row, file=sys.stderr, flush=True)
    return row


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Train per seed and dataset, measure in-domain (held out) and on the other datasets; the table's rows."""
    work = Path(args.work)
    rows: list[dict[str, Any]] = []
    for seed in args.seeds:
        groups = {d: labelled_groups(d, work / Path(d).stem / "context_index", context_only=True, seed=seed,
                                     logs=args.queries_from, progress=False) for d in args.data}
        for d in args.data:
            part, _ = split_by_question(groups[d], 0.25, seed)  # the training questions only
            for measured, train_on, name in (("validation", part, "validation"), ("held out", groups[d], "assessor")):
                outs = {s: work / Path(d).stem / f"{name}-{s}-{seed}" for s in args.scorers}  # last: measured below
                reports = {s: train_assessor(train_on, outs[s], seed=seed, scorer=SCORERS[s], progress=False) for s in outs}
                rows.append(_row(seed, Path(d).stem, measured, next(iter(reports.values())).n_groups["test"],
                                 {s: r.mrr for s, r in reports.items()}))
            for other in (x for x in args.data if x != d):
                evs = {s: evaluate_assessor(groups[other], load_assessor(outs[s])) for s in outs}
                rows.append(_row(seed, Path(d).stem, Path(other).stem, next(iter(evs.values()))["n_groups"],
                                 {s: e["mrr"] for s, e in evs.items()}))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, run, print the table (and save / compare)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", action="append", required=True, help="QA data with gold supporting passages (repeat)")
    ap.add_argument("--queries-from", action="append", default=[], help="ReAct/Reflexion trajectory log (repeat)")
    ap.add_argument("--seeds", default="0,1,2", type=lambda s: [int(x) for x in s.split(",") if x.strip()],
                    help="seeds, comma-separated (default 0,1,2)")
    ap.add_argument("--scorers", default="trees,cross", type=lambda s: s.split(","), help="trees, cross or both (default)")
    ap.add_argument("--work", default=".furepa_assessor", help="folder for the context indexes and assessors")
    add_report_flags(ap, "cross-encoder MRR")
    args = ap.parse_args(argv)
    if bad := set(args.scorers) - SCORERS.keys():
        ap.error(f"--scorers: unknown {', '.join(sorted(bad))}; choose from {', '.join(SCORERS)}")
    rows = run(args)
    print_rows(rows, [("seed", "d"), ("trained_on", "s"), ("measured_on", "s"), ("points", "d"), ("trees", ".3f"),
                      ("cross", ".3f"), ("overlap", ".3f"), ("bm25", ".3f"), ("retriever", ".3f"), ("first", ".3f"),
                      ("random", ".3f"), ("oracle", ".3f"), ("trees_margin", "+.3f"), ("cross_margin", "+.3f")],
               key="key", baseline=args.baseline, compare="cross")
    save_report(args.save, "furepa_assessor", rows, data=args.data, seeds=args.seeds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
