"""Answer metrics for open-domain QA: exact match and token F1, label accuracy, retrieval ratio.

:func:`normalize_answer`, :func:`exact_match` and :func:`f1_score` follow the official HotpotQA
evaluation script (``hotpot_evaluate_v1.py``; the 2WikiMultihopQA script uses the same rules):

* normalisation lowercases, deletes every ASCII punctuation character (``string.punctuation``,
  so ``"U.S."`` becomes ``"us"`` and ``"Jay-Z"`` becomes ``"jayz"``), replaces the whole words
  *a*, *an*, *the* with a space, and collapses whitespace — in that order;
* EM is 1 when the normalised strings are equal;
* F1 is over whitespace tokens of the normalised strings (bag of words: repeated tokens count as
  often as both sides have them); when either normalised side is ``yes``, ``no`` or ``noanswer``
  and the two differ, F1 is 0 — so "no" never earns partial credit against "no way";
* with several gold answers (aliases) the best score over them counts.

Yes/no and FEVER answers are also read as labels (:func:`extract_label`), so a reply such as
"Yes, because pears float." is graded as *yes*; the paper's StrategyQA protocol extracts the final
answer and matches it against the gold one.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "normalize_answer", "exact_match", "f1_score", "extract_label", "label_accuracy",
    "retrieval_ratio", "retrieval_count", "FEVER_LABELS",
]

FEVER_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NO_PARTIAL = ("yes", "no", "noanswer")


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation, drop the articles a/an/the, collapse whitespace (HotpotQA's rules)."""
    text = (text or "").lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(gold: str | Iterable[str]) -> list[str]:
    golds = [gold] if isinstance(gold, str) else [str(g) for g in gold]
    return golds or [""]


def exact_match(prediction: str, gold: str | Iterable[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer (best over several), else 0.0."""
    p = normalize_answer(prediction)
    return float(any(p == normalize_answer(g) for g in _golds(gold)))


def _f1_one(prediction: str, gold: str) -> float:
    p, g = normalize_answer(prediction), normalize_answer(gold)
    if (p in _NO_PARTIAL or g in _NO_PARTIAL) and p != g:
        return 0.0
    p_toks, g_toks = p.split(), g.split()
    same = sum((Counter(p_toks) & Counter(g_toks)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p_toks), same / len(g_toks)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, gold: str | Iterable[str]) -> float:
    """Token-level F1 of the normalised prediction against the gold answer(s), the best over several."""
    return max(_f1_one(prediction, g) for g in _golds(gold))


# ---------------------------------------------------------------------------------------- labels

_YESNO = {
    "yes": "yes", "true": "yes", "correct": "yes",
    "no": "no", "false": "no", "incorrect": "no",
}
_FEVER = {
    "supports": "SUPPORTS", "support": "SUPPORTS", "supported": "SUPPORTS", "supporting": "SUPPORTS",
    "true": "SUPPORTS", "correct": "SUPPORTS", "yes": "SUPPORTS", "entailment": "SUPPORTS",
    "refutes": "REFUTES", "refute": "REFUTES", "refuted": "REFUTES", "false": "REFUTES", "incorrect": "REFUTES",
    "no": "REFUTES", "contradicts": "REFUTES", "contradicted": "REFUTES", "contradiction": "REFUTES",
    "not true": "REFUTES", "not correct": "REFUTES",
    "not enough info": "NOT ENOUGH INFO", "not enough information": "NOT ENOUGH INFO",
    "not enough evidence": "NOT ENOUGH INFO", "nei": "NOT ENOUGH INFO", "not verifiable": "NOT ENOUGH INFO",
    "insufficient info": "NOT ENOUGH INFO", "insufficient information": "NOT ENOUGH INFO",
    "insufficient evidence": "NOT ENOUGH INFO", "unverifiable": "NOT ENOUGH INFO", "unknown": "NOT ENOUGH INFO",
    "cannot be determined": "NOT ENOUGH INFO", "cannot be verified": "NOT ENOUGH INFO",
    "can not be determined": "NOT ENOUGH INFO", "undetermined": "NOT ENOUGH INFO",
    "neither supported nor refuted": "NOT ENOUGH INFO", "neither supports nor refutes": "NOT ENOUGH INFO",
    "not supported": "NOT ENOUGH INFO", "unsupported": "NOT ENOUGH INFO", "no evidence": "NOT ENOUGH INFO",
    "no information": "NOT ENOUGH INFO", "no info": "NOT ENOUGH INFO", "not enough": "NOT ENOUGH INFO",
}
# phrases that can only mean the third FEVER class, wherever they stand in a reply
_NEI_ANYWHERE = re.compile(r"\b(?:not enough (?:info|information|evidence)|insufficient (?:info|information|evidence)"
                           r"|cannot be (?:verified|determined)|neither supported nor refuted)\b")


def _label_text(text: str) -> str:
    """Lowercase, punctuation and underscores to spaces (``NOT_ENOUGH_INFO``, ``Yes,``), collapsed."""
    text = "".join(" " if ch in _PUNCT else ch for ch in (text or "").lower())
    return " ".join(text.split())


def _compile(aliases: Mapping[str, str]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    alts = "|".join(re.escape(a) for a in sorted(aliases, key=len, reverse=True))
    start = re.compile(rf"^(?:final answer |answer |label |verdict |the claim is |claim is |it is |it s )?({alts})\b")
    inner = re.compile(rf"\b(?:answer is|answer|label is|label|verdict is|verdict|the claim is|claim is|therefore|so)"
                       rf" ({alts})\b")
    return start, inner


_PATTERNS = {"yesno": _compile(_YESNO), "fever": _compile(_FEVER)}
_TABLES = {"yesno": _YESNO, "fever": _FEVER}


def extract_label(prediction: str, kind: str) -> str | None:
    """The label a free-text reply gives, or ``None`` when it names none.

    ``kind`` is ``"yesno"`` (returns ``"yes"``/``"no"``; true/false/correct/incorrect count, and a
    reply that *starts* with one — "Yes, because …" — or says "the answer is no" is read as such) or
    ``"fever"`` (returns a :data:`FEVER_LABELS` value; paraphrases such as supported / refuted /
    not enough information / true / false / NEI are mapped; "not supported" counts as NOT ENOUGH INFO,
    since FEVER's third class is exactly a claim without supporting or refuting evidence).
    Only the start of the reply and explicit "answer is X" / "label: X" phrases are read, never a
    yes or no in the middle of an explanation; for FEVER an unambiguous "not enough information" /
    "cannot be verified" anywhere also counts.
    """
    if kind not in _TABLES:
        raise ValueError(f"unknown label kind {kind!r}: use 'yesno' or 'fever'")
    text = _label_text(prediction)
    if not text:
        return None
    table = _TABLES[kind]
    if text in table:
        return table[text]
    start, inner = _PATTERNS[kind]
    m = start.match(text) or inner.search(text)
    if m:
        return table[m.group(1)]
    if kind == "fever" and _NEI_ANYWHERE.search(text):
        return "NOT ENOUGH INFO"
    return None


def _canonical_gold(gold: str, kind: str) -> str:
    label = extract_label(gold, kind)
    return label if label is not None else _label_text(gold)


def label_accuracy(prediction: str, gold: str | Iterable[str], kind: str) -> float:
    """1.0 when the label read from ``prediction`` equals the (canonical) gold label, else 0.0."""
    label = extract_label(prediction, kind)
    if label is None:
        return 0.0
    return float(any(label == _canonical_gold(g, kind) for g in _golds(gold)))


# ------------------------------------------------------------------------------------- retrieval

def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _queries(output: Mapping[str, Any]) -> list[Any]:
    qs = output.get("queries") or []
    return [q if isinstance(q, Mapping) else getattr(q, "__dict__", {}) for q in qs] if isinstance(qs, list) else []


def retrieval_ratio(output: Mapping[str, Any]) -> float:
    """Share of (sub-)queries that retrieved: the output's ``retrieval_ratio``, else counted from its
    ``queries`` (``retrieve`` flags); 0.0 when the output has neither (e.g. a failed run)."""
    value = _num(output.get("retrieval_ratio"))
    if value is not None:
        return value
    qs = _queries(output)
    return sum(1 for q in qs if q.get("retrieve")) / len(qs) if qs else 0.0


def retrieval_count(output: Mapping[str, Any]) -> int:
    """Retrievals made: the output's ``retrieval_count``, else the ``queries`` that retrieved, else 0."""
    value = _num(output.get("retrieval_count"))
    if value is not None:
        return int(value)
    return sum(1 for q in _queries(output) if q.get("retrieve"))
