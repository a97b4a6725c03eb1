"""FuRePA and the IRCoT-style baseline end to end: scripted models over a real local FAISS index of the synthetic
multi-hop corpus, with a plan assessor trained on that corpus (the FuRePA family's test data); the network path
through the real OpenAI client against the local stub (temperatures in the request bodies); the CLI's refusal
without an assessor."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ragplan.api import ask
from ragplan.cli import main
from ragplan.nodes.furepa.answer import EvidenceAnswer
from ragplan.nodes.furepa.mask_reasoning import build_prompt
from ragplan.nodes.furepa.propose import Proposal
from ragplan.state.furepa import FuRePAContext, FuRePAResult
from tests.family_data.furepa import SYNTHETIC
from tests.test_furepa_nodes import TempModel


@pytest.fixture(scope="module")
def world(every_family_data):
    """The synthetic corpus, context index and assessor trained on it that the FuRePA family's test data hold (built
    once per test run, tests/family_data/furepa.py); one founder → birthplace question."""
    from ragplan.methods.furepa.scorer import load_assessor

    assessor = Path(every_family_data["furepa"].api("furepa")["assessor_dir"])
    recs = [json.loads(x) for x in (assessor.parent / SYNTHETIC).read_text().splitlines()]
    rec = next(r for r in recs if r["question"].startswith("In which city was the founder of"))
    company, founder = [t for t, _ in rec["metadata"]["supporting_facts"]]
    return {"index": str(assessor / "context_index" / "index"), "assessor": str(assessor),
            "question": rec["question"], "company": company, "founder": founder, "city": rec["golden_answers"][0],
            "mrr": load_assessor(assessor).meta["metrics"]["mrr"]}


def ctx(world, model, **settings):
    return FuRePAContext(model="-", chat_model=model, retriever="local", index_dir=world["index"],
                         assessor_dir=world["assessor"], **settings)


def run(world, method, model, **settings):
    nodes: list[str] = []
    res = ask(world["question"], method, context=ctx(world, model, **settings), on_update=lambda n, u: nodes.append(n))
    assert isinstance(res, FuRePAResult)
    return res, nodes


def _has(messages, title):
    return f"] {title} (local)" in messages[-1].content


def two_hop_agent(world, first=None, second=None):
    """Search for the company, then for its founder, then answer the city (candidates as the test gives them)."""
    first = first or ["more information about the answer", world["company"], "city where someone was born"]
    second = second or [world["company"], f"{world['founder']} birthplace", "founder company history"]

    def respond(messages, schema):
        if schema == "EvidenceAnswer":
            return EvidenceAnswer(reasoning="from the evidence", answer=world["city"])
        if _has(messages, world["founder"]):
            return Proposal(thought=f"{world['founder']} was born in {world['city']}.", action="answer", answer=world["city"])
        if _has(messages, world["company"]):
            return Proposal(thought=f"{world['company']} was founded by {world['founder']}; where was he born?",
                            action="search", queries=second)
        return Proposal(thought="First find who founded the company.", action="search", queries=first)

    return respond


def test_assessor_trained_for_the_graph_beats_first_and_random(world):
    m = world["mrr"]  # on its held-out questions, as train_assessor measured and saved them
    assert m["trained"] > m["first"] and m["trained"] > m["random"]


def test_furepa_masked_two_hops_with_the_trained_assessor(world):
    # every candidate of a round finds that round's page, so the path does not hang on which one the demo-trained
    # assessor prefers; the test checks that its scores decide the pick and the pick is what runs
    first = [world["company"], f"Who founded {world['company']}?", f"{world['company']} founder"]
    second = [world["founder"], f"{world['founder']} birthplace", f"Where was {world['founder']} born?"]
    model = TempModel(responder=two_hop_agent(world, first, second))
    res, nodes = run(world, "furepa", model)
    assert nodes == ["mask_reasoning", "propose", "assess_plan", "review_plan", "repetition_control", "retrieve"] * 2 + \
        ["mask_reasoning", "propose"]  # review_plan passes through (review is off)
    assert res.answer == world["city"] and res.stop_reason == "answered" and not res.error
    it1, it2, it3 = res.iterations
    for it in (it1, it2):
        scores = [c.score for c in it.candidates]
        assert it.assessor == "trained" and all(s is not None for s in scores) and len(scores) == 3
        assert it.pick == max(range(3), key=lambda i: (scores[i], -i)) and it.executed and not it.repeated
    assert it1.query in first and it2.query in second and res.executed_queries() == [it1.query, it2.query]
    titles = [p.title for p in res.evidence]
    assert titles[0] == world["company"] and world["founder"] in titles and len(titles) == len(set(p.key for p in res.evidence))
    assert all(p.source == "local" and p.query in res.executed_queries() for p in res.evidence)
    assert it3.answer == world["city"] and res.temperature_changes == [] and model.seen == [0.2, 0.2, 0.2]
    # masking: the second prompt is exactly question + evidence + instruction; the first thought is not in it
    second = model.prompts[1][-1].content
    evidence_then = [p for p in res.evidence if p.iteration == 1]
    assert second == build_prompt(world["question"], evidence_then, [], masked=True, n_queries=3)
    assert it1.thought not in second and "Iteration 1" not in second
    rec = res.record()
    assert rec["iteration_count"] == 3 and rec["repeated_query_rate"] == 0.0 and rec["temperature_raises"] == 0
    assert res.retrievals() == 2 and res.retrieval_errors() == 0 and res.usage.llm_calls == 3


def test_masking_off_shows_the_earlier_thought(world):
    model = TempModel(responder=two_hop_agent(world))
    res, _ = run(world, "furepa", model, mask_reasoning=False, assessor_mode="first")
    second = model.prompts[1][-1].content
    assert f"Iteration 1 thought: {res.iterations[0].thought}" in second
    assert "Iteration 1 search: more information about the answer" in second
    assert not res.iterations[1].masked and res.iterations[0].query == "more information about the answer"


def test_repeats_raise_the_temperature_then_stop_with_the_best_answer(world):
    model = TempModel(responder=two_hop_agent(world, first=[world["company"]], second=[world["company"]]))
    res, nodes = run(world, "furepa", model, assessor_mode="first", max_temperature_raises=2, repeat_similarity=1.0)
    assert res.stop_reason == "repetition" and res.answer == world["city"] and nodes[-1] == "answer"
    assert [it.repeated for it in res.iterations] == [False, True, True, True]
    assert [it.executed for it in res.iterations] == [True, False, False, False]
    assert [(c.before, c.after) for c in res.temperature_changes] == [(0.2, 1.0), (1.0, 1.8)]
    assert model.seen == [0.2, 0.2, 1.0, 1.8, 0.0]  # the three proposals after the first, then the answer at `temperature`
    assert res.record()["repeated_query_rate"] == 0.75 and res.record()["temperature_raises"] == 2
    assert res.executed_queries() == [world["company"]]


def test_a_fresh_query_after_a_raise_goes_back_to_tp0(world):
    calls = {"n": 0}
    agent = two_hop_agent(world, first=[world["company"]])

    def respond(messages, schema):
        if schema == "Proposal" and _has(messages, world["company"]) and not _has(messages, world["founder"]):
            calls["n"] += 1
            q = world["company"] if calls["n"] == 1 else world["founder"]
            return Proposal(thought="t", action="search", queries=[q])
        return agent(messages, schema)

    model = TempModel(responder=respond)
    res, _ = run(world, "furepa", model, assessor_mode="first", tp0=1.0, delta_tp=0.5)
    assert model.seen == [1.0, 1.0, 1.5, 1.0] and res.answer == world["city"]
    assert [(c.before, c.after) for c in res.temperature_changes] == [(1.0, 1.5), (1.5, 1.0)]


def test_iteration_bound_ends_with_the_answer_step(world):
    counter = iter(range(100))

    def respond(messages, schema):
        if schema == "EvidenceAnswer":
            return EvidenceAnswer(reasoning="r", answer="unknown")
        return Proposal(thought="t", action="search", queries=[f"query number {next(counter)}"])

    res, nodes = run(world, "furepa", TempModel(responder=respond), assessor_mode="random", max_iterations=3)
    assert res.stop_reason == "max_iterations" and len(res.iterations) == 3 and res.retrievals() == 3
    assert nodes[-2:] == ["retrieve", "answer"] and res.answer == "unknown"


def test_ircot_keeps_reasoning_and_runs_one_query_per_step(world):
    model = TempModel(responder=two_hop_agent(world, first=[world["company"], "ignored"], second=[world["founder"], "ignored"]))
    res, nodes = run(world, "ircot", model)
    assert nodes == ["keep_reasoning", "propose", "retrieve"] * 2 + ["keep_reasoning", "propose"]
    assert res.answer == world["city"] and res.executed_queries() == [world["company"], world["founder"]]
    assert all(len(it.candidates) == 1 for it in res.iterations[:2]) and res.iterations[0].assessor == "single"
    assert "Iteration 1 thought: First find who founded the company." in model.prompts[1][-1].content
    assert model.seen == [0.0, 0.0, 0.0]


def test_network_path_sends_each_proposals_temperature(world, monkeypatch):
    from tests.auto_reply import auto_responder
    from tests.openai_server import OpenAIStub

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    company = world["company"]

    def proposal(req):
        return {"thought": "t", "action": "search", "queries": [company], "answer": ""}

    with OpenAIStub(responder=auto_responder({"Proposal": proposal, "EvidenceAnswer": {"answer": world["city"]}})) as stub:
        res = ask(world["question"], "furepa", model="openai:stub", base_url=stub.base_url, retriever="local",
                  index_dir=world["index"], assessor_mode="first", repeat_similarity=1.0)
        temps = [r.body.get("temperature") for r in stub.requests]
        tools = [r.forced_tool for r in stub.requests]
    assert res.stop_reason == "repetition" and res.answer == world["city"]
    assert temps == [0.2, 0.2, 1.0, 1.8, 0.0] and tools == ["Proposal"] * 4 + ["EvidenceAnswer"]


def test_cli_refuses_trained_mode_without_an_assessor(world, capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("RAGPLAN_FUREPA_ASSESSOR", raising=False)
    base = ["ask", "--method", "furepa", "--question", "q", "--retriever", "local", "--index", world["index"],
            "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1"]
    assert main(base) == 2
    assert "needs a trained plan assessor" in capsys.readouterr().err
    assert main(base + ["--assessor", str(tmp_path)]) == 2
    assert "cannot be loaded" in capsys.readouterr().err
    assert main(["ask", "--method", "ircot", "--question", "q", "--assessor-mode", "first", "--model", "openai:m",
                 "--base-url", "http://127.0.0.1:9/v1", "--retriever", "local", "--index", str(tmp_path)]) == 2
    assert "index cannot be opened" in capsys.readouterr().err


def test_eval_runs_furepa_and_retrieval_scores_its_executed_queries(world, tmp_path, monkeypatch, capsys):
    """``ragplan eval --method furepa`` over the synthetic corpus (context-only index), then ``ragplan eval retrieval
    --queries RUN_DIR`` scores the queries the run executed against the gold supporting passages."""
    from tests.auto_reply import auto_responder
    from tests.openai_server import OpenAIStub

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    from ragplan.methods.furepa.synthetic import write_synthetic

    data = write_synthetic(tmp_path / "syn.jsonl", 3, seed=5)

    def proposal(req):
        if "none yet" in req.prompt_text:
            return {"thought": "t", "action": "search", "queries": ["the answer", "founder company", "city"], "answer": ""}
        return {"thought": "t", "action": "answer", "queries": [], "answer": "somewhere"}

    run = tmp_path / "run"
    with OpenAIStub(responder=auto_responder({"Proposal": proposal, "EvidenceAnswer": {"answer": "x"}})) as stub:
        code = main(["eval", "--method", "furepa", "--benchmark", "hotpotqa", "--data", str(data), "--context-only",
                     "--model", "openai:stub", "--base-url", stub.base_url, "--out", str(run), "--no-progress",
                     "--set", f"assessor_dir={world['assessor']}", "--concurrency", "1"])
    assert code == 0, capsys.readouterr().err
    recs = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert len(recs) == 3 and all(r["iteration_count"] == 2 and r["retrievals"] == 1 for r in recs)
    assert all(len(r["executed_queries"]) == 1 and r["repeated_query_rate"] == 0.0 and r["temperature_raises"] == 0
               for r in recs)
    assert all(r["iterations"][0]["candidates"][0]["score"] is not None for r in recs)
    capsys.readouterr()
    code = main(["eval", "retrieval", "--benchmark", "hotpotqa", "--data", str(data), "--context-only",
                 "--queries", str(run), "--out", str(tmp_path / "ret"), "--no-progress"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "mrr" in out.out.lower()


def test_furepa_picks_through_a_cross_encoder_assessor(world, tmp_path):
    """A graph whose assessor_dir holds a cross-encoder (trained by train_assessor on tiny data) scores each round's
    candidates with it, in their context (question + evidence so far), and runs its highest-scored pick."""
    from ragplan.methods.furepa.scorer import load_assessor
    from ragplan.methods.furepa.train import train_assessor
    from tests.test_furepa_assessor import _group

    train_assessor([_group(i, good_first=i % 5 == 0) for i in range(8)], tmp_path / "xenc", seed=0,
                   scorer="cross-encoder", epochs=1, progress=False)
    cross, trees = load_assessor(tmp_path / "xenc"), load_assessor(world["assessor"])
    assert cross.meta["scorer"] == "cross-encoder" and cross.cross is not None
    first = [world["company"], f"Who founded {world['company']}?", f"{world['company']} founder"]
    second = [world["founder"], f"{world['founder']} birthplace", f"Where was {world['founder']} born?"]
    model = TempModel(responder=two_hop_agent(world, first, second))
    res = ask(world["question"], "furepa", context=dataclasses.replace(ctx(world, model), assessor_dir=str(tmp_path / "xenc")))
    assert res.stop_reason == "answered" and res.answer == world["city"] and len(res.iterations) == 3
    for it in res.iterations[:2]:
        held = [(p.title, p.text) for p in res.evidence if p.iteration < it.index]
        queries = [c.query for c in it.candidates]
        scores = cross.score(world["question"], held, queries)
        assert it.assessor == "trained" and [c.score for c in it.candidates] == [round(s, 4) for s in scores]
        assert scores != trees.score(world["question"], held, queries)  # not the trees' scores
        assert it.pick == max(range(3), key=lambda i: (scores[i], -i)) and it.query == queries[it.pick] and it.executed
    assert res.executed_queries() == [it.query for it in res.iterations[:2]]
