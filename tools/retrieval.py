"""One retriever interface (:class:`Passage`, :class:`Retriever`) and the Sentence-BERT :class:`SentenceRanker`."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Passage", "Evidence", "Retriever", "SentenceRanker", "split_sentences"]


@dataclass
class Passage:
    """A retrieved document: a Wikipedia page or a corpus passage."""

    id: str
    title: str
    text: str
    score: float = 0.0
    source: str = ""
    """``wiki`` or ``local``."""
    meta: dict[str, Any] = field(default_factory=dict)
    sentences: list[str] = field(default_factory=list)
    """The corpus's own sentences of the passage, in order, when it gives them (HotpotQA's contexts,
    FEVER's wiki-pages lines); empty when the text has to be split. ``text`` is then their join."""

    def sentence_list(self) -> list[tuple[int | None, str]]:
        """``(index, sentence)`` pairs: the given sentences with their positions, else the text split by
        :func:`split_sentences` (index ``None``: a split sentence has no position in the corpus)."""
        if self.sentences:
            return [(i, _cut(" ".join(s.split()), _MAX_CHARS)) for i, s in enumerate(self.sentences) if s.strip()]
        return [(None, s) for s in split_sentences(self.text)]


@dataclass
class Evidence:
    """One sentence kept as context, with where it came from and its similarity to the query."""

    sentence: str
    title: str
    passage_id: str
    score: float
    source: str = ""
    sentence_index: int | None = None
    """Its position among the passage's given sentences (``None`` when the passage text was split)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``sentence_index`` only when known)."""
        out = {**asdict(self), "score": round(float(self.score), 4)}
        return out if self.sentence_index is not None else {k: v for k, v in out.items() if k != "sentence_index"}


@runtime_checkable
class Retriever(Protocol):
    """Anything that returns passages for a query."""

    name: str

    def search(self, query: str, k: int = 5) -> list[Passage]:
        """The ``k`` best passages for ``query``; may raise (e.g. ``WikipediaError``), callers record it."""
        ...


_MAX_CHARS = 600
_SENT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_ABBREV = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|Inc|Ltd|Co|vs|etc|e\.g|i\.e|U\.S|No|Vol|Fig|approx|ca)\.$", re.I)


def split_sentences(text: str, *, min_chars: int = 12, max_chars: int = _MAX_CHARS) -> list[str]:
    """Sentences of ``text`` (abbreviations kept whole), headings and fragments dropped, long ones cut."""
    out: list[str] = []
    for para in (text or "").split("\n"):
        para = para.strip()
        if not para or para.startswith(("==", "#")):
            continue
        merged: list[str] = []
        for piece in _SENT.split(para):
            if merged and _ABBREV.search(merged[-1]):
                merged[-1] += " " + piece
            else:
                merged.append(piece)
        out += [_cut(s, max_chars) for s in (" ".join(m.split()) for m in merged) if len(s) >= min_chars]
    return out


def _cut(s: str, max_chars: int) -> str:
    return s if len(s) <= max_chars else s[:max_chars].rsplit(" ", 1)[0] + " …"


class SentenceRanker:
    """Top-n sentences of passages by cosine similarity to the query (Sentence-BERT embeddings)."""

    def __init__(self, embedder: Any) -> None:
        """``embedder`` has ``encode(list[str]) -> np.ndarray`` of L2-normalised rows (see tools.embeddings)."""
        self.embedder = embedder

    def rank(self, query: str, passages: list[Passage], n: int = 3) -> list[Evidence]:
        """The ``n`` most similar sentences across ``passages`` (ties keep passage order; each text ranked once)."""
        import numpy as np

        first: dict[str, tuple[Passage, int | None]] = {}
        for p in passages:
            for idx, s in p.sentence_list():
                first.setdefault(s, (p, idx))
        cands = [(s, p, idx) for s, (p, idx) in first.items()]
        if not cands or n <= 0:
            return []
        vecs = self.embedder.encode([query] + [s for s, _, _ in cands])
        scores = vecs[1:] @ vecs[0]
        order = np.argsort(-scores, kind="stable")[:n]
        return [Evidence(cands[i][0], cands[i][1].title, cands[i][1].id, float(scores[i]), cands[i][1].source,
                         cands[i][2]) for i in order]
