"""QA dataset loaders on tiny files written in each release's real format; detection; errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from ragplan.datasets import (
    DatasetError, QAExample, detect_format, infer_kind, load_qa, read_records, resolve_data_file,
)

# ----------------------------------------------------------------------------- files as released

HOTPOT = [
    {"_id": "5a8b57f25542995d1e6f1371", "answer": "yes",
     "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
     "supporting_facts": [["Scott Derrickson", 0], ["Ed Wood", 0]],
     "context": [
         ["Ed Wood (film)", ["Ed Wood is a 1994 American biographical period comedy-drama film directed by Tim Burton.",
                             " The film concerns the period in Wood's life when he made his best-known films."]],
         ["Scott Derrickson", ["Scott Derrickson (born July 16, 1966) is an American director, screenwriter and producer.",
                               " He lives in Los Angeles, California."]],
         ["Ed Wood", ["Edward Davis Wood Jr. (October 10, 1924 – December 10, 1978) was an American filmmaker."]]],
     "type": "comparison", "level": "hard"},
    {"_id": "5a8c7595554299585d9e36b6", "answer": "Chief of Protocol",
     "question": "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?",
     "supporting_facts": [["Kiss and Tell (1945 film)", 0], ["Shirley Temple", 0], ["Shirley Temple", 1]],
     "context": [
         ["Kiss and Tell (1945 film)", ["Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley "
                                        "Temple as Corliss Archer."]],
         ["Shirley Temple", ["Shirley Temple Black (April 23, 1928 – February 10, 2014) was an American actress.",
                             " As an adult, she was named United States ambassador to Ghana and to Czechoslovakia and "
                             "also served as Chief of Protocol of the United States."]],
         ["Scott Derrickson", ["Scott Derrickson (born July 16, 1966) is an American director, screenwriter and producer.",
                               " He lives in Los Angeles, California."]]],
     "type": "bridge", "level": "medium"},
]

TWOWIKI = [
    {"_id": "8813f87c0bdd11eba7f7acde48001122", "type": "compositional",
     "question": "Who is the mother of the director of film Polish-Russian War (Film)?",
     "context": [["Polish-Russian War (film)", ["Polish-Russian War is a 2009 Polish film directed by Xawery Żuławski.",
                                                "The film is based on the novel by Dorota Masłowska."]],
                 ["Xawery Żuławski", ["Xawery Żuławski (born 22 December 1971 in Warsaw) is a Polish film director.",
                                      "He is the son of actress Małgorzata Braunek and director Andrzej Żuławski."]]],
     "supporting_facts": [["Polish-Russian War (film)", 0], ["Xawery Żuławski", 1]],
     "evidences": [["Polish-Russian War", "director", "Xawery Żuławski"],
                   ["Xawery Żuławski", "mother", "Małgorzata Braunek"]],
     "answer": "Małgorzata Braunek", "answer_id": "Q274420"},
    {"_id": "028eaef60bdb11eba7f7acde48001122", "type": "comparison",
     "question": "Are both Hanger 18 and Death Valley Days American?",
     "context": [["Hangar 18 (film)", ["Hangar 18 is a 1980 American science fiction film."]]],
     "supporting_facts": [["Hangar 18 (film)", 0]], "evidences": [["Hangar 18", "country", "United States"]],
     "answer": "yes", "answer_id": "Q_yes"},
]
TWOWIKI_ALIASES = [{"Q_id": "Q274420", "aliases": ["Malgorzata Braunek"], "demonyms": []},
                   {"Q_id": "Q30", "aliases": ["USA", "United States of America"], "demonyms": ["American"]}]

STRATEGY = [
    {"qid": "4fd64bb6ce5b78ab20b6", "term": "Mixed martial arts", "description": "full-contact combat sport",
     "question": "Is Mixed martial arts totally original from Roman Colosseum games?", "answer": False,
     "facts": ["Mixed Martial arts in the UFC takes place in an enclosed structure called The Octagon.",
               "The Roman Colosseum games were fought in enclosed arenas where combatants would fight until the death."],
     "decomposition": ["What are the rules of MMA?", "What were the rules of the Roman Colosseum games?",
                       "Are #1 and #2 exactly the same?"],
     "evidence": [[[["Mixed martial arts-1"]], ["no_evidence"], ["operation"]]]},
    {"qid": "e0044a7b4d146d611e73", "term": "Pear", "description": "genus of plants",
     "question": "Would a pear sink in water?", "answer": True, "facts": [], "decomposition": []},
]

FEVER = [
    {"id": 75397, "verifiable": "VERIFIABLE", "label": "SUPPORTS",
     "claim": "Nikolaj Coster-Waldau worked with the Fox Broadcasting Company.",
     "evidence": [[[92206, 104971, "Nikolaj_Coster-Waldau", 7], [92206, 104971, "Fox_Broadcasting_Company", 0]]]},
    {"id": 150448, "verifiable": "VERIFIABLE", "label": "REFUTES", "claim": "Roman Atwood is a content creator.",
     "evidence": [[[174271, 187498, "Roman_Atwood", 1]], [[174271, 187499, "Roman_Atwood", 1]]]},
    {"id": 91198, "verifiable": "NOT VERIFIABLE", "label": "NOT ENOUGH INFO",
     "claim": "Colin Kaepernick became a starting quarterback during the 49ers 63rd season in the National Football League.",
     "evidence": [[[108548, None, None, None]]]},
    {"id": 2, "verifiable": "VERIFIABLE", "label": "SUPPORTS", "claim": "Saw (franchise) is a horror franchise.",
     "evidence": [[[1, 2, "Saw_-LRB-franchise-RRB-", 0]]]},
]

def _musique_paragraphs(supporting: dict[int, tuple[str, str]]) -> list[dict]:
    """MuSiQue's 20 paragraphs: the supporting ones at the given idx, made-up distractors elsewhere."""
    out = []
    for idx in range(20):
        title, text = supporting.get(idx, (f"Distractor {idx}", f"Distractor {idx} is a village with {idx * 37} people."))
        out.append({"idx": idx, "title": title, "paragraph_text": text, "is_supporting": idx in supporting})
    return out


MUSIQUE = [  # the official records' shape (musique_ans_v1.0_dev.jsonl); contents made up for the tests
    {"id": "2hop__100001_200002",
     "paragraphs": _musique_paragraphs({
         3: ("Green (album)", "Green is the second studio album by the fictional guitarist Arlo Venn, released in 1979."),
         11: ("Arlo Venn", "Arlo Venn (born 1951) is a guitarist. He is married to the synthesist Mira Solde.")}),
     "question": "Who is the spouse of the Green performer?",
     "question_decomposition": [
         {"id": 100001, "question": "Green >> performer", "answer": "Arlo Venn", "paragraph_support_idx": 3},
         {"id": 200002, "question": "#1 >> spouse", "answer": "Mira Solde", "paragraph_support_idx": 11}],
     "answer": "Mira Solde", "answer_aliases": ["Mira Venn", "M. Solde"], "answerable": True},
    {"id": "3hop1__300003_400004_500005",
     "paragraphs": _musique_paragraphs({
         0: ("Lake Orrin", "Lake Orrin lies in the county of Dunmere."),
         7: ("Dunmere", "Dunmere's county seat is Halvik."),
         19: ("Halvik", "Halvik was founded in 1712 by fishermen.")}),
     "question": "When was the seat of the county containing Lake Orrin founded?",
     "question_decomposition": [
         {"id": 300003, "question": "Lake Orrin >> located in the administrative territorial entity",
          "answer": "Dunmere", "paragraph_support_idx": 0},
         {"id": 400004, "question": "#1 >> capital", "answer": "Halvik", "paragraph_support_idx": 7},
         {"id": 500005, "question": "When was #2 founded?", "answer": "1712", "paragraph_support_idx": 19}],
     "answer": "1712", "answer_aliases": [], "answerable": True},
]
MUSIQUE_FULL_UNANSWERABLE = {  # musique_full: the same question with a supporting paragraph taken away
    **MUSIQUE[0], "id": "2hop__100001_200002_u",
    "paragraphs": [{**p, "is_supporting": False} if p["idx"] == 11 else p for p in MUSIQUE[0]["paragraphs"]],
    "answerable": False}

FLASHRAG = [
    {"id": "dev_0", "question": "Were Scott Derrickson and Ed Wood of the same nationality?", "golden_answers": ["yes"],
     "metadata": {"type": "comparison", "level": "hard",
                  "supporting_facts": {"title": ["Scott Derrickson", "Ed Wood"], "sent_id": [0, 0]},
                  "context": {"title": ["Ed Wood", "Scott Derrickson"],
                              "sentences": [["Ed Wood was an American filmmaker."],
                                            ["Scott Derrickson is an American director."]]}}},
    {"id": "dev_1", "question": "Which city is the capital of France?", "golden_answers": ["Paris", "City of Paris"],
     "metadata": {"type": "bridge", "level": "easy"}},
]

KILT_FEVER = [
    {"id": "137334", "input": "Fox 2000 Pictures released the film Soul Food.",
     "output": [{"answer": "SUPPORTS", "provenance": [{"wikipedia_id": "1073955", "title": "Soul Food (film)",
                                                       "start_paragraph_id": 1}]},
                {"answer": "SUPPORTS"}]},
]


def write_json(path: Path, records: list) -> Path:
    """Write records as one JSON list (the HotpotQA / 2Wiki / StrategyQA releases)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    return path


def write_jsonl(path: Path, records: list) -> Path:
    """Write records as JSON Lines (FEVER, FlashRAG, KILT)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------- loaders

def test_hotpotqa(tmp_path):
    exs = load_qa(write_json(tmp_path / "hotpot_dev_distractor_v1.json", HOTPOT))
    assert [e.id for e in exs] == ["5a8b57f25542995d1e6f1371", "5a8c7595554299585d9e36b6"]
    yes, span = exs
    assert isinstance(yes, QAExample)
    assert (yes.answers, yes.kind, yes.gold) == (["yes"], "yesno", "yes")
    assert (span.answers, span.kind) == (["Chief of Protocol"], "span")
    assert yes.meta == {"dataset": "hotpotqa", "type": "comparison", "level": "hard"}
    assert yes.dataset == "hotpotqa"
    assert yes.supporting_facts == [("Scott Derrickson", 0), ("Ed Wood", 0)]
    assert yes.contexts[1] == ("Scott Derrickson", ["Scott Derrickson (born July 16, 1966) is an American director, "
                                                    "screenwriter and producer.", " He lives in Los Angeles, California."])
    assert len(yes.contexts) == 3 and yes.decomposition == []


def test_2wikimultihopqa_with_sibling_aliases(tmp_path):
    data = write_json(tmp_path / "dev.json", TWOWIKI)
    (tmp_path / "id_aliases.json").write_text("".join(json.dumps(a) + "\n" for a in TWOWIKI_ALIASES))
    first, second = load_qa(data)
    assert first.meta["dataset"] == "2wikimultihopqa" and first.meta["type"] == "compositional"
    assert first.answers == ["Małgorzata Braunek", "Malgorzata Braunek"]
    assert first.meta["evidences"][1] == ["Xawery Żuławski", "mother", "Małgorzata Braunek"]
    assert first.supporting_facts == [("Polish-Russian War (film)", 0), ("Xawery Żuławski", 1)]
    assert (second.kind, second.answers) == ("yesno", ["yes"])


def test_2wiki_aliases_and_demonyms(tmp_path):
    rec = {**TWOWIKI[0], "answer": "United States", "answer_id": "Q30"}
    data = write_json(tmp_path / "d" / "dev.json", [rec])
    (plain,) = load_qa(data)  # no id_aliases.json beside it: the answer alone
    assert plain.answers == ["United States"]
    write_jsonl(tmp_path / "d" / "id_aliases.json", TWOWIKI_ALIASES)
    (ex,) = load_qa(data)
    assert ex.answers == ["United States", "USA", "United States of America", "American"]


@pytest.mark.parametrize("writer", [write_jsonl, write_json])
def test_musique_official_jsonl_and_json_list(tmp_path, writer):
    name = "musique_ans_v1.0_dev.jsonl" if writer is write_jsonl else "musique_dev.json"
    path = writer(tmp_path / name, MUSIQUE + [MUSIQUE_FULL_UNANSWERABLE])
    assert detect_format(path) == "musique"
    two, three, unans = load_qa(path)
    assert two.id == "2hop__100001_200002" and two.kind == "span"
    assert two.answers == ["Mira Solde", "Mira Venn", "M. Solde"]                      # answer + aliases
    assert len(two.contexts) == 20 and not two.sentence_segmented
    assert two.contexts[3] == ("Green (album)", [MUSIQUE[0]["paragraphs"][3]["paragraph_text"]])
    assert two.supporting_paragraphs == [3, 11] and two.supporting_facts == []
    assert two.decomposition == ["Green >> performer", "#1 >> spouse"]
    assert [(s.id, s.answer, s.paragraph_support_idx) for s in two.decomposition_steps] == [
        ("100001", "Arlo Venn", 3), ("200002", "Mira Solde", 11)]
    assert two.meta == {"dataset": "musique", "answerable": True, "hops": 2, "composition": "2hop"}
    assert unans.meta["answerable"] is False and unans.supporting_paragraphs == [3]
    assert (three.meta["hops"], three.answers, three.supporting_paragraphs) == (3, ["1712"], [0, 7, 19])


def test_musique_is_never_read_as_hotpotqa(tmp_path):
    path = write_jsonl(tmp_path / "dev.jsonl", MUSIQUE)
    assert load_qa(path)[0].meta["dataset"] == "musique"
    bad = {**MUSIQUE[0], "question_decomposition": [{"id": 1, "question": "x", "answer": "y", "paragraph_support_idx": 42}]}
    assert "['paragraph_support_idx'] = 42 names no paragraph idx" in _bad(tmp_path, [bad], write_jsonl, "m.jsonl")
    no_paras = {k: v for k, v in MUSIQUE[0].items() if k != "paragraphs"}
    assert "'paragraphs' should be a non-empty list" in _bad(tmp_path, [no_paras], write_jsonl, "m.jsonl")
    text_idx = {**MUSIQUE[0], "paragraphs": [{**MUSIQUE[0]["paragraphs"][0], "idx": "3"}]}  # an id as text: refused
    msg = _bad(tmp_path, [text_idx], write_jsonl, "m.jsonl")
    assert "record 0 (line 1): 'paragraphs'[0] should be {idx, title, paragraph_text, is_supporting}, got {" in msg
    assert msg.endswith(": ['idx'] is '3' (input should be a valid integer)")  # the field, not only the item


def test_2wiki_native_record_fully_read(tmp_path):
    (ex, _) = load_qa(write_json(tmp_path / "dev.json", TWOWIKI))
    assert ex.id == "8813f87c0bdd11eba7f7acde48001122" and ex.meta["type"] == "compositional"
    assert ex.meta["evidences"] == [["Polish-Russian War", "director", "Xawery Żuławski"],
                                    ["Xawery Żuławski", "mother", "Małgorzata Braunek"]]
    assert ex.contexts[1][1][1] == "He is the son of actress Małgorzata Braunek and director Andrzej Żuławski."
    assert ex.sentence_segmented
    bad = {**TWOWIKI[0], "evidences": [["only", "two"]]}
    assert "'evidences'[0] should be [subject, relation, object]" in _bad(tmp_path, [bad])


def test_fever_evidence_sets_stay_grouped(tmp_path):
    sup, ref, nei, saw = load_qa(write_jsonl(tmp_path / "shared_task_dev.jsonl", FEVER))
    # one set of two sentences that verify the claim only together
    assert sup.evidence_sets == [[("Nikolaj Coster-Waldau", 7), ("Fox Broadcasting Company", 0)]]
    assert ref.evidence_sets == [[("Roman Atwood", 1)]]       # two annotators' identical sets: kept once
    assert nei.evidence_sets == [] and saw.evidence_sets == [[("Saw (franchise)", 0)]]
    two_sets = {**FEVER[0], "evidence": [[[1, 2, "A", 0], [1, 3, "B", 4]], [[2, 5, "C", 1]]]}
    (ex,) = load_qa(write_jsonl(tmp_path / "f2.jsonl", [two_sets]))
    assert ex.evidence_sets == [[("A", 0), ("B", 4)], [("C", 1)]]
    assert ex.supporting_facts == [("A", 0), ("B", 4), ("C", 1)]


@pytest.mark.parametrize(("record", "named"), [
    ({"title": "Normans", "paragraphs": [{"context": "…", "qas": []}]}, "SQuAD"),
    ({"id": "1", "title": "Normans", "context": "…", "question": "q?", "answers": {"text": ["x"]}}, "SQuAD"),
    ({"question_text": "who?", "annotations": [], "document_tokens": []}, "Natural Questions"),
    ({"Question": "who?", "Answer": {"Value": "x"}, "EntityPages": []}, "TriviaQA"),
    ({"query": "who", "passages": [], "answers": []}, "MS MARCO"),
    ({"question": "who?", "answer": "x"}, "a bare {question, answer} file"),
])
def test_unrecognised_formats_are_refused_by_name(tmp_path, record, named):
    msg = _bad(tmp_path, [record], write_jsonl, "x.jsonl")
    assert named in msg and "a format ragplan does not read" in msg and "musique" in msg


@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize(("published", "named"), [
    ({"version": "v2.0", "data": [{"title": "Normans", "paragraphs": [{"context": "…", "qas": []}]}]}, "SQuAD"),
    ({"Data": [{"Question": "who?", "Answer": {"Value": "x"}, "EntityPages": []}], "Domain": "Web",
      "Split": "dev", "Version": 1.0, "VerifiedEval": False}, "TriviaQA"),
])
def test_published_squad_and_triviaqa_files_are_named(tmp_path, published, named, indent):
    # the files as their authors publish them: one object holding the records (on one line, or pretty-printed)
    path = tmp_path / "published.json"
    path.write_text(json.dumps(published, indent=indent))
    with pytest.raises(DatasetError) as err:
        load_qa(path)
    assert named in str(err.value) and "a format ragplan does not read" in str(err.value)


def test_strategyqa(tmp_path):
    no, yes = load_qa(write_json(tmp_path / "strategyqa_train.json", STRATEGY))
    assert (no.id, no.answers, no.kind, no.meta["label"]) == ("4fd64bb6ce5b78ab20b6", ["no"], "yesno", "no")
    assert no.decomposition[2] == "Are #1 and #2 exactly the same?"
    assert no.contexts == [("Mixed martial arts", STRATEGY[0]["facts"])]
    assert no.meta["term"] == "Mixed martial arts" and no.meta["dataset"] == "strategyqa"
    assert (yes.answers, yes.contexts, yes.decomposition) == (["yes"], [], [])


def test_fever(tmp_path):
    exs = load_qa(write_jsonl(tmp_path / "shared_task_dev.jsonl", FEVER))
    sup, ref, nei, saw = exs
    assert (sup.id, sup.question, sup.answers, sup.kind) == (
        "75397", "Nikolaj Coster-Waldau worked with the Fox Broadcasting Company.", ["SUPPORTS"], "fever")
    assert sup.supporting_facts == [("Nikolaj Coster-Waldau", 7), ("Fox Broadcasting Company", 0)]
    assert ref.supporting_facts == [("Roman Atwood", 1)]  # the same sentence in two evidence sets, kept once
    assert (nei.answers, nei.supporting_facts, nei.meta["verifiable"]) == (["NOT ENOUGH INFO"], [], "NOT VERIFIABLE")
    assert saw.supporting_facts == [("Saw (franchise)", 0)]
    assert {e.meta["label"] for e in exs} == {"SUPPORTS", "REFUTES", "NOT ENOUGH INFO"}


def test_flashrag_dataset_from_folder_and_metadata(tmp_path):
    yes, paris = load_qa(write_jsonl(tmp_path / "hotpotqa" / "dev.jsonl", FLASHRAG))
    assert (yes.kind, yes.meta) == ("yesno", {"dataset": "hotpotqa", "type": "comparison", "level": "hard", "label": "yes"})
    assert yes.contexts == [("Ed Wood", ["Ed Wood was an American filmmaker."]),
                            ("Scott Derrickson", ["Scott Derrickson is an American director."])]
    assert yes.supporting_facts == [("Scott Derrickson", 0), ("Ed Wood", 0)]
    assert (paris.answers, paris.kind) == (["Paris", "City of Paris"], "span")
    (fev,) = load_qa(write_jsonl(tmp_path / "fever_dev.jsonl", [
        {"id": "1", "question": "Soul Food is a film.", "golden_answers": ["supports"]}]))
    assert (fev.kind, fev.answers, fev.dataset) == ("fever", ["SUPPORTS"], "fever")


def test_kilt(tmp_path):
    (ex,) = load_qa(write_jsonl(tmp_path / "fever-dev-kilt.jsonl", KILT_FEVER))
    assert (ex.id, ex.answers, ex.kind, ex.dataset) == ("137334", ["SUPPORTS"], "fever", "fever")
    assert ex.meta["provenance_titles"] == ["Soul Food (film)"]


@pytest.mark.parametrize(("name", "records", "writer", "fmt"), [
    ("hotpot.json", HOTPOT, write_json, "hotpotqa"),
    ("2wiki.json", TWOWIKI, write_json, "2wikimultihopqa"),
    ("musique.jsonl", MUSIQUE, write_jsonl, "musique"),
    ("sqa.json", STRATEGY, write_json, "strategyqa"),
    ("fever.jsonl", FEVER, write_jsonl, "fever"),
    ("flash.jsonl", FLASHRAG, write_jsonl, "flashrag"),
    ("kilt.jsonl", KILT_FEVER, write_jsonl, "kilt"),
    # the other container: every dataset may come as JSON or as JSON Lines
    ("hotpot.jsonl", HOTPOT, write_jsonl, "hotpotqa"),
    ("fever.json", FEVER, write_json, "fever"),
    ("sqa.jsonl", STRATEGY, write_jsonl, "strategyqa"),
])
def test_format_detection(tmp_path, name, records, writer, fmt):
    path = writer(tmp_path / name, records)
    assert detect_format(path) == fmt
    assert len(load_qa(path)) == len(records)


def test_fmt_override_and_aliases(tmp_path):
    # a HotpotQA-shaped record without HotpotQA's level: detection says hotpotqa, fmt= says 2Wiki
    rec = {k: v for k, v in HOTPOT[1].items() if k != "level"}
    path = write_json(tmp_path / "x.json", [rec])
    assert load_qa(path)[0].meta["dataset"] == "hotpotqa"
    assert load_qa(path, fmt="2wiki")[0].meta["dataset"] == "2wikimultihopqa"
    with pytest.raises(ValueError, match="unknown dataset format 'squad'"):
        load_qa(path, fmt="squad")


def test_gzip_wrapped_object_and_pretty_jsonl(tmp_path):
    gz = tmp_path / "shared_task_dev.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in FEVER)
    assert [e.id for e in load_qa(gz)] == ["75397", "150448", "91198", "2"]
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"version": 1, "data": STRATEGY}, indent=2))
    assert len(load_qa(wrapped)) == 2
    blank_lines = tmp_path / "blank.jsonl"
    blank_lines.write_text("\n" + json.dumps(FEVER[0]) + "\n\n" + json.dumps(FEVER[1]) + "\n")
    assert len(load_qa(blank_lines)) == 2


def test_jsonl_text_with_unicode_line_separators_stays_one_record(tmp_path):
    """json.dumps(ensure_ascii=False) leaves U+2028/U+2029 and \\x85 unescaped in strings: a JSON Lines record is cut at
    newlines only."""
    rec = dict(HOTPOT[0], question="Which magazine\u2028was started first,\u2029Arthur\x85s or First for Women?")
    exs = load_qa(write_jsonl(tmp_path / "hotpot.jsonl", [rec, HOTPOT[1]]))
    assert [e.question for e in exs] == [rec["question"], HOTPOT[1]["question"]]


def test_limit_stops_reading_jsonl(tmp_path):
    path = tmp_path / "fever.jsonl"
    path.write_text(json.dumps(FEVER[0]) + "\n" + json.dumps(FEVER[1]) + "\n{not json\n")
    assert [e.id for e in load_qa(path, limit=2)] == ["75397", "150448"]
    with pytest.raises(DatasetError, match="line 3"):
        load_qa(path)


def test_resolve_release_folder(tmp_path):
    write_json(tmp_path / "hotpot" / "hotpot_dev_distractor_v1.json", HOTPOT)
    assert resolve_data_file(tmp_path / "hotpot", "hotpotqa").name == "hotpot_dev_distractor_v1.json"
    assert len(load_qa(tmp_path / "hotpot")) == 2
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="without a fever file"):
        resolve_data_file(tmp_path / "empty", "fever")
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_qa(tmp_path / "missing.json")


def test_infer_kind():
    assert infer_kind(["Yes"]) == "yesno"
    assert infer_kind(["NOT_ENOUGH_INFO"]) == "fever"
    assert infer_kind(["yes", "Paris"]) == "span"
    assert infer_kind([]) == "span"


# -------------------------------------------------------------------------------------- errors

def _bad(tmp_path: Path, records: list, writer=write_json, name: str = "bad.json", **kw) -> str:
    path = writer(tmp_path / name, records)
    with pytest.raises(DatasetError) as info:
        load_qa(path, **kw)
    msg = str(info.value)
    assert str(path) in msg
    return msg


def test_malformed_records_name_file_and_record(tmp_path):
    no_question = {k: v for k, v in HOTPOT[1].items() if k != "question"}
    assert "record 1: missing 'question'" in _bad(tmp_path, [HOTPOT[0], no_question])
    test_split = {k: v for k, v in HOTPOT[0].items() if k != "answer"}
    assert "test split without gold answers" in _bad(tmp_path, [test_split], fmt="hotpotqa")
    bad_ctx = {**HOTPOT[0], "context": [["Ed Wood", "x", "y"]]}
    assert "record 0: 'context'[0] should be [title, [sentences]]" in _bad(tmp_path, [bad_ctx])
    bad_sentences = {**HOTPOT[0], "context": [["Ed Wood", ["ok", 3]]]}  # the title is fine, a sentence is not
    assert ("'context'[0] should be [title, [sentences]], got ['Ed Wood', ['ok', 3]]: [1][1] is 3 (input should be a "
            "valid string)") in _bad(tmp_path, [bad_sentences])
    assert "'context' should be a list of [title, [sentences]]" in _bad(tmp_path, [{**HOTPOT[0], "context": 7}])
    bad_fact = {**HOTPOT[0], "supporting_facts": [["Ed Wood", "zero"]]}
    assert "'supporting_facts'[0] should be [title, sentence index]" in _bad(tmp_path, [bad_fact])
    bool_fact = {**HOTPOT[0], "supporting_facts": [["Ed Wood", True]]}  # a bool is no sentence index
    assert ("'supporting_facts'[0] should be [title, sentence index], got ['Ed Wood', True]: [1] is True (input should "
            "be a valid integer)") in _bad(tmp_path, [bool_fact])
    maybe = {**STRATEGY[0], "answer": "maybe"}
    assert "'answer' should be true or false" in _bad(tmp_path, [maybe])
    no_label = {k: v for k, v in FEVER[0].items() if k != "label"}
    msg = _bad(tmp_path, [FEVER[0], no_label], write_jsonl, "f.jsonl")
    assert "record 1 (line 2): missing 'label'" in msg
    assert "should be SUPPORTS, REFUTES or NOT ENOUGH INFO" in _bad(
        tmp_path, [{**FEVER[0], "label": "MAYBE"}], write_jsonl, "f.jsonl")
    assert "'golden_answers' should be a list of strings" in _bad(
        tmp_path, [{"id": "a", "question": "q?", "golden_answers": {"x": 1}}], write_jsonl, "g.jsonl")
    assert "record 2: expected a JSON object, got list" in _bad(tmp_path, [HOTPOT[0], HOTPOT[1], [1, 2]])


def test_json_lines_are_read_one_line_at_a_time(tmp_path):
    """A JSON Lines file is streamed: the records before a bad line are read before the reader gets to it (the whole
    file is never held), and the bad line is still named."""
    path = tmp_path / "big.jsonl"
    path.write_bytes((json.dumps(FEVER[0]) + "\n" + json.dumps(FEVER[1]) + "\n").encode() + b"\xff\xfe\n")
    records = read_records(path)
    assert [next(records).data, next(records).data] == [FEVER[0], FEVER[1]]
    with pytest.raises(DatasetError, match=r"big.jsonl:3: not UTF-8"):
        next(records)
    gz = tmp_path / "d.jsonl.gz"
    gz.write_bytes(gzip.compress(b"\xef\xbb\xbf" + "\n\n".join(json.dumps(r) for r in FEVER).encode()))
    assert [(r.index, r.line) for r in read_records(gz)] == [(i, 2 * i + 1) for i in range(len(FEVER))]


def test_duplicate_ids_and_unknown_shapes(tmp_path):
    assert "id '75397' already used by record 0" in _bad(tmp_path, [FEVER[0], FEVER[0]], write_jsonl, "d.jsonl")
    assert "cannot tell the dataset format" in _bad(tmp_path, [{"foo": 1, "bar": 2}])
    path = tmp_path / "torn.jsonl"
    path.write_text(json.dumps(FEVER[0]) + "\n" + json.dumps(FEVER[1])[:-5] + "\n")
    with pytest.raises(DatasetError, match=r"torn.jsonl: line 2: not valid JSON"):
        load_qa(path)
    broken = tmp_path / "broken.json"
    broken.write_text('[{"_id": "a", "question": "q"')
    with pytest.raises(DatasetError, match=r"broken.json: line 1 column \d+: not valid JSON"):
        load_qa(broken)
    empty = tmp_path / "empty.json"
    empty.write_text("  \n")
    with pytest.raises(DatasetError, match="empty"):
        load_qa(empty)
    csv = tmp_path / "data.json"
    csv.write_text("id,question\n1,q\n")
    with pytest.raises(DatasetError, match="neither JSON nor JSON Lines"):
        load_qa(csv)
