"""The plan assessor on StrategyQA as published: facts as passages among other questions' facts (the gold = the
question's own), the human-written decomposition as candidates (``#k`` has no written answer: left out), no candidate
quoting a fact not yet held; and the training steps that compute once what does not change per candidate."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import numpy as np

import ragplan.methods.furepa.data as data
import ragplan.methods.furepa.train as train
from ragplan.datasets import load_qa
from ragplan.eval.retrieval import gold_support
from ragplan.methods.furepa.data import HopGroup, build_groups, data_candidates, fact_pools, leaks, question_hops
from ragplan.methods.furepa.features import content_words, group_features
from ragplan.methods.furepa.pipeline import labelled_groups
from tests.test_datasets import STRATEGY, write_json

SAMPLE = Path(__file__).parent / "samples" / "furepa" / "strategyqa_train.json"  # published data, see its NOTICE


def test_strategyqa_facts_among_seeded_distractors_are_the_gold():
    published = json.loads(SAMPLE.read_text())
    exs = fact_pools(load_qa(SAMPLE), seed=0)
    assert len(exs) == 10
    own_of = {r["qid"]: r["facts"] for r in published}
    for ex in exs:
        own = own_of[ex.id]
        titles = [t for t, _ in ex.contexts]
        assert titles[:len(own)] == own and len(titles) == len(own) + 8  # the own facts, then 8 distractors
        assert all(t not in own and any(t in f for f in own_of.values()) for t in titles[len(own):])
        assert list(gold_support(ex).titles) == own and ex.contexts[0] == (own[0], [own[0]])
        hops, ordered = question_hops(ex)
        assert not ordered and [h.text for h in hops] == own
    assert fact_pools(load_qa(SAMPLE), seed=0) == exs and fact_pools(load_qa(SAMPLE), seed=1) != exs
    groups = build_groups(exs, n_candidates=10)
    first = [g for g in groups if g.qid == exs[0].id]
    assert [(g.hop, g.targets) for g in first] == [(h, own_of[exs[0].id][h:]) for h in range(3)]  # no order: any left
    assert first[2].context == [(f, f) for f in own_of[exs[0].id][:2]] and len(first[0].own) == 11


def test_strategyqa_decomposition_steps_are_the_candidates_and_k_is_left_out():
    exs = fact_pools(load_qa(SAMPLE))
    shrimp = next(e for e in exs if e.question == "Is shrimp scampi definitely free of plastic?")
    hops, _ = question_hops(shrimp)
    for h in range(len(hops)):
        cands = data_candidates(shrimp, hops, h, random.Random(0), 10)
        assert sorted(cands) == sorted([shrimp.question, "What protein is Shrimp scampi made out of?",
                                        "What have been found to contain?", "Are free from plastic?"])
    groups = build_groups(exs, n_candidates=10)
    assert groups and not any("#" in c for g in groups for c in g.candidates)
    facts = {t for ex in exs for t, _ in ex.contexts}
    assert not any(c in facts for g in groups for c in g.candidates)


def test_strategyqa_no_candidate_quotes_a_fact_the_evidence_does_not_hold(tmp_path):
    """A step that quotes a fact is a candidate only once that fact is evidence; the published `evidence` field is
    accepted (and not needed)."""
    rec = {**STRATEGY[0], "decomposition": [STRATEGY[0]["facts"][0], "What are the rules of MMA?"]}
    exs = fact_pools(load_qa(write_json(tmp_path / "strategyqa_train.json", [rec, STRATEGY[1]])))
    assert exs[0].meta["evidence"] == STRATEGY[0]["evidence"] and not gold_support(exs[1])
    hops, _ = question_hops(exs[0])
    quote = " ".join(rec["decomposition"][0].split())
    assert quote not in data_candidates(exs[0], hops, 0, random.Random(0), 10)
    assert quote in data_candidates(exs[0], hops, 1, random.Random(0), 10)
    assert leaks(hops, exs[0].question, [])(quote)
    assert not leaks(hops[1:], exs[0].question, [(hops[0].title, hops[0].text)])(quote)
    assert [g.hop for g in build_groups(exs)] == [0, 1]  # the record without facts has no picking point


def test_strategyqa_labelled_against_its_own_pool(tmp_path):
    groups = labelled_groups(SAMPLE, tmp_path / "index", context_only=True, progress=False)
    assert {g.source for g in groups} == {"data"} and len(groups) == 24
    assert all(len(g.labels) == len(g.candidates) and all(0 <= v <= 1 for v in g.labels) for g in groups)
    assert any(v > 0 for g in groups for v in g.labels) and any(v < 1 for g in groups for v in g.labels)


def test_leaks_reads_each_text_once_per_picking_point(monkeypatch):
    """The question and evidence, each gold title and answer, each candidate: their words are read once (they were
    read again for every candidate and gold)."""
    (ex,) = [e for e in fact_pools(load_qa(SAMPLE)) if e.question.startswith("Are more people")]
    hops, _ = question_hops(ex)
    calls = []
    monkeypatch.setattr(data, "content_words", lambda text: calls.append(text) or content_words(text))
    cands = data_candidates(ex, hops, 0, random.Random(0), 10)
    pool = 1 + len(ex.decomposition) + 1  # the question, the steps and the (empty) joined reasoning
    assert len(cands) == 4 and len(calls) == 1 + 2 * len(hops) + pool + len(cands)


def test_baselines_and_labels_build_their_tables_once_per_group(monkeypatch):
    own = [(f"T{i}", f"passage {i} about thing{i} and more") for i in range(5)]
    g = HopGroup("q", "what is thing1?", 1, own[:1], ["T1"], [f"thing{i}" for i in range(6)], [0.0] * 6, own=own,
                 top_scores=[0.0] * 6)
    counters = []
    monkeypatch.setattr(train, "Counter", lambda *a: counters.append(1) or Counter(*a))
    scores = train.baseline_scores(g)["bm25"]
    assert len(counters) == 1 + 4 and np.argmax(scores) == 1 and scores[0] == 0.0  # df, then each of 4 passages' tf
    keys = []
    monkeypatch.setattr(data, "title_key", lambda t: keys.append(t) or t.casefold())
    data.label_groups([g], lambda qs, k: [[] for _ in qs], own_only=True)
    assert len(keys) == len(own) + 1 and g.labels == [0.0] * 6  # the group's titles, not once per candidate


def test_an_empty_group_is_not_embedded():
    class Embedder:
        dim = 384

        def encode(self, texts, **kw):
            raise AssertionError("embedded an empty group")

    assert group_features(Embedder(), "q?", [("T", "x")], []).shape == (0, 394)
