"""InstructRAG's parts without an LLM: paths in, tasks, Algorithm 1 on hand-worked cases, the walk, the docstore."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragplan.tools.react_docstore import ReActDocstore
from ragplan.tools.retrieval import Passage
from ragplan.methods.instructrag.graph import START, InstructionGraph, build_instruction_graph
from ragplan.methods.instructrag.paths import Instruction, InstructionPath, parse_instruction, parse_trajectory_log, read_paths
from ragplan.methods.instructrag.rl_agent import traverse
from ragplan.methods.instructrag.tasks import ANSWER_TYPES, SEEN_TASKS, UNSEEN_TASKS, answer_type, question_type, task_split


class VecEmbedder:
    """Hand-chosen vectors, so every similarity ψ of the worked example is known."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table
        self.dim = len(next(iter(table.values())))

    def encode(self, texts: list[str]) -> np.ndarray:
        rows = [np.asarray(self.table.get(t, [0.0] * (self.dim - 1) + [1.0]), dtype=np.float32) for t in texts]
        return np.stack([r / np.linalg.norm(r) for r in rows])


# Figure 1(a) of the paper: two paths of task T1, one of task T2.
TABLE = {
    "Search[Scott Derrickson]": [1, 0, 0, 0, 0],
    "Lookup[nationality]": [0, 1, 0, 0, 0],
    "Search[Ed Wood]": [0.9, 0.1, 0, 0, 0],          # ψ(Scott Derrickson) ≈ 0.99 ≥ δ: joins its node
    "Search[Christopher Nolan]": [0.3, 0, 0, 0.95, 0],  # ψ ≈ 0.30 < δ: a new node
    "Lookup[birthplace]": [0, 0.8, 0, 0, 0.6],      # ψ(nationality) = 0.8: joins its node
    "Lookup[year of founding]": [0, 0.2, 1, 0, 0],  # ψ < δ with every instruction outside the adjacent node
    "Were Scott Derrickson and Ed Wood of the same nationality?": [0.7, 0.7, 0, 0, 0.1],
    "Where was Christopher Nolan born?": [0.2, 0.5, 0, 0.8, 0.3],
    "When was Scott Derrickson's studio founded?": [0.6, 0.1, 0.8, 0, 0],
}


def _p(question: str, task: str, *steps: str) -> InstructionPath:
    ins = [parse_instruction(s) for s in steps]
    assert all(ins)
    return InstructionPath(question, "x", [i for i in ins if i], True, task=task)


PATHS = [
    _p("Were Scott Derrickson and Ed Wood of the same nationality?", "T1", "Search[Scott Derrickson]", "Lookup[nationality]",
       "Search[Ed Wood]", "Lookup[nationality]"),
    _p("Where was Christopher Nolan born?", "T1", "Search[Christopher Nolan]", "Lookup[birthplace]"),
    _p("When was Scott Derrickson's studio founded?", "T2", "Search[Scott Derrickson]", "Lookup[nationality]",
       "Lookup[year of founding]"),
]


def _node_sets(g: InstructionGraph) -> list[set[str]]:
    return [{g.instructions[i]["text"] for i in ids} for ids in g.nodes]


def test_algorithm1_on_the_papers_worked_example():
    g = build_instruction_graph(PATHS, delta=0.4, embedder=VecEmbedder(TABLE))
    assert _node_sets(g) == [{"Search[Scott Derrickson]", "Search[Ed Wood]"},
                             {"Lookup[nationality]", "Lookup[birthplace]"},
                             {"Search[Christopher Nolan]"}, {"Lookup[year of founding]"}]
    assert [len(n) for n in g.nodes] == [3, 4, 1, 1]  # every inserted instruction is kept, duplicates included
    tasks = {e: sorted(t) for e, t in g.edges.items()}
    assert tasks == {(START, 0): ["T1", "T2"], (0, 1): ["T1", "T2"], (1, 0): ["T1"], (START, 2): ["T1"], (2, 1): ["T1"],
                     (1, 3): ["T2"]}
    assert g.edges[(0, 1)]["T2"] == [2]  # the edge records the question of T2 that walked it
    st = g.stats()
    assert (st.nodes, st.edges, st.start_edges, st.instructions, st.tasks, st.paths) == (4, 4, 2, 9, 2, 3)
    assert g.paths[0]["nodes"] == [0, 1, 0, 1]


def test_adjacent_instructions_never_share_a_node():
    table = {"Search[A]": [1, 0, 0], "Search[A too]": [0.99, 0.1, 0], "Lookup[b]": [0, 0, 1]}
    g = build_instruction_graph([_p("q", "T", "Search[A]", "Search[A too]", "Lookup[b]")], delta=0.4, embedder=VecEmbedder(table))
    assert _node_sets(g) == [{"Search[A]"}, {"Search[A too]"}, {"Lookup[b]"}]
    g2 = build_instruction_graph([_p("q", "T", "Search[A]", "Lookup[b]", "Search[A too]")], delta=0.4, embedder=VecEmbedder(table))
    assert _node_sets(g2) == [{"Search[A]", "Search[A too]"}, {"Lookup[b]"}]  # not adjacent: merged


@pytest.mark.parametrize("delta,nodes", [(1.01, 9), (0.4, 4), (-1.0, 2)])
def test_delta_controls_the_number_of_nodes(delta, nodes):
    g = build_instruction_graph(PATHS, delta=delta, embedder=VecEmbedder(TABLE))
    assert len(g.nodes) == nodes and len(g.instructions) == 9


def test_graph_persists_and_grows_incrementally(tmp_path):
    emb = VecEmbedder(TABLE)
    g = build_instruction_graph(PATHS[:2], delta=0.4, embedder=emb)
    g.save(tmp_path / "g")
    loaded = InstructionGraph.load(tmp_path / "g")
    assert loaded.stats() == g.stats()
    loaded.insert(PATHS[2:], emb)
    full = build_instruction_graph(PATHS, delta=0.4, embedder=emb)
    assert _node_sets(loaded) == _node_sets(full) and loaded.edges == full.edges
    with pytest.raises(ValueError, match="build-graph"):
        InstructionGraph.load(tmp_path / "nothing")


def test_noise_comes_only_from_failed_paths_of_the_support_questions():
    support = [p.question for p in PATHS]
    failed = [InstructionPath(support[i % 3], "x", [Instruction("Search", f"wrong {i}")], False, task="T1") for i in range(4)]
    others = [InstructionPath("A query question?", "x", [Instruction("Search", "leak")], False, task="T1"),
              InstructionPath("An unseen task's question?", "x", [Instruction("Search", "leak too")], False, task="T9")]
    g = build_instruction_graph(PATHS, delta=0.4, embedder=VecEmbedder(TABLE), failed=others + failed, noise_rate=0.25)
    assert len(g.paths) == 4 and sum(not p["success"] for p in g.paths) == 1 and len(g.failed) == 3
    assert g.stats().noisy_paths == 1 and {q["text"] for q in g.questions} == set(support)  # nothing leaked into G
    g = build_instruction_graph(PATHS, delta=0.4, embedder=VecEmbedder(TABLE), failed=others, noise_rate=0.5)
    assert len(g.paths) == 3 and not g.failed and g.stats().noisy_paths == 0


def test_walk_follows_the_rules():
    g = build_instruction_graph(PATHS, delta=0.4, embedder=VecEmbedder(TABLE))
    q = VecEmbedder(TABLE).encode(["Were Scott Derrickson and Ed Wood of the same nationality?"])[0]
    res = traverse(g, q, lambda s: 1, k=3, max_len=4)
    texts = [[g.instructions[i]["text"] for i in p] for p in res.paths]
    assert texts and all(len(p) <= 4 for p in texts) and len({tuple(p) for p in texts}) == len(texts)
    assert all(not p[0].startswith("Lookup") for p in texts)  # no Lookup before a Search
    # most similar instruction first (ψ(Ed Wood) ≈ 0.77 > ψ(Scott Derrickson) = 0.70); back in the junction node the
    # instruction not used yet is taken, so the walk combines the two Search instructions of path 1
    assert texts[0][:3] == ["Search[Ed Wood]", "Lookup[nationality]", "Search[Scott Derrickson]"]
    assert len(res.states) == len(res.actions) and all(len(s) == 3 for s in res.states)
    none = traverse(g, q, lambda s: 0, k=3)
    assert none.paths == [] and none.actions and set(none.actions) == {0}



def test_walk_rules_no_finish_before_a_search_and_no_repeated_instruction():
    """Our rules: a bare Finish[X] path and the same Search twice used to come out of the walk."""
    table = {"Finish[Ed Wood]": [0, 0, 0, 1], "Search[Ed Wood]": [1, 0, 0, 0], "Search[Bela Lugosi]": [0, 0, 1, 0],
             "Lookup[nationality]": [0, 1, 0, 0], "Who is Ed Wood?": [0.5, 0.1, 0.1, 0.85]}
    paths = [_p("Who is Ed Wood?", "T", "Finish[Ed Wood]"),  # the question's nearest node holds only a Finish
             _p("q1", "T", "Search[Ed Wood]", "Lookup[nationality]", "Search[Bela Lugosi]", "Lookup[nationality]",
                "Search[Ed Wood]", "Finish[Ed Wood]")]
    emb = VecEmbedder(table)
    g = build_instruction_graph(paths, delta=0.4, embedder=emb)
    res = traverse(g, emb.encode(["Who is Ed Wood?"])[0], lambda s: 1, k=3, max_len=8)
    texts = [[g.instructions[i]["text"] for i in p] for p in res.paths]
    assert texts and all(p[0].startswith("Search[") for p in texts)  # never a bare Finish[Ed Wood]
    for p in texts:
        searches = [t for t in p if t.startswith("Search[")]
        assert len(searches) == len(set(searches))  # the same Search is not added twice
        pages: list[list[str]] = []
        for t in p:  # a Lookup may repeat only on another page
            if t.startswith("Search["):
                pages.append([])
            else:
                assert t not in pages[-1]
                pages[-1].append(t)
    assert any(p.count("Lookup[nationality]") == 2 for p in texts)  # the paper's own shape stays possible



def test_from_lines_name_the_paths_the_instructions_come_from():
    """Regression: "from:" listed the questions of the walk's edges, mostly the start edge's (here qb first)."""
    from ragplan.methods.instructrag.selection import derived_from

    table = {"Search[X]": [1, 0, 0, 0], "Search[Y]": [0.95, 0.31, 0, 0], "Lookup[a]": [0, 0, 1, 0], "Lookup[b]": [0, 0, 0.3, 0.95],
             "qa?": [0.7, 0, 0.7, 0]}
    emb = VecEmbedder(table)
    g = build_instruction_graph([_p("qb?", "T", "Search[Y]", "Lookup[b]"), _p("qa?", "T", "Search[X]", "Lookup[a]")],
                                delta=0.4, embedder=emb)
    assert sorted(g.edges[(START, 0)]["T"]) == [0, 1]  # the start edge records both questions
    res = traverse(g, emb.encode(["qa?"])[0], lambda s: 1, k=1)
    assert [g.instructions[i]["text"] for i in res.paths[0]] == ["Search[X]", "Lookup[a]"]
    assert derived_from(g, res.paths[0]) == ["qa?"]


def test_the_rap_style_store_keeps_noisy_paths():
    """The paper's RAP database holds the noisy paths too (Table 4); the baseline used to skip them."""
    from ragplan.methods.instructrag.selection import PlannerParts, stored_candidates

    emb = VecEmbedder(TABLE)
    noisy = InstructionPath(PATHS[1].question, "x", [Instruction("Search", "wrong page")], False, task="T1")
    g = build_instruction_graph(PATHS, delta=0.4, embedder=emb, failed=[noisy], noise_rate=0.25)
    assert g.stats().noisy_paths == 1
    texts = [c.text for c in stored_candidates(PlannerParts(g, emb), PATHS[1].question, k=10)]
    assert "Search[wrong page]" in texts and len(texts) == 4



class _CountedList(list):
    """A list that counts the walks over it."""

    walks = 0

    def __iter__(self):
        self.walks += 1
        return super().__iter__()


def test_the_majority_path_and_instruction_vectors_are_made_once_per_graph_and_again_after_an_insert():
    from ragplan.methods.instructrag.selection import stored_path

    emb = VecEmbedder(TABLE)
    g = build_instruction_graph(PATHS, delta=0.4, embedder=emb)
    known = g.instruction_vectors
    assert g.instruction_vectors is known and set(known) == {i.text for p in PATHS for i in p.instructions}
    g.paths = _CountedList(g.paths)
    nolan = emb.encode([PATHS[1].question])[0]
    picks = {m: g.paths[stored_path(g, nolan, m)]["instructions"] for m in ("rap", "majority", "majority", "majority")}
    assert len(picks["rap"]) == 2 and len(picks["majority"]) == 4  # three action sequences once each: the first counts
    assert g.paths.walks == 1  # counted once, not per question
    more = [_p(f"Where was director {i} born?", "T1", f"Search[director {i}]", "Lookup[birthplace]") for i in range(2)]
    g.insert(more, emb)
    assert g.paths[stored_path(g, nolan, "majority")]["instructions"] == picks["rap"]  # Search → Lookup is now commonest
    assert "Search[director 1]" in g.instruction_vectors and "Search[director 1]" not in known


REFLEXION_LOG = """
########################################
BEGIN TRIAL 1
Trial summary: Correct: 1, Incorrect: 1, Halted: 1
#######################################
------------- BEGIN CORRECT AGENTS -------------

Question: Which river runs through the town where Ilse Maren was born?
Thought 1: I need to find where Ilse Maren was born, then the river there.
Action 1: Search[Ilse Maren]
Observation 1: Ilse Maren (born 1950 in Hollmark) is a sculptor.
Thought 2: She was born in Hollmark. Now the river.
Action 2: Search[Hollmark]
Observation 2: Hollmark is a town on the river Vessa.
Thought 3: The river is the Vessa.
Action 3: Finish[Vessa]
Observation 3: Answer is CORRECT
Correct answer: Vessa

------------- BEGIN INCORRECT AGENTS -----------

Question: Are Tarn Holt and Egil Brun both painters?
Thought 1: I search both.
Action 1: Search[Tarn Holt]
Observation 1: Tarn Holt is a painter.
Thought 2: And Egil Brun.
Action 2: Lookup[painter]
Observation 2: No more results.
Action 3: Finish[no]
Observation 3: Answer is INCORRECT
Correct answer: yes

------------- BEGIN HALTED AGENTS --------------

Question: When did the ferry line close?
Thought 1: I search it.
Action 1: Search[ferry line]
Observation 1: Could not find ferry line.
Correct answer: 1972
"""

REACT_LOG = """17 Question: What instrument does Oda Lien play?
Thought 1: I search Oda Lien.
Action 1: search[Oda Lien]
Observation 1: Oda Lien is a cellist from Bergen.
Thought 2: She plays the cello.
Action 2: finish[cello]
Observation 2: Episode finished, reward = 1

{'steps': 2, 'answer': 'cello', 'gt_answer': 'cello', 'question_idx': 17, 'reward': True, 'em': True, 'f1': 1.0, 'n_calls': 2}
1 1 1.0 3.1
-----------

42 Question: Who founded the Vessa rowing club?
Thought 1: I search the club.
Action 1: search[Vessa rowing club]
Observation 1: Could not find Vessa rowing club. Similar: ['Vessa'].
Thought 2: I give up.
Action 2: finish[Ilse Maren]
Observation 2: Episode finished, reward = 0

{'steps': 2, 'answer': 'Ilse Maren', 'gt_answer': 'Per Vik', 'question_idx': 42, 'reward': False, 'em': False, 'f1': 0}
"""


def test_reflexion_trial_logs_are_read_with_their_labels():
    rep = parse_trajectory_log(REFLEXION_LOG, "trial.txt")
    assert [p.question for p in rep.successful] == ["Which river runs through the town where Ilse Maren was born?"]
    ok = rep.successful[0]
    assert ok.text == "Search[Ilse Maren] → Search[Hollmark] → Finish[Vessa]" and ok.answer == "Vessa"
    assert [p.answer for p in rep.failed] == ["yes", "1972"]  # the incorrect and the halted run, gold answers kept
    assert rep.failed[0].task == "yes/no" and rep.failed[1].task == "date"


# A later Reflexion trial as its authors log it (util.log_trial: the agent prompt with the few-shot part
# removed, or printed whole), with the last-trial context and a reflection before the current trial.
REFLEXION_TRIAL_2 = """
########################################
BEGIN TRIAL 2
Trial summary: Correct: 1, Incorrect: 0
#######################################
------------- BEGIN CORRECT AGENTS -------------

Solve a question answering task with interleaving Thought, Action, Observation steps. Thought can reason about the current situation, and Action can be three types:
(1) Search[entity], which searches the exact entity on Wikipedia and returns the first paragraph if it exists.
(2) Lookup[keyword], which returns the next sentence containing keyword in the last passage successfully found by Search.
(3) Finish[answer], which returns the answer and finishes the task.
You may take as many steps as necessary.
Here are some examples:
Question: What is the elevation range for the area that the eastern sector of the Colorado orogeny extends into?
Thought 1: I need to search Colorado orogeny.
Action 1: Search[Colorado orogeny]
Observation 1: The Colorado orogeny was an episode of mountain building.
Action 2: Finish[1,800 to 7,000 ft]
(END OF EXAMPLES)
You have attempted to answer the following question before and failed. Below is the last trial you attempted to answer the question.
Question: Which river runs through the town where Ilse Maren was born?
Thought 1: I search the river.
Action 1: Search[Vessa river]
Observation 1: Could not find Vessa river.
Action 2: Finish[Rhine]
Observation 2: Answer is INCORRECT
(END PREVIOUS TRIAL)
The following reflection(s) give a plan to avoid failing to answer the question in the same way you did previously.
Reflections:
- I should have searched Ilse Maren first.

Question: Which river runs through the town where Ilse Maren was born?
Thought 1: I search Ilse Maren.
Action 1: Search[Ilse Maren]
Observation 1: Ilse Maren (born 1950 in Hollmark) is a sculptor.
Action 2: Search[Hollmark]
Observation 2: Hollmark is a town on the river Vessa.
Action 3: Finish[Vessa]
Observation 3: Answer is CORRECT
Correct answer: Vessa

------------- BEGIN INCORRECT AGENTS -----------

Previous trial:
Question: Are Tarn Holt and Egil Brun both painters?
Action 1: Search[Tarn Holt]
Action 2: Finish[yes]
Observation 2: Answer is CORRECT

Reflection:
Question: Are Tarn Holt and Egil Brun both painters?
Action 1: Search[Egil Brun]
Action 2: Finish[no]
Observation 2: Answer is INCORRECT
Correct answer: yes
"""

PRINTED_PROMPT_LOG = """Question: Who founded the Vessa rowing club?
Thought 1: an example of the prompt, printed before the question
Action 1: search[Example page]
Action 2: finish[Example answer]
Question: What instrument does Oda Lien play?
Action 1: search[Oda Lien]
Action 2: finish[cello]
{'steps': 2, 'answer': 'cello', 'gt_answer': 'cello', 'question_idx': 17, 'reward': True, 'em': True, 'f1': 1.0}
"""


def test_logs_leave_out_examples_and_earlier_trials():
    rep = parse_trajectory_log(REFLEXION_TRIAL_2, "trial2.txt")
    assert [p.text for p in rep.successful] == ["Search[Ilse Maren] → Search[Hollmark] → Finish[Vessa]"]
    assert [p.text for p in rep.failed] == ["Search[Egil Brun] → Finish[no]"]  # not the quoted previous trial
    assert rep.skipped == 0  # the few-shot example in the CORRECT section is no block at all
    rep = parse_trajectory_log(PRINTED_PROMPT_LOG, "react.log")
    assert [p.text for p in rep.successful] == ["Search[Oda Lien] → Finish[cello]"]  # the label is the last block's
    assert not rep.failed and rep.skipped == 1 and "before the label" in rep.problems[0]
    rep = parse_trajectory_log("Question: q?\nAction 1: Search[x]\nAction 2: Finish[y]\n(END OF EXAMPLES)\n"
                               "Question: real?\nAction 1: Search[z]\nAction 2: Finish[w]\nObservation 2: Answer is CORRECT\n", "p")
    assert [p.text for p in rep.successful] == ["Search[z] → Finish[w]"] and rep.skipped == 1
    rep = parse_trajectory_log("BEGIN CORRECT AGENTS\nQuestion: q?\nAction 1: Search[old try]\nAction 2: Finish[no]\n"
                               "Question: q?\nAction 1: Search[new try]\nAction 2: Finish[yes]\nCorrect answer: yes\n", "sec")
    assert [p.text for p in rep.successful] == ["Search[new try] → Finish[yes]"] and not rep.failed and rep.skipped == 1


def test_react_notebook_logs_are_read_with_their_info_dicts(tmp_path):
    rep = parse_trajectory_log(REACT_LOG, "react.log")
    assert [p.text for p in rep.successful] == ["Search[Oda Lien] → Finish[cello]"]
    assert rep.successful[0].task == "common noun"
    assert [p.answer for p in rep.failed] == ["Per Vik"]
    (tmp_path / "r.log").write_text(REACT_LOG + "\n" + REACT_LOG)
    both = read_paths([tmp_path / "r.log"])
    assert len(both.successful) == 1 and len(both.failed) == 1  # a repeated (question, path) is kept once


def test_short_act_obs_labels_are_read():
    rep = parse_trajectory_log("Question: Who?\nThought 1: t\nAct 1: Search[Vessa]\nObs 1: x\nAct 2: Finish[Per]\n"
                               "Obs 2: Answer is CORRECT\n", "short")
    assert [p.text for p in rep.successful] == ["Search[Vessa] → Finish[Per]"]


def test_unlabelled_blocks_are_skipped_and_jsonl_is_read(tmp_path):
    rep = parse_trajectory_log("Question: q?\nThought 1: t\nAction 1: Search[x]\nObservation 1: y\n", "plain")
    assert rep.skipped == 1 and not rep.successful
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"question": "Who directed Alien?", "answer": "Ridley Scott", "task": "",
                             "path": [{"action": "search", "argument": "Alien (film)"}, {"action": "Finish", "argument": "Ridley Scott"}],
                             "success": True}) + "\n")
    got = read_paths([f])
    assert got.successful[0].text == "Search[Alien (film)] → Finish[Ridley Scott]" and got.successful[0].task == "person"
    for n, line in ((2, "not json"), (3, json.dumps({"question": "q", "path": [{"action": "Fly", "argument": "x"}]}))):
        f.write_text(f.read_text() + line + "\n")  # a bad line among good ones is refused, naming its line
        with pytest.raises(ValueError, match=rf"p\.jsonl:{n}: " + ("not valid JSON" if n == 2 else ".*Fly")):
            read_paths([f])
        f.write_text(f.read_text().replace(line + "\n", "\n"))


def test_twelve_tasks_six_seen_six_unseen_and_the_rule():
    assert len(ANSWER_TYPES) == 12 and len(SEEN_TASKS) == len(UNSEEN_TASKS) == 6 and not set(SEEN_TASKS) & set(UNSEEN_TASKS)
    cases = [("yes", "Were A and B of the same nationality?", "yes/no"), ("12 March 1979", "", "date"), ("1994", "", "date"),
             ("7 million", "How many people live there?", "number"), ("Ridley Scott", "Who directed Alien?", "person"),
             ("Chicago", "In which city was he born?", "location"), ("Creed", "Which band did Scott Stapp front?", "group/org"),
             ("Human Clay", "Which album went diamond?", "artwork"), ("Battle of Hastings", "Which battle came first?", "event"),
             ("American", "What nationality is Ed Wood?", "adjective"), ("guitar", "What does he play?", "common noun"),
             ("Golden Lion", "What did the film get?", "other proper noun")]
    for answer, question, want in cases:
        assert answer_type(answer, question) == want, (answer, question)
    assert question_type("Were Scott Derrickson and Ed Wood of the same nationality?") == "yes/no"
    assert question_type("When was the director of Alien born?") == "date"
    assert task_split(SEEN_TASKS[0]) == "seen" and task_split(UNSEEN_TASKS[0]) == "unseen" and task_split("x") == "other"


class ListRetriever:
    name = "local"

    def __init__(self, passages: list[Passage]) -> None:
        self.passages = passages

    def search(self, query: str, k: int = 5) -> list[Passage]:
        words = set(query.lower().split())
        return sorted(self.passages, key=lambda p: -len(words & set(p.title.lower().split())))[:k]


def test_docstore_search_and_lookup_as_react():
    store = ReActDocstore(ListRetriever([
        Passage("1", "Creed (band)", "Creed was an American rock band. Creed disbanded in 2004. The band reunited in 2009."),
        Passage("2", "Creed", "A creed is a statement of shared beliefs."),
    ]))
    assert store.lookup("band").observation.startswith("There is no page")
    r = store.search("creed (band)")
    assert r.title == "Creed (band)" and r.observation.startswith("Creed was an American rock band.")
    assert store.lookup("band").observation == "(Result 1 / 3) Creed was an American rock band."
    assert store.lookup("band").observation == "(Result 2 / 3) Creed disbanded in 2004."  # a substring, as in ReAct
    assert store.lookup("band").observation == "(Result 3 / 3) The band reunited in 2009."
    assert store.lookup("band").observation == "No more results."
    assert store.lookup("disbanded").observation == "(Result 1 / 1) Creed disbanded in 2004."
    r = store.search("rock band Creed history")
    assert "No page named" in r.observation and "closest" in r.observation
    assert store.execute("Think", "x").observation.startswith("Invalid action")


def test_observe_writes_the_page_only_when_a_search_changes_it():
    """A Lookup reads the page a Search stored: observe writes no page sentences for it (they used to be written by
    every step, so every checkpoint held the whole page again)."""
    from langgraph.runtime import Runtime

    from ragplan.nodes.instructrag.observe import observe
    from ragplan.state.instructrag import InstructRAGContext, TAOStep

    page = Passage("1", "Creed (band)", "Creed was an American rock band. Creed disbanded in 2004.")
    rt = Runtime(context=InstructRAGContext(model="-", retriever_object=ListRetriever([page])))
    search = TAOStep(index=1, action="Search", argument="Creed (band)")
    first = observe({"question": "q", "steps": [search]}, rt)
    assert first["page_title"] == "Creed (band)" and len(first["page_sentences"]) == 2
    kept = {k: v for k, v in first.items() if k.startswith(("page_", "lookup_"))}
    lookup = TAOStep(index=2, action="Lookup", argument="disbanded")
    second = observe({"question": "q", "steps": [search, lookup], **kept}, rt)
    assert second["steps"][0]["observation"] == "(Result 1 / 1) Creed disbanded in 2004."
    assert second["lookup_keyword"] == "disbanded" and second["lookup_next"] == 1
    assert "page_sentences" not in second and "page_title" not in second
    third = observe({"question": "q", "steps": [search, lookup, lookup.model_copy(update={"index": 3})],
                     **kept, "lookup_keyword": "disbanded", "lookup_next": 1}, rt)
    assert third["steps"][0]["observation"] == "No more results." and set(third) == {"steps"}
