"""``ragplan furepa train-assessor | make-data``: FuRePA's plan assessor (trained and measured on published data or an
LLM's candidates) and a synthetic demo corpus (docs/methods/furepa.md). Exit codes: 0 done; 2 bad input."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ragplan.cli.errors import fail

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    """The ``furepa`` command and its sub-commands."""
    fu = sub.add_parser("furepa", help="FuRePA: train the plan assessor, write a synthetic demo corpus",
                        description="FuRePA (furthest reasoning with plan assessment): the plan assessor and its data.")
    fsub = fu.add_subparsers(dest="furepa_command", metavar="SUBCOMMAND", required=True)
    t = fsub.add_parser("train-assessor", help="train the plan assessor (query scorer) and report held-out figures",
                        description="Label candidate queries by the reciprocal rank of the hop's gold passage against "
                                    "the index, train the scorer on CPU, and print held-out Spearman and the MRR of the "
                                    "trained pick beside word overlap, BM25, the retriever's top score, first, random "
                                    "and oracle; --eval-data measures the saved assessor on another dataset.")
    t.add_argument("--data", default=None, metavar="FILE", help="QA data with gold supporting passages "
                   "(HotpotQA, 2Wiki, MuSiQue, StrategyQA, FlashRAG JSONL with metadata.supporting_facts, `furepa make-data`)")
    t.add_argument("--eval-data", default=None, metavar="FILE", help="measure the assessor (trained now, or saved at "
                   "--out when no --data is given) on every question of this dataset")
    t.add_argument("--queries-from", action="append", default=[], metavar="LOG", help="ReAct/Reflexion trajectory log "
                   "whose Search[...] queries become candidates of the same questions (matched by text; repeatable)")
    t.add_argument("--format", default=None, metavar="FMT", help="the data's format when detection should not decide")
    where = t.add_mutually_exclusive_group(required=True)
    where.add_argument("--index", default="", metavar="DIR", help="a local index holding the gold passages (matched by title)")
    where.add_argument("--context-only", action="store_true",
                       help="label against an index of the questions' own paragraphs (built under MODEL/context_index)")
    t.add_argument("--out", required=True, metavar="MODEL", help="folder to save the assessor to (or read it from)")
    t.add_argument("--seed", type=int, default=0, help="seed of candidates, split and training (default 0)")
    t.add_argument("--limit", type=int, default=None, metavar="N", help="read the first N questions only")
    t.add_argument("--candidates", type=int, default=6, metavar="N", help="candidate queries per question and hop (default 6)")
    t.add_argument("--label-k", type=int, default=20, metavar="K", help="results searched for the gold passage (default 20)")
    t.add_argument("--test-share", type=float, default=0.25, metavar="F", help="share of questions held out (default 0.25)")
    t.add_argument("--scorer", choices=("trees", "cross-encoder"), default="trees", help="boosted trees over MiniLM "
                   "features, or a cross-encoder from MiniLM reading (question + evidence, query) (default trees)")
    t.add_argument("--trees", type=int, default=300, metavar="N", help="boosted trees (default 300)")
    t.add_argument("--model-path", default="", metavar="DIR", help="a local Sentence-BERT model (default: the packaged MiniLM)")
    t.add_argument("--model", default=None, help="candidate queries from this chat model (provider:name) instead of the data")
    t.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint for --model")
    t.add_argument("--llm-cache", default="", metavar="DIR", help="keep --model's replies here; a rerun reads them")
    t.add_argument("--json", action="store_true", help="print the report as one JSON object")
    t.add_argument("--no-progress", action="store_true", help="no progress bars")
    d = fsub.add_parser("make-data", help="write a synthetic multi-hop demo corpus (FlashRAG-style JSONL)",
                        description="A fictional world of cities, people, companies and novels, with bridge and "
                                    "comparison questions, gold supporting passages, distractors and decompositions.")
    d.add_argument("--out", required=True, metavar="FILE", help="the JSONL file to write")
    d.add_argument("--n", type=int, default=300, help="questions (default 300)")
    d.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    d.add_argument("--distractors", type=int, default=6, help="distractor paragraphs per question (default 6)")


def run(args: argparse.Namespace) -> int:
    """Run the chosen ``furepa`` sub-command."""
    if args.furepa_command == "make-data":
        from ragplan.methods.furepa.synthetic import write_synthetic

        path = write_synthetic(args.out, args.n, args.seed, args.distractors)
        n = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
        print(f"Wrote {n} questions to {path}")
        return 0
    from ragplan.datasets import DatasetError
    from ragplan.llm import LLMConfigError, endpoint_problem
    from ragplan.methods.furepa.pipeline import assessor_from_data, labelled_groups
    from ragplan.methods.furepa.scorer import AssessorError, load_assessor
    from ragplan.methods.furepa.train import evaluate_assessor, mrr_line
    from ragplan.state.furepa import FuRePAContext
    from ragplan.tools.embeddings import EmbeddingModelError

    out: dict[str, Any] = {}
    try:
        if args.data is None and args.eval_data is None:
            raise ValueError("give --data FILE to train on, or --eval-data FILE to measure the assessor saved at --out")
        llm_context = None  # candidates from the data, or from the LLM that --model / --base-url name
        if args.model is not None or args.base_url is not None:
            llm_context = FuRePAContext(**{k: v for k, v in (("model", args.model), ("base_url", args.base_url))
                                           if v is not None}, llm_cache_dir=args.llm_cache)
            if problem := endpoint_problem(llm_context.model, llm_context.base_url):
                raise LLMConfigError(problem)
        common = dict(context_only=args.context_only, index_dir=args.index, fmt=args.format, limit=args.limit,
                      seed=args.seed, n_candidates=args.candidates, label_k=args.label_k, model_path=args.model_path,
                      llm_context=llm_context, logs=args.queries_from, progress=not args.no_progress)
        if args.data is not None:
            report = assessor_from_data(args.data, args.out, test_share=args.test_share, n_trees=args.trees,
                                        scorer=args.scorer, **common)
            out["train"] = asdict(report)
        if args.eval_data is not None:
            assessor = load_assessor(args.out)
            groups = labelled_groups(args.eval_data, Path(args.out) / f"context_index_{Path(args.eval_data).stem}", **common)
            out["eval"] = {"data": args.eval_data, **evaluate_assessor(groups, assessor)}
    except (DatasetError, FileNotFoundError, IsADirectoryError, LLMConfigError, EmbeddingModelError, AssessorError,
            ValueError) as exc:
        return fail(str(exc))
    if args.json:
        print(json.dumps(out["train"] if list(out) == ["train"] else out, ensure_ascii=False))
        return 0
    if args.data is not None:
        print("\n".join(report.lines()))
    if e := out.get("eval"):
        print(f"On {e['data']} (every question; {e['n_questions']} questions, {e['n_groups']} picking points, "
              f"{e['n_candidates']} candidates from {e['candidates']}): MRR of the picked query\n{mrr_line(e['mrr'])}")
    return 0
