"""``ragplan reaper train-classifier --shop DIR [--goldset FILE] --out DIR [--seed S] [--model-path DIR] [--json]``.

Trains the classification baseline's route classifier (:mod:`ragplan.methods.reaper.classifier`) on the gold
set's ``train`` split and prints, for the held-out ``test`` split, per-class precision / recall / F1
with the accuracy next to the majority-class rate (the floor a classifier must beat). Without
``--goldset`` the shop's ``goldset.jsonl`` is read, or the default gold set of the shop is generated
in memory (the same one ``ragplan`` benchmarks generate: seed 0, 360 questions). ``--json`` prints
the report as one JSON object.

Exit codes: 0 trained and saved; 2 bad input (no shop, unreadable gold set, a split missing, an
unusable embedding model).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_classifier_parser", "run_classifier", "format_report"]


def add_classifier_parser(rsub: Any) -> argparse.ArgumentParser:
    """Register ``train-classifier`` on the subparsers of the ``reaper`` command."""
    p = rsub.add_parser("train-classifier", help="train the classification baseline's route classifier",
                        description="Train the route classifier (Sentence-BERT features, logistic regression + kNN) "
                                    "on the gold set's train split; report per-class P/R/F1 on the test split next "
                                    "to the majority-class rate. Exit 2 on bad input.")
    p.add_argument("--shop", required=True, metavar="DIR", help="the shop folder (`ragplan reaper make-shop`)")
    p.add_argument("--goldset", default="", metavar="FILE",
                   help="gold-set JSONL (default: DIR/goldset.jsonl, or the shop's default gold set generated)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to save the classifier to")
    p.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    p.add_argument("--model-path", default="", metavar="DIR",
                   help="a local Sentence-BERT model folder (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(reaper_command="train-classifier")
    return p


def format_report(report: Any) -> str:
    """The per-class table and the summary lines of a :class:`~ragplan.methods.reaper.classifier.ClassifierReport`."""
    rows = [["class", "precision", "recall", "f1", "support"]]
    for cls, m in report.per_class.items():
        rows.append([cls, f"{m['precision']:.3f}", f"{m['recall']:.3f}", f"{m['f1']:.3f}", str(m["support"])])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    table = "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                      for r in rows)
    heads = ", ".join(f"{k} {v:.3f}" for k, v in report.head_accuracy.items())
    return (f"{table}\n\n"
            f"accuracy {report.accuracy:.3f} (macro F1 {report.macro_f1:.3f}; heads alone: {heads})\n"
            f"majority-class rate {report.majority_rate:.3f} (always {report.majority_class})\n"
            f"train {report.n_train}, test {report.n_test} examples; {len(report.classes)} classes; "
            f"saved to {report.out_dir}")


def _examples(args: argparse.Namespace) -> list[Any]:
    from ragplan.methods.reaper.goldset import generate_goldset, load_goldset

    shop = Path(args.shop)
    if not shop.is_dir():
        raise ValueError(f"the shop folder {shop} does not exist")
    path = Path(args.goldset) if args.goldset else shop / "goldset.jsonl"
    if args.goldset or path.exists():
        try:
            return load_goldset(path)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"cannot read the gold set {path}: {exc}") from exc
    try:
        return generate_goldset(shop)
    except Exception as exc:  # not a shop folder
        raise ValueError(f"cannot generate a gold set from {shop}: {exc}") from exc


def run_classifier(args: argparse.Namespace) -> int:
    """Run ``ragplan reaper train-classifier``; returns the exit code (0 saved, 2 bad input)."""
    from ragplan.methods.reaper.classifier import train_classifier
    from ragplan.tools.embeddings import EmbeddingModelError

    try:
        examples = _examples(args)
        report = train_classifier(examples, model_path=args.model_path, seed=args.seed, out_dir=args.out)
    except (ValueError, EmbeddingModelError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(format_report(report))
    return 0
