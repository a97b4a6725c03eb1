"""Answer metrics for open-domain QA: the official EM and F1 (``rule``: ``"hotpotqa"``, hotpot_evaluate_v1.py, also
2Wiki's; ``"musique"``, metrics/answer.py), label accuracy, retrieval statistics."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ragplan.eval.labels import FEVER_LABELS
from ragplan.eval.labels import read_label as extract_label

__all__ = [
    "normalize_answer", "exact_match", "f1_score", "extract_label", "canonical_label", "label_accuracy",
    "retrieval_stats", "RetrievalStats", "FEVER_LABELS", "ScoreRule", "SCORE_RULES", "count_of", "field_of",
]

ScoreRule = Literal["hotpotqa", "musique"]
SCORE_RULES: tuple[str, ...] = ("hotpotqa", "musique")
"""The official scripts whose EM/F1 rules :func:`exact_match` and :func:`f1_score` implement."""

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NO_PARTIAL = ("yes", "no", "noanswer")


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation, drop the articles a/an/the, collapse whitespace (the official rules)."""
    text = (text or "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(gold: str | Iterable[str]) -> list[str]:
    golds = [gold] if isinstance(gold, str) else [str(g) for g in gold]
    return golds or [""]


def _check_rule(rule: str) -> None:
    if rule not in SCORE_RULES:
        raise ValueError(f"unknown scoring rule {rule!r}; known: {', '.join(SCORE_RULES)}")


def exact_match(prediction: str, gold: str | Iterable[str], rule: ScoreRule = "hotpotqa") -> float:
    """1.0 when the normalised prediction equals a normalised gold answer (``rule`` does not change EM)."""
    _check_rule(rule)
    return float(any(normalize_answer(prediction) == normalize_answer(g) for g in _golds(gold)))


def _f1_one(prediction: str, gold: str, rule: str) -> float:
    p, g = normalize_answer(prediction), normalize_answer(gold)
    if rule == "hotpotqa" and (p in _NO_PARTIAL or g in _NO_PARTIAL) and p != g:
        return 0.0
    p_toks, g_toks = p.split(), g.split()
    if rule == "musique" and (not p_toks or not g_toks):
        return float(p_toks == g_toks)
    same = sum((Counter(p_toks) & Counter(g_toks)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p_toks), same / len(g_toks)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, gold: str | Iterable[str], rule: ScoreRule = "hotpotqa") -> float:
    """Token-level F1 of the normalised prediction against the gold answer(s), the best over several."""
    _check_rule(rule)
    return max(_f1_one(prediction, g, rule) for g in _golds(gold))


def canonical_label(gold: str, kind: str) -> str:
    """A gold label in its canonical spelling (``NOT_ENOUGH_INFO`` → ``NOT ENOUGH INFO``, ``Yes`` → ``yes``)."""
    g = " ".join((gold or "").replace("_", " ").split())
    if kind == "fever" and g.upper() in FEVER_LABELS:
        return g.upper()
    if kind == "yesno" and g.lower() in ("yes", "no"):
        return g.lower()
    label = extract_label(gold, kind)  # type: ignore[arg-type]
    return label if label is not None else g


def label_accuracy(prediction: str, gold: str | Iterable[str], kind: str) -> float:
    """1.0 when the label read from ``prediction`` is the (canonical) gold label; unreadable scores 0.0."""
    label = extract_label(prediction, kind)  # type: ignore[arg-type]
    return float(label is not None and any(label == canonical_label(g, kind) for g in _golds(gold)))


@dataclass(frozen=True)
class RetrievalStats:
    """What one question's run did with retrieval."""

    queries: int | None
    """(Sub-)queries the run answered (None when the output does not list them)."""
    attempted: int
    """Retrievals it ran (a failed one included)."""
    failed: int
    """Retrievals that failed (an error, or nothing found)."""

    @property
    def succeeded(self) -> int:
        """Retrievals that returned evidence."""
        return max(0, self.attempted - self.failed)

    @property
    def question_ratio(self) -> float:
        """1.0 when the question retrieved successfully at least once, else 0.0 (Figure 3's unit)."""
        return 1.0 if self.succeeded > 0 else 0.0

    @property
    def subquery_ratio(self) -> float | None:
        """Share of the question's (sub-)queries that retrieved successfully (None without queries)."""
        return self.succeeded / self.queries if self.queries else None


def count_of(value: Any) -> int | None:
    """A record's count as an int (a number, not a bool), else None."""
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else int(value)


def field_of(x: Any, name: str) -> Any:
    """``x[name]`` of a mapping, else the attribute (None when missing)."""
    return x.get(name) if isinstance(x, Mapping) else getattr(x, name, None)


def retrieval_stats(output: Mapping[str, Any]) -> RetrievalStats:
    """Retrieval counts of a graph's output: from its ``queries`` when listed, else its counts."""
    qs = output.get("queries")
    if isinstance(qs, list) and qs:
        ran = [q for q in qs if field_of(q, "retrieve")]
        failed = sum(1 for q in ran if field_of(q, "retrieval_error"))
        return RetrievalStats(len(qs), len(ran), failed)
    typed = count_of(output.get("retrievals"))
    attempted = (typed if typed is not None else count_of(output.get("retrieval_count"))) or 0
    return RetrievalStats(None, attempted, min(attempted, count_of(output.get("retrieval_errors")) or 0))
