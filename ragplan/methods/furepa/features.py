"""What the plan assessor reads of a candidate query in its context: Sentence-BERT (MiniLM) embeddings of the
context (question + evidence so far) and of the candidate, their products and cosines, and where its words come from."""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

import numpy as np

__all__ = ["SCALAR_FEATURES", "feature_names", "group_features", "group_texts", "context_text", "content_words", "STOPWORDS"]

STOPWORDS = frozenset("""a an the of in on at to for from by with and or but is are was were be been being do does did
what which who whom whose where when why how that this these those it its he she his her they them their there as
into about than then also same both either neither not no yes any some many much more most other such own one two
name named called find search information about please tell me give show list""".split())

_WORD = re.compile(r"[A-Za-z0-9]+")

SCALAR_FEATURES = ("cos_context", "cos_question", "cos_evidence_max", "cos_context_vs_best", "cos_evidence_vs_best",
                   "share_in_question", "share_from_evidence", "share_novel", "query_len_log", "n_evidence_log")


def feature_names(dim: int) -> list[str]:
    """Column names of :func:`group_features` for an embedding of ``dim`` dimensions."""
    return [*SCALAR_FEATURES, *(f"context_x_query_{i}" for i in range(dim))]


def content_words(text: str) -> list[str]:
    """Lower-case words of ``text`` without stop words."""
    return [w for w in (m.lower() for m in _WORD.findall(text or "")) if w not in STOPWORDS]


def context_text(question: str, evidence: Sequence[tuple[str, str]]) -> str:
    """The question and the evidence so far (each passage cut to 300 characters) as one text."""
    return " ".join([question, *(f"{t}. {' '.join(x.split())[:300]}" for t, x in evidence)])


def group_texts(question: str, evidence: Sequence[tuple[str, str]], queries: Sequence[str]) -> list[str]:
    """The texts :func:`group_features` embeds: context, question, the queries, then each evidence passage."""
    return [context_text(question, evidence), question, *queries, *(f"{t}. {' '.join(x.split())[:700]}" for t, x in evidence)]


def group_features(embedder: Any, question: str, evidence: Sequence[tuple[str, str]], queries: Sequence[str]) -> np.ndarray:
    """The feature matrix (a row per query, columns :func:`feature_names`) of one group of candidates."""
    if not (queries := list(queries)):
        return np.zeros((0, len(feature_names(int(embedder.dim)))))
    vecs = np.asarray(embedder.encode(group_texts(question, evidence, queries)), dtype=np.float64)
    cv, qv, cand, ev = vecs[0], vecs[1], vecs[2:2 + len(queries)], vecs[2 + len(queries):]
    cos_c, cos_q = cand @ cv, cand @ qv
    cos_e = (cand @ ev.T).max(axis=1) if len(ev) else np.zeros(len(queries))
    q_set = set(content_words(question))
    e_set = {w for t, x in evidence for w in content_words(f"{t} {x}")} - q_set
    rows = []
    for i, query in enumerate(queries):
        words = content_words(query) or [""]
        rows.append([cos_c[i], cos_q[i], cos_e[i], cos_c[i] - cos_c.max(), cos_e[i] - cos_e.max(),
                     sum(w in q_set for w in words) / len(words), sum(w in e_set for w in words) / len(words),
                     sum(w not in q_set and w not in e_set for w in words) / len(words),
                     math.log1p(len(_WORD.findall(query))), math.log1p(len(evidence))])
    return np.hstack([np.asarray(rows, dtype=np.float64), cand * cv])
