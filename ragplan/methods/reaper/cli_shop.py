"""``ragplan reaper make-shop``: generate the REAPER retail shop the ``retail`` tools run over.

    ragplan reaper make-shop --out DIR [--seed S] [--products N] [--orders N] [--today YYYY-MM-DD]
                             [--build-index] [--model-path DIR]

The same seed and sizes give byte-identical files. The FAISS indexes are built on the first search
unless ``--build-index`` builds them now (loads the embedding model). Exit codes: 0 success; 2 bad
input (a size below 1, a malformed date, an output path that is a file, a model that cannot load).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_shop_parser", "run_shop"]


def add_shop_parser(sub: Any) -> None:
    """Register ``make-shop`` on the ``reaper`` command's subparsers."""
    p = sub.add_parser("make-shop", help="generate the retail shop (catalogue, orders, help centre) for the retail tools",
                       description="Write a deterministic shop for a seed: products with attributes, Q&A and reviews "
                                   "(JSONL), orders and shipments dated relative to --today (SQLite), and help-centre "
                                   "articles (JSONL). Bind the retail tools to it with --shop-dir / shop_dir.")
    p.add_argument("--out", required=True, metavar="DIR", help="shop directory (created; a shop already there is replaced)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--products", type=int, default=400, metavar="N", help="catalogue size (default 400)")
    p.add_argument("--orders", type=int, default=150, metavar="N", help="customer orders (default 150)")
    p.add_argument("--today", default="2026-11-22", metavar="YYYY-MM-DD",
                   help="the shop's today: order dates and date_math are relative to it (default 2026-11-22)")
    p.add_argument("--build-index", action="store_true",
                   help="build the catalogue and help-centre FAISS indexes now (default: on first search)")
    p.add_argument("--model-path", default="", metavar="DIR",
                   help="with --build-index: local sentence-transformers model (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument("--json", action="store_true", help="print the shop's meta.json instead of a summary")


def _bad(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def run_shop(args: argparse.Namespace) -> int:
    """Run ``ragplan reaper make-shop``; returns the exit code."""
    from ragplan.tools.retail import generate_shop, load_shop

    if args.products < 1 or args.orders < 0:
        return _bad("--products must be at least 1 and --orders at least 0")
    try:
        dt.date.fromisoformat(args.today)
    except ValueError:
        return _bad(f"--today must be a date YYYY-MM-DD, got {args.today!r}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        return _bad(f"--out {str(out)!r} exists and is not a directory")
    path = generate_shop(out, seed=args.seed, n_products=args.products, n_orders=args.orders, today=args.today)
    meta = json.loads((path / "meta.json").read_text())
    if args.build_index:
        from ragplan.tools.embeddings import EmbeddingModelError
        from ragplan.tools.textindex import TextIndexError

        try:
            shop = load_shop(path, model_path=args.model_path)
            shop.build_indexes()
            shop.close()
        except (EmbeddingModelError, TextIndexError) as exc:
            return _bad(str(exc))
    if args.json:
        print(json.dumps(meta, indent=2))
        return 0
    c = meta["counts"]
    print(f"shop (seed {meta['seed']}, today {meta['today']}) -> {path}")
    print(f"  {c['products']} products in {len(c['product_types'])} types, {c['reviews']} reviews, "
          f"{c['orders']} orders, {c['faq']} help-centre articles")
    print("  indexes: " + ("built" if args.build_index else "built on first search (or rerun with --build-index)"))
    return 0
