"""From a dataset file to labelled picking points (load, index, candidates, labels), to a trained plan assessor and its
held-out report."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any, Sequence

from ragplan.datasets.qa import build_context_index
from ragplan.eval.retrieval import gold_support
from ragplan.methods.furepa.data import HopGroup, build_groups, fact_pools, label_groups, llm_candidates, logged_queries, read_ircot
from ragplan.methods.furepa.train import AssessorReport, train_assessor

__all__ = ["assessor_from_data", "labelled_groups"]


def labelled_groups(data: str | Path, index_root: str | Path, *, index_dir: str = "", context_only: bool = False,
                    fmt: str | None = None, limit: int | None = None, seed: int = 0, n_candidates: int = 6,
                    label_k: int = 20, model_path: str = "", llm_context: Any = None, logs: Sequence[str] = (),
                    progress: bool = True) -> list[HopGroup]:
    """A dataset file's picking points with their candidates (``llm_context``'s LLM, else the data and the ReAct
    ``logs``) labelled against ``index_dir`` (or, ``context_only``, the questions' own paragraphs indexed under
    ``index_root``)."""
    from ragplan.datasets import load_qa
    from ragplan.tools.textindex import TextIndex

    examples = fact_pools(read_ircot(data)[:limit] or load_qa(data, fmt, limit=limit), seed)
    if not any(gold_support(ex) for ex in examples):
        raise ValueError(f"{data}: no question has gold supporting passages (supporting_facts, MuSiQue's is_supporting "
                         "paragraphs, StrategyQA's facts); the assessor's labels need them")
    if context_only == bool(index_dir):
        raise ValueError("name the index to label against: --index DIR or --context-only (one of them)")
    if context_only:
        index_dir = str(build_context_index(examples, index_root, model=model_path, what=str(data)))
    propose = partial(llm_candidates, llm_context) if llm_context is not None else None
    groups = build_groups(examples, seed=seed, n_candidates=n_candidates, propose=propose,
                          logged=logged_queries(logs) if logs else None, progress=progress)
    with TextIndex.open(index_dir, model_path=model_path) as index:
        label_groups(groups, index.search_many, k=label_k, own_only=context_only, progress=progress)
    return groups


def assessor_from_data(data: str | Path, out_dir: str | Path, *, index_dir: str = "", context_only: bool = False,
                       fmt: str | None = None, limit: int | None = None, seed: int = 0, n_candidates: int = 6,
                       label_k: int = 20, test_share: float = 0.25, model_path: str = "", llm_context: Any = None,
                       logs: Sequence[str] = (), n_trees: int = 300, scorer: str = "trees", progress: bool = True) -> AssessorReport:
    """Train an assessor from a dataset file (see :func:`labelled_groups`) and report on its held-out questions."""
    t0 = time.perf_counter()
    groups = labelled_groups(data, Path(out_dir) / "context_index", index_dir=index_dir, context_only=context_only,
                             fmt=fmt, limit=limit, seed=seed, n_candidates=n_candidates, label_k=label_k,
                             model_path=model_path, llm_context=llm_context, logs=logs, progress=progress)
    report = train_assessor(groups, out_dir, seed=seed, test_share=test_share, model_path=model_path, label_k=label_k,
                            n_trees=n_trees, scorer=scorer, progress=progress,
                            extra_meta={"data": str(data), "index_dir": str(index_dir), "n_candidates": n_candidates})
    report.seconds = round(time.perf_counter() - t0, 1)  # the whole command: index, candidates, labels, training
    return report
