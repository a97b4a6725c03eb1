"""Features of a candidate query in its context (question + evidence so far) for the plan assessor: cosines, where its
words come from, references and repeats, and the same signals relative to the group's other candidates."""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

import numpy as np

__all__ = ["BASE_FEATURES", "RELATIVE_FEATURES", "FEATURE_NAMES", "group_features", "group_texts", "content_words", "STOPWORDS"]

STOPWORDS = frozenset("""a an the of in on at to for from by with and or but is are was were be been being do does did
what which who whom whose where when why how that this these those it its he she his her they them their there as
into about than then also same both either neither not no yes any some many much more most other such own one two
name named called find search information about please tell me give show list""".split())

_WORD = re.compile(r"[A-Za-z0-9]+")
_REF = re.compile(r"#\d+")
_PRONOUN_ONLY = frozenset({"it", "he", "she", "they", "him", "her", "them", "this", "that"})

BASE_FEATURES = (
    "cos_question", "cos_evidence_max", "cos_evidence_mean", "n_evidence_log", "query_len_log",
    "share_in_question", "share_from_evidence", "share_novel", "question_coverage", "names_evidence_title",
    "title_overlap_max", "unresolved_reference", "entities_from_evidence", "entities_novel", "same_as_question",
    "question_evidence_cos_max", "cos_question_minus_evidence",
)
RELATIVE_FEATURES = ("cos_question", "cos_evidence_max", "share_from_evidence", "question_coverage",
                     "entities_from_evidence", "title_overlap_max", "share_novel")
FEATURE_NAMES = BASE_FEATURES + tuple(f"{n}_vs_best" for n in RELATIVE_FEATURES) + tuple(
    f"{n}_vs_mean" for n in RELATIVE_FEATURES)
"""Column names of :func:`group_features`' matrix, in order."""


def content_words(text: str) -> list[str]:
    """Lower-case words of ``text`` without stop words."""
    return [w for w in (m.lower() for m in _WORD.findall(text or "")) if w not in STOPWORDS]


def _entities(text: str) -> set[str]:
    """Capitalised words and numbers (names, years) in ``text``, lower-cased, stop words excluded."""
    words = _WORD.findall(text or "")
    return {m.lower() for m in words if (m[0].isupper() or m.isdigit()) and m.lower() not in STOPWORDS}


def _norm(text: str) -> str:
    return " ".join(m.lower() for m in _WORD.findall(text or ""))


def _share(part: set[str] | list[str], whole: list[str]) -> float:
    return sum(1 for w in whole if w in part) / len(whole) if whole else 0.0


def group_texts(question: str, evidence: Sequence[tuple[str, str]], queries: Sequence[str]) -> list[str]:
    """The texts :func:`group_features` embeds: the question, the queries, then each evidence passage."""
    return [question, *queries, *(f"{t}. {' '.join(x.split())[:700]}" for t, x in evidence)]


def group_features(embedder: Any, question: str, evidence: Sequence[tuple[str, str]], queries: Sequence[str]) -> np.ndarray:
    """The feature matrix (a row per query, columns :data:`FEATURE_NAMES`) of one group of candidates."""
    queries = list(queries)
    if not queries:
        return np.zeros((0, len(FEATURE_NAMES)))
    vecs = np.asarray(embedder.encode(group_texts(question, evidence, queries)), dtype=np.float64)
    qv, cand, ev = vecs[0], vecs[1:1 + len(queries)], vecs[1 + len(queries):]
    cos_q = cand @ qv
    if len(ev):
        sims = cand @ ev.T
        cos_e_max, cos_e_mean = sims.max(axis=1), sims.mean(axis=1)
        q_e_max = float((ev @ qv).max())
    else:
        cos_e_max = cos_e_mean = np.zeros(len(queries))
        q_e_max = 0.0
    q_words = content_words(question)
    q_set = set(q_words)
    e_set = set(w for t, x in evidence for w in content_words(f"{t} {x}"))
    e_only = e_set - q_set
    q_ent = _entities(question)
    e_ent = set(w for t, x in evidence for w in _entities(f"{t} {x}")) | e_set
    titles = [(_norm(t), set(content_words(t))) for t, _ in evidence if _norm(t)]
    q_norm = _norm(question)
    rows = []
    for i, query in enumerate(queries):
        words = content_words(query)
        w_set = set(words)
        raw_words = [m.lower() for m in _WORD.findall(query)]
        ents = _entities(query)
        norm = _norm(query)
        rows.append([
            cos_q[i], cos_e_max[i], cos_e_mean[i], math.log1p(len(evidence)), math.log1p(len(raw_words)),
            _share(q_set, words), _share(e_only, words), _share(w_set - q_set - e_set, words) if words else 1.0,
            _share(w_set, q_words),
            float(any(len(t) >= 3 and f" {t} " in f" {norm} " for t, _ in titles)),
            max((len(w_set & tw) / len(tw) for _, tw in titles if tw), default=0.0),
            float(bool(_REF.search(query)) or (bool(raw_words) and set(raw_words) <= _PRONOUN_ONLY | STOPWORDS)),
            float(len((ents & e_ent) - q_ent)), float(len(ents - q_ent - e_ent)), float(norm == q_norm),
            q_e_max, cos_q[i] - cos_e_max[i],
        ])
    base = np.asarray(rows, dtype=np.float64)
    rel_idx = [BASE_FEATURES.index(n) for n in RELATIVE_FEATURES]
    rel = base[:, rel_idx]
    return np.hstack([base, rel - rel.max(axis=0, keepdims=True), rel - rel.mean(axis=0, keepdims=True)])
