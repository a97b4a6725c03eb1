"""A reply just under ``max_reply_chars`` is stored once: once per results line, bounded in later prompts.

The LLM is the local OpenAI-compatible stub (:mod:`tests.auto_reply`) reached through the real client; the
long text is ~150,000 characters of lower-case words, so the normalised answer is the same text.
"""

from __future__ import annotations

import json

import pytest

from ragplan.cli import main
from ragplan.eval.question_runner import LARGE_TEXT, once
from tests.auto_reply import auto_responder
from tests.openai_server import OpenAIStub

BIG = ("lorem ipsum dolor " * 8_400).strip()  # 151,199 characters, under the 200,000 default cap
MODEL = ["--model", "openai:stub-model"]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """The text families' small local index (tests/family_data/think_then_act.py), built once for the module."""
    from tests.family_data.think_then_act import local_index

    return local_index(tmp_path_factory.mktemp("text"))


def _eval(tmp_path, stub, *args: str) -> tuple[str, dict]:
    run = tmp_path / "run"
    code = main(["eval", *args, "--limit", "1", *MODEL, "--base-url", stub.base_url, "--out", str(run),
                 "--no-progress"])
    assert code == 0
    line = (run / "results.jsonl").read_text()
    return line, json.loads(line)


def test_a_long_answer_is_written_once_in_a_text_qa_results_line(tmp_path, local_endpoint):
    from tests.test_datasets import HOTPOT, write_json

    data = write_json(tmp_path / "hotpot.json", HOTPOT[:1])
    with OpenAIStub(responder=auto_responder({"ShortAnswer": {"answer": BIG}})) as stub:
        line, rec = _eval(tmp_path, stub, "--method", "standard", "--benchmark", "hotpotqa", "--data", str(data))
    assert rec["answer"] == BIG and rec["error"] == ""
    assert len(line) < len(BIG) + 5_000  # was 3 copies: answer, chosen, queries[0].answer
    assert rec["chosen"] == BIG[:200] + "…"  # the normalised answer, a display copy
    assert rec["queries"][0]["answer"] == f"[same text as answer: {len(BIG):,} characters]"
    assert rec["em"] == 0.0 and rec["question"] == HOTPOT[0]["question"]


def test_planrag_stores_a_long_self_thinking_step_once_and_bounds_it_in_later_prompts(tmp_path, local_endpoint):
    from ragplan.methods.planrag.generate import generate_clone

    clone = tmp_path / "dqa"
    generate_clone(clone, "locating", 1, seed=0)

    def act(req):
        if "\nObservation" in req.prompt_text:
            return {"thought": "enough", "action": "finish", "action_input": ""}
        return {"thought": "reason it out", "action": "self_thinking", "action_input": BIG}

    overrides = {"Plan": {"steps": ["Reason about the nodes"]}, "RetrievalAction": act,
                 "ReplanDecision": {"replan": False, "reason": "fine"}, "FinalAnswer": {"answer": "lubeck"}}
    with OpenAIStub(responder=auto_responder(overrides)) as stub:
        line, rec = _eval(tmp_path, stub, "--method", "planrag", "--benchmark", "dqa-locating", "--data", str(clone))
        prompts = [len(r.prompt_text) for r in stub.requests]
    step = rec["steps"][0]
    assert step["query"] == BIG and step["observation"] == f"[same text as steps[0].query: {len(BIG):,} characters]"
    assert len(line) < len(BIG) + 10_000  # was 2 copies (the step's input and its observation)
    # the step went into the next prompts cut to the trace budget (was whole, twice: 302,000+ characters)
    assert len(prompts) >= 4 and max(prompts) < 30_000, prompts
    assert any("…(shortened)" in r.prompt_text for r in stub.requests)


def test_once_keeps_short_copies_and_the_executed_queries():
    q = "q" * (LARGE_TEXT + 1)
    rec = once({"question": q, "answer": "Paris", "executed_queries": [q], "queries": [{"text": q, "answer": "Paris"}]})
    assert rec["answer"] == rec["queries"][0]["answer"] == "Paris"  # short texts repeat as before
    assert rec["executed_queries"] == [q]  # read by `ragplan eval retrieval --queries`
    assert rec["queries"][0]["text"] == f"[same text as question: {len(q):,} characters]"
    plan = once({"answer": "ok", "args": [q], "raw": f'#E1 = search("{q}")', "plan_text": f'Step 1: #E1 = search("{q}")'})
    assert plan["args"] == [q] and plan["raw"] == f'#E1 = search("[same text as args[0]: {len(q):,} characters]")'
    assert plan["plan_text"] == f'Step 1: {plan["raw"]}'  # within a longer text too (REAPER's step lines)


def _stored(db) -> tuple[int, int, int]:
    """Checkpoints, their bytes and the bytes of the nodes' writes in a checkpoint file."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        (n, blobs), = conn.execute("SELECT count(*), coalesce(sum(length(checkpoint)), 0) FROM checkpoints")
        (writes,) = conn.execute("SELECT coalesce(sum(length(value)), 0) FROM writes").fetchone()
    return n, blobs, writes


def _history(builder, db, thread_id: str) -> list:
    """The run's state at every checkpoint, newest first, as ``get_state`` (Studio) reads it back."""
    from ragplan.checkpoints import open_saver

    with open_saver(str(db)) as saver:
        return list(builder().compile(checkpointer=saver).get_state_history({"configurable": {"thread_id": thread_id}}))


def test_a_long_step_is_stored_once_in_the_checkpoints_of_a_planrag_run(tmp_path, trade_cql, question):
    """Every later checkpoint stored the whole steps list again (15 checkpoints: 1.5 MB for one 150,000-character
    thought); the lists are delta channels now, so the thought is stored once, with the step's write."""
    from ragplan.api import ask
    from ragplan.nodes.planrag.answer import FinalAnswer
    from ragplan.nodes.planrag.plan import Plan
    from ragplan.nodes.planrag.replan import ReplanDecision
    from ragplan.nodes.planrag.retrieve import RetrievalAction
    from tests.scripted import ScriptedChatModel

    count = "MATCH (t:Trade_node) RETURN count(t) AS n"
    replies: list = [Plan(steps=[f"Step {i}" for i in range(4)]),
                     RetrievalAction(thought=BIG, action="graph_db", action_input=count)]
    for _ in range(3):
        replies += [ReplanDecision(replan=False, reason="ok"), RetrievalAction(thought="t", action="graph_db",
                                                                               action_input=count)]
    replies += [ReplanDecision(replan=False, reason="ok"), FinalAnswer(answer="lubeck")]
    db = tmp_path / "checkpoints.sqlite"
    res = ask(question, "planrag", model=ScriptedChatModel(replies=replies), store=str(trade_cql),
              checkpoint_db=str(db))
    assert res.answer == "lubeck" and [s.thought for s in res.steps] == [BIG, "t", "t", "t"]
    n, blobs, writes = _stored(db)
    assert n >= 10 and blobs < len(BIG) // 2, (n, blobs)  # was ~10 copies
    assert len(BIG) < writes < 2 * len(BIG)  # the step's own write: once


def test_a_long_sub_answer_is_cut_in_later_prompts_and_stored_once_in_checkpoints(tmp_path, index):
    """Think-then-Act: a 150,000-character answer to sub-query 1 went whole into every later sub-query (its #1
    reference, "answers found so far"), the composition (prompts up to 450,000 characters) and its copies filled ~50 checkpoints."""
    from ragplan.api import ask
    from ragplan.graphs.think_then_act import build_think_then_act
    from ragplan.nodes.think_then_act.answer_subquery import ShortAnswer
    from ragplan.nodes.think_then_act.assess_query import QueryAssessment
    from ragplan.nodes.think_then_act.confidence_gate import Confidence
    from tests.scripted import ScriptedChatModel

    prompts: list[int] = []
    answers: list[str] = []

    def respond(messages, tool):
        prompts.append(sum(len(str(m.content)) for m in messages))
        if tool == "QueryAssessment":
            return QueryAssessment(category="AMBIGUOUS", sub_queries=["Who directed Alien?", "Where was #1 born?",
                                                                      "When was #1 born?", "Answer: #2 and #3"])
        if tool == "Confidence":
            return Confidence(probability=0.9, reason="known")
        answers.append(BIG if not answers else "short")  # the first sub-answer is long
        return ShortAnswer(answer=answers[-1])

    db = tmp_path / "checkpoints.sqlite"
    res = ask("Who directed Alien, and where and when was he born?", "think_then_act",
              model=ScriptedChatModel(responder=respond), retriever="local", index_dir=str(index),
              checkpoint_db=str(db))
    assert [q.answer for q in res.queries] == [BIG, "short", "short", "short"] and res.answer == "short"
    assert res.queries[1].resolved == f"Where was {BIG[:300]}… born?"
    assert len(prompts) == 10 and max(prompts) < 5_000, prompts
    assert _history(build_think_then_act, db, res.thread_id)[0].values["queries"] == res.queries
    _, blobs, writes = _stored(db)
    # queries are delta channels: the sub-answer is in its branch's write and in the branch's output (was 1.27 MB of
    # checkpoints, one copy in each later one)
    assert blobs < len(BIG) // 2 and writes < 3 * len(BIG), (blobs, writes)


def test_instructrag_steps_enter_later_prompts_with_long_thoughts_cut():
    from ragplan.nodes.instructrag.prompt import scratchpad
    from ragplan.state.instructrag import TAOStep

    steps = [TAOStep(index=1, thought=BIG, action="Search", argument="Alien", observation="Alien is a 1979 film."),
             TAOStep(index=2, thought="Found it.", action="Finish", argument="Ridley Scott")]
    pad = scratchpad(steps)
    assert len(pad) < 1_000 and "Thought 1: lorem ipsum dolor" in pad and "…\nAction 1: Search[Alien]" in pad
    assert "Observation 1: Alien is a 1979 film." in pad and "Action 2: Finish[Ridley Scott]" in pad


def test_a_long_furepa_thought_is_stored_about_once_in_the_checkpoints(tmp_path, index):
    """FuRePA: each later checkpoint held the thought twice (``reasoning`` and its iteration) and each later node
    wrote the iteration whole again (10 checkpoints, 2.0 MB); now the lists and ``reasoning`` are delta channels and a
    node after ``propose`` writes only the fields it changed."""
    from ragplan.api import ask
    from ragplan.graphs.furepa import build_furepa
    from ragplan.nodes.furepa.propose import Proposal
    from tests.scripted import ScriptedChatModel

    replies = [Proposal(thought=BIG, action="search", queries=["Alien film director"]),
               Proposal(thought="Ridley Scott directed it.", action="answer", answer="Ridley Scott")]
    db = tmp_path / "checkpoints.sqlite"
    res = ask("Who directed Alien?", "furepa", model=ScriptedChatModel(replies=replies), retriever="local",
              index_dir=str(index), assessor_mode="first", checkpoint_db=str(db))
    assert res.answer == "Ridley Scott" and [it.thought for it in res.iterations] == [BIG, "Ridley Scott directed it."]
    assert res.iterations[0].query == "Alien film director" and res.iterations[0].executed and res.evidence
    snaps = _history(build_furepa, db, res.thread_id)  # each checkpoint reads back whole, the changes merged
    assert snaps[0].values["iterations"] == res.iterations and snaps[0].values["reasoning"] == res.reasoning
    picked = [s.values["iterations"][0]
              for s in snaps if s.values["iterations"] and s.values["iterations"][0].pick == 0]
    assert len(picked) >= 5 and all(it.thought == BIG and it.query == "Alien film director" for it in picked)
    n, blobs, writes = _stored(db)
    assert n >= 10 and blobs + writes < 3 * len(BIG), (n, blobs, writes)  # was 2.75 MB (2.0 MB of checkpoints)


def test_a_long_instructrag_thought_is_stored_about_once_in_the_checkpoints(tmp_path, index):
    """InstructRAG: ``steps`` was written whole by every node and copied into every later checkpoint; now a delta
    channel, ``plan_step`` writes the new step and ``observe`` only its observation."""
    from ragplan.api import ask
    from ragplan.graphs.instructrag import build_react
    from ragplan.nodes.instructrag.plan_step import TAODecision
    from tests.scripted import ScriptedChatModel

    replies = [TAODecision(thought=BIG, action="Search", argument="Alien (film)"),
               TAODecision(thought="Found it.", action="Search", argument="Ridley Scott"),
               TAODecision(thought="Done.", action="Finish", argument="Ridley Scott")]
    db = tmp_path / "checkpoints.sqlite"
    res = ask("Who directed Alien?", "react", model=ScriptedChatModel(replies=replies), retriever="local",
              index_dir=str(index), checkpoint_db=str(db))
    assert res.answer == "Ridley Scott" and [s.thought for s in res.steps] == [BIG, "Found it.", "Done."]
    assert "Ridley Scott" in res.steps[0].observation and res.steps[0].title == "Alien (film)"
    snaps = _history(build_react, db, res.thread_id)
    assert snaps[0].values["steps"] == res.steps and all(s.values["steps"][0].thought == BIG for s in snaps[:-2])
    n, blobs, writes = _stored(db)
    assert n >= 7 and blobs + writes < 3 * len(BIG), (n, blobs, writes)  # was 1.5 MB (0.77 MB of checkpoints)
