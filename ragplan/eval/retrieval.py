"""Retrieval scores against a dataset's gold paragraphs (recall@k, all-supporting@k, MRR; ``title_*`` the same by
title alone), no LLM: ``ragplan eval retrieval`` (docs/evaluation.md, "Retrieval without an LLM") and
:class:`SupportScorer` for a run's queries."""

from __future__ import annotations

import itertools
import json
import threading
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragplan.datasets import QAExample
from ragplan.eval.figures import format_table, score_cell
from ragplan.eval.metrics import field_of, mean_scores
from ragplan.eval.runfolder import RunFolder, atomic_write

__all__ = ["SupportSentence", "GoldParagraph", "EvidenceSet", "passage_key", "GoldSupport", "gold_support",
           "score_ranking", "score_queries", "mean_scores", "score_names", "DEFAULT_KS", "SUPPORT_KS",
           "support_metric_names", "SupportScorer", "evaluate_retrieval", "score_examples", "read_executed_queries",
           "retrieval_table", "write_result"]

DEFAULT_KS: tuple[int, ...] = (1, 2, 5, 10)
"""The cut-offs reported when none are named."""


def _text_key(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text or "").split())


def title_key(title: str) -> str:
    """A title as compared: NFC, whitespace collapsed, case folded."""
    return _text_key(title).casefold()


@dataclass(frozen=True)
class SupportSentence:
    """A gold sentence: its page title, its index in the page's (paragraph's) sentences and, when known, its text."""

    title: str
    index: int
    text: str = ""


@dataclass(frozen=True)
class GoldParagraph:
    """A gold paragraph, named by MuSiQue's ``idx`` or by its supporting ``sentence_ids``: a passage is it when the
    titles match and the passage holds every one of ``texts`` (the paragraph, or its supporting sentences). Without
    texts (FEVER, KILT: page-level gold) the title alone names it."""

    title: str
    texts: tuple[str, ...] = ()
    idx: int | None = None
    sentence_ids: tuple[int, ...] = ()

    def is_passage(self, key: tuple[str, str]) -> bool:
        """Whether a passage's ``(title_key, text_key)`` is this paragraph."""
        return key[0] == title_key(self.title) and all(t in key[1] for t in self.texts)

    def label(self) -> dict[str, Any]:
        """How the paragraph is named in a result: its title and ``idx`` or ``sentence_ids``."""
        return {"title": self.title, **({"idx": self.idx} if self.idx is not None else {}),
                **({"sentence_ids": list(self.sentence_ids)} if self.sentence_ids else {})}


@dataclass(frozen=True)
class EvidenceSet:
    """Titles, sentences and paragraphs that support the answer together (one of possibly several alternatives)."""

    titles: tuple[str, ...]
    sentences: tuple[SupportSentence, ...] = ()
    paragraphs: tuple[GoldParagraph, ...] = ()

    @property
    def units(self) -> tuple[GoldParagraph, ...]:
        """What must be retrieved: the paragraphs, else one page-level paragraph per title."""
        return self.paragraphs or tuple(GoldParagraph(t) for t in self.titles)


@dataclass(frozen=True)
class GoldSupport:
    """An example's gold support: one or more alternative evidence sets (any complete one suffices)."""

    sets: tuple[EvidenceSet, ...] = ()

    @property
    def titles(self) -> tuple[str, ...]:
        """Every gold title of every set, in first-seen order."""
        return tuple(dict.fromkeys(t for s in self.sets for t in s.titles))

    @property
    def has_sentences(self) -> bool:
        """Whether some set names sentences (sentence recall is defined)."""
        return any(s.sentences for s in self.sets)

    def __bool__(self) -> bool:
        return any(s.titles for s in self.sets)


def _sentence_set(ex: QAExample, facts: Sequence[tuple[str, int]]) -> EvidenceSet:
    # the first paragraph of a title names its sentences (reversed: a later one is overwritten by it)
    texts = {(t, i): s for t, ss in reversed(ex.contexts if ex.sentence_segmented else []) for i, s in enumerate(ss)}
    sents = tuple(SupportSentence(t, i, _text_key(texts.get((t, i), ""))) for t, i in dict.fromkeys(facts))
    by_title: dict[str, list[SupportSentence]] = {}
    for fact in sents:
        by_title.setdefault(fact.title, []).append(fact)
    paragraphs = tuple(GoldParagraph(t, tuple(f.text for f in fs if f.text), sentence_ids=tuple(f.index for f in fs))
                       for t, fs in by_title.items())
    return EvidenceSet(tuple(by_title), sents, paragraphs)


def gold_support(example: QAExample) -> GoldSupport:
    """The gold support of a loaded example (empty when the dataset gives none, e.g. FEVER's NOT ENOUGH INFO)."""
    if example.evidence_sets:
        return GoldSupport(tuple(_sentence_set(example, s) for s in example.evidence_sets))
    if example.supporting_facts:
        return GoldSupport((_sentence_set(example, example.supporting_facts),))
    if example.supporting_paragraphs:
        idx = {s.paragraph_position: s.paragraph_support_idx for s in example.decomposition_steps}
        texts = [_text_key(" ".join(example.contexts[j][1])) for j in example.supporting_paragraphs]
        paragraphs = tuple(GoldParagraph(example.contexts[j][0], (t,) if t else (), idx.get(j, j))
                           for j, t in zip(example.supporting_paragraphs, texts))
        return GoldSupport((EvidenceSet(tuple(dict.fromkeys(p.title for p in paragraphs)), (), paragraphs),))
    prov = example.meta.get("provenance_titles")
    if isinstance(prov, list) and prov:
        return GoldSupport((EvidenceSet(tuple(dict.fromkeys(str(t) for t in prov))),))
    return GoldSupport()


# ------------------------------------------------------------------------------------------ scoring

def passage_key(p: Any) -> tuple[str, str]:
    """A passage (a :class:`Passage`, a ``{title, text|contents}`` dict or a bare title) as compared."""
    if isinstance(p, str):
        return title_key(p), ""
    return title_key(str(field_of(p, "title") or "")), _text_key(str(field_of(p, "text") or field_of(p, "contents") or ""))


def score_names(ks: Sequence[int] = DEFAULT_KS, *, sentences: bool = True) -> list[str]:
    """The names of the scores :func:`score_queries` returns, in table order (paragraph scores, then by title)."""
    names = [f"recall@{k}" for k in ks] + [f"all_supporting@{k}" for k in ks]
    if sentences:
        names += [f"sentence_recall@{k}" for k in ks]
    return [*names, "mrr", *(f"title_recall@{k}" for k in ks), *(f"title_all_supporting@{k}" for k in ks), "title_mrr"]


def _sentence_hits(sentences: Sequence[Any], gold: EvidenceSet) -> set[SupportSentence]:
    hits: set[SupportSentence] = set()
    for s in sentences:
        title, idx = title_key(str(field_of(s, "title") or "")), field_of(s, "sentence_index")
        text = _text_key(str(field_of(s, "sentence") or ""))
        for g in gold.sentences:
            if title_key(g.title) == title and ((idx is not None and idx == g.index) or (g.text and g.text == text)):
                hits.add(g)
    return hits


def _unit_scores(out: dict[str, float | None], prefix: str, keys: list[list[tuple[str, str]]], ks: list[int],
                 sets: list[tuple[GoldParagraph, ...]]) -> None:
    for k in ks:
        got = [p for r in keys for p in r[:k]]
        shares = [sum(any(u.is_passage(p) for p in got) for u in us) / len(us) for us in sets]
        out[f"{prefix}recall@{k}"] = max(shares, default=0.0)
        out[f"{prefix}all_supporting@{k}"] = 1.0 if any(x == 1.0 for x in shares) else 0.0
    firsts = [next((i for i, p in enumerate(r, 1) if any(u.is_passage(p) for us in sets for u in us)), 0) for r in keys]
    out[f"{prefix}mrr"] = max((1.0 / i for i in firsts if i), default=0.0)


def score_queries(rankings: Sequence[Sequence[Any]], gold: GoldSupport, ks: Sequence[int] = DEFAULT_KS, *,
                  sentence_rankings: Sequence[Sequence[Any]] | None = None) -> dict[str, float | None]:
    """Scores of a question whose queries returned ``rankings`` (ranked passages or titles per query) and,
    optionally, ``sentence_rankings`` (ranked sentences per query; else ``sentence_recall@k`` is ``None``)."""
    ks = sorted({int(k) for k in ks if int(k) > 0})
    keys = [[passage_key(p) for p in r] for r in rankings]
    out: dict[str, float | None] = {}
    _unit_scores(out, "", keys, ks, [s.units for s in gold.sets if s.titles])
    sent_sets = [s for s in gold.sets if s.sentences] if sentence_rankings is not None else []
    for k in ks:
        top = [x for r in sentence_rankings or [] for x in list(r)[:k]]
        out[f"sentence_recall@{k}"] = max((len(_sentence_hits(top, s)) / len(set(s.sentences)) for s in sent_sets),
                                          default=None)
    _unit_scores(out, "title_", keys, ks, [tuple(map(GoldParagraph, s.titles)) for s in gold.sets if s.titles])
    return out


def score_ranking(ranking: Sequence[Any], gold: GoldSupport, ks: Sequence[int] = DEFAULT_KS, *,
                  sentences: Sequence[Any] | None = None) -> dict[str, float | None]:
    """Scores of one query's ranked passages (and ranked sentences, optionally) against ``gold``."""
    return score_queries([ranking], gold, ks, sentence_rankings=None if sentences is None else [sentences])


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
        """The figures of one question (``None`` each without gold support or a list of queries)."""
        if not gold or queries is None:
            return dict.fromkeys(support_metric_names(self.ks))
        qs = [q for q in queries if isinstance(q, str) and q.strip()]
        rankings: list[list[Any]] = []
        if qs:
            with self._lock:
                if self._index is None:
                    from ragplan.tools.textindex import TextIndex

                    self._index = TextIndex.open(self.index_dir, model_path=self.embedding_model)
                rankings = self._index.search_many(qs, max(self.ks))
        s = score_queries(rankings, gold, self.ks)
        return {f"support_{n}": None if (v := s[n]) is None else round(float(v), 4)
                for n in (*(f"recall@{k}" for k in self.ks), "mrr")}


#: ``search(queries, k) -> ranked passages per query`` (e.g. :meth:`TextIndex.search_many`).
SearchMany = Callable[[Sequence[str], int], list[list[Any]]]


def read_executed_queries(path: str | Path) -> dict[str, list[str]]:
    """Question id → the queries a method executed, from a run folder or its ``results.jsonl``."""
    p = Path(path)
    folder = RunFolder(p if p.is_dir() else p.parent)
    folder.results_file = folder.results_file if p.is_dir() else p
    if not folder.results_file.is_file():
        raise FileNotFoundError(f"{p}: no results.jsonl (give a run folder of `ragplan eval` or its results.jsonl)")
    out: dict[str, list[str]] = {}
    for qid, rec in folder.load_records().items():
        qs = rec.get("executed_queries")
        if not isinstance(qs, list) or not all(isinstance(q, str) for q in qs):
            raise ValueError(f"{folder.results_file}: record {qid!r} has no executed_queries list (a run from an older "
                             "ragplan?); rerun it to record the queries")
        out[qid] = [q for q in qs if q.strip()]
    return out


def score_examples(examples: Sequence[QAExample], search: SearchMany, *, ks: Sequence[int] = DEFAULT_KS,
                   queries: dict[str, list[str]] | None = None, ranker: Any = None, passages: int | None = None,
                   group_by: Sequence[str] = ()) -> dict[str, Any]:
    """Retrieve for every example with gold support (``queries``, else the questions) and score it; the means
    overall and per group, the counts and every question's scores."""
    ks = sorted({int(k) for k in ks if int(k) > 0}) or list(DEFAULT_KS)
    depth = max(int(passages or 0), max(ks))
    pool = int(passages or max(ks))
    counts = {"questions": len(examples), "scored": 0, "no_gold": 0, "missing": 0, "without_queries": 0}
    todo: list[tuple[QAExample, GoldSupport, list[str]]] = []
    for ex in examples:
        gold = gold_support(ex)
        if not gold:
            counts["no_gold"] += 1
            continue
        if queries is not None and ex.id not in queries:
            counts["missing"] += 1
            continue
        qs = [ex.question] if queries is None else queries[ex.id]
        counts["without_queries"] += 0 if qs else 1
        todo.append((ex, gold, qs))
    flat = [q for _, _, qs in todo for q in qs]
    results = search(flat, depth) if flat else []
    sentences = any(g.has_sentences for _, g, _ in todo) and ranker is not None
    per_question: list[dict[str, Any]] = []
    ranked = iter(results)
    for ex, gold, qs in todo:
        rankings = list(itertools.islice(ranked, len(qs)))
        sent_rankings = ([ranker.rank(q, list(r)[:pool], n=max(ks)) for q, r in zip(qs, rankings)]
                         if sentences and gold.has_sentences else None)
        scores = score_queries(rankings, gold, ks, sentence_rankings=sent_rankings)
        units = list(dict.fromkeys(u for s in gold.sets for u in s.units))
        found = [[next((u.label() for u in units if u.is_passage(passage_key(p))), None) for p in r] for r in rankings]
        per_question.append({"id": ex.id, "queries": qs, **{k: ex.meta[k] for k in group_by if k in ex.meta},
                             "gold_titles": list(gold.titles), "gold_paragraphs": [u.label() for u in units],
                             "scores": scores, "retrieved_paragraphs": found,
                             "retrieved_titles": [[getattr(p, "title", "") for p in r] for r in rankings]})
    counts["scored"] = len(per_question)
    groups: dict[str, dict[str, Any]] = {}
    for key in group_by:
        values: dict[str, list[dict[str, Any]]] = {}
        for row in per_question:
            if key in row:
                values.setdefault(str(row[key]), []).append(row["scores"])
        if values:
            groups[key] = {v: {"n": len(rs), **mean_scores(rs)} for v, rs in sorted(values.items())}
    n_queries = [len(r["queries"]) for r in per_question]
    return {"ks": ks, "passages": pool, "counts": counts,
            "queries_per_question": round(sum(n_queries) / len(n_queries), 3) if n_queries else 0.0,
            "score_names": score_names(ks, sentences=sentences),
            "overall": mean_scores([r["scores"] for r in per_question]), "groups": groups,
            "per_question": per_question}


def retrieval_table(result: dict[str, Any]) -> str:
    """The means as a Markdown table: one row per k (paragraph, sentence and title-level scores), then MRR."""
    o = result["overall"]
    cols = ["recall", "all_supporting", "sentence_recall", "title_recall", "title_all_supporting"]
    rows = [[k, *(score_cell(o.get(f"{c}@{k}")) for c in cols)] for k in result["ks"]]
    table = format_table(["k", *cols], rows, style="md")
    c = result["counts"]
    head = (f"# retrieval on {result.get('benchmark', '?')} — queries: {result.get('query_source', 'the questions')}\n\n"
            f"{c['scored']} of {c['questions']} questions scored ({c['no_gold']} without gold support, {c['missing']} "
            f"not in the run, {c['without_queries']} without queries); {result['queries_per_question']} queries per "
            f"question; sentences ranked from the top {result['passages']} passages of each query.\n")
    return head + "\n" + table + (f"\n\nMRR (first supporting paragraph): {score_cell(o.get('mrr'))}; by title: "
                                           f"{score_cell(o.get('title_mrr'))}\n")


def evaluate_retrieval(benchmark: str, data: str, *, index_dir: str | Path | None = None, context_only: bool = False,
                       queries: str | Path | None = None, ks: Sequence[int] = DEFAULT_KS, limit: int | None = None,
                       passages: int | None = None, options: dict[str, Any] | None = None,
                       work_dir: str | Path = ".") -> dict[str, Any]:
    """Everything ``ragplan eval retrieval`` does but printing (``options``: the benchmark's, e.g. ``fmt``)."""
    from ragplan.datasets.qa import build_context_index
    from ragplan.eval.registry import get_benchmark
    from ragplan.tools.retrieval import SentenceRanker
    from ragplan.tools.textindex import TextIndex

    if bool(index_dir) == bool(context_only):
        raise ValueError("give exactly one of --index DIR and --context-only")
    bench = get_benchmark(benchmark, data, limit=limit, **(options or {}))
    embedding_model = str((options or {}).get("embedding_model") or "")
    if not hasattr(bench, "examples"):
        raise ValueError(f"benchmark {benchmark!r} has no gold passages or sentences to score retrieval against")
    examples: list[QAExample] = bench.examples()
    if context_only:
        index_dir = build_context_index(examples, Path(work_dir) / f"context_index-{benchmark}", model=embedding_model,
                                        what=f"{data} ({benchmark})")
    executed = read_executed_queries(queries) if queries else None
    with TextIndex.open(str(index_dir), model_path=embedding_model) as index:
        result = score_examples(examples, index.search_many, ks=ks, queries=executed,
                                ranker=SentenceRanker(index.embedder), passages=passages,
                                group_by=[k for k in getattr(bench, "group_by", ()) if k != "kind"])
    return {"benchmark": benchmark, "data": str(data), "index": str(index_dir), "context_only": bool(context_only),
            "query_source": f"executed queries of {queries}" if queries else "the questions", **result}


def write_result(result: dict[str, Any], path: str | Path) -> Path:
    """Write the result as JSON (atomically); returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(p, json.dumps(result, indent=2, ensure_ascii=False))
    return p
