"""Retrieval-only figures of each question's executed queries, graded inline by the text benchmarks.

``support_recall@k`` (k in :data:`SUPPORT_KS`) and ``support_mrr``: ``ragplan eval retrieval --queries``'s
``title_recall@k`` and ``mrr`` (docs/evaluation.md, "Metrics and grading"). No query scores 0; no gold
support, ``None``.
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

from ragplan.eval.retrieval import GoldSupport, score_queries

__all__ = ["SUPPORT_KS", "support_metric_names", "SupportScorer"]

SUPPORT_KS: tuple[int, ...] = (2, 5)
"""The cut-offs of ``support_recall@k`` in a run's summary."""


def support_metric_names(ks: Sequence[int] = SUPPORT_KS) -> tuple[str, ...]:
    """The record fields :meth:`SupportScorer.score` fills, in column order."""
    return (*(f"support_recall@{k}" for k in ks), "support_mrr")


class SupportScorer:
    """Scores executed queries against gold support in one local index (opened on first use, thread-safe)."""

    def __init__(self, index_dir: str, embedding_model: str = "", ks: Sequence[int] = SUPPORT_KS) -> None:
        """``index_dir``: the index the run retrieved from; ``embedding_model``: the model it embeds queries with."""
        self.index_dir, self.embedding_model, self.ks = str(index_dir), embedding_model, tuple(ks)
        self._index: Any = None
        self._lock = threading.Lock()

    def score(self, gold: GoldSupport, queries: Sequence[str] | None) -> dict[str, float | None]:
        """The figures of one question (``None`` each without gold support or a list of queries); raises what
        the index raises."""
        names = support_metric_names(self.ks)
        if not gold or queries is None:
            return dict.fromkeys(names)
        qs = [q for q in queries if isinstance(q, str) and q.strip()]
        rankings: list[list[Any]] = []
        if qs:
            with self._lock:
                if self._index is None:
                    from ragplan.tools.textindex import TextIndex

                    self._index = TextIndex.open(self.index_dir, model_path=self.embedding_model)
                rankings = self._index.search_many(qs, max(self.ks))
        s = score_queries(rankings, gold, self.ks)
        out: dict[str, float | None] = {f"support_recall@{k}": s[f"title_recall@{k}"] for k in self.ks}
        out["support_mrr"] = s["mrr"]
        return {k: None if v is None else round(float(v), 4) for k, v in out.items()}

    def close(self) -> None:
        """Close the index, if it was opened."""
        with self._lock:
            if self._index is not None:
                self._index.close()
                self._index = None
