"""The label reader on what models really write: a corpus of yes/no and FEVER replies with the expected label.

``None`` means the reply gives no clear label (scored as wrong). Adversarial entries are replies whose
naive reading (the first answer word) inverts the answer.
"""

from __future__ import annotations

import pytest

from ragplan.eval.metrics import label_accuracy, read_label

YESNO = [
    # bare and near-bare
    ("Yes", "yes"), ("yes.", "yes"), ("YES!", "yes"), ("No", "no"), ("no.", "no"), ("NO", "no"),
    ("Nope", "no"), ("Nope.", "no"), ("Nah.", "no"), ("Yep", "yes"), ("Yeah, it would.", "yes"), ("Yup!", "yes"),
    ("True", "yes"), ("false", "no"), ("Correct.", "yes"), ("Incorrect.", "no"), ("**Yes**", "yes"), ("`no`", "no"),
    # hedged
    ("I think yes.", "yes"), ("I think so.", "yes"), ("I don't think so.", "no"), ("I doubt it.", "no"),
    ("Probably not.", "no"), ("Probably.", "yes"), ("Most likely not.", "no"), ("Most likely yes", "yes"),
    ("Definitely not", "no"), ("Definitely!", "yes"), ("Of course.", "yes"), ("Of course not.", "no"),
    ("Not really.", "no"), ("Not at all.", "no"), ("Unlikely.", "no"), ("I would say no.", "no"),
    ("I believe the answer is yes.", "yes"), ("Well, no.", "no"), ("Hmm, yes.", "yes"), ("Absolutely.", "yes"),
    # answer first, explanation after
    ("Yes, because pears are less dense than water.", "yes"), ("Yes, both are American.", "yes"),
    ("No, it would not.", "no"), ("No it wouldn't", "no"), ("Yes because they are both American", "yes"),
    ("True, both were born in 1950.", "yes"), ("False: Paris is older.", "no"),
    # explicit markers
    ("The answer is no.", "no"), ("Answer: yes", "yes"), ("Final answer: No", "no"), ("A: no", "no"),
    ("Q: Would a pear sink?\nA: no", "no"), ("Finish[yes]", "yes"), ("Thought: pears float. Finish[no]", "no"),
    ("The answer would be yes.", "yes"), ("My answer is: no", "no"), ("Label: yes", "yes"),
    ("So the final answer is: yes.", "yes"), ("Answer - no", "no"),
    # conclusions after reasoning
    ("Hence, no.", "no"), ("Pears float in water, so no.", "no"), ("Therefore, yes.", "yes"),
    ("Both were American. Thus yes.", "yes"), ("Ada died in 1852 and email came in 1971. Therefore, no.", "no"),
    ("In conclusion, yes.", "yes"), ("Pears are less dense than water, so it would not.", "no"),
    ("The Eiffel Tower is taller, so yes, it is.", "yes"), ("Overall: no.", "no"),
    # answer last
    ("Pears are less dense than water. No.", "no"), ("Both directors were American: yes.", "yes"),
    ("It is true that it would.", "yes"), ("It is not true.", "no"), ("It would.", "yes"), ("They are not.", "no"),
    # adversarial: the first answer-like word is not the answer
    ("Correct me if I'm wrong, but no.", "no"), ("No doubt about it: yes.", "yes"),
    ("Correct me if I am wrong, but yes.", "yes"), ("There's no doubt: no.", "no"),
    ("No question about it, yes.", "yes"), ("Without a doubt, no.", "no"),
    ("Nobody knows", None), ("No one can say for sure.", None), ("Yesterday it rained", None),
    ("Not sure.", None), ("I'm not sure; yes and no.", None), ("Yes and no.", None), ("Maybe", None),
    ("I have no idea.", None), ("No, wait, yes.", None), ("", None), ("   ", None),
    ("Both are American.", None), ("Scott Derrickson", None), ("It depends on the variety of pear.", None),
    ("I'm not sure, but probably yes.", "yes"), ("Whether or not it sinks depends on the pear.", None),
    ("The answer to that is unclear.", None), ("Is it true that pears sink? No.", "no"), ("Yes. No.", None),
    ("The correct answer is no.", "no"), ("I cannot answer: no information is given.", None),
    ("No evidence about pears.", None), ("Answer: No, they are not.", "no"), ("They were both American, therefore the answer is yes.", "yes"),
]

FEVER = [
    ("SUPPORTS", "SUPPORTS"), ("Supports.", "SUPPORTS"), ("supported", "SUPPORTS"), ("REFUTES", "REFUTES"),
    ("refuted", "REFUTES"), ("NOT ENOUGH INFO", "NOT ENOUGH INFO"), ("NOT_ENOUGH_INFO", "NOT ENOUGH INFO"),
    ("NEI", "NOT ENOUGH INFO"), ("Not enough information.", "NOT ENOUGH INFO"),
    ("Finish[SUPPORTS]", "SUPPORTS"), ("Finish[REFUTES]", "REFUTES"), ("Finish[NOT ENOUGH INFO]", "NOT ENOUGH INFO"),
    ("The evidence refutes the claim.", "REFUTES"), ("The evidence supports the claim.", "SUPPORTS"),
    ("I cannot verify this claim.", "NOT ENOUGH INFO"), ("I can't verify this.", "NOT ENOUGH INFO"),
    ("It cannot be verified from the sources.", "NOT ENOUGH INFO"),
    ("There is not enough evidence to verify this claim.", "NOT ENOUGH INFO"),
    ("The claim is not supported.", "NOT ENOUGH INFO"), ("No evidence supports this.", "NOT ENOUGH INFO"),
    ("The claim is supported by the article.", "SUPPORTS"), ("The claim is refuted.", "REFUTES"),
    ("Contradicted by Wikipedia.", "REFUTES"), ("Label: REFUTES", "REFUTES"), ("Verdict: SUPPORTS", "SUPPORTS"),
    ("Therefore the answer is SUPPORTS.", "SUPPORTS"), ("True", "SUPPORTS"), ("False.", "REFUTES"),
    ("The claim is true.", "SUPPORTS"), ("The claim is false.", "REFUTES"), ("Yes, it is.", "SUPPORTS"),
    ("No.", "REFUTES"), ("The claim says he was born in 1950, which is true.", None),
    ("The claim says he was born in 1950, but the evidence refutes it.", "REFUTES"),
    ("The evidence neither supports nor refutes the claim.", "NOT ENOUGH INFO"),
    ("The evidence does not refute the claim; it supports it.", "SUPPORTS"),
    ("Unknown.", "NOT ENOUGH INFO"), ("Insufficient evidence.", "NOT ENOUGH INFO"),
    ("The claim is unverifiable.", "NOT ENOUGH INFO"), ("There is no information about his second album.", "NOT ENOUGH INFO"),
    ("Correct me if I'm wrong, but the claim is refuted.", "REFUTES"),
    ("No doubt about it: SUPPORTS.", "SUPPORTS"),
    ("The article says he joined Fox in 2001, so the claim is supported.", "SUPPORTS"),
    ("Is it true that he worked with Fox? No.", "REFUTES"), ("He did work with Fox.", None), ("banana", None), ("", None), ("I don't know.", None),
]


@pytest.mark.parametrize(("reply", "label"), YESNO)
def test_yes_no_corpus(reply, label):
    assert read_label(reply, "yesno") == label


@pytest.mark.parametrize(("reply", "label"), FEVER)
def test_fever_corpus(reply, label):
    assert read_label(reply, "fever") == label


def test_corpus_is_large_enough():
    assert len(YESNO) + len(FEVER) >= 80
    assert len(YESNO) >= 80


def test_unreadable_is_wrong_never_partial():
    assert label_accuracy("Maybe", "yes", "yesno") == 0.0
    assert label_accuracy("", "no", "yesno") == 0.0
    assert label_accuracy("Correct me if I'm wrong, but no.", "no", "yesno") == 1.0
    assert label_accuracy("No doubt about it: yes.", "no", "yesno") == 0.0
    assert label_accuracy("I cannot verify this claim.", "NOT_ENOUGH_INFO", "fever") == 1.0
    assert label_accuracy("banana", "SUPPORTS", "fever") == 0.0
    with pytest.raises(ValueError, match="unknown label kind"):
        read_label("yes", "span")  # type: ignore[arg-type]
