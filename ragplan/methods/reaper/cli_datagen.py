"""``ragplan reaper datagen``: REAPER fine-tuning data from a small pool of human-written plans.

    ragplan reaper datagen --seed-plans FILE --out DIR [--seed S] [--per-example K] [--tools retail]
                           [--extra-queries FILE] [--no-dqs] [--trim F] [--model-path DIR] [--ttg-tasks a,b,c]

``--seed-plans`` is JSONL ``{"query", "context": {...}, "plan": "<plan text>"}`` (optional ``"id"``);
every plan is parsed and checked against the tool suite. DQS draws as many extra queries as the seed
pool has from ``--extra-queries`` (JSONL ``{"query", "context"?, "plan"?}``) or, without it, from
template variations of the seed queries, after dropping the most- and least-similar ``--trim``
fraction (Sentence-BERT). Picked queries that have a plan become training examples; those without
are written to ``dqs_queries.jsonl`` for annotation. Writes ``{task}.jsonl`` per task, ``train.jsonl``
and ``stats.json``; the same inputs and seed give byte-identical files. ``--ttg-tasks`` picks TTG's
secondary tasks (names or the paper's numbers 1–7, ``all`` by default, ``none`` for the primary task
only): the paper's Table 3 compares 0, 3, 4 and 5 tasks.

Exit codes: 0 success; 2 bad input (unreadable or invalid seed file, unknown suite, model error).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_datagen_parser", "run_datagen"]


def add_datagen_parser(rsub: Any) -> argparse.ArgumentParser:
    """Register ``datagen`` on the ``reaper`` command's subparsers (``ragplan reaper datagen``)."""
    p = rsub.add_parser("datagen", help="generate REAPER SFT data (TEvo, TTG, DQS) from seed plans",
                        description="Turn a small pool of annotated plans into chat-format SFT data: the planning task "
                                    "with evolved tool prompts (TEvo), seven secondary tasks (TTG) and diverse extra "
                                    "queries (DQS). Exit 0 success, 2 bad input.")
    p.add_argument("--seed-plans", required=True, metavar="FILE", help='JSONL {"query", "context", "plan"} per line')
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (created)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--per-example", type=int, default=2, metavar="K", help="TEvo variants of each task per example "
                                                                            "(default 2)")
    p.add_argument("--tools", default="retail", metavar="SUITE", help="tool suite (default retail)")
    p.add_argument("--extra-queries", default=None, metavar="FILE",
                   help='DQS pool: JSONL {"query", "context"?, "plan"?} (default: template variations of the seeds)')
    p.add_argument("--no-dqs", action="store_true", help="skip DQS (no embedding model is loaded)")
    p.add_argument("--trim", type=float, default=0.1, metavar="F",
                   help="DQS: fraction dropped at each extreme of similarity (default 0.1)")
    p.add_argument("--model-path", default="", metavar="DIR", help="DQS: local sentence-transformers model")
    p.add_argument("--ttg-tasks", default="all", metavar="TASKS",
                   help="TTG secondary tasks to generate, comma-separated names or the paper's numbers: 1 query_from_plan, "
                        "2 complete_partial_plan, 3 identify_tools, 4 masked_step, 5 reorder_steps, 6 masked_params, "
                        "7 use_provided_tools; `all` (default) or `none` (the primary planning task only)")
    p.set_defaults(reaper_command="datagen")
    return p


def _embedder(model_path: str) -> Any:
    from ragplan.tools.embeddings import get_embedder

    return get_embedder(model_path)


def run_datagen(args: argparse.Namespace) -> int:
    """Run ``ragplan reaper datagen``; returns the exit code."""
    from ragplan.methods.reaper import datagen as dg, sft
    from ragplan.tools import suites as tool_registry

    if args.per_example < 1:
        print("error: --per-example must be at least 1", file=sys.stderr)
        return 2
    if not 0 <= args.trim < 0.5:
        print("error: --trim must be in [0, 0.5)", file=sys.stderr)
        return 2
    try:
        ttg_tasks = sft.parse_ttg_tasks(args.ttg_tasks)
    except ValueError as exc:
        print(f"error: --ttg-tasks: {exc}", file=sys.stderr)
        return 2
    try:
        registry = tool_registry.get_suite(args.tools)
    except (KeyError, ImportError) as exc:
        print(f"error: the tool suite {args.tools!r} cannot be loaded: {exc}", file=sys.stderr)
        return 2
    try:
        seeds = dg.load_seed_examples(args.seed_plans, registry)
        rng = random.Random(f"{args.seed}|dqs")
        if args.extra_queries:
            pool = dg.load_query_pool(args.extra_queries, registry)
        else:
            pool = dg.template_variants(seeds, rng)
    except dg.DatagenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print(f"error: --out {out} is a file", file=sys.stderr)
        return 2
    extra: list[Any] = []
    unannotated: list[dict[str, Any]] = []
    dqs_stats: dict[str, Any] = {"enabled": not args.no_dqs}
    if not args.no_dqs and pool:
        try:
            embedder = _embedder(args.model_path)
            kept, report = dg.diverse_query_sample([s.query for s in seeds], [q["query"] for q in pool], embedder, rng,
                                                   trim=args.trim)
        except (ValueError, ImportError, OSError) as exc:
            print(f"error: DQS cannot embed the queries: {exc}", file=sys.stderr)
            return 2
        for j in kept:
            q = pool[j]
            if q["plan"] is None:
                unannotated.append({"id": q["id"], "query": q["query"], "context": q["context"]})
            else:
                extra.append(dg.SeedExample(f"dqs:{q['id']}", q["query"], q["context"], q["plan"]))
        dqs_stats.update({"pool": report["large"], "dropped_similar": len(report["dropped_similar"]),
                          "dropped_dissimilar": len(report["dropped_dissimilar"]), "sampled": len(kept),
                          "annotated": len(extra), "unannotated": len(unannotated)})
    records = sft.generate_dataset(seeds, registry, seed=args.seed, per_example=args.per_example, extra=extra,
                                   ttg_tasks=ttg_tasks)
    out.mkdir(parents=True, exist_ok=True)
    if unannotated:
        (out / "dqs_queries.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in unannotated),
                                               encoding="utf-8")
    stats = sft.write_dataset(records, out, seed=args.seed, ttg_tasks=ttg_tasks,
                             extra_stats={"seed_examples": len(seeds), "per_example": args.per_example,
                                          "tools": args.tools, "ttg_tasks": ttg_tasks, "dqs": dqs_stats})
    tasks = ", ".join(f"{k} {v}" for k, v in stats["tasks"].items())
    print(f"wrote {stats['total']} records to {out} ({len(seeds)} seed + {len(extra)} DQS examples): {tasks}")
    return 0
