"""Train the plan assessor and measure it on held-out questions: Spearman correlation of score and label and the MRR
of each selector's pick: the trained scorer, one-line baselines (word overlap with the question, BM25 of the
candidate, the retriever's top score), ``first``, ``random`` (expected) and the ``oracle`` ceiling."""

from __future__ import annotations

import hashlib
import math
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ragplan.methods.furepa.data import HopGroup
from ragplan.methods.furepa.features import content_words, context_text, feature_names, group_features, group_texts
from ragplan.methods.furepa.scorer import PlanAssessor, fit_cross_encoder, fit_trees, save_assessor

__all__ = ["AssessorReport", "split_by_question", "featurize", "baseline_scores", "pick_mrr", "mrr_line", "spearman",
           "train_assessor", "evaluate_assessor"]

BASELINES = ("overlap", "bm25", "retriever")


@dataclass
class AssessorReport:
    """What :func:`train_assessor` measured on the held-out questions, and where it saved the model."""

    spearman: float
    """Spearman correlation of score and label over every held-out candidate."""
    group_spearman: float
    """Mean per-group Spearman over held-out groups whose labels differ."""
    mrr: dict[str, float]
    """Mean label of the picked candidate: trained, the one-line baselines, first, random (expected), oracle."""
    n_questions: dict[str, int]
    n_groups: dict[str, int]
    """Picking points (question × hop) in each split."""
    n_candidates: dict[str, int]
    train_mrr: dict[str, float]
    """The same picks on the training questions (how well the scorer fits)."""
    seed: int
    label_k: int
    """Results searched for the gold passage when labelling."""
    candidates: str
    """Where the candidates came from (data, llm, or both)."""
    model_path: str
    """The Sentence-BERT model of the features ('' = the packaged MiniLM)."""
    out_dir: str
    seconds: float
    """Wall time of the training (of the whole command when run from data)."""

    def lines(self) -> list[str]:
        """The report as printed by ``ragplan furepa train-assessor``."""
        m = self.mrr
        return [
            f"Held-out questions: {self.n_questions['test']} ({self.n_groups['test']} picking points, "
            f"{self.n_candidates['test']} candidates); trained on {self.n_questions['train']} "
            f"({self.n_candidates['train']} candidates from {self.candidates}), seed {self.seed}",
            f"Spearman (score vs label): {self.spearman:.3f} overall, {self.group_spearman:.3f} mean within a group",
            f"MRR of the picked query (label = 1/rank of the hop's gold passage in the top {self.label_k}):",
            mrr_line(m), f"Saved to {self.out_dir} ({self.seconds:.1f} s)",
        ]


def mrr_line(m: dict[str, float]) -> str:
    """The selectors' MRR on one line, and the trained pick's margin over the best one-line baseline."""
    best = max(BASELINES, key=lambda b: m[b])
    return (f"  trained {m['trained']:.3f}   overlap {m['overlap']:.3f}   bm25 {m['bm25']:.3f}   retriever "
            f"{m['retriever']:.3f}   first {m['first']:.3f}   random {m['random']:.3f}   oracle {m['oracle']:.3f}   "
            f"(trained - best baseline {best}: {m['trained'] - m[best]:+.3f})")


def split_by_question(groups: Sequence[HopGroup], test_share: float, seed: int) -> tuple[list[HopGroup], list[HopGroup]]:
    """Train and test groups, every group of a question on the same side (a seeded share of questions held out)."""
    qids = sorted({g.qid for g in groups})
    random.Random(seed).shuffle(qids)
    n_test = max(1, round(len(qids) * test_share)) if len(qids) > 1 else 0
    test = set(qids[:n_test])
    return [g for g in groups if g.qid not in test], [g for g in groups if g.qid in test]


def featurize(groups: Sequence[HopGroup], embedder: Any, *, progress: bool = False, desc: str = "features") -> np.ndarray:
    """Feature rows of every candidate of ``groups``, group after group."""
    from tqdm import tqdm

    texts = list(dict.fromkeys(t for g in groups for t in group_texts(g.question, g.context, g.candidates)))
    embedder.encode(texts, batch_size=128, show_progress=progress)  # one batched pass; the groups then read the cache
    rows = [group_features(embedder, g.question, g.context, g.candidates)
            for g in tqdm(groups, desc=desc, unit="group", disable=not progress)]
    return np.vstack(rows) if rows else np.zeros((0, len(feature_names(int(embedder.dim)))))


def _bm25(docs: list[list[str]], k1: float = 1.5, b: float = 0.75) -> Callable[[str], float]:
    """The best Okapi BM25 score of a query over ``docs`` (word lists; idf from them), the tables built once."""
    df = Counter(w for d in docs for w in set(d))
    avg = sum(map(len, docs)) / max(1, len(docs)) or 1.0
    idf = {w: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5)) for w, n in df.items()}
    weights = [{w: idf[w] * n * (k1 + 1) / (n + k1 * (1 - b + b * len(d) / avg)) for w, n in Counter(d).items()}
               for d in docs]
    return lambda query: max((sum(t.get(w, 0.0) for w in set(content_words(query))) for t in weights), default=0.0)


def baseline_scores(g: HopGroup) -> dict[str, list[float]]:
    """The one-line baselines' scores of ``g``'s candidates: word overlap (Jaccard) with the question, BM25 over the
    question's own paragraphs not yet held, and the retriever's top score (from labelling)."""
    q = set(content_words(g.question))
    held = {t for t, _ in g.context}
    docs = [content_words(f"{t} {x}") for t, x in g.own if t not in held]
    return {"overlap": [len(q & set(w)) / len(q | set(w)) if q | set(w) else 0.0
                        for w in map(content_words, g.candidates)],
            "bm25": list(map(_bm25(docs), g.candidates)),
            "retriever": list(g.top_scores) if len(g.top_scores) == len(g.candidates) else [0.0] * len(g.candidates)}


def spearman(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation (ties get their mean rank); 0 when either side is constant."""
    from scipy.stats import spearmanr

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(spearmanr(x, y).statistic) if len(x) > 1 and np.ptp(x) > 0 and np.ptp(y) > 0 else 0.0


def pick_mrr(groups: Sequence[HopGroup], scores: Sequence[Sequence[float]]) -> dict[str, float]:
    """Mean label of the pick of each selector (a scorer picks its highest score, ties to the earlier candidate)."""
    def mean_pick(per: Sequence[Sequence[float]]) -> float:
        return round(sum(g.labels[int(np.argmax(s))] for g, s in zip(groups, per)) / max(1, len(groups)), 4)

    base = [baseline_scores(g) for g in groups]
    n = max(1, len(groups))
    return {"trained": mean_pick(scores), **{b: mean_pick([x[b] for x in base]) for b in BASELINES},
            "first": round(sum(g.labels[0] for g in groups) / n, 4),
            "random": round(sum(sum(g.labels) / len(g.labels) for g in groups) / n, 4),
            "oracle": round(sum(max(g.labels) for g in groups) / n, 4)}


def _per_group(groups: Sequence[HopGroup], flat: np.ndarray) -> list[list[float]]:
    bounds = np.cumsum([len(g.candidates) for g in groups])[:-1]
    return [part.tolist() for part in np.split(np.asarray(flat, dtype=float), bounds)] if groups else []


def train_assessor(groups: Sequence[HopGroup], out_dir: str | Path, *, seed: int = 0, test_share: float = 0.25,
                   model_path: str = "", label_k: int = 20, n_trees: int = 300, scorer: str = "trees", epochs: int = 2,
                   progress: bool = True, extra_meta: dict[str, Any] | None = None) -> AssessorReport:
    """Fit the scorer (``trees`` or ``cross-encoder``) on the training questions, measure it on the held-out ones, save
    it to ``out_dir``; deterministic."""
    from ragplan.tools.embeddings import get_embedder, resolve_model_path

    t0 = time.perf_counter()
    groups = [g for g in groups if len(g.labels) == len(g.candidates) and len(g.candidates) >= 2]
    train, test = split_by_question(groups, test_share, seed)
    if not train or not test:
        raise ValueError(f"too few questions with gold supporting passages to train and hold out "
                         f"({len({g.qid for g in groups})} usable); give more data")
    y = np.array([v for g in train for v in g.labels], dtype=np.float64)
    if not (y > 0).any():
        raise ValueError("no training candidate retrieved its gold passage: check that the index holds the dataset's "
                         "paragraphs (titles are matched) or use --context-only")
    not_learnt = ValueError("the scorer did not learn (its score is the same for every training candidate): the labels "
                            "do not vary with the candidates; not saved")
    if np.ptp(y) == 0:
        raise not_learnt
    settings: dict[str, Any] = {"epochs": epochs} if scorer == "cross-encoder" else {"n_trees": n_trees}
    if scorer == "cross-encoder":
        pairs = [(context_text(g.question, g.context), c) for g in train for c in g.candidates]
        model: Any = fit_cross_encoder(pairs, y.tolist(), model_path=model_path, seed=seed, epochs=epochs, progress=progress)
        fitted = model.predict(pairs, batch_size=64, show_progress_bar=progress)
        assessor = PlanAssessor(settings, cross=model)
    else:
        embedder = get_embedder(model_path)
        x_train = featurize(train, embedder, progress=progress, desc="features (train)")
        model = fit_trees(x_train, y, seed=seed, n_trees=n_trees, progress=progress)
        fitted = model.predict(x_train)
        settings["features"] = feature_names(int(embedder.dim))
        assessor = PlanAssessor({**settings, "model_path": model_path}, trees=model)
    if np.ptp(fitted) <= 1e-9:
        raise not_learnt
    held = evaluate_assessor(test, assessor)  # the held-out questions, as another dataset is measured
    report = AssessorReport(
        spearman=held["spearman"], group_spearman=held["group_spearman"],
        mrr=held["mrr"], train_mrr=pick_mrr(train, _per_group(train, fitted)),
        n_questions={"train": len({g.qid for g in train}), "test": held["n_questions"]},
        n_groups={"train": len(train), "test": len(test)},
        n_candidates={"train": len(y), "test": held["n_candidates"]}, seed=seed, label_k=label_k,
        candidates="+".join(sorted({g.source for g in groups})), model_path=model_path, out_dir=str(out_dir), seconds=0.0)
    digest = hashlib.sha256(repr([(g.qid, g.hop, g.candidates, g.labels) for g in groups]).encode()).hexdigest()[:16]
    report.seconds = round(time.perf_counter() - t0, 1)
    meta = {"model_path": model_path, "resolved_model_path": resolve_model_path(model_path), "seed": seed,
            "test_share": test_share, "label_k": label_k, "data_digest": digest, **settings,
            "metrics": {k: v for k, v in asdict(report).items() if k not in ("out_dir", "seconds")}, **(extra_meta or {})}
    save_assessor(out_dir, model, meta)
    return report


def evaluate_assessor(groups: Sequence[HopGroup], assessor: PlanAssessor) -> dict[str, Any]:
    """A saved assessor's picks on labelled ``groups`` (every question of another dataset) beside the baselines."""
    from ragplan.tools.embeddings import get_embedder

    groups = [g for g in groups if len(g.labels) == len(g.candidates) and len(g.candidates) >= 2]
    if not groups:
        raise ValueError("no picking point with two or more labelled candidates to evaluate on")
    if assessor.trees is not None:  # one batch; scoring reads the embedder's cache
        texts = list(dict.fromkeys(t for g in groups for t in group_texts(g.question, g.context, g.candidates)))
        get_embedder(assessor.meta.get("model_path", "")).encode(texts, batch_size=128)
    scores = [assessor.score(g.question, g.context, g.candidates) for g in groups]
    within = [spearman(s, g.labels) for g, s in zip(groups, scores) if len(set(g.labels)) > 1]
    flat = spearman([v for s in scores for v in s], [v for g in groups for v in g.labels])
    return {"n_questions": len({g.qid for g in groups}), "n_groups": len(groups), "spearman": round(flat, 4),
            "n_candidates": sum(len(g.candidates) for g in groups), "candidates": "+".join(sorted({g.source for g in groups})),
            "group_spearman": round(float(np.mean(within)) if within else 0.0, 4), "mrr": pick_mrr(groups, scores)}
