"""``ragplan eval retrieval``: score a retriever (and a method's queries) against gold support, no LLM
(docs/evaluation.md, "Retrieval without an LLM")."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragplan.datasets import QAExample
from ragplan.eval.figures import format_table
from ragplan.eval.retrieval import (
    DEFAULT_KS, GoldSupport, gold_support, mean_scores, passage_key, score_names, score_queries,
)
from ragplan.eval.runfolder import RunFolder, atomic_write

__all__ = ["evaluate_retrieval", "score_examples", "read_executed_queries", "retrieval_table", "write_result"]

#: ``search(queries, k) -> ranked passages per query`` (e.g. :meth:`TextIndex.search_many`).
SearchMany = Callable[[Sequence[str], int], list[list[Any]]]


def read_executed_queries(path: str | Path) -> dict[str, list[str]]:
    """Question id → the queries a method executed, from a run folder or its ``results.jsonl``."""
    p = Path(path)
    folder = RunFolder(p if p.is_dir() else p.parent)
    folder.results_file = folder.results_file if p.is_dir() else p
    if not folder.results_file.is_file():
        raise FileNotFoundError(f"{p}: no results.jsonl (give a run folder of `ragplan eval` or its results.jsonl)")
    out: dict[str, list[str]] = {}
    for qid, rec in folder.load_records().items():
        qs = rec.get("executed_queries")
        if not isinstance(qs, list) or not all(isinstance(q, str) for q in qs):
            raise ValueError(f"{folder.results_file}: record {qid!r} has no executed_queries list (a run from an older "
                             "ragplan?); rerun it to record the queries")
        out[qid] = [q for q in qs if q.strip()]
    return out


def score_examples(examples: Sequence[QAExample], search: SearchMany, *, ks: Sequence[int] = DEFAULT_KS,
                   queries: dict[str, list[str]] | None = None, ranker: Any = None, passages: int | None = None,
                   group_by: Sequence[str] = ()) -> dict[str, Any]:
    """Retrieve for every example with gold support (``queries``, else the questions) and score it; the means
    overall and per group, the counts and every question's scores."""
    ks = sorted({int(k) for k in ks if int(k) > 0}) or list(DEFAULT_KS)
    depth = max(int(passages or 0), max(ks))
    pool = int(passages or max(ks))
    counts = {"questions": len(examples), "scored": 0, "no_gold": 0, "missing": 0, "without_queries": 0}
    todo: list[tuple[QAExample, GoldSupport, list[str]]] = []
    for ex in examples:
        gold = gold_support(ex)
        if not gold:
            counts["no_gold"] += 1
            continue
        if queries is not None and ex.id not in queries:
            counts["missing"] += 1
            continue
        qs = [ex.question] if queries is None else queries[ex.id]
        counts["without_queries"] += 0 if qs else 1
        todo.append((ex, gold, qs))
    flat = [q for _, _, qs in todo for q in qs]
    results = search(flat, depth) if flat else []
    sentences = any(g.has_sentences for _, g, _ in todo) and ranker is not None
    per_question: list[dict[str, Any]] = []
    ranked = iter(results)
    for ex, gold, qs in todo:
        rankings = list(itertools.islice(ranked, len(qs)))
        sent_rankings = ([ranker.rank(q, list(r)[:pool], n=max(ks)) for q, r in zip(qs, rankings)]
                         if sentences and gold.has_sentences else None)
        scores = score_queries(rankings, gold, ks, sentence_rankings=sent_rankings)
        units = list(dict.fromkeys(u for s in gold.sets for u in s.units))
        found = [[next((u.label() for u in units if u.is_passage(passage_key(p))), None) for p in r] for r in rankings]
        per_question.append({"id": ex.id, "queries": qs, **{k: ex.meta[k] for k in group_by if k in ex.meta},
                             "gold_titles": list(gold.titles), "gold_paragraphs": [u.label() for u in units],
                             "scores": scores, "retrieved_paragraphs": found,
                             "retrieved_titles": [[getattr(p, "title", "") for p in r] for r in rankings]})
    counts["scored"] = len(per_question)
    groups: dict[str, dict[str, Any]] = {}
    for key in group_by:
        values: dict[str, list[dict[str, Any]]] = {}
        for row in per_question:
            if key in row:
                values.setdefault(str(row[key]), []).append(row["scores"])
        if values:
            groups[key] = {v: {"n": len(rs), **mean_scores(rs)} for v, rs in sorted(values.items())}
    n_queries = [len(r["queries"]) for r in per_question]
    return {"ks": ks, "passages": pool, "counts": counts,
            "queries_per_question": round(sum(n_queries) / len(n_queries), 3) if n_queries else 0.0,
            "score_names": score_names(ks, sentences=sentences),
            "overall": mean_scores([r["scores"] for r in per_question]), "groups": groups,
            "per_question": per_question}


def retrieval_table(result: dict[str, Any]) -> str:
    """The means as a Markdown table: one row per k (paragraph, sentence and title-level scores), then MRR."""
    o = result["overall"]
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    cols = ["recall", "all_supporting", "sentence_recall", "title_recall", "title_all_supporting"]
    table = format_table(["k", *cols], [[k, *(fmt(o.get(f"{c}@{k}")) for c in cols)] for k in result["ks"]], style="md")
    c = result["counts"]
    head = (f"# retrieval on {result.get('benchmark', '?')} — queries: {result.get('query_source', 'the questions')}\n\n"
            f"{c['scored']} of {c['questions']} questions scored ({c['no_gold']} without gold support, {c['missing']} "
            f"not in the run, {c['without_queries']} without queries); {result['queries_per_question']} queries per "
            f"question; sentences ranked from the top {result['passages']} passages of each query.\n")
    return head + "\n" + table + (f"\n\nMRR (first supporting paragraph): {fmt(o.get('mrr'))}; by title: "
                                           f"{fmt(o.get('title_mrr'))}\n")


def evaluate_retrieval(benchmark: str, data: str, *, index_dir: str | Path | None = None, context_only: bool = False,
                       queries: str | Path | None = None, ks: Sequence[int] = DEFAULT_KS, limit: int | None = None,
                       passages: int | None = None, embedding_model: str = "", fmt: str | None = None,
                       work_dir: str | Path = ".") -> dict[str, Any]:
    """Everything ``ragplan eval retrieval`` does but printing."""
    from ragplan.eval.benchmarks.context_index import build_context_index
    from ragplan.eval.registry import get_benchmark
    from ragplan.tools.retrieval import SentenceRanker
    from ragplan.tools.textindex import TextIndex

    if bool(index_dir) == bool(context_only):
        raise ValueError("give exactly one of --index DIR and --context-only")
    bench = get_benchmark(benchmark, data, limit=limit, **({"fmt": fmt} if fmt else {}))
    if not hasattr(bench, "examples"):
        raise ValueError(f"benchmark {benchmark!r} has no gold passages or sentences to score retrieval against")
    examples: list[QAExample] = bench.examples()
    if context_only:
        index_dir = build_context_index(examples, Path(work_dir) / f"context_index-{benchmark}", model=embedding_model,
                                        what=f"{data} ({benchmark})")
    executed = read_executed_queries(queries) if queries else None
    with TextIndex.open(str(index_dir), model_path=embedding_model) as index:
        result = score_examples(examples, index.search_many, ks=ks, queries=executed,
                                ranker=SentenceRanker(index.embedder), passages=passages,
                                group_by=[k for k in getattr(bench, "group_by", ()) if k != "kind"])
    return {"benchmark": benchmark, "data": str(data), "index": str(index_dir), "context_only": bool(context_only),
            "query_source": f"executed queries of {queries}" if queries else "the questions", **result}


def write_result(result: dict[str, Any], path: str | Path) -> Path:
    """Write the result as JSON (atomically); returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(p, json.dumps(result, indent=2, ensure_ascii=False))
    return p
