"""``ragplan reaper validate | make-shop | datagen | train-classifier``: REAPER's plan check, retail shop, planner
training data and the classification baseline (docs/methods/reaper.md). Exit codes: 0 success (validate: valid);
1 validate: invalid plan; 2 bad input."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import random
import sys
from pathlib import Path
from typing import Any

from ragplan.cli.errors import fail
from ragplan.eval.figures import format_table

__all__ = ["add_parser", "run", "add_validate_parser", "run_validate", "add_shop_parser", "run_shop", "add_datagen_parser",
           "run_datagen", "add_classifier_parser", "run_classifier", "format_report"]


def add_parser(sub: Any) -> None:
    """The ``reaper`` command and its sub-commands."""
    reaper = sub.add_parser("reaper", help="REAPER: validate retrieval plans, make the retail shop, training data",
                            description="REAPER (one-call retrieval plans over a tool registry): tools and data.")
    rsub = reaper.add_subparsers(dest="reaper_command", metavar="SUBCOMMAND", required=True)
    for add in (add_validate_parser, add_shop_parser, add_datagen_parser, add_classifier_parser):
        add(rsub)


def run(args: argparse.Namespace) -> int:
    """Run the chosen ``reaper`` sub-command."""
    return {"validate": run_validate, "make-shop": run_shop, "datagen": run_datagen,
            "train-classifier": run_classifier}[args.reaper_command](args)


def add_validate_parser(sub: Any) -> None:
    """Register ``validate`` on the subparsers of the ``reaper`` command (``ragplan reaper validate``)."""
    v = sub.add_parser("validate", help="parse a REAPER plan file and check it against a tool suite",
                       description="Parse a REAPER plan (`Step k: purpose - #Ek = tool(args)` lines) and check it "
                                   "against a tool suite. Exit 0 valid, 1 invalid, 2 unreadable file or unknown suite.")
    v.add_argument("plan_file", metavar="PLAN_FILE", help="the plan text (- for standard input)")
    v.add_argument("--tools", default="retail", metavar="SUITE", help="tool suite to check against (default retail)")
    v.add_argument("--json", action="store_true", help='print {"valid", "steps", "errors", "notes"} as JSON')


def _arg_json(arg: Any) -> Any:
    return arg.value if arg.kind != "ref" else f"#E{arg.refs[0]}"


def _step_json(step: Any, registry: Any) -> dict[str, Any]:
    from ragplan.methods.reaper.validate import bind_args

    bound, surplus, _ = bind_args(step, registry)
    return {"step": step.index, "line": step.line, "evidence_var": f"#{step.evidence_var}", "tool": step.tool,
            "purpose": step.purpose, "args": {k: _arg_json(a) for k, a in bound.items()},
            "extra_positional": [_arg_json(a) for a in surplus],
            "refs": [f"#E{r}" for r in step.refs], "call": step.call_text()}


def run_validate(args: argparse.Namespace) -> int:
    """Run ``ragplan reaper validate``; returns the exit code (0 valid, 1 invalid, 2 bad input)."""
    from ragplan.methods.reaper.plan import PlanError, format_arg, parse_plan
    from ragplan.nodes.reaper.planner_prompt import NO_RETRIEVAL
    from ragplan.methods.reaper.validate import bind_args, check_plan
    from ragplan.tools import suites as tool_registry

    try:
        text = sys.stdin.read() if args.plan_file == "-" else Path(args.plan_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return fail(f"cannot read the plan file {args.plan_file}: {exc}")
    try:
        registry = tool_registry.get_suite(args.tools)
    except (KeyError, ImportError) as exc:
        return fail(f"the tool suite {args.tools!r} cannot be loaded: {exc}")
    if not text.strip():
        return fail(f"the plan file {args.plan_file} is empty")
    parsed = parse_plan(text)
    errors = sorted([*parsed.errors, *check_plan(parsed.plan, registry)], key=lambda e: (e.line, e.step or 0))
    says_none = " ".join(text.split()).rstrip(".").lower() == NO_RETRIEVAL.rstrip(".").lower()
    if not parsed.plan.steps and not errors and not says_none:
        errors = [PlanError(line=1, message=f"no plan steps (a plan without steps is written {NO_RETRIEVAL!r})")]
    valid = not errors
    if args.json:
        print(json.dumps({
            "valid": valid,
            "steps": [_step_json(s, registry) for s in parsed.plan.steps],
            "errors": [e.model_dump() for e in errors],
            "notes": [n.model_dump() for n in parsed.notes],
        }, ensure_ascii=False, indent=2))
        return 0 if valid else 1
    for n in parsed.notes:
        print(f"note: {n}", file=sys.stderr)
    if not valid:
        for e in errors:
            print(str(e))
        print(f"{args.plan_file}: invalid ({len(errors)} problem{'s' if len(errors) != 1 else ''}, "
              f"tools: {args.tools})")
        return 1
    steps = parsed.plan.steps
    if steps:
        rows = [[str(s.index), f"#{s.evidence_var}", s.tool,
                 ", ".join(f"{k}={format_arg(a)}" for k, a in bind_args(s, registry)[0].items())] for s in steps]
        print(format_table(["STEP", "VAR", "TOOL", "ARGUMENTS"], rows, style="plain"))
    print(f"{args.plan_file}: valid, {len(steps)} step{'s' if len(steps) != 1 else ''} (tools: {args.tools})")
    return 0


def add_shop_parser(sub: Any) -> None:
    """Register ``make-shop`` on the ``reaper`` command's subparsers."""
    p = sub.add_parser("make-shop", help="generate the retail shop (catalogue, orders, help centre) for the retail tools",
                       description="Write a deterministic shop for a seed (the same seed and sizes give the same files); "
                                   "bind the retail tools to it with --shop / shop_dir.")
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


def run_shop(args: argparse.Namespace) -> int:
    """Run ``ragplan reaper make-shop``; returns the exit code."""
    from ragplan.tools.retail import generate_shop, load_shop

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        return fail(f"--out {str(out)!r} exists and is not a directory")
    try:
        path = generate_shop(out, seed=args.seed, n_products=args.products, n_orders=args.orders, today=args.today)
        if args.build_index:  # both indexes now instead of at the first search
            with contextlib.closing(load_shop(path, model_path=args.model_path)) as shop:
                for name in ("catalog", "faq"):
                    shop.index(name)
    except ValueError as exc:  # the sizes or --today; an embedding model or an index that cannot be built
        return fail(str(exc))
    meta = json.loads((path / "meta.json").read_text())
    if args.json:
        print(json.dumps(meta, indent=2))
        return 0
    c = meta["counts"]
    print(f"shop (seed {meta['seed']}, today {meta['today']}) -> {path}")
    print(f"  {c['products']} products in {len(c['product_types'])} types, {c['reviews']} reviews, "
          f"{c['orders']} orders, {c['faq']} help-centre articles")
    print("  indexes: " + ("built" if args.build_index else "built on first search (or rerun with --build-index)"))
    return 0


def add_datagen_parser(rsub: Any) -> None:
    """Register ``datagen`` on the ``reaper`` command's subparsers (``ragplan reaper datagen``)."""
    p = rsub.add_parser("datagen", help="generate REAPER SFT data (TEvo, TTG, DQS) from seed plans",
                        description="Turn a small pool of annotated plans into chat-format SFT data (TEvo, TTG, DQS).")
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


def run_datagen(args: argparse.Namespace) -> int:
    """Run ``ragplan reaper datagen``; returns the exit code."""
    from ragplan.methods.reaper import datagen as dg, ttg
    from ragplan.tools import suites as tool_registry
    from ragplan.tools.embeddings import get_embedder
    from ragplan.jsonl import atomic_write, jsonl_text

    if args.per_example < 1:
        return fail("--per-example must be at least 1")
    if not 0 <= args.trim < 0.5:
        return fail("--trim must be in [0, 0.5)")
    try:
        ttg_tasks = ttg.parse_ttg_tasks(args.ttg_tasks)
    except ValueError as exc:
        return fail(f"--ttg-tasks: {exc}")
    try:
        registry = tool_registry.get_suite(args.tools)
        seeds = dg.load_seed_examples(args.seed_plans, registry)
        rng = random.Random(f"{args.seed}|dqs")
        pool = dg.load_query_pool(args.extra_queries, registry) if args.extra_queries else dg.template_variants(seeds, rng)
    except (KeyError, ImportError) as exc:
        return fail(f"the tool suite {args.tools!r} cannot be loaded: {exc}")
    except dg.DatagenError as exc:
        return fail(str(exc))
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        return fail(f"--out {out} is a file")
    extra: list[Any] = []
    unannotated: list[dict[str, Any]] = []
    dqs_stats: dict[str, Any] = {"enabled": not args.no_dqs}
    if not args.no_dqs and pool:
        try:
            kept, report = dg.diverse_query_sample([s.query for s in seeds], [q["query"] for q in pool],
                                                   get_embedder(args.model_path), rng, trim=args.trim)
        except (ValueError, ImportError, OSError) as exc:
            return fail(f"DQS cannot embed the queries: {exc}")
        picked = [pool[j] for j in kept]
        unannotated = [{k: q[k] for k in ("id", "query", "context")} for q in picked if q["plan"] is None]
        extra = [dg.SeedExample(f"dqs:{q['id']}", q["query"], q["context"], q["plan"])
                 for q in picked if q["plan"] is not None]
        dqs_stats.update({"pool": report["large"], "dropped_similar": len(report["dropped_similar"]),
                          "dropped_dissimilar": len(report["dropped_dissimilar"]), "sampled": len(kept),
                          "annotated": len(extra), "unannotated": len(unannotated)})
    records = ttg.generate_dataset(seeds, registry, seed=args.seed, per_example=args.per_example, extra=extra,
                                   ttg_tasks=ttg_tasks)
    out.mkdir(parents=True, exist_ok=True)
    if unannotated:
        atomic_write(out / "dqs_queries.jsonl", jsonl_text(unannotated))
    stats = ttg.write_dataset(records, out, seed=args.seed, ttg_tasks=ttg_tasks,
                             extra_stats={"seed_examples": len(seeds), "per_example": args.per_example,
                                          "tools": args.tools, "ttg_tasks": ttg_tasks, "dqs": dqs_stats})
    tasks = ", ".join(f"{k} {v}" for k, v in stats["tasks"].items())
    print(f"wrote {stats['total']} records to {out} ({len(seeds)} seed + {len(extra)} DQS examples): {tasks}")
    return 0


def add_classifier_parser(rsub: Any) -> None:
    """Register ``train-classifier`` on the subparsers of the ``reaper`` command."""
    p = rsub.add_parser("train-classifier", help="train the classification baseline's route classifier",
                        description="Train the route classifier on the gold set's train split; report per-class P/R/F1 "
                                    "on the test split next to the majority-class rate.")
    p.add_argument("--shop", required=True, metavar="DIR", help="the shop folder (`ragplan reaper make-shop`)")
    p.add_argument("--goldset", default="", metavar="FILE",
                   help="gold-set JSONL (default: DIR/goldset.jsonl, the shop's gold set, written there when missing)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to save the classifier to")
    p.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    p.add_argument("--model-path", default="", metavar="DIR",
                   help="a local Sentence-BERT model folder (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def format_report(report: Any) -> str:
    """The per-class table and the summary lines of a :class:`~ragplan.methods.reaper.classifier.ClassifierReport`."""
    rows = [[cls, f"{m['precision']:.3f}", f"{m['recall']:.3f}", f"{m['f1']:.3f}", str(m["support"])]
            for cls, m in report.per_class.items()]
    table = format_table(["class", "precision", "recall", "f1", "support"], rows, style="plain", right=True)
    heads = ", ".join(f"{k} {v:.3f}" for k, v in report.head_accuracy.items())
    return (f"{table}\n\n"
            f"accuracy {report.accuracy:.3f} (macro F1 {report.macro_f1:.3f}; heads alone: {heads})\n"
            f"majority-class rate {report.majority_rate:.3f} (always {report.majority_class})\n"
            f"train {report.n_train}, test {report.n_test} examples; {len(report.classes)} classes; "
            f"saved to {report.out_dir}")


def run_classifier(args: argparse.Namespace) -> int:
    """Run ``ragplan reaper train-classifier``; returns the exit code (0 saved, 2 bad input)."""
    from ragplan.methods.reaper.benchmark import ReaperBenchmark
    from ragplan.methods.reaper.classifier import train_classifier
    from ragplan.tools.embeddings import EmbeddingModelError

    try:
        if not Path(args.shop).is_dir():
            raise ValueError(f"the shop folder {args.shop} does not exist")
        examples = ReaperBenchmark(args.goldset or args.shop, split="all").examples()  # a bad file: ValueError naming it
        report = train_classifier(examples, model_path=args.model_path, seed=args.seed, out_dir=args.out)
    except (ValueError, EmbeddingModelError, OSError) as exc:
        return fail(str(exc))
    print(json.dumps(dataclasses.asdict(report), indent=2, ensure_ascii=False) if args.json else format_report(report))
    return 0
