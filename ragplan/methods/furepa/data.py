"""Training groups for the plan assessor: per question and hop, the gold passages of the earlier hops as context,
candidate queries (from the data or the LLM) and their labels (the reciprocal rank of the hop's gold passage among
the top ``k`` results, passages the context holds left out; 0 when absent)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ragplan.datasets import QAExample
from ragplan.eval.retrieval import EvidenceSet, GoldSupport, gold_support, score_ranking, title_key
from ragplan.methods.furepa.features import content_words

__all__ = ["Hop", "HopGroup", "question_hops", "data_candidates", "llm_candidates", "build_groups", "label_groups",
           "reciprocal_rank"]

_REF = re.compile(r"#(\d+)")
_PAREN = re.compile(r"\s*\([^)]*\)")


@dataclass
class Hop:
    """One gold passage a question needs."""

    title: str
    text: str = ""
    """Its text (the dataset's paragraph; empty when the dataset does not ship it)."""
    sub_question: str = ""
    """The decomposition's sub-question for this hop, as written (may hold ``#k``)."""
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
    """Where the candidates came from: data or llm."""


def _names(question: str, title: str) -> bool:
    """Whether ``question`` names the page ``title`` (its words in a row, the disambiguation left out)."""
    words = content_words(_PAREN.sub("", title))
    return bool(words) and f" {' '.join(words)} " in f" {' '.join(content_words(question))} "


def _paragraph(sentences: list[str]) -> str:
    return " ".join(s.strip() for s in sentences if s.strip())


def _step_hops(ex: QAExample) -> list[Hop]:
    """Hops from MuSiQue's ``question_decomposition`` (each step's paragraph, question and answer), when complete."""
    steps = list(getattr(ex, "decomposition_steps", None) or [])
    pos = [s.paragraph_position for s in steps]  # the paragraph's place in contexts (its MuSiQue idx may differ)
    if not steps or not all(isinstance(i, int) and 0 <= i < len(ex.contexts) for i in pos):
        return []
    return [Hop(ex.contexts[i][0], _paragraph(ex.contexts[i][1]), s.question, s.answer)
            for s, i in zip(steps, pos) if isinstance(i, int)]


def question_hops(ex: QAExample) -> tuple[list[Hop], bool]:
    """The question's gold passages as hops (the decomposition's order, else a title the question names first; a
    comparison has no order), and whether their order matters."""
    if hops := _step_hops(ex):
        return hops, True
    paragraphs: dict[str, str] = {}
    for t, sents in ex.contexts:
        paragraphs.setdefault(t, _paragraph(sents))
    titles = list(gold_support(ex).titles)
    if not titles:
        return [], False
    subs = list(ex.decomposition)
    ordered = bool(subs) and len(subs) == len(titles) and ex.meta.get("type") != "comparison"
    if not ordered:
        named = [t for t in titles if _names(ex.question, t)]
        if ex.meta.get("type") != "comparison" and named and len(named) < len(titles):
            titles = named + [t for t in titles if t not in named]
            ordered = True
    aligned = len(subs) == len(titles)
    return [Hop(t, paragraphs.get(t, ""), subs[i] if aligned else "") for i, t in enumerate(titles)], ordered


def _filled(sub: str, hops: list[Hop]) -> str:
    """``#k`` replaced by hop k's answer, else by the title of hop k+1 (the entity hop k leads to)."""
    def fill(m: re.Match) -> str:
        """The answer (or next hop's title) for one ``#k``."""
        k = int(m.group(1))
        if 1 <= k <= len(hops) and hops[k - 1].answer:
            return hops[k - 1].answer
        return hops[k].title if 0 <= k < len(hops) else m.group(0)

    return _REF.sub(fill, sub)


def data_candidates(ex: QAExample, hops: list[Hop], h: int, rng: random.Random, n: int) -> list[str]:
    """Up to ``n`` candidate queries for hop ``h`` from the data (sub-questions, titles, the question, rewrites, poor
    variants), shuffled."""
    hop = hops[h]
    pool: list[str] = []
    if hop.sub_question:
        pool.append(_filled(hop.sub_question, hops))
        if _REF.search(hop.sub_question):
            pool.append(hop.sub_question)
    words = content_words(ex.question)
    pool += [hop.title, ex.question, " ".join(words)]
    if len(words) >= 4:
        half = len(words) // 2
        pool += [" ".join(words[:half]), " ".join(words[half:])]
    if h > 0:
        pool += [f"{ex.question} {hop.title}", hops[h - 1].title, f"{hops[h - 1].title} {' '.join(words[-3:])}"]
    gold = {title_key(x.title) for x in hops}
    if distractors := [t for t, _ in ex.contexts if title_key(t) not in gold]:
        d = rng.choice(distractors)
        pool += [d, f"{d} {' '.join(words[:3])}"]
    pool.append(rng.choice(["more information about the answer", "the answer to the question", "related facts"]))
    out = list(dict.fromkeys(" ".join(p.split()) for p in pool if p and p.strip()))
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
    if not d.ok or d.value.action != "search":
        return []
    return distinct_queries(d.value.queries, n)


def build_groups(examples: Sequence[QAExample], *, seed: int = 0, n_candidates: int = 6,
                 propose: Callable[[str, Sequence[tuple[str, str]], int], list[str]] | None = None,
                 progress: bool = False) -> list[HopGroup]:
    """Every question's picking points, with candidates from ``propose(question, context, n)`` or else the data's."""
    from tqdm import tqdm

    groups: list[HopGroup] = []
    for ex in tqdm(examples, desc="building candidate queries", unit="question", disable=not progress):
        hops, ordered = question_hops(ex)
        for h in range(len(hops)):
            context = [(x.title, x.text) for x in hops[:h]]
            targets = [hops[h].title] if ordered else [x.title for x in hops[h:]]
            rng = random.Random(f"{seed}:{ex.id}:{h}")
            cands = propose(ex.question, context, n_candidates) if propose is not None else []
            source = "llm" if cands else "data"
            cands = cands or data_candidates(ex, hops, h, rng, n_candidates)
            if len(cands) >= 2:
                groups.append(HopGroup(ex.id, ex.question, h, context, targets, cands, source=source))
    return groups


def reciprocal_rank(result_titles: Sequence[str], targets: Sequence[str], known: Sequence[str]) -> float:
    """1/rank of the first target title among the results, the ``known`` (already held) titles left out; 0 if absent."""
    skip = {title_key(t) for t in known}
    ranking = [t for t in result_titles if title_key(t) not in skip]
    score = score_ranking(ranking, GoldSupport((EvidenceSet(tuple(targets)),)), ks=(1,))["mrr"]
    return float(score or 0.0)


def label_groups(groups: list[HopGroup], search_many: Callable[[list[str], int], list[list[Any]]], *, k: int = 20,
                 batch: int = 256, progress: bool = False) -> None:
    """Fill every group's ``labels``: :func:`reciprocal_rank` of its targets in ``search_many(queries, k)``'s results."""
    from tqdm import tqdm

    flat = [(g, q) for g in groups for q in g.candidates]
    labels: dict[int, list[float]] = {id(g): [] for g in groups}
    with tqdm(total=len(flat), desc="labelling candidates against the index", unit="query", disable=not progress) as bar:
        for start in range(0, len(flat), batch):
            chunk = flat[start:start + batch]
            results = search_many([q for _, q in chunk], k + 10)
            for (g, _), hits in zip(chunk, results):
                rr = reciprocal_rank([getattr(p, "title", "") for p in hits], g.targets, [t for t, _ in g.context])
                labels[id(g)].append(rr if rr >= 1.0 / k else 0.0)
            bar.update(len(chunk))
    for g in groups:
        g.labels = labels[id(g)]
