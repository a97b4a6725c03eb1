"""Training groups for the plan assessor: per question and hop, the earlier hops' gold passages (StrategyQA: facts) as
context, candidate queries written by people or planners (annotated sub-questions, ReAct logs, the propose prompt) and
their labels (the reciprocal rank of the hop's gold passage among the top ``k`` new results; 0 when absent)."""

from __future__ import annotations

import itertools
import json
import random
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ragplan.datasets import DatasetError, QAExample, infer_kind
from ragplan.datasets.example import DecompositionStep
from ragplan.eval.retrieval import EvidenceSet, GoldSupport, gold_support, score_ranking, title_key
from ragplan.methods.furepa.features import content_words

__all__ = ["Hop", "HopGroup", "question_hops", "data_candidates", "leaks", "question_key", "logged_queries", "fact_pools",
           "llm_candidates", "build_groups", "label_groups", "reciprocal_rank", "read_ircot"]

_REF = re.compile(r"#(\d+)")
_PAREN = re.compile(r"\s*\([^)]*\)")
_STEP_END = re.compile(r"(?<!\b[A-Z]\.)(?<=\.)\s+(?=[A-Z])")  # a sentence's end, not an initial's ("Edward L. Cahn")
_TITLE = "Wikipedia Title: "
_ANSWER = re.compile(r"^A: (.*?)\s*So the answer is:\s*(.*?)\.?\s*$", re.MULTILINE)


@dataclass
class Hop:
    """One gold passage a question needs."""

    title: str
    text: str = ""
    """Its text (the dataset's paragraph; empty when the dataset does not ship it)."""
    answer: str = ""
    """The sub-question's answer when the dataset gives it."""


@dataclass
class HopGroup:
    """One picking point: question, context (earlier gold passages), targets, candidates and their labels."""

    qid: str
    question: str
    hop: int  # 0-based
    context: list[tuple[str, str]]
    """The evidence held at this point: ``(title, text)`` of the earlier hops' gold passages."""
    targets: list[str]
    """Titles whose retrieval counts (the hop's gold passage; any remaining one when the order is free)."""
    candidates: list[str] = field(default_factory=list)
    """The candidate queries, in the order a selector sees them (``first`` takes the first)."""
    labels: list[float] = field(default_factory=list)
    """Each candidate's reciprocal rank of a target (0 when none is in the top k)."""
    source: str = "data"
    """Where the candidates came from: data (the question and annotated sub-questions), react-log or llm."""
    own: list[tuple[str, str]] = field(default_factory=list)
    """The question's own paragraphs ``(title, text)`` (the distractor setting's pool)."""
    top_scores: list[float] = field(default_factory=list)
    """Each candidate's best new result's retrieval score (a one-line baseline)."""


def _spaced(text: str, full: bool = True) -> str:
    """The content words of ``text`` between spaces (a page's disambiguation left out unless ``full``)."""
    return f" {' '.join(content_words(text if full else _PAREN.sub('', text)))} "


def _named_at(text: str, title: str, *, full: bool = False) -> int:
    """Where ``text`` names the page ``title`` (its words in a row), -1 if it does not."""
    return _spaced(text).find(words) if (words := _spaced(title, full)).strip() else -1


def _paragraph(sentences: list[str]) -> str:
    return " ".join(s.strip() for s in sentences if s.strip())


def _step_hops(ex: QAExample) -> list[Hop]:
    """Hops from MuSiQue's ``question_decomposition`` (each step's paragraph, question and answer), when complete."""
    steps = list(getattr(ex, "decomposition_steps", None) or [])
    pos = [s.paragraph_position for s in steps]  # the paragraph's place in contexts (its MuSiQue idx may differ)
    if not steps or not all(isinstance(i, int) and 0 <= i < len(ex.contexts) for i in pos):
        return []
    return [Hop(ex.contexts[i][0], _paragraph(ex.contexts[i][1]), s.answer)
            for s, i in zip(steps, pos) if isinstance(i, int)]


def question_hops(ex: QAExample) -> tuple[list[Hop], bool]:
    """The question's gold passages as hops (the decomposition's order, else a title the question names first; a
    comparison or StrategyQA's facts have no order), and whether their order matters."""
    if hops := _step_hops(ex):
        return hops, True
    paragraphs = {t: _paragraph(sents) for t, sents in reversed(ex.contexts)}  # a title's first paragraph
    titles = list(gold_support(ex).titles)
    free = ex.meta.get("type") == "comparison" or ex.dataset == "strategyqa"
    ordered = not free and len(ex.decomposition) == len(titles) > 0
    named = [t for t in titles if not (free or ordered) and _named_at(ex.question, t) >= 0]
    if 0 < len(named) < len(titles):
        titles, ordered = named + [t for t in titles if t not in named], True
    return [Hop(t, paragraphs.get(t, "")) for t in titles], ordered


def read_ircot(path: str | Path) -> list[QAExample]:
    """IRCoT's annotated prompt file (``# METADATA: {"qid": …}``, ``Wikipedia Title:`` paragraphs, ``Q: …``, ``A: steps.
    So the answer is: X.``) as examples ([] for a file in another format): the paragraphs the reasoning or question names
    are the gold hops, in the order named; the reasoning steps are kept in ``meta["reasoning"]``."""
    p = Path(path)
    if not p.is_file():
        return []
    with p.open(encoding="utf-8", errors="replace") as f:
        if not f.read(12).startswith("# METADATA:"):
            return []
    try:
        text, out = p.read_text(encoding="utf-8"), []
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{p}: not UTF-8 text (byte {exc.start})") from None
    starts = [m.start() for m in re.finditer(r"^# METADATA:", text, re.MULTILINE)] + [len(text)]
    for start, end in itertools.pairwise(starts):
        head, _, block = text[start:end].partition("\n")
        chunks = [c.strip() for c in block.split("\n\n") if c.strip()]
        paras = [c[len(_TITLE):].partition("\n")[::2] for c in chunks if c.startswith(_TITLE)]
        question, answer = re.search(r"^Q: (.*)$", block, re.MULTILINE), _ANSWER.search(block)
        try:
            qid = str(json.loads(head.removeprefix("# METADATA:"))["qid"])
        except (ValueError, KeyError, TypeError):
            qid = ""
        if not (qid and paras and question and answer):
            raise DatasetError(f"{p}: line {text.count(chr(10), 0, start) + 1}: an IRCoT block needs METADATA with a "
                               "qid, 'Wikipedia Title:' paragraphs, a 'Q:' line and an 'A: … So the answer is: X.' line")
        said, answers = f"{answer.group(1)} {question.group(1)}", [answer.group(2)]
        named = {_PAREN.sub("", t) for t, _ in paras if _named_at(said, t, full=True) >= 0}  # "X (1962 film)" named
        at = {i: _named_at(said, t, full=_PAREN.sub("", t) in named) for i, (t, _) in enumerate(paras)}
        gold = sorted((i for i in at if at[i] >= 0), key=at.__getitem__)
        steps = [DecompositionStep(f"{qid}#{k}", "", answers[0] if k == len(gold) - 1 else "", i, i)
                 for k, i in enumerate(gold)]
        out.append(QAExample(qid, question.group(1), answers, infer_kind(answers), [(t, [x]) for t, x in paras],
                             sentence_segmented=False, supporting_paragraphs=gold, decomposition_steps=steps,
                             meta={"dataset": p.stem, "reasoning": [x for x in _STEP_END.split(answer.group(1)) if x]}))
    return out


def fact_pools(examples: Sequence[QAExample], seed: int = 0, distractors: int = 8) -> list[QAExample]:
    """StrategyQA questions as a distractor setting: each fact a passage titled by its text, the question's own facts
    (its gold) then ``distractors`` facts of other questions drawn with ``seed``; other examples are returned as they are."""
    facts = [(ex.id, f) for ex in examples if ex.dataset == "strategyqa" for _, fs in ex.contexts for f in fs]
    out = []
    for ex in examples:
        own = list(dict.fromkeys(f for _, fs in ex.contexts for f in fs)) if ex.dataset == "strategyqa" else []
        drawn = random.Random(f"{seed}:{ex.id}").sample(facts, min(len(facts), distractors + len(own))) if own else []
        pool = own + [f for q, f in drawn if q != ex.id and f not in own][:distractors]
        out.append(replace(ex, contexts=[(f, [f]) for f in pool], sentence_segmented=False,
                           supporting_paragraphs=list(range(len(own)))) if own else ex)
    return out


def _filled(sub: str, hops: list[Hop], h: int) -> str:
    """``#k`` replaced by hop k's answer when hop k comes before hop ``h`` (evidence so far), else left out."""
    return " ".join(_REF.sub(lambda m: hops[int(m[1]) - 1].answer if 1 <= int(m[1]) <= h else "", sub).split())


def leaks(searched: Sequence[Hop], question: str, context: Sequence[tuple[str, str]]) -> Callable[[str], bool]:
    """A test of whether a query names a searched hop's gold title or answer when neither the question nor the evidence
    so far does (a candidate a planner could not have written without the gold annotation)."""
    known = _spaced(" ".join([question, *(f"{t} {x}" for t, x in context)]))  # the words of each once, not per query
    hidden = [w for hop in searched for g in (hop.title, hop.answer) if (w := _spaced(g, False)).strip() and w not in known]
    return lambda query: any(w in q for q in [_spaced(query)] for w in hidden)


def question_key(question: str) -> str:
    """A question compared across files: lower case, words only."""
    return " ".join(re.findall(r"[a-z0-9]+", question.lower()))


def logged_queries(files: Sequence[str | Path]) -> dict[str, list[str]]:
    """The ``Search[...]`` queries ReAct/Reflexion agents wrote, per :func:`question_key`, from their published
    trajectory logs (every trial, successful or not, in the order written)."""
    from ragplan.methods.instructrag.paths import parse_trajectory_log

    out: dict[str, list[str]] = {}
    for f in files:
        report = parse_trajectory_log(Path(f).read_text(encoding="utf-8"), str(f))
        for p in report.successful + report.failed:
            qs = out.setdefault(question_key(p.question), [])
            qs += [i.argument.strip(' "') for i in p.instructions if i.action == "Search" and i.argument.strip(' "')]
    return out


def data_candidates(ex: QAExample, hops: list[Hop], h: int, rng: random.Random, n: int, logged: Sequence[str] = ()) -> list[str]:
    """Up to ``n`` candidate queries for hop ``h`` written by people or planners: the question, every annotated sub-question
    (MuSiQue's, StrategyQA's; ``#k`` filled with an earlier hop's written answer, else left out), 2Wiki's evidence
    triples as "subject relation", the ReAct agents' ``logged`` queries, IRCoT's reasoning steps before hop ``h``; none
    that :func:`leaks` (hop ``h`` on); shuffled."""
    context = [(x.title, x.text) for x in hops[:h]]
    steps = list(ex.meta.get("reasoning") or [])[:h]  # IRCoT's reasoning written before hop h: each, and all of it
    triples = [f"{s} {r}" for s, r, _ in ex.meta.get("evidences") or []]  # the object is what the query should find
    pool = [ex.question, *(_filled(s, hops, h) for s in ex.decomposition), *triples, *logged, *steps, " ".join(steps)]
    leaking = leaks(hops[h:], ex.question, context)
    out = list(dict.fromkeys(q for q in (" ".join(p.split()) for p in pool) if content_words(q) and not leaking(q)))
    rng.shuffle(out)
    return out[:n]


def llm_candidates(ctx: Any, question: str, context: Sequence[tuple[str, str]], n: int) -> list[str]:
    """Candidate queries from the run's LLM with FuRePA's own (masked) prompt; [] when it answers or fails."""
    from ragplan.nodes.furepa.mask_reasoning import build_prompt
    from ragplan.nodes.furepa.propose import ask_proposal, distinct_queries
    from ragplan.state.furepa import EvidencePassage

    evidence = [EvidencePassage(id=t, title=t, text=x, source="gold") for t, x in context]
    prompt = build_prompt(question, evidence, [], masked=True, n_queries=n, passage_chars=getattr(ctx, "passage_chars", 700))
    d = ask_proposal(ctx, prompt, float(getattr(ctx, "tp0", 0.2)))
    return distinct_queries(d.value.queries, n) if d.ok and d.value.action == "search" else []


def build_groups(examples: Sequence[QAExample], *, seed: int = 0, n_candidates: int = 6,
                 propose: Callable[[str, Sequence[tuple[str, str]], int], list[str]] | None = None,
                 logged: dict[str, list[str]] | None = None, progress: bool = False) -> list[HopGroup]:
    """Every question's picking points, with candidates from ``propose(question, context, n)`` or else the data's and
    the ``logged`` agents' queries (:func:`data_candidates`)."""
    from tqdm import tqdm

    groups: list[HopGroup] = []
    for ex in tqdm(examples, desc="building candidate queries", unit="question", disable=not progress):
        hops, ordered = question_hops(ex)
        agents, own = (logged or {}).get(question_key(ex.question), []), [(t, _paragraph(x)) for t, x in ex.contexts]
        for h in range(len(hops)):
            context = [(x.title, x.text) for x in hops[:h]]
            targets = [hops[h].title] if ordered else [x.title for x in hops[h:]]
            rng = random.Random(f"{seed}:{ex.id}:{h}")
            cands = propose(ex.question, context, n_candidates) if propose is not None else []
            source = "llm" if cands else "react-log" if agents else "data"
            cands = cands or data_candidates(ex, hops, h, rng, n_candidates, agents)
            if len(cands) >= 2:
                groups.append(HopGroup(ex.id, ex.question, h, context, targets, cands, source=source, own=own))
    return groups


def reciprocal_rank(result_titles: Sequence[str], targets: Sequence[str]) -> float:
    """1/rank of the first target title among the results (titles compared as :func:`title_key` does); 0 if absent."""
    return float(score_ranking(result_titles, GoldSupport((EvidenceSet(tuple(targets)),)), ks=(1,))["mrr"] or 0.0)


def label_groups(groups: list[HopGroup], search_many: Callable[[list[str], int], list[list[Any]]], *, k: int = 20,
                 own_only: bool = False, batch: int = 256, progress: bool = False) -> None:
    """Fill every group's ``labels`` (:func:`reciprocal_rank` of its targets in ``search_many(queries, k)``'s results;
    with ``own_only`` among the question's own paragraphs) and ``top_scores`` (the best new result's score)."""
    from tqdm import tqdm

    flat = []
    for g in groups:  # the titles a result may have (own_only) and those already held, once per group
        g.labels, g.top_scores = [], []
        own, known = {title_key(t) for t, _ in g.own} if own_only else None, {title_key(t) for t, _ in g.context}
        flat += [(g, own, known, q) for q in g.candidates]
    with tqdm(total=len(flat), desc="labelling candidates against the index", unit="query", disable=not progress) as bar:
        for start in range(0, len(flat), batch):
            chunk = flat[start:start + batch]
            for (g, own, known, _), hits in zip(chunk, search_many([q for *_, q in chunk], 200 if own_only else k + 10)):
                hits = [p for p in hits if (own is None or title_key(p.title) in own) and title_key(p.title) not in known]
                rr = reciprocal_rank([p.title for p in hits], g.targets)
                g.labels.append(rr if rr >= 1.0 / k else 0.0)
                g.top_scores.append(float(hits[0].score) if hits else 0.0)
            bar.update(len(chunk))
