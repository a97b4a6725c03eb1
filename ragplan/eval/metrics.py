"""Answer metrics for open-domain QA: the official EM and F1 (``rule``: ``"hotpotqa"``, hotpot_evaluate_v1.py, also
2Wiki's; ``"musique"``, metrics/answer.py), a yes/no or FEVER label read from a free-text answer (:func:`read_label`,
docs/evaluation.md) and label accuracy, retrieval statistics."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, Literal

__all__ = [
    "normalize_answer", "exact_match", "f1_score", "read_label", "LabelKind", "canonical_label", "label_accuracy",
    "retrieval_stats", "FEVER_LABELS", "ScoreRule", "SCORE_RULES", "count_of", "field_of",
    "mean_scores",
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
    return ([gold] if isinstance(gold, str) else [str(g) for g in gold]) or [""]


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


LabelKind = Literal["yesno", "fever"]

FEVER_LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
"""FEVER's three classes, as the dataset spells them."""

_CONTRACTIONS = [(re.compile(p), r) for p, r in [
    (r"\bcan ?not\b|\bcan't\b", "cannot"), (r"\bwon't\b", "will not"), (r"\bshan't\b", "shall not"),
    (r"n't\b", " not"), (r"\bi'm\b", "i am"), (r"\b(it|that|there|what|this|he|she)'s\b", r"\1 is"),
    (r"'re\b", " are"), (r"'d\b", " would"), (r"'ll\b", " will"), (r"'ve\b", " have"),
]]

_NEUTRAL = re.compile(
    r"\b(?:correct me if i am wrong|(?:there is |there can be |i have )?no doubt(?: about (?:it|that))?"
    r"|without (?:a |any )?doubt|no question(?: about (?:it|that))?|no matter|no one|no longer|no more|no less"
    r"|no later|no earlier|not only|not just|(?:i am |i am just )?not (?:sure|certain)|(?:i have )?no idea"
    r"|yes (?:and|or) no|no (?:and|or) yes|true (?:and|or) false|false (?:and|or) true|whether or not|if not|if so"
    r"|correct or (?:not|incorrect)|right or wrong)\b")
NEUTRAL_MARK = "~"

_SPLIT = re.compile(r"[.,;:!?()\[\]\n\u2014\u2013]+|\s-\s|\s(?=but\b|however\b)")
_SENTENCE = re.compile(r"(?<=[.!?\n])\s+")


def _prepare(text: str) -> str:
    t = (text or "").lower()
    t = t.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    for pat, rep in _CONTRACTIONS:
        t = pat.sub(rep, t)
    t = t.replace("_", " ").replace("*", " ").replace('"', " ").replace("`", " ").replace("#", " ")
    t = _NEUTRAL.sub(f" {NEUTRAL_MARK} ", t)
    return re.sub(r"[ \t]+", " ", t).strip()


def _words(s: str) -> str:
    """A clause as plain words: punctuation other than the neutral mark gone, spaces collapsed."""
    return " ".join(re.sub(r"[^a-z0-9~\s]", " ", s).split())


def _clauses(t: str) -> list[str]:
    return [c for c in (_words(x) for x in _SPLIT.split(t)) if c]


_HEDGES = sorted([
    "i think", "i believe", "i guess", "i suppose", "i would say", "i would guess", "i say", "i feel",
    "i am fairly sure", "i am pretty sure", "i am quite sure", "i am confident", "i am certain",
    "probably", "likely", "most likely", "very likely", "most probably", "possibly", "perhaps", "maybe",
    "well", "hmm", "um", "uh", "ok", "okay", "so", "then", "and", "but", "however", "also", "simply",
    "basically", "short answer", "the short answer", "in short", "in my opinion", "in my view", "my guess",
    "my answer", "honestly", "frankly", "actually", "clearly", "obviously", "definitely", "certainly",
    "absolutely", "surely", "of course", "indeed", "it seems", "it appears", "it seems that",
    "it appears that", "the answer", "answer", "final answer", "the final answer", "it is", "that is",
    "this is", "that", NEUTRAL_MARK,
], key=len, reverse=True)
_FEVER_HEDGES = sorted(_HEDGES + [
    "the claim is", "this claim is", "that claim is", "the statement is", "this statement is",
], key=len, reverse=True)

_EXACT = {
    "yes": ["yes", "yeah", "yep", "yup", "true", "correct", "affirmative", "indeed", "of course", "definitely",
            "certainly", "absolutely", "surely", "sure", "probably", "likely", "most likely", "very likely",
            "i think so", "i believe so", "i guess so", "i suppose so", "i would say so", "it is true",
            "that is true", "that is correct", "it is correct", "right", "that is right", "yes indeed",
            "yes definitely", "yes certainly"],
    "no": ["no", "nope", "nah", "false", "incorrect", "not", "not really", "not at all", "not necessarily",
           "not likely", "unlikely", "i do not think so", "i think not", "i believe not", "i doubt it",
           "i doubt that", "i do not believe so", "no way", "never", "by no means", "hardly", "certainly not",
           "definitely not", "absolutely not", "of course not", "probably not", "most likely not", "likely not",
           "not true", "not correct", "not the case", "untrue", "wrong", "negative", "no it is not",
           "no definitely not"],
}
_EXACT_MAP = {p: lab for lab, ps in _EXACT.items() for p in ps}
# answer words a first clause may start with ("No, it would not" / "Yes because …" / "True, but …")
_LEADING = {"yes": ["yes", "yeah", "yep", "yup", "true", "correct", "affirmative"],
            "no": ["no", "nope", "nah", "false", "incorrect", "not true", "not correct", "not the case", "untrue"]}
_LEADING_RE = re.compile(r"^(" + "|".join(sorted((re.escape(w) for ws in _LEADING.values() for w in ws),
                                                  key=len, reverse=True)) + r")(?:\s|$)")
_LEADING_MAP = {w: lab for lab, ws in _LEADING.items() for w in ws}
# "no" followed by one of these is a determiner ("no information"), not an answer
_NOT_AFTER_NO = {"information", "info", "evidence", "data", "idea", "answer", "record", "records", "mention", "reason",
                 "sign", "indication", "support", "source", "sources", "details", "detail", "context"}
_SUBJECT_AUX = re.compile(
    r"^(?:it|he|she|they|we|you|that|this|there|both|both of them|each|either|one|she|i)\s+"
    r"(?:is|are|was|were|does|do|did|would|could|can|will|has|have|had|should|might|may|must|am)"
    r"(\s+(?:not|never))?(?:\s+(?:be|have))?$")

_CONCLUSION = re.compile(
    r"^(?:so|hence|thus|therefore|consequently|accordingly|in conclusion|in short|in summary|to sum up"
    r"|to conclude|overall|ultimately|all in all|in the end|as a result|this means|which means)(?:\s+|$)")
_MARKER = re.compile(
    r"(?:\b(?:the\s+|my\s+|final\s+|correct\s+)*(?:answer|label|verdict|prediction|classification|judgement|judgment)"
    r"\b\s*(?:is|would be|will be|should be|must be|=|:|-|would have to be)?\s*:?"
    r"|(?:^|[\n.!?]\s*)a\s*:)\s*([^.,;:!?()\[\]\n]*)")
_FINISH = re.compile(r"\bfinish\s*\[([^\]]*)\]")


def _strip_hedges(c: str, hedges: list[str]) -> str:
    while c and (h := next((x for x in hedges if c == x or c.startswith(x + " ")), None)) is not None:
        c = c[len(h) + 1:]
    return c


def _clause_yesno(c: str, *, leading: bool, hedges: list[str] = _HEDGES) -> str | None:
    """The yes/no a clause says (see the module docstring, step 3), or None."""
    for cand in (c, _strip_hedges(c, hedges)):
        if not cand:
            continue
        if cand in _EXACT_MAP:
            return _EXACT_MAP[cand]
        if m := _SUBJECT_AUX.match(cand):
            return "no" if m.group(1) else "yes"
        if leading:
            m2 = _LEADING_RE.match(cand)
            nxt = cand[m2.end():].split()[:1] if m2 else []
            if m2 and not (nxt and (nxt[0] == NEUTRAL_MARK or (m2.group(1) == "no" and nxt[0] in _NOT_AFTER_NO))):
                return _LEADING_MAP[m2.group(1)]
    return None


def _marked(t: str, clauses: list[str], read: Callable[[str], str | None]) -> str | None:
    """Steps 1 and 2: the last explicit marker that reads, else the last conclusion clause that reads."""
    found = [read(_words(m.group(1))) for rx in (_FINISH, _MARKER) for m in rx.finditer(t)]
    if not any(found):
        for i, c in enumerate(clauses):
            m = _CONCLUSION.match(c)
            rest = (c[m.end():].strip() or (clauses[i + 1] if i + 1 < len(clauses) else "")) if m else ""
            found.append(read(rest) if rest else None)
    return next((f for f in reversed(found) if f), None)


def _ends(clauses: list[str], hedges: list[str]) -> tuple[str | None, str | None]:
    """The yes/no of the first and of the last clause (step 3)."""
    return (_clause_yesno(clauses[0], leading=True, hedges=hedges),
            _clause_yesno(clauses[-1], leading=len(clauses) == 1, hedges=hedges))


def _read_yesno(t: str, clauses: list[str]) -> str | None:
    if marked := _marked(t, clauses, lambda c: _clause_yesno(c, leading=True)):
        return marked
    first, last = _ends(clauses, _HEDGES)
    if first or last:
        return None if first and last and first != last else first or last
    openings = {lab for s in _SENTENCE.split(t) for cs in [_clauses(s)] if cs
                for lab in [_clause_yesno(cs[0], leading=True)] if lab}  # 4. sentence openings
    return openings.pop() if len(openings) == 1 else None


_S, _R, _N = FEVER_LABELS
_FEVER_PHRASES: list[tuple[str, str | None]] = [
    # NOT ENOUGH INFO (negated support, no evidence, cannot verify)
    (r"not enough (?:info|information|evidence|data|support|context)", _N), (r"nei", _N),
    (r"insufficient(?: info| information| evidence| data)?", _N), (r"inconclusive", _N),
    (r"(?:cannot|could not|can not|unable to|impossible to|not possible to|no way to|not able to)"
     r"(?: be)? (?:verif(?:y|ied)|determine(?:d)?|confirm(?:ed)?|check(?:ed)?|tell|decide(?:d)?|establish(?:ed)?)", _N),
    (r"(?:not|un)verifiable", _N), (r"neither supports? nor refutes?", _N), (r"neither supported nor refuted", _N),
    (r"(?:does|do|did|cannot|would|could|can) not (?:support|confirm|prove|verify)", _N),
    (r"(?:is|are|was|were|be)? ?not (?:supported|confirmed|proven|proved|verified)", _N), (r"unsupported", _N),
    (r"unconfirmed", _N), (r"unproven", _N),
    (r"(?:there is |there are |with |i have |i find |i found |found )?no (?:supporting |relevant |direct |clear |such )?"
     r"(?:evidence|information|info|data|support|mention|record)", _N),
    (r"lacks? (?:evidence|support|information)", _N), (r"lack of (?:evidence|support|information)", _N),
    (r"not enough", _N),
    # negated refutation: says nothing by itself
    (r"(?:does|do|did|cannot|would|could|can) not (?:refute|contradict|disprove)", None),
    (r"(?:is|are|was|were|be)? ?not (?:refuted|contradicted|disproven|disproved)", None),
    # REFUTES
    (r"refut(?:es|e|ed|ing|ation)", _R), (r"contradict(?:s|ed|ing|ion|ory)?", _R), (r"disprov(?:es|e|ed|en)", _R),
    (r"debunk(?:s|ed)?", _R), (r"rejects?", _R), (r"rejected", _R),
    # SUPPORTS
    (r"support(?:s|ed|ing)?", _S), (r"entail(?:s|ed|ment)?", _S), (r"confirm(?:s|ed)?", _S), (r"verified", _S),
    (r"corroborat(?:es|ed)", _S),
]
_FEVER_RE = re.compile(r"\b(?:" + "|".join(f"(?P<p{i}>{p})" for i, (p, _) in enumerate(_FEVER_PHRASES)) + r")\b")
_FEVER_EXACT_NEI = {"unknown", "unclear", "uncertain", "undetermined", "cannot say", "cannot tell", "cannot be determined"}
_YESNO_TO_FEVER = {"yes": _S, "no": _R}


def _strong(c: str) -> list[str | None]:
    """The FEVER labels of the strong phrases in a clause, in order (None for a negated refutation)."""
    return [_FEVER_PHRASES[int(str(m.lastgroup)[1:])][1] for m in _FEVER_RE.finditer(c)]  # its one group: p<index>


def _clause_fever(c: str) -> str | None:
    """A FEVER label for a short span: its first strong phrase, else an exact NEI word, else its yes/no reading."""
    if labels := [x for x in _strong(c) if x]:
        return labels[0]
    if _strip_hedges(c, _FEVER_HEDGES) in _FEVER_EXACT_NEI:  # (no NEI word starts with a hedge)
        return _N
    yn = _clause_yesno(c, leading=True, hedges=_FEVER_HEDGES)
    return _YESNO_TO_FEVER.get(yn or "")


def _read_fever(t: str, clauses: list[str]) -> str | None:
    if marked := _marked(t, clauses, _clause_fever):
        return marked
    strong = [x for c in clauses for x in _strong(c) if x]
    if len(set(strong)) == 1:
        return strong[0]
    if strong:
        return next((x for x in _strong(clauses[0]) if x), None)
    if any(_strip_hedges(c, _FEVER_HEDGES) in _FEVER_EXACT_NEI for c in (clauses[0], clauses[-1])):
        return _N
    first, last = _ends(clauses, _FEVER_HEDGES)
    return None if first and last and first != last else _YESNO_TO_FEVER.get(first or last or "")


def read_label(reply: str, kind: LabelKind) -> str | None:
    """The label a reply gives (``"yes"``/``"no"``, or one of :data:`FEVER_LABELS`), or ``None``; the first step that
    finds one wins: 0. idioms blanked; 1. the last marker (``Finish[X]``, "answer: X"); 2. the last conclusion ("so
    no"); 3. first and last clause, which must agree; 4. yes/no: sentence openings; FEVER: strong phrases and "unknown"
    before step 3."""
    if kind not in ("yesno", "fever"):
        raise ValueError(f"unknown label kind {kind!r}: use 'yesno' or 'fever'")
    t = _prepare(reply)
    clauses = _clauses(t)
    if not clauses:
        return None
    return (_read_yesno if kind == "yesno" else _read_fever)(t, clauses)


def canonical_label(gold: str, kind: str) -> str:
    """A gold label in its canonical spelling (``NOT_ENOUGH_INFO`` → ``NOT ENOUGH INFO``, ``Yes`` → ``yes``)."""
    g = " ".join((gold or "").replace("_", " ").split())
    if kind == "fever" and g.upper() in FEVER_LABELS:
        return g.upper()
    if kind == "yesno" and g.lower() in ("yes", "no"):
        return g.lower()
    return read_label(gold, kind) or g  # type: ignore[arg-type]


def label_accuracy(prediction: str, gold: str | Iterable[str], kind: str) -> float:
    """1.0 when the label read from ``prediction`` is the (canonical) gold label; unreadable scores 0.0."""
    label = read_label(prediction, kind)  # type: ignore[arg-type]
    return float(label is not None and any(label == canonical_label(g, kind) for g in _golds(gold)))


def count_of(value: Any) -> int | None:
    """A record's count as an int (a number, not a bool), else None."""
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else int(value)


def field_of(x: Any, name: str) -> Any:
    """``x[name]`` of a mapping, else the attribute (None when missing)."""
    return x.get(name) if isinstance(x, Mapping) else getattr(x, name, None)


def mean_scores(scores: Sequence[Mapping[str, float | None]]) -> dict[str, float | None]:
    """The mean of each score over records (questions), ``None`` values left out (``None`` when none has it)."""
    names = dict.fromkeys(n for s in scores for n in s)
    vals = {n: [float(v) for s in scores if isinstance(v := s.get(n), (int, float))] for n in names}
    return {n: round(sum(v) / len(v), 4) if v else None for n, v in vals.items()}


def retrieval_stats(output: Mapping[str, Any]) -> dict[str, Any]:
    """A question's retrieval figures, from a graph's output's ``queries`` when listed, else its counts:
    ``subqueries`` (None when not listed), ``retrieval_count`` (a failed retrieval included), ``retrieval_errors``
    (an error, or nothing found), ``retrieval_ratio`` (1.0 when it retrieved successfully at least once: Figure 3's
    unit) and ``subquery_retrieval_ratio`` (share of its sub-queries that retrieved successfully)."""
    qs = output.get("queries")
    if isinstance(qs, list) and qs:
        ran = [q for q in qs if field_of(q, "retrieve")]
        queries, attempted, failed = len(qs), len(ran), sum(1 for q in ran if field_of(q, "retrieval_error"))
    else:
        typed = count_of(output.get("retrievals"))
        queries, attempted = None, (typed if typed is not None else count_of(output.get("retrieval_count"))) or 0
        failed = min(attempted, count_of(output.get("retrieval_errors")) or 0)
    ok = max(0, attempted - failed)
    return {"retrieval_ratio": 1.0 if ok else 0.0,
            "subquery_retrieval_ratio": round(ok / queries, 4) if queries else None,
            "subqueries": queries, "retrieval_count": attempted, "retrieval_errors": failed}
