"""Retrieval-only evaluation: gold support of each format, hand-computed scores, and `ragplan eval retrieval`."""

from __future__ import annotations

import json

import pytest

from ragplan.cli import main
from ragplan.datasets import load_qa
from ragplan.eval.retrieval import (
    EvidenceSet, GoldParagraph, GoldSupport, SupportSentence, gold_support, mean_scores, score_examples, score_queries,
    score_ranking,
)
from ragplan.tools.retrieval import Evidence, Passage
from tests.test_datasets import FEVER, HOTPOT, KILT_FEVER, MUSIQUE, TWOWIKI, write_json, write_jsonl

# ------------------------------------------------------------------------------------ gold support


def test_gold_support_of_each_format(tmp_path):
    comp, bridge = load_qa(write_json(tmp_path / "h.json", HOTPOT))
    g = gold_support(bridge)
    assert g.titles == ("Kiss and Tell (1945 film)", "Shirley Temple") and len(g.sets) == 1 and g.has_sentences
    assert g.sets[0].sentences[2] == SupportSentence(
        "Shirley Temple", 1, "As an adult, she was named United States ambassador to Ghana and to Czechoslovakia and "
                             "also served as Chief of Protocol of the United States.")   # text from the context, stripped
    assert gold_support(comp).sets[0].sentences[1] == SupportSentence(
        "Ed Wood", 0, "Edward Davis Wood Jr. (October 10, 1924 – December 10, 1978) was an American filmmaker.")
    sup, ref, nei, _ = load_qa(write_jsonl(tmp_path / "f.jsonl", FEVER))
    assert gold_support(sup).sets == (EvidenceSet(("Nikolaj Coster-Waldau", "Fox Broadcasting Company"),
                                                  (SupportSentence("Nikolaj Coster-Waldau", 7),
                                                   SupportSentence("Fox Broadcasting Company", 0)),
                                                  (GoldParagraph("Nikolaj Coster-Waldau", sentence_ids=(7,)),
                                                   GoldParagraph("Fox Broadcasting Company", sentence_ids=(0,)))),)
    assert not gold_support(nei) and gold_support(nei).titles == ()                # NOT ENOUGH INFO: nothing to find
    two, _ = load_qa(write_jsonl(tmp_path / "m.jsonl", MUSIQUE))
    g = gold_support(two)
    assert g.titles == ("Green (album)", "Arlo Venn") and not g.has_sentences
    (kilt,) = load_qa(write_jsonl(tmp_path / "fever-dev-kilt.jsonl", KILT_FEVER))
    assert gold_support(kilt).titles == ("Soul Food (film)",)
    (wiki, _) = load_qa(write_json(tmp_path / "dev.json", TWOWIKI))
    assert gold_support(wiki).titles == ("Polish-Russian War (film)", "Xawery Żuławski")


# -------------------------------------------------------------------------------- scores by hand

GOLD = GoldSupport((EvidenceSet(("A", "B"), (SupportSentence("A", 0, "A is first."), SupportSentence("B", 2, "B two."))),))


def test_score_ranking_by_hand():
    ranking = [Passage("1", "X", ""), Passage("2", "b", ""), {"title": "Y"}, "A"]   # Passage, dict or title
    s = score_ranking(ranking, GOLD, ks=(1, 2, 4))
    assert s["title_recall@1"] == 0.0 and s["title_recall@2"] == 0.5 and s["title_recall@4"] == 1.0  # "b" ~ "B"
    assert (s["all_supporting@1"], s["all_supporting@2"], s["all_supporting@4"]) == (0.0, 0.0, 1.0)
    assert s["mrr"] == 0.5                                                         # first gold title at rank 2
    assert s["sentence_recall@1"] is None                                          # no sentences given
    sents = [Evidence("B two.", "B", "2", 0.9), Evidence("Something else.", "A", "1", 0.8, sentence_index=0),
             {"title": "A", "sentence": "A is first.", "sentence_index": None}]
    s = score_ranking(ranking, GOLD, ks=(1, 2), sentences=sents)
    # rank 1 matches B#2 by text; rank 2 matches A#0 by its given index (whatever its text)
    assert (s["sentence_recall@1"], s["sentence_recall@2"]) == (0.5, 1.0)
    assert score_ranking([], GOLD)["mrr"] == 0.0 and score_ranking([], GOLD)["title_recall@10"] == 0.0


def test_several_queries_unite_their_top_k_and_keep_the_best_rank():
    s = score_queries([["X", "A"], ["B", "Y"]], GOLD, ks=(1, 2))
    assert s["title_recall@1"] == 0.5 and s["title_recall@2"] == 1.0 and s["all_supporting@2"] == 1.0
    assert s["mrr"] == 1.0
    assert score_queries([], GOLD, ks=(1,))["title_recall@1"] == 0.0               # no queries: nothing retrieved


def test_fever_alternative_sets_best_one_counts():
    gold = GoldSupport((EvidenceSet(("A", "B"), (SupportSentence("A", 0), SupportSentence("B", 1))),
                        EvidenceSet(("C",), (SupportSentence("C", 3),))))
    s = score_ranking(["A", "C"], gold, ks=(1, 2), sentences=[{"title": "C", "sentence": "x", "sentence_index": 3}])
    assert s["title_recall@1"] == 0.5 and s["title_recall@2"] == 1.0 and s["all_supporting@2"] == 1.0
    assert s["all_supporting@1"] == 0.0 and s["sentence_recall@1"] == 1.0 and s["mrr"] == 1.0


def test_mean_scores_leave_none_out():
    assert mean_scores([{"a": 1.0, "b": None}, {"a": 0.0, "b": None}, {"a": 0.5, "b": 1.0}]) == {"a": 0.5, "b": 1.0}
    assert mean_scores([{"x": None}]) == {"x": None}


def test_score_examples_with_a_fixed_search(tmp_path):
    exs = load_qa(write_jsonl(tmp_path / "f.jsonl", FEVER))
    table = {FEVER[0]["claim"]: ["Nikolaj Coster-Waldau", "Other"], FEVER[1]["claim"]: ["Nope", "Roman Atwood"],
             "written query": ["Fox Broadcasting Company"]}
    asked = []

    def search(queries, k):
        asked.append((list(queries), k))
        return [[Passage(t, t, "") for t in table.get(q, [])][:k] for q in queries]

    res = score_examples(exs, search, ks=(1, 2))
    assert asked == [([FEVER[0]["claim"], FEVER[1]["claim"], FEVER[3]["claim"]], 2)]   # NEI claim left out
    assert res["counts"] == {"questions": 4, "scored": 3, "no_gold": 1, "missing": 0, "without_queries": 0}
    by_id = {r["id"]: r["scores"] for r in res["per_question"]}
    assert by_id["75397"]["title_recall@2"] == 0.5 and by_id["150448"]["mrr"] == 0.5 and by_id["2"]["mrr"] == 0.0
    assert res["overall"]["mrr"] == pytest.approx((1 + 0.5 + 0) / 3, abs=1e-4)
    # a method's executed queries: the union over them; a question the run lacks is left out
    res = score_examples(exs, search, ks=(2,), queries={"75397": [FEVER[0]["claim"], "written query"], "2": []})
    assert res["counts"]["missing"] == 1 and res["counts"]["without_queries"] == 1
    by_id = {r["id"]: r["scores"] for r in res["per_question"]}
    assert by_id["75397"]["all_supporting@2"] == 1.0 and by_id["2"]["title_recall@2"] == 0.0
    assert res["queries_per_question"] == 1.0


# ------------------------------------------------------------------ paragraphs by identity, not title

CANON = {"id": "2hop__700007_800008", "question": "Who wrote the code of canon law in force in the country of Xo?",
         "paragraphs": [
             {"idx": 0, "title": "Canon law", "paragraph_text": "The 1983 Code of Canon Law is in force in Xo.",
              "is_supporting": True},
             {"idx": 1, "title": "Canon law", "paragraph_text": "Canon law is the body of laws made by a church.",
              "is_supporting": False},
             {"idx": 2, "title": "Canon law", "paragraph_text": "The 1983 Code was drafted by Pietro Gasparri's heirs.",
              "is_supporting": True},
             {"idx": 3, "title": "Xo", "paragraph_text": "Xo is a small island state.", "is_supporting": False}],
         "question_decomposition": [
             {"id": 700007, "question": "Xo >> code of canon law", "answer": "1983 Code", "paragraph_support_idx": 0},
             {"id": 800008, "question": "#1 >> author", "answer": "Pietro Gasparri's heirs",
              "paragraph_support_idx": 2}],
         "answer": "Pietro Gasparri's heirs", "answer_aliases": [], "answerable": True}


def _para(p: dict) -> Passage:
    return Passage(str(p["idx"]), p["title"], p["paragraph_text"])


def test_musique_paragraphs_that_share_a_title_are_scored_by_identity(tmp_path):
    (ex,) = load_qa(write_jsonl(tmp_path / "musique_ans_v1.0_dev.jsonl", [CANON]))
    gold = gold_support(ex)
    first, distractor, second = (_para(CANON["paragraphs"][i]) for i in (0, 1, 2))
    s = score_ranking([first], gold, ks=(1, 2))
    assert s["all_supporting@1"] == 0.0 and s["recall@1"] == 0.5           # one of the two supporting paragraphs
    assert (s["title_recall@1"], s["title_all_supporting@1"]) == (1.0, 1.0)  # the title-level columns
    s = score_ranking([distractor, first], gold, ks=(1, 2))                  # same title, other paragraph: no hit
    assert (s["recall@1"], s["mrr"], s["title_recall@1"], s["title_mrr"]) == (0.0, 0.5, 1.0, 1.0)
    assert score_ranking([second, first], gold, ks=(2,))["all_supporting@2"] == 1.0
    assert [(p.title, p.idx) for p in gold.sets[0].paragraphs] == [("Canon law", 0), ("Canon law", 2)]
    res = score_examples([ex], lambda qs, k: [[distractor, second]] * len(qs), ks=(2,))
    row = res["per_question"][0]
    assert row["retrieved_paragraphs"] == [[None, {"title": "Canon law", "idx": 2}]]
    assert row["gold_paragraphs"] == [{"title": "Canon law", "idx": 0}, {"title": "Canon law", "idx": 2}]
    assert res["overall"]["recall@2"] == 0.5 and res["overall"]["title_all_supporting@2"] == 1.0


def test_hotpotqa_a_paragraph_is_a_hit_when_it_holds_its_supporting_sentences(tmp_path):
    _, bridge = load_qa(write_json(tmp_path / "h.json", HOTPOT))
    gold = gold_support(bridge)
    film, temple = (Passage(t, t, " ".join(x.strip() for x in sents)) for t, sents in HOTPOT[1]["context"][:2])
    other = Passage("o", "Shirley Temple", "Shirley Temple is a non-alcoholic mixed drink.")  # same title, other text
    half = Passage("h", "Shirley Temple", HOTPOT[1]["context"][1][1][0])         # only the first supporting sentence
    s = score_ranking([other, half, film, temple], gold, ks=(1, 3, 4))
    assert s["all_supporting@3"] == 0.0 and s["mrr"] == 1 / 3  # neither Temple passage is the paragraph
    assert (s["recall@3"], s["recall@4"], s["all_supporting@4"]) == (0.5, 1.0, 1.0)
    assert (s["title_mrr"], s["title_recall@1"], s["title_all_supporting@3"]) == (1.0, 0.5, 1.0)
    as_dict = {"title": "shirley  temple", "contents": temple.text}              # a dict passage; titles as compared
    assert score_ranking([as_dict], gold, ks=(1,))["recall@1"] == 0.5
    assert [(p.title, p.sentence_ids) for p in gold.sets[0].paragraphs] == [("Kiss and Tell (1945 film)", (0,)),
                                                                           ("Shirley Temple", (0, 1))]


# ---------------------------------------------------------------------------------------- command

def _eval(*args: str) -> int:
    return main(["eval", "retrieval", *args])


def test_eval_retrieval_context_only_questions_and_run_queries(tmp_path, capsys):
    data = write_json(tmp_path / "hotpot_dev_distractor_v1.json", HOTPOT)
    out = tmp_path / "r" / "q.json"
    assert _eval("--benchmark", "hotpotqa", "--data", str(data), "--context-only", "-k", "1,10", "--out", str(out)) == 0
    text = capsys.readouterr().out
    assert "| k | recall | all_supporting | sentence_recall | title_recall | title_all_supporting |" in text
    assert "MRR (first supporting paragraph)" in text
    res = json.loads(out.read_text())
    assert res["counts"]["scored"] == 2 and res["query_source"] == "the questions" and res["ks"] == [1, 10]
    # 5 passages, ~8 sentences in all: at k = 10 everything is retrieved
    o = res["overall"]
    assert o["recall@10"] == 1.0 and o["all_supporting@10"] == 1.0 and o["sentence_recall@10"] == 1.0
    assert o["title_recall@10"] == 1.0 and o["title_all_supporting@10"] == 1.0
    assert 0 < o["mrr"] <= 1 and (tmp_path / "r" / "context_index-hotpotqa" / "manifest.json").is_file()
    assert set(res["groups"]) == {"type", "level"}
    # a method's executed queries, read from a run folder
    run = tmp_path / "run"
    run.mkdir()
    recs = [{"id": HOTPOT[0]["_id"], "executed_queries": ["Ed Wood filmmaker", "Scott Derrickson director"]},
            {"id": HOTPOT[1]["_id"], "executed_queries": []}]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    out2 = tmp_path / "r" / "run.json"
    assert _eval("--benchmark", "hotpotqa", "--data", str(data), "--context-only", "--queries", str(run),
                 "--out", str(out2)) == 0
    res = json.loads(out2.read_text())
    assert res["counts"]["without_queries"] == 1 and res["queries_per_question"] == 1.0
    first = next(r for r in res["per_question"] if r["id"] == HOTPOT[0]["_id"])
    assert first["queries"] == recs[0]["executed_queries"] and first["scores"]["all_supporting@2"] == 1.0
    assert "executed queries of" in res["query_source"]


def test_eval_retrieval_musique_and_an_index(tmp_path, capsys):
    from ragplan.tools.textindex import build_index

    data = write_jsonl(tmp_path / "musique_ans_v1.0_dev.jsonl", MUSIQUE)
    src = tmp_path / "p.jsonl"
    src.write_text("".join(json.dumps({"id": f"{i}", "title": p["title"], "contents": p["paragraph_text"]}) + "\n"
                           for i, p in enumerate(MUSIQUE[0]["paragraphs"])))
    build_index(src, tmp_path / "idx", progress=False)
    out = tmp_path / "m.json"
    assert _eval("--benchmark", "musique", "--data", str(data), "--index", str(tmp_path / "idx"), "-k", "2,20",
                 "--out", str(out)) == 0
    res = json.loads(out.read_text())
    o = res["overall"]
    assert o["sentence_recall@2"] is None and "sentence_recall@2" not in res["score_names"]   # paragraph-level gold
    by_id = {r["id"]: r["scores"] for r in res["per_question"]}
    assert by_id["2hop__100001_200002"]["all_supporting@20"] == 1.0       # its paragraphs are in this index
    assert by_id["3hop1__300003_400004_500005"]["recall@20"] == 0.0
    assert by_id["3hop1__300003_400004_500005"]["title_recall@20"] == 0.0  # the other question's are not
    assert set(res["groups"]) == {"hops", "answerable"}
    assert "| 2 |" in capsys.readouterr().out


def test_eval_retrieval_refuses_bad_input(tmp_path, capsys):
    data = write_json(tmp_path / "h.json", HOTPOT)
    assert _eval("--benchmark", "hotpotqa", "--data", str(data)) == 2                       # neither index nor context
    assert _eval("--benchmark", "hotpotqa", "--data", str(data), "--context-only", "--index", "x") == 2
    assert _eval("--benchmark", "hotpotqa", "--data", str(data), "--context-only", "-k", "0,x") == 2
    assert _eval("--benchmark", "hotpotqa", "--data", str(data), "--index", str(tmp_path / "none")) == 2
    assert _eval("--benchmark", "hotpotqa", "--data", str(data), "--context-only", "--benchmark-option", "nope=1") == 2
    run = tmp_path / "old"
    run.mkdir()
    (run / "results.jsonl").write_text(json.dumps({"id": HOTPOT[0]["_id"], "answer": "x"}) + "\n")
    assert _eval("--benchmark", "hotpotqa", "--data", str(data), "--context-only", "--queries", str(run),
                 "--out", str(tmp_path / "o.json")) == 2
    err = capsys.readouterr().err
    assert "exactly one of --index DIR and --context-only" in err and "-k takes positive integers" in err
    assert "no text index" in err and "no executed_queries list" in err and "has no option nope" in err
    fever = write_jsonl(tmp_path / "f.jsonl", FEVER)
    assert _eval("--benchmark", "fever", "--data", str(fever), "--context-only", "--out", str(tmp_path / "f.json")) == 2
    assert "context_only needs the questions' own context paragraphs" in capsys.readouterr().err
