"""One parser per dataset format as released (docs/evaluation.md): a :class:`RawRecord` in, a :class:`QAExample` out;
:func:`looks_like` detects the format, :func:`unsupported_format` names well-known ones ragplan does not read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel, StrictInt, StrictStr, TypeAdapter

from ragplan.datasets.example import DecompositionStep, Kind, QAExample, RawRecord, infer_kind

__all__ = ["ParseOptions", "PARSERS", "fever_title", "looks_like", "unsupported_format"]

_TWOWIKI_TYPES = ("inference", "compositional", "bridge_comparison")  # (HotpotQA has "comparison" too)
_FEVER_LABELS = {"SUPPORTS": "SUPPORTS", "REFUTES": "REFUTES", "NOT ENOUGH INFO": "NOT ENOUGH INFO",
                 "NOT_ENOUGH_INFO": "NOT ENOUGH INFO", "NEI": "NOT ENOUGH INFO"}
_PTB = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}", "-COLON-": ":"}


@dataclass
class ParseOptions:
    """What a parser needs beyond the record."""

    dataset: str = ""
    """The dataset name to put in ``meta`` (FlashRAG/KILT files say it through their file name)."""
    aliases: dict[str, list[str]] = field(default_factory=dict)
    """2Wiki ``answer_id`` → alias answers (from ``id_aliases.json``)."""


class _Paragraph(BaseModel):  # MuSiQue's paragraphs, then its question_decomposition steps
    idx: StrictInt | None = None
    title: StrictStr
    paragraph_text: StrictStr
    is_supporting: Any = None


class _Step(BaseModel):
    id: Any = ""
    question: StrictStr
    answer: Any = None
    paragraph_support_idx: StrictInt | None = None


_TRIPLES = TypeAdapter(list[tuple[StrictStr, StrictStr, StrictStr]])
_PARAGRAPHS = TypeAdapter(list[_Paragraph])
_STEPS = TypeAdapter(list[_Step])
_EVIDENCE = TypeAdapter(list[list[tuple[Any, Any, Any, Any]]])
_OUTPUTS = TypeAdapter(list[dict[str, Any]])


def _dedupe(xs: list[str]) -> list[str]:
    return [x for x in dict.fromkeys(xs) if x]


def _labelled(answers: list[str], meta: dict) -> tuple[Any, list[str]]:
    """The kind of FlashRAG/KILT answers, FEVER labels spelt canonically, and ``meta["label"]`` set."""
    kind = infer_kind(answers)
    if kind == "fever":
        answers = [_FEVER_LABELS.get(a.upper().replace("_", " "), a) for a in answers]
    if kind != "span":
        meta["label"] = answers[0].lower() if kind == "yesno" else answers[0]
    return kind, answers


def _typed(data: dict) -> dict[str, str]:
    """The question ``type`` and ``level`` a record (or FlashRAG's ``metadata``) gives, as text."""
    return {k: str(data[k]) for k in ("type", "level") if data.get(k) is not None}


def fever_title(page: str) -> str:
    """A FEVER page id as a title: underscores to spaces, PTB bracket escapes undone."""
    for k, v in _PTB.items():
        page = page.replace(k, v)
    return page.replace("_", " ")


def parse_multihop(rec: RawRecord, opts: ParseOptions) -> QAExample:
    """HotpotQA and 2WikiMultihopQA records (the same shape; 2Wiki adds ``evidences`` and aliases)."""
    qid = rec.ident("_id", "id")
    question = rec.text("question")
    answer = rec.text("answer", what=" (a test split without gold answers cannot be graded)")
    answers = [answer]
    meta: dict = {"dataset": opts.dataset, **_typed(rec.data)}
    if rec.has("evidences"):  # 2Wiki's [subject, relation, object] triples, kept as given
        meta["evidences"] = [list(ev) for ev in rec.listed("evidences", _TRIPLES, "[subject, relation, object]")]
    if rec.has("answer_id"):
        meta["answer_id"] = str(rec.get("answer_id"))
        answers += opts.aliases.get(meta["answer_id"], [])
    kind: Kind = "yesno" if answer.strip().lower() in ("yes", "no") else "span"
    return QAExample(qid, question, _dedupe(answers), kind, contexts=rec.contexts(), supporting_facts=rec.facts(),
                     meta=meta)


def parse_musique(rec: RawRecord, opts: ParseOptions) -> QAExample:
    """MuSiQue records (answerable-only and full releases): paragraphs, aliases, decomposition, answerable."""
    qid = rec.ident("id")
    question = rec.text("question")
    answer = rec.text("answer", what=" (the MuSiQue test split has no gold answers and cannot be graded)")
    answers = _dedupe([answer] + [a.strip() for a in rec.str_list("answer_aliases")])
    paras = rec.listed("paragraphs", _PARAGRAPHS, "{idx, title, paragraph_text, is_supporting}")
    if not paras:
        rec.fail("'paragraphs' should be a non-empty list of {idx, title, paragraph_text, is_supporting}")
    position_of: dict[int, int] = {}  # a paragraph's idx -> its place in the list (contexts)
    for j, p in enumerate(paras):
        idx = j if p.idx is None else p.idx
        if idx in position_of:
            rec.fail(f"'paragraphs'[{j}]['idx'] = {idx} is also the idx of 'paragraphs'[{position_of[idx]}]")
        position_of[idx] = j
    steps: list[DecompositionStep] = []
    decomposition = rec.listed("question_decomposition", _STEPS, "{id, question, answer, paragraph_support_idx}")
    for j, st in enumerate(decomposition):
        sup = st.paragraph_support_idx
        if sup is not None and sup not in position_of:
            rec.fail(f"'question_decomposition'[{j}]['paragraph_support_idx'] = {sup!r} names no paragraph idx")
        steps.append(DecompositionStep(str(st.id), st.question, str(st.answer or ""), sup,
                                       None if sup is None else position_of[sup]))
    answerable = rec.data.get("answerable", True)
    if not isinstance(answerable, bool):
        rec.fail(f"'answerable' should be true or false, got {answerable!r}")
    meta: dict = {"dataset": opts.dataset, "answerable": answerable}
    prefix = qid.split("__", 1)[0]
    if prefix[:1].isdigit() and "hop" in prefix:
        meta["hops"] = int(prefix[0])
        meta["composition"] = prefix
    kind = infer_kind(answers[:1])
    return QAExample(qid, question, answers, "yesno" if kind == "yesno" else "span",
                     contexts=[(p.title, [p.paragraph_text]) for p in paras], sentence_segmented=False,
                     supporting_paragraphs=[j for j, p in enumerate(paras) if p.is_supporting is True],
                     decomposition=[s.question for s in steps], decomposition_steps=steps, meta=meta)


def parse_strategyqa(rec: RawRecord, opts: ParseOptions) -> QAExample:
    """StrategyQA records: the boolean answer becomes ``"yes"``/``"no"``."""
    qid = rec.ident("qid", "id")
    question = rec.text("question")
    raw = rec.data.get("answer")
    if raw is None:
        rec.fail("missing 'answer' (strategyqa_test.json has no gold answers and cannot be graded)")
    word = str(raw).strip().lower()
    if not isinstance(raw, (bool, str)) or word not in ("yes", "no", "true", "false"):
        rec.fail(f"'answer' should be true or false, got {raw!r}")
    answer = "yes" if word in ("yes", "true") else "no"
    facts = rec.str_list("facts")
    term = str(rec.get("term", "")).strip()
    meta = {"dataset": opts.dataset, "label": answer, "term": term, "description": str(rec.get("description", ""))}
    if rec.has("evidence"):
        meta["evidence"] = rec.get("evidence")
    return QAExample(qid, question, [answer], "yesno", contexts=[(term or "facts", facts)] if facts else [],
                     decomposition=rec.str_list("decomposition"), meta=meta)


def parse_fever(rec: RawRecord, opts: ParseOptions) -> QAExample:
    """FEVER records: the claim is the question and the label the one answer."""
    qid = rec.ident("id")
    claim = rec.text("claim")
    raw = rec.text("label", what=" (the FEVER test split has no labels and cannot be graded)")
    label = _FEVER_LABELS.get(raw.upper())
    if label is None:
        rec.fail(f"'label' should be SUPPORTS, REFUTES or NOT ENOUGH INFO, got {raw!r}")
    sets: list[list[tuple[str, int]]] = []
    for ev_set in rec.listed("evidence", _EVIDENCE, "an evidence set [[annotation, evidence, page, sentence], …]"):
        group = list(dict.fromkeys((fever_title(page), sent) for _, _, page, sent in ev_set
                                   if isinstance(page, str) and isinstance(sent, int) and not isinstance(sent, bool)))
        if group and group not in sets:  # NOT ENOUGH INFO sets ([ann, None, None, None]) carry no sentence
            sets.append(group)
    facts = list(dict.fromkeys(f for g in sets for f in g))
    meta = {"dataset": opts.dataset, "label": label}
    if rec.has("verifiable"):
        meta["verifiable"] = str(rec.get("verifiable"))
    return QAExample(qid, claim, [label], "fever", supporting_facts=facts, evidence_sets=sets, meta=meta)


def parse_flashrag(rec: RawRecord, opts: ParseOptions) -> QAExample:
    """FlashRAG records; the kind follows from the gold answers, metadata fills type/level/context."""
    qid = rec.ident("id", "_id", fallback=True)
    question = rec.text("question")
    answers = _dedupe([a.strip() for a in rec.str_list("golden_answers", required=True)])
    if not answers:
        rec.fail("'golden_answers' is empty")
    md = rec.get("metadata", {})
    if not isinstance(md, dict):
        rec.fail("'metadata' should be an object")
    meta: dict = {"dataset": str(md.get("dataset") or opts.dataset), **_typed(md)}
    kind, answers = _labelled(answers, meta)
    raw = md.get("decomposition")
    decomposition: list[Any] = raw if isinstance(raw, list) else []
    return QAExample(qid, question, answers, kind, contexts=rec.contexts(md.get("context") or [], "metadata.context"),
                     supporting_facts=rec.facts(md.get("supporting_facts") or [], "metadata.supporting_facts"),
                     decomposition=[str(d) for d in decomposition], meta=meta)


def parse_kilt(rec: RawRecord, opts: ParseOptions) -> QAExample:
    """KILT records: answers are the outputs' ``answer`` fields; provenance titles go to ``meta``."""
    qid = rec.ident("id", fallback=True)
    question = rec.text("input")
    answers: list[str] = []
    titles: list[str] = []
    for out in rec.listed("output", _OUTPUTS, "an object {answer, provenance}"):
        if isinstance(out.get("answer"), str):
            answers.append(out["answer"].strip())
        for prov in out.get("provenance") or []:
            if isinstance(prov, dict) and isinstance(prov.get("title"), str):
                titles.append(prov["title"])
    answers = _dedupe(answers)
    if not answers:
        rec.fail("no 'output' with an 'answer' (a test split without gold answers cannot be graded)")
    meta: dict = {"dataset": opts.dataset, "provenance_titles": _dedupe(titles)}
    kind, answers = _labelled(answers, meta)
    return QAExample(qid, question, answers, kind, meta=meta)


PARSERS: dict[str, Callable[[RawRecord, ParseOptions], QAExample]] = {
    "hotpotqa": parse_multihop,
    "2wikimultihopqa": parse_multihop,
    "musique": parse_musique,
    "strategyqa": parse_strategyqa,
    "fever": parse_fever,
    "flashrag": parse_flashrag,
    "kilt": parse_kilt,
}
"""Format name → parser."""


# what a record's keys give away, the first match winning: a format ragplan reads, else a well-known one it does not
_SNIFF: list[tuple[str, Callable[[dict, set[str]], bool]]] = [
    ("flashrag", lambda d, k: "golden_answers" in k),
    ("kilt", lambda d, k: {"input", "output"} <= k),
    ("fever", lambda d, k: "claim" in k),
    ("musique", lambda d, k: "question" in k and bool(k & {"paragraphs", "question_decomposition", "answer_aliases"})),
    ("strategyqa", lambda d, k: bool(k & {"qid", "decomposition", "facts"}) or isinstance(d.get("answer"), bool)),
    ("2wikimultihopqa", lambda d, k: "question" in k and ("evidences" in k or d.get("type") in _TWOWIKI_TYPES)),
    ("hotpotqa",  # HotpotQA's context is a list of [title, sentences] (SQuAD's is a string)
     lambda d, k: "question" in k and (isinstance(d.get("context"), (list, dict)) or "supporting_facts" in k)),
    ("SQuAD (a {title, paragraphs: [{context, qas}]} article)",
     lambda d, k: "paragraphs" in k and "title" in k and "question" not in k),
    ("SQuAD (flattened {id, title, context, question, answers})", lambda d, k: {"context", "question", "answers"} <= k),
    ("Natural Questions", lambda d, k: "question_text" in k and ("annotations" in k or "document_tokens" in k)),
    ("TriviaQA", lambda d, k: "Question" in k and "Answer" in k),
    ("MS MARCO", lambda d, k: "query" in k and "passages" in k),
    ("IIRC", lambda d, k: "questions" in k and "links" in k),
    ("a bare {question, answer} file (no dataset structure)", lambda d, k: {"question", "answer"} <= k),
]


def looks_like(data: dict) -> str | None:
    """The format a raw record's keys point to (keys only that format has), or ``None`` when they fit none."""
    return next((name for name, test in _SNIFF if name in PARSERS and test(data, set(data))), None)


def unsupported_format(data: dict) -> str | None:
    """The name of a well-known QA format a record is in that ragplan does not read, or ``None``."""
    return next((name for name, test in _SNIFF if name not in PARSERS and test(data, set(data))), None)
