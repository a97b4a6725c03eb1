"""The plan assessor in-domain and cross-dataset: per seed, train on each dataset, then report the trained pick's MRR
beside the one-line baselines on its held-out questions and on every question of the other dataset.
Usage: python benchmarks/furepa_assessor.py --data A --data B [--queries-from LOG ...] [--seeds 0,1,2] [--work DIR]."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.common import add_report_flags, load_baseline, print_rows, save_report  # noqa: E402
from ragplan.methods.furepa.pipeline import labelled_groups  # noqa: E402
from ragplan.methods.furepa.scorer import load_assessor  # noqa: E402
from ragplan.methods.furepa.train import BASELINES, evaluate_assessor, train_assessor  # noqa: E402


def _row(seed: int, trained_on: str, measured_on: str, points: int, mrr: dict[str, float]) -> dict[str, Any]:
    best = max(BASELINES, key=lambda b: mrr[b])
    return {"key": f"{seed}/{trained_on}/{measured_on}", "seed": seed, "trained_on": trained_on,
            "measured_on": measured_on, "points": points, **mrr, "margin": round(mrr["trained"] - mrr[best], 4)}


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Train per seed and dataset, measure in-domain (held out) and on the other datasets; the table's rows."""
    work = Path(args.work)
    rows: list[dict[str, Any]] = []
    for seed in args.seeds:
        groups = {d: labelled_groups(d, work / Path(d).stem / "context_index", context_only=True, seed=seed,
                                     logs=args.queries_from, progress=False) for d in args.data}
        for d in args.data:
            out = work / Path(d).stem / f"assessor-{seed}"
            report = train_assessor(groups[d], out, seed=seed, progress=False)
            rows.append(_row(seed, Path(d).stem, "held out", report.n_groups["test"], report.mrr))
            for other in (x for x in args.data if x != d):
                ev = evaluate_assessor(groups[other], load_assessor(out))
                rows.append(_row(seed, Path(d).stem, Path(other).stem, ev["n_groups"], ev["mrr"]))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, run, print the table (and save / compare)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", action="append", required=True, help="QA data with gold supporting passages (repeat)")
    ap.add_argument("--queries-from", action="append", default=[], help="ReAct/Reflexion trajectory log (repeat)")
    ap.add_argument("--seeds", default="0,1,2", type=lambda s: [int(x) for x in s.split(",") if x.strip()],
                    help="seeds, comma-separated (default 0,1,2)")
    ap.add_argument("--work", default=".furepa_assessor", help="folder for the context indexes and assessors")
    add_report_flags(ap, "trained MRR")
    args = ap.parse_args(argv)
    rows = run(args)
    print_rows(rows, [("seed", "d"), ("trained_on", "s"), ("measured_on", "s"), ("points", "d"), ("trained", ".3f"),
                      ("overlap", ".3f"), ("bm25", ".3f"), ("retriever", ".3f"), ("first", ".3f"), ("random", ".3f"),
                      ("oracle", ".3f"), ("margin", "+.3f")],
               key="key", baseline=load_baseline(args.baseline), compare="trained")
    save_report(args.save, "furepa_assessor", rows, data=args.data, seeds=args.seeds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
