"""EM/F1 against hand-computed cases and the official HotpotQA script's behaviours; label mapping."""

from __future__ import annotations

import pytest

from ragplan.eval.metrics import (
    exact_match, read_label, f1_score, label_accuracy, normalize_answer, retrieval_stats,
)


@pytest.mark.parametrize(("text", "norm"), [
    ("The Beatles!", "beatles"),
    ("an apple a day", "apple day"),
    ("A  Tale of\tTwo   Cities.", "tale of two cities"),
    ("Theatre of the Absurd", "theatre of absurd"),       # articles only as whole words
    ("U.S.A.", "usa"),                                   # punctuation is deleted, not spaced
    ("Jay-Z", "jayz"),
    ("Los Angeles, California", "los angeles california"),
    ("THE", ""),
    ("", ""),
    ("Małgorzata Braunek", "małgorzata braunek"),        # non-ASCII letters stay
    ("“quoted” answer", "“quoted” answer"),              # only ASCII punctuation is removed (as the script)
])
def test_normalize_answer(text, norm):
    assert normalize_answer(text) == norm


def test_exact_match():
    assert exact_match("the Eiffel Tower.", "Eiffel Tower") == 1.0
    assert exact_match("Eiffel Tower, Paris", "Eiffel Tower") == 0.0
    assert exact_match("Jay Z", "Jay-Z") == 0.0         # "jay z" vs "jayz"
    assert exact_match("NYC", ["New York City", "NYC"]) == 1.0
    assert exact_match("", "") == 1.0


def test_f1_hand_computed():
    # 4 predicted tokens, 2 gold, 2 shared: P = 1/2, R = 1, F1 = 2/3
    assert f1_score("Barack Obama was president", "Barack Obama") == pytest.approx(2 / 3)
    # bag of words: "new" twice in the prediction, once in the gold -> 2 shared of 3 and 2: F1 = 0.8
    assert f1_score("new new york", "new york") == pytest.approx(0.8)
    # articles and punctuation go before counting: "the city of paris" -> [city, of, paris] vs [paris]
    assert f1_score("The city of Paris.", "Paris") == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))
    assert f1_score("London", "Paris") == 0.0
    assert f1_score("", "Paris") == 0.0
    assert f1_score("", "") == 0.0                       # nothing shared: 0 (as the script)
    assert f1_score("Chief of Protocol", "chief of protocol!") == 1.0


def test_f1_yes_no_rule():
    assert f1_score("yes", "Yes.") == 1.0
    assert f1_score("yes", "yes sir") == 0.0            # prediction is yes and differs: no partial credit
    assert f1_score("no way", "no") == 0.0              # gold is no and differs
    assert f1_score("noanswer", "no answer") == 0.0
    assert f1_score("no answer", "no answer given") == pytest.approx(0.8)  # neither side is exactly yes/no/noanswer
    assert f1_score("yes", "no") == 0.0


def test_best_over_several_golds():
    golds = ["Małgorzata Braunek", "Malgorzata Braunek"]
    assert exact_match("Malgorzata Braunek", golds) == 1.0
    assert f1_score("Braunek", golds) == pytest.approx(2 / 3)
    assert f1_score("United States", ["USA", "United States of America"]) == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert exact_match("x", []) == 0.0


@pytest.mark.parametrize(("reply", "label"), [
    ("Yes", "yes"), ("yes.", "yes"), ("Yes, because pears are less dense than water.", "yes"),
    ("No, it would not.", "no"), ("NO", "no"), ("True", "yes"), ("false", "no"), ("Correct.", "yes"),
    ("The answer is no.", "no"), ("Answer: yes", "yes"), ("Final answer: No", "no"),
    ("Pears float in water, so no.", "no"), ("It is true that it would.", "yes"),
    ("Nobody knows", None), ("Maybe", None), ("I am not sure; yes and no.", None), ("", None),
    ("Yesterday it rained", None),
])
def test_yes_no_labels(reply, label):
    assert read_label(reply, "yesno") == label


@pytest.mark.parametrize(("reply", "label"), [
    ("SUPPORTS", "SUPPORTS"), ("Supported.", "SUPPORTS"), ("supports", "SUPPORTS"), ("True", "SUPPORTS"),
    ("The claim is supported by the article.", "SUPPORTS"), ("Yes, it is.", "SUPPORTS"),
    ("REFUTES", "REFUTES"), ("refuted", "REFUTES"), ("False.", "REFUTES"), ("The claim is refuted.", "REFUTES"),
    ("No.", "REFUTES"), ("Contradicted by Wikipedia.", "REFUTES"), ("Label: REFUTES", "REFUTES"),
    ("NOT ENOUGH INFO", "NOT ENOUGH INFO"), ("Not enough information.", "NOT ENOUGH INFO"),
    ("NOT_ENOUGH_INFO", "NOT ENOUGH INFO"), ("NEI", "NOT ENOUGH INFO"),
    ("There is not enough evidence to verify this claim.", "NOT ENOUGH INFO"),
    ("The claim is not supported.", "NOT ENOUGH INFO"), ("No evidence supports this.", "NOT ENOUGH INFO"),
    ("It cannot be verified from the sources.", "NOT ENOUGH INFO"),
    ("Therefore the answer is SUPPORTS.", "SUPPORTS"),
    ("banana", None), ("", None),
])
def test_fever_labels(reply, label):
    assert read_label(reply, "fever") == label


def test_label_accuracy():
    assert label_accuracy("Yes, because …", "yes", "yesno") == 1.0
    assert label_accuracy("Yes, because …", ["no"], "yesno") == 0.0
    assert label_accuracy("Maybe", "yes", "yesno") == 0.0
    assert label_accuracy("refuted", "REFUTES", "fever") == 1.0
    assert label_accuracy("not enough information", "NOT ENOUGH INFO", "fever") == 1.0
    assert label_accuracy("supported", "NOT_ENOUGH_INFO", "fever") == 0.0
    with pytest.raises(ValueError, match="unknown label kind"):
        read_label("yes", "span")


def test_musique_rule_differs_only_where_the_scripts_do():
    # MuSiQue's metrics (SQuAD rules): no yes/no rule, an empty side scores 1 only against another empty side
    assert f1_score("no way", "no", rule="musique") == pytest.approx(2 * 0.5 * 1 / 1.5)
    assert f1_score("no way", "no", rule="hotpotqa") == 0.0
    assert f1_score("", "", rule="musique") == 1.0 and f1_score("", "", rule="hotpotqa") == 0.0
    assert f1_score("the", "Paris", rule="musique") == 0.0
    assert exact_match("The Beatles", ["Beatles", "Fab Four"], rule="musique") == 1.0
    assert f1_score("Fab Four band", ["Beatles", "Fab Four"], rule="musique") == pytest.approx(0.8)
    with pytest.raises(ValueError, match="unknown scoring rule"):
        f1_score("a", "b", rule="squad2")  # type: ignore[arg-type]


def test_official_em_is_over_the_raw_answer():
    # the example: a yes/no answer written as a sentence is EM 0 / F1 0 in the official script
    assert exact_match("Yes, both are American.", "yes") == 0.0
    assert f1_score("Yes, both are American.", "yes") == 0.0
    assert label_accuracy("Yes, both are American.", "yes", "yesno") == 1.0


def test_retrieval_stats():
    queries = [{"index": 0, "text": "a", "beta": 0.9, "retrieve": False, "evidence": [], "answer": "x"},
               {"index": 1, "text": "b", "beta": 0.2, "retrieve": True, "evidence": [{}], "answer": "y"},
               {"index": 2, "text": "c", "beta": None, "retrieve": True, "evidence": [], "answer": "z",
                "retrieval_error": "ConnectionError: down"}]
    def figures(output):
        st = retrieval_stats(output)
        return (st["subqueries"], st["retrieval_count"], st["retrieval_errors"], st["retrieval_ratio"],
                st["subquery_retrieval_ratio"])

    assert figures({"retrieval_ratio": 0.25, "queries": queries}) == (3, 2, 1, 1.0, 0.3333)  # counted from the queries
    all_failed = [{**q, "retrieve": True, "retrieval_error": "no passage found"} for q in queries]
    assert figures({"queries": all_failed}) == (3, 3, 3, 0.0, 0.0)
    assert figures({"answer": "x"}) == (None, 0, 0, 0.0, None)                    # a failed run: nothing
    assert figures({"retrieval_count": 2, "retrieval_errors": 2}) == (None, 2, 2, 0.0, None)  # no queries listed
    assert figures({"retrieval_count": True}) == (None, 0, 0, 0.0, None)           # a bool is no count
    typed_first = {"retrievals": 3, "retrieval_count": 9, "retrieval_errors": 1}  # a typed count comes first
    assert figures(typed_first) == (None, 3, 1, 1.0, None)
