"""The plan assessor: hops from gold supporting passages; candidates written by people or planners (annotated
sub-questions, ReAct logs, the propose prompt), never naming the searched hop's gold title or answer; reciprocal-rank
labels; the text scorer trained through ``ragplan furepa train-assessor`` beside its one-line baselines; --eval-data."""

from __future__ import annotations

import os

import json
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from ragplan.cli import main
from ragplan.datasets import DatasetError, load_qa
from ragplan.nodes.furepa.propose import Proposal
from ragplan.state.furepa import FuRePAContext
from ragplan.methods.furepa.data import (HopGroup, build_groups, data_candidates, leaks, llm_candidates, logged_queries,
                                         question_hops, question_key, read_ircot, reciprocal_rank)
from ragplan.methods.furepa.features import feature_names, group_features
from ragplan.methods.furepa.features import context_text
from ragplan.methods.furepa.scorer import (
    AssessorError, TreeEnsemble, fit_cross_encoder, fit_trees, load_assessor, save_assessor,
)
from ragplan.methods.furepa.train import pick_mrr, train_assessor
from ragplan.methods.furepa.synthetic import write_synthetic
from ragplan.eval.retrieval import title_key
from tests.scripted import ScriptedChatModel
from tests.test_datasets import HOTPOT, MUSIQUE, write_json, write_jsonl

SAMPLES = Path(__file__).parent / "samples" / "furepa"  # published data, see its NOTICE
MUSIQUE_SAMPLE, HOTPOT_SAMPLE, REACT_LOG = (SAMPLES / "musique_ans_v1.0_train.json",
                                            SAMPLES / "hotpot_distractor_sample.json", SAMPLES / "react_log_sample.txt")
IRCOT_2WIKI = SAMPLES / "ircot_2wikimultihopqa_cot.txt"


@pytest.fixture(scope="module")
def musique_context_index(tmp_path_factory) -> Path:
    """The MuSiQue sample's context index as ``train-assessor --data MUSIQUE_SAMPLE --context-only`` builds it under
    ``--out``/context_index (same passages, packaged model: the command finds it fresh and reuses it), embedded once
    for the tests that train on that sample rather than once per test; each copies it into its own ``--out``."""
    from ragplan.datasets.qa import build_context_index
    from ragplan.methods.furepa.data import fact_pools

    root = tmp_path_factory.mktemp("musique") / "context_index"
    build_context_index(fact_pools(load_qa(MUSIQUE_SAMPLE), 0), root, what=str(MUSIQUE_SAMPLE))
    return root


def _with_index(out: Path, index: Path) -> Path:
    shutil.copytree(index, out / "context_index")
    return out


def _no_leak(groups, examples):
    """No candidate names the gold title or answer of the searched or a later hop unless the question or the evidence
    so far holds it."""
    by_id = {ex.id: question_hops(ex)[0] for ex in examples}
    for g in groups:
        assert not [c for c in g.candidates if leaks(by_id[g.qid][g.hop:], g.question, g.context)(c)], g


def test_musique_candidates_from_the_published_decomposition():
    """MuSiQue's question_decomposition as published: a later hop's #k takes the earlier hop's answer (evidence so
    far); the hop being searched never gets its own answer or title from the annotation."""
    exs = load_qa(MUSIQUE_SAMPLE)
    ex = next(e for e in exs if e.id == "2hop__150763_14904")
    hops, ordered = question_hops(ex)
    assert ordered and ex.decomposition == ["What company published Journal of Psychotherapy Integration?",
                                            "Who was the first president of #1 ?"]
    first = data_candidates(ex, hops, 0, random.Random(0), 10)
    second = data_candidates(ex, hops, 1, random.Random(0), 10)
    assert "Who was the first president of ?" in first and not any("American Psychological" in c for c in first)
    assert "Who was the first president of American Psychological Association ?" in second
    assert not any("Stanley Hall" in c for c in first + second)  # the answer of the hop searched last
    assert ex.question in first and ex.question in second
    groups = build_groups(exs, n_candidates=10)
    assert {g.qid for g in groups} == {e.id for e in exs} and all(g.source == "data" for g in groups)
    _no_leak(groups, exs)
    three = next(e for e in exs if e.id.startswith("3hop"))
    h3, _ = question_hops(three)
    assert leaks(h3[1:2], three.question, [])(h3[1].title) and not leaks(h3[1:2], three.question, [])(three.question)


def test_react_log_queries_are_mapped_to_the_distractor_questions():
    """The Search[...] queries of the published ReAct log become candidates of the same HotpotQA questions (matched by
    question text); one naming a hop the evidence has not reached yet is left out."""
    logged = logged_queries([REACT_LOG])
    exs = load_qa(HOTPOT_SAMPLE)
    assert {question_key(e.question) for e in exs} <= set(logged)
    wallace = next(e for e in exs if "Wallace and Gromit" in e.question)
    assert logged[question_key(wallace.question)] == ["Wallace and Gromit", "Nick Park"]
    groups = build_groups(exs, n_candidates=10, logged=logged)
    assert groups and all(g.source == "react-log" for g in groups)
    _no_leak(groups, exs)
    (g0,) = [g for g in groups if g.qid == wallace.id and g.hop == 0]
    assert "Wallace and Gromit" in g0.candidates and "Nick Park" not in g0.candidates  # Nick Park is a gold page
    jaclyn = {g.hop: g.candidates for g in groups if "Jaclyn Stapp" in g.question}
    assert "Creed" in jaclyn[1] and not any("Creed" in c for c in jaclyn[0])  # the bridge entity once evidence holds it
    assert not build_groups(exs, n_candidates=10)  # without the log, the question alone is no choice


def test_2wiki_evidence_triples_are_candidates_once_their_subject_is_known(tmp_path):
    """2WikiMultihopQA's published ``evidences`` ([subject, relation, object]) give "subject relation" queries; a
    triple whose subject is the next hop's page is a candidate only once the evidence so far names that page, and the
    object (what the query should find) is never written into a candidate. (A record hand-written in the published
    format, after the dataset's README example: the published files are not obtainable offline.)"""
    record = {
        "_id": "w1", "type": "compositional", "answer": "Małgorzata Braunek",
        "question": "Who is the mother of the director of film Polish-Russian War (Film)?",
        "context": [["Polish-Russian War (film)", ["Polish-Russian War is a 2009 Polish film.",
                                                   " It was directed by Xawery Żuławski."]],
                    ["Xawery Żuławski", ["Xawery Żuławski is a Polish film director.",
                                         " He is the son of Małgorzata Braunek."]],
                    ["Blind Shaft", ["Blind Shaft is a 2003 film."]]],
        "supporting_facts": [["Polish-Russian War (film)", 1], ["Xawery Żuławski", 1]],
        "evidences": [["Polish-Russian War", "director", "Xawery Żuławski"],
                      ["Xawery Żuławski", "mother", "Małgorzata Braunek"]],
    }
    path = tmp_path / "dev.json"
    path.write_text(json.dumps([record]), encoding="utf-8")
    (ex,) = load_qa(path)
    hops, _ = question_hops(ex)
    assert [h.title for h in hops] == ["Polish-Russian War (film)", "Xawery Żuławski"]
    first = data_candidates(ex, hops, 0, random.Random(0), 10)
    second = data_candidates(ex, hops, 1, random.Random(0), 10)
    assert "Polish-Russian War director" in first and not any("Żuławski" in c for c in first)
    assert "Xawery Żuławski mother" in second
    assert not any("Braunek" in c for c in first + second)


def test_ircot_prompt_file_reasoning_steps_before_a_hop_are_its_candidates(tmp_path):
    """IRCoT's annotated 2Wiki prompt as published: the paragraphs its reasoning names are the gold hops, in the order
    named (not a distractor sharing a named page's base title); hop h's candidates hold the human-written reasoning
    before it, never a step naming a gold page the evidence has not reached; a broken block names its line."""
    exs = read_ircot(IRCOT_2WIKI)
    assert [len(e.contexts) for e in exs] == [5, 5, 7, 7] and read_ircot(HOTPOT_SAMPLE) == []
    laughter, sun, aunts = exs[1], exs[2], exs[3]
    assert laughter.answers == ["August 25, 1963"] and laughter.meta["reasoning"] == [
        "The film Laughter In Hell was directed by Edward L. Cahn.", "Edward L. Cahn died on August 25, 1963."]
    assert [(h.title, h.answer) for h in question_hops(laughter)[0]] == [("Laughter in Hell", ""),
                                                                       ("Edward L. Cahn", "August 25, 1963")]
    assert [h.title for h in question_hops(aunts)[0]] == ["When the Mad Aunts Arrive", "Franz Josef Gottlieb",
                                                          "The Miracle Worker (1962 film)", "Arthur Penn"]
    assert "The Miracle Worker (1936 film)" in dict(aunts.contexts) and len(aunts.supporting_paragraphs) == 4
    groups = {(g.qid, g.hop): g for g in build_groups(exs, n_candidates=10)}
    _no_leak(groups.values(), exs)
    assert "The film Laughter In Hell was directed by Edward L. Cahn." in groups[(laughter.id, 1)].candidates
    assert (laughter.id, 0) not in groups  # before the first hop there is no reasoning: the question alone is no choice
    waters = "The director of Nevada (1927 film) is John Waters."  # names hop 3's page: not before the evidence holds it
    assert sun.meta["reasoning"][1] == waters and [h.title for h in question_hops(sun)[0]][3].startswith("John Waters")
    assert not any("John Waters" in c for c in groups[(sun.id, 2)].candidates) and waters in groups[(sun.id, 3)].candidates
    bad = tmp_path / "bad.txt"
    bad.write_text(IRCOT_2WIKI.read_text().split("\n\n\n")[0] + '\n\n\n# METADATA: {"qid": "x"}\nQ: What?\n')
    with pytest.raises(DatasetError, match=r"bad.txt: line 2\d: an IRCoT block needs"):
        read_ircot(bad)
    bad.write_bytes(IRCOT_2WIKI.read_bytes() + b"\nQ: caf\xe9?\n")  # a Latin-1 byte: named, not a traceback
    with pytest.raises(DatasetError, match=r"bad.txt: not UTF-8 text"):
        read_ircot(bad)


def test_hotpot_hops_bridge_ordered_comparison_free(tmp_path):
    comparison, bridge = load_qa(write_json(tmp_path / "h.json", HOTPOT))
    hops, ordered = question_hops(comparison)
    assert not ordered and [h.title for h in hops] == ["Scott Derrickson", "Ed Wood"]
    hops, ordered = question_hops(bridge)
    assert ordered and [h.title for h in hops] == ["Kiss and Tell (1945 film)", "Shirley Temple"]
    logged = {question_key(ex.question): ["Ed Wood films", "Scott Derrickson director", "Corliss Archer actress"]
              for ex in (comparison, bridge)}
    groups = build_groups([comparison, bridge], seed=0, n_candidates=4, logged=logged)
    assert [(g.qid, g.hop, g.targets) for g in groups] == [
        (comparison.id, 0, ["Scott Derrickson", "Ed Wood"]), (comparison.id, 1, ["Ed Wood"]),
        (bridge.id, 0, ["Kiss and Tell (1945 film)"]), (bridge.id, 1, ["Shirley Temple"])]
    assert groups[3].context == [("Kiss and Tell (1945 film)", "Kiss and Tell is a 1945 American comedy film starring "
                                  "then 17-year-old Shirley Temple as Corliss Archer.")]
    assert all(2 <= len(g.candidates) <= 4 for g in groups)


def test_musique_decomposition_orders_hops_and_fills_answers(tmp_path):
    _, three = load_qa(write_jsonl(tmp_path / "musique_ans_v1.0_dev.jsonl", MUSIQUE))
    hops, ordered = question_hops(three)
    assert ordered and [(h.title, h.answer) for h in hops] == [("Lake Orrin", "Dunmere"), ("Dunmere", "Halvik"),
                                                              ("Halvik", "1712")]
    assert hops[2].text == "Halvik was founded in 1712 by fishermen."
    assert "When was Halvik founded?" in data_candidates(three, hops, 2, random.Random(0), 30)
    assert "When was founded?" in data_candidates(three, hops, 1, random.Random(0), 30)  # #2 is not known yet
    groups = build_groups([three], n_candidates=5)
    assert [g.targets for g in groups] == [["Lake Orrin"], ["Dunmere"], ["Halvik"]]
    assert groups[2].context == [("Lake Orrin", "Lake Orrin lies in the county of Dunmere."),
                                 ("Dunmere", "Dunmere's county seat is Halvik.")]


def test_reciprocal_rank_skips_what_the_context_holds():
    assert reciprocal_rank(["A", "B", "C"], ["C"]) == pytest.approx(1 / 3)
    known = {title_key("a")}  # label_groups leaves the titles already held out of the results
    assert reciprocal_rank([t for t in ["A", "B", "C"] if title_key(t) not in known], ["C"]) == 0.5
    assert reciprocal_rank(["A", "B"], ["Z"]) == 0.0
    assert reciprocal_rank(["x", "Shirley  TEMPLE"], ["shirley temple", "Other"]) == 0.5


def test_llm_candidates_use_the_masked_prompt():
    model = ScriptedChatModel(replies=[Proposal(thought="t", action="search", queries=["Shirley Temple", "shirley temple", "x"]),
                                       Proposal(thought="t", action="answer", answer="done")])
    ctx = FuRePAContext(model="-", chat_model=model)
    got = llm_candidates(ctx, "Q?", [("Kiss and Tell", "A film.")], 3)
    assert got == ["Shirley Temple", "x"]
    prompt = model.prompts[0][-1].content
    assert prompt.startswith("Q?") is False and "[1] Kiss and Tell (gold): A film." in prompt and "3 different" in prompt
    assert llm_candidates(ctx, "Q?", [], 3) == []  # it answered instead: the caller falls back to data candidates


def test_tree_export_reproduces_scikit_learn():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 5))
    y = (x[:, 0] > 0.3).astype(float) * 0.7 + 0.1 * x[:, 1]
    trees = fit_trees(x, y, seed=0, n_trees=60, progress=False)
    restored = TreeEnsemble.from_arrays(trees.arrays())
    assert np.allclose(restored.predict(x), trees.predict(x)) and trees.predict(x[:1]).shape == (1,)
    assert np.corrcoef(trees.predict(x), y)[0, 1] > 0.9


def test_features_of_a_group():
    from ragplan.tools.embeddings import get_embedder

    f = group_features(get_embedder(""), "Where was the founder of Iskax Mills born?",
                       [("Iskax Mills", "Iskax Mills was founded by Bruno Yoren.")],
                       ["Bruno Yoren", "Iskax Mills", "Where was the founder born?"])
    names = feature_names(384)
    assert f.shape == (3, len(names))
    col = {n: f[:, i] for i, n in enumerate(names)}
    assert list(col["share_from_evidence"]) == [1.0, 0.0, 0.0] and list(col["share_in_question"]) == [0.0, 1.0, 1.0]
    assert col["cos_evidence_vs_best"].max() == 0.0 and np.allclose(f[:, len(names) - 384:].sum(axis=1), col["cos_context"])


def _group(i, good_first):
    """A picking point where the bridge entity from the evidence retrieves the target and the question does not."""
    q, ev = f"Where was the founder of Mill {i} born?", [(f"Mill {i}", f"Mill {i} was founded by Bruno Yoren{i}.")]
    cands, labels = [q, f"Bruno Yoren{i}", "related facts"], [0.1, 1.0, 0.0]
    order = [1, 0, 2] if good_first else [0, 2, 1]
    return HopGroup(f"q{i}", q, 1, ev, [f"Bruno Yoren{i}"], [cands[j] for j in order], [labels[j] for j in order],
                    top_scores=[0.5, 0.5, 0.5])


def test_text_scorer_learns_what_the_labels_reward_and_beats_word_overlap(tmp_path):
    """Trained on tiny data whose labels reward the bridge entity taken from the evidence, the scorer picks it on
    held-out questions, where word overlap with the question and ``first`` pick wrongly; a flat label set is refused."""
    groups = [_group(i, good_first=i % 5 == 0) for i in range(24)]
    report = train_assessor(groups, tmp_path / "m", seed=0, test_share=0.25, n_trees=40, progress=False)
    m = report.mrr
    assert m["trained"] == m["oracle"] == 1.0 and m["overlap"] == 0.1 and m["first"] < 0.5
    assessor = load_assessor(tmp_path / "m")
    s = assessor.score("Where was the founder of Mill 99 born?", [("Mill 99", "Mill 99 was founded by Bruno Yoren99.")],
                       ["Where was the founder of Mill 99 born?", "Bruno Yoren99"])
    assert s[1] > s[0] and assessor.meta["features"][-1] == "context_x_query_383"
    flat = [HopGroup(g.qid, g.question, 1, g.context, g.targets, g.candidates, [0.5] * 3) for g in groups]
    with pytest.raises(ValueError, match="did not learn"):
        train_assessor(flat, tmp_path / "flat", seed=0, n_trees=10, progress=False)
    assert not (tmp_path / "flat").exists()
    base = pick_mrr(groups[:2], [[0, 0, 1], [1, 0, 0]])
    assert set(base) == {"trained", "overlap", "bm25", "retriever", "first", "random", "oracle"}


def test_cross_encoder_scorer_trains_saves_reloads_and_learns_the_labels(tmp_path, monkeypatch):
    """The cross-encoder (from the packaged MiniLM) reads (question + evidence, candidate): a few pairs and one epoch
    change its ranking towards what the labels reward; train_assessor saves it beside meta.json naming the scorer, and
    load_assessor scores with it; one whose scores do not vary is refused and not saved."""
    groups = [_group(i, good_first=i % 5 == 0) for i in range(8)]
    pairs = [(context_text(g.question, g.context), c) for g in groups for c in g.candidates]
    labels = [v for g in groups for v in g.labels]
    probe_q, probe_ev = "Where was the founder of Mill 99 born?", [("Mill 99", "Mill 99 was founded by Bruno Yoren99.")]
    probe = [(context_text(probe_q, probe_ev), c) for c in (probe_q, "Bruno Yoren99", "related facts")]
    before = fit_cross_encoder(pairs, labels, epochs=0, progress=False).predict(probe)
    after = fit_cross_encoder(pairs, labels, epochs=1, lr=1e-4, batch=8, progress=False).predict(probe)
    assert int(np.argmax(before)) != 1 and int(np.argmax(after)) == 1  # the bridge entity, once trained
    report = train_assessor(groups, tmp_path / "x", seed=0, test_share=0.25, scorer="cross-encoder", epochs=1,
                            progress=False)
    assert report.n_candidates == {"train": 18, "test": 6} and set(report.mrr) >= {"trained", "bm25", "oracle"}
    folder = json.loads((tmp_path / "x" / "meta.json").read_text())["cross_encoder_dir"]
    assert [p.name for p in (tmp_path / "x").glob("cross_encoder*")] == [folder]
    assert (tmp_path / "x" / folder).is_dir() and not (tmp_path / "x" / "trees.npz").exists()
    assessor = load_assessor(tmp_path / "x")
    assert assessor.meta["scorer"] == "cross-encoder" and assessor.meta["epochs"] == 1 and assessor.trees is None
    s = assessor.score(probe_q, probe_ev, [c for _, c in probe])
    assert len(s) == 3 and len(set(s)) == 3 and assessor.score(probe_q, probe_ev, []) == []

    class KilledMidway:  # a cross-encoder save that stops after its first file
        def save(self, path: str) -> None:
            Path(path).mkdir()
            (Path(path) / "config.json").write_text("{")
            raise OSError("no space left on device")

    with pytest.raises(OSError):
        save_assessor(tmp_path / "x", KilledMidway(), {"scorer": "cross-encoder"})
    again = load_assessor(tmp_path / "x")  # the earlier assessor, whole
    assert again.meta["cross_encoder_dir"] == folder and again.score(probe_q, probe_ev, [c for _, c in probe]) == s
    train_assessor(groups, tmp_path / "x", seed=0, test_share=0.25, progress=False)  # trees saved over it
    assert not list((tmp_path / "x").glob("cross_encoder*")) and load_assessor(tmp_path / "x").meta["scorer"] == "trees"
    (tmp_path / "x" / "trees.npz").write_bytes(b"not an npz")
    meta = tmp_path / "x" / "meta.json"
    os.utime(meta, ns=(meta.stat().st_atime_ns, meta.stat().st_mtime_ns + 10**9))  # (a new version of the folder)
    with pytest.raises(AssessorError, match=r"not a saved plan assessor \(trees.npz\)"):
        load_assessor(tmp_path / "x")
    from sentence_transformers import CrossEncoder

    monkeypatch.setattr(CrossEncoder, "predict", lambda self, x, **kw: np.full(len(x), 0.5))
    with pytest.raises(ValueError, match="did not learn"):
        train_assessor(groups, tmp_path / "flat", seed=0, scorer="cross-encoder", epochs=0, progress=False)
    assert not (tmp_path / "flat").exists()


_LINE = re.compile(r"trained ([\d.]+)\s+overlap ([\d.]+)\s+bm25 ([\d.]+)\s+retriever ([\d.]+)\s+first ([\d.]+)\s+"
                   r"random ([\d.]+)\s+oracle ([\d.]+)\s+\(trained - best baseline (\w+): ([-+][\d.]+)\)")


def test_train_on_published_musique_then_eval_data_on_hotpotqa_with_the_react_log(tmp_path, capsys,
                                                                                   musique_context_index):
    """``train-assessor`` on the MuSiQue sample prints held-out MRR beside the one-line baselines; ``--eval-data``
    measures the saved assessor on the HotpotQA sample (candidates from the ReAct log) and on IRCoT's 2Wiki prompt
    file the same way (each building its context index); reruns repeat."""
    out = _with_index(tmp_path / "m", musique_context_index)
    args = ["furepa", "train-assessor", "--data", str(MUSIQUE_SAMPLE), "--context-only", "--out", str(out),
            "--trees", "30", "--test-share", "0.34", "--no-progress"]
    assert main(args) == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    (figures,) = _LINE.findall(text)
    m = dict(zip(("trained", "overlap", "bm25", "retriever", "first", "random", "oracle"), map(float, figures[:7])))
    assert all(0 <= v <= m["oracle"] for v in m.values()) and "Held-out questions: 1" in text
    assert float(figures[8]) == pytest.approx(m["trained"] - m[figures[7]], abs=0.002)
    trees = (out / "trees.npz").read_bytes()
    assert main(args) == 0 and (out / "trees.npz").read_bytes() == trees  # deterministic for a seed
    capsys.readouterr()
    code = main(["furepa", "train-assessor", "--eval-data", str(HOTPOT_SAMPLE), "--queries-from", str(REACT_LOG),
                 "--context-only", "--out", str(out), "--no-progress", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    ev = json.loads(captured.out)["eval"]
    assert ev["n_questions"] == 3 and ev["candidates"] == "react-log" and ev["data"] == str(HOTPOT_SAMPLE)
    assert set(ev["mrr"]) == {"trained", "overlap", "bm25", "retriever", "first", "random", "oracle"}
    assert (out / "context_index_hotpot_distractor_sample" / "index").is_dir()
    code = main(["furepa", "train-assessor", "--eval-data", str(IRCOT_2WIKI), "--context-only", "--out", str(out),
                 "--no-progress", "--json"])  # IRCoT's prompt file as published, detected by its format
    captured = capsys.readouterr()
    assert code == 0, captured.err
    ev = json.loads(captured.out)["eval"]
    assert (ev["n_questions"], ev["n_groups"], ev["n_candidates"], ev["candidates"]) == (4, 8, 22, "data")


def test_eval_data_bad_or_missing_file(tmp_path, capsys):
    """A missing, malformed or gold-less --eval-data file, or no assessor at --out, is a clear error (exit 2)."""
    base = ["furepa", "train-assessor", "--context-only", "--out", str(tmp_path / "m"), "--no-progress"]
    assert main(base) == 2 and "--data FILE" in capsys.readouterr().err
    assert main([*base, "--eval-data", str(HOTPOT_SAMPLE)]) == 2
    assert "no trained plan assessor" in capsys.readouterr().err
    train_assessor([_group(i, i % 2 == 0) for i in range(8)], tmp_path / "m", n_trees=5, progress=False)
    assert main([*base, "--eval-data", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('[{"_id": "x", "question": "q?",\n')
    assert main([*base, "--eval-data", str(bad)]) == 2
    assert "bad.json" in capsys.readouterr().err
    no_facts = write_json(tmp_path / "h.json", [{k: v for k, v in HOTPOT[0].items() if k != "supporting_facts"}])
    assert main([*base, "--eval-data", str(no_facts)]) == 2
    assert "gold supporting passages" in capsys.readouterr().err


def test_train_assessor_bad_input(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    no_facts = write_json(tmp_path / "h.json", [{k: v for k, v in HOTPOT[0].items() if k != "supporting_facts"}])
    assert main(["furepa", "train-assessor", "--data", str(no_facts), "--context-only", "--out", str(tmp_path / "m")]) == 2
    assert "gold supporting passages" in capsys.readouterr().err
    assert main(["furepa", "train-assessor", "--data", str(tmp_path / "missing.json"), "--context-only",
                 "--out", str(tmp_path / "m")]) == 2
    capsys.readouterr()
    data = write_synthetic(tmp_path / "s.jsonl", 10)
    assert main(["furepa", "train-assessor", "--data", str(data), "--context-only", "--out", str(tmp_path / "m"),
                 "--model", "openai:gpt-4o-mini"]) == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err
    with pytest.raises(AssessorError, match="no trained plan assessor"):
        load_assessor(tmp_path)
    (tmp_path / "meta.json").write_text("{}")
    with pytest.raises(AssessorError, match="not a saved plan assessor"):
        load_assessor(tmp_path)


def test_make_data_command(tmp_path, capsys):
    assert main(["furepa", "make-data", "--out", str(tmp_path / "d.jsonl"), "--n", "12", "--seed", "4"]) == 0
    assert "Wrote 12 questions" in capsys.readouterr().out
    assert len(load_qa(tmp_path / "d.jsonl")) == 12


def test_train_assessor_with_llm_candidates_through_the_openai_client(tmp_path, capsys, monkeypatch, musique_context_index):
    """--model/--base-url: every picking point's candidates come from the LLM, asked with FuRePA's masked prompt;
    with --llm-cache a rerun is served from the cache (no request) and gives the same figures."""
    from tests.auto_reply import auto_responder
    from tests.openai_server import OpenAIStub

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    _with_index(tmp_path / "m", musique_context_index)

    def proposal(req):
        text = req.prompt_text
        question = text.split("Question: ", 1)[1].split("\n", 1)[0]
        held = [ln.split("] ", 1)[1].split(" (gold)")[0] for ln in text.splitlines() if ln.startswith("[")]
        return {"thought": "t", "action": "search", "answer": "",
                "queries": [question, "related facts", *(f"{t} history" for t in held)]}

    def train():
        code = main(["furepa", "train-assessor", "--data", str(MUSIQUE_SAMPLE), "--context-only", "--out",
                     str(tmp_path / "m"), "--model", "openai:stub", "--base-url", stub.base_url, "--llm-cache",
                     str(tmp_path / "cache"), "--candidates", "3", "--trees", "20", "--test-share", "0.34", "--json",
                     "--no-progress"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        return json.loads(captured.out)

    with OpenAIStub(responder=auto_responder({"Proposal": proposal})) as stub:
        report = train()
        prompts = [r.prompt_text for r in stub.requests]
        again = train()
        assert len(stub.requests) == len(prompts)  # the rerun read the cache
    assert report["candidates"] == "llm" and len(prompts) == 7  # one request per question and hop
    assert all("Evidence gathered so far" in p and "write 3 different search queries" in p for p in prompts)
    assert again["mrr"] == report["mrr"] and "bm25" in report["mrr"]


def test_musique_hops_follow_the_paragraph_idx_not_the_list_position(tmp_path):
    """paragraph_support_idx names a paragraph's idx; the hop is the paragraph with that idx wherever it is listed."""
    three = {**MUSIQUE[1], "paragraphs": list(reversed(MUSIQUE[1]["paragraphs"]))}  # idx 19 first, idx 0 last
    (ex,) = load_qa(write_jsonl(tmp_path / "musique_ans_v1.0_dev.jsonl", [three]))
    assert [s.paragraph_support_idx for s in ex.decomposition_steps] == [0, 7, 19]
    assert [ex.contexts[s.paragraph_position][0] for s in ex.decomposition_steps] == ["Lake Orrin", "Dunmere", "Halvik"]
    hops, ordered = question_hops(ex)
    assert ordered and [(h.title, h.text) for h in hops] == [
        ("Lake Orrin", "Lake Orrin lies in the county of Dunmere."), ("Dunmere", "Dunmere's county seat is Halvik."),
        ("Halvik", "Halvik was founded in 1712 by fishermen.")]
    dup = {**MUSIQUE[1], "paragraphs": [{**p, "idx": 0} for p in MUSIQUE[1]["paragraphs"]]}
    with pytest.raises(DatasetError, match="is also the idx of"):
        load_qa(write_jsonl(tmp_path / "dup" / "musique_ans_v1.0_dev.jsonl", [dup]))
