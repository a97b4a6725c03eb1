"""FuRePA's nodes one at a time, with scripted models: the masked prompt (exact text), propose, assess_plan,
repetition control and its temperature schedule, retrieve, the fallback answer."""

from __future__ import annotations

import pytest
from langgraph.runtime import Runtime

from ragplan.nodes.furepa.answer import EvidenceAnswer, answer_from_evidence
from ragplan.nodes.furepa.assess_plan import NO_ASSESSOR, assess_plan
from ragplan.nodes.furepa.mask_reasoning import keep_reasoning, mask_reasoning
from ragplan.nodes.furepa.propose import Proposal, chat_model_at, distinct_queries, make_propose
from ragplan.nodes.furepa.repetition_control import find_repeat, raised_temperature, repetition_control
from ragplan.nodes.furepa.retrieve import retrieve_passages
from ragplan.state.furepa import Candidate, EvidencePassage, FuRePAContext, Iteration, merge_evidence, merge_iterations
from ragplan.tools.retrieval import Passage
from tests.scripted import ScriptedChatModel

Q = "In which city was the founder of Iskax Mills born?"
EV = [EvidencePassage(id="p1", title="Iskax Mills", text="Iskax Mills is a brewing company founded in 1933 by Bruno Yoren.",
                      source="local", query="Iskax Mills", iteration=1, rank=1, score=0.8)]
PAST = [Iteration(index=1, temperature=0.2, thought="SECRET-THOUGHT: it must be a company", candidates=[Candidate(query="Iskax Mills")],
                  pick=0, query="Iskax Mills", executed=True, assessor="first")]


def rt(model=None, **settings):
    return Runtime(context=FuRePAContext(model="-", chat_model=model, retriever="local", index_dir="-", **settings))


MASKED = """Question: In which city was the founder of Iskax Mills born?

Evidence gathered so far:
[1] Iskax Mills (local): Iskax Mills is a brewing company founded in 1933 by Bruno Yoren.

Reason about the question from scratch, using only the evidence above. In `thought`, work out step by step which facts the evidence establishes and which fact is still missing.
If the evidence is enough to answer, set `action` to "answer" and give the answer in `answer`, as briefly as possible: a name, date, number or short phrase, or "yes" / "no" for a yes/no question; no full sentence.
Otherwise set `action` to "search" and write 3 different search queries in `queries`. Each query
goes after the fact that is still missing, and they should differ in how they go after it, so that at least one
finds it. A query must stand on its own: name the person, place or thing it is about (use the name the evidence
gives, never "it", "he" or "#1")."""


def test_mask_reasoning_prompt_is_question_and_evidence_only():
    out = mask_reasoning({"question": Q, "evidence": EV, "iterations": PAST}, rt())
    assert out["prompt"] == MASKED
    assert "SECRET-THOUGHT" not in out["prompt"] and "search: Iskax Mills" not in out["prompt"]


def test_masking_off_and_ircot_show_earlier_thoughts_and_searches():
    history = ("Your earlier reasoning and searches:\nIteration 1 thought: SECRET-THOUGHT: it must be a company\n"
               "Iteration 1 search: Iskax Mills")
    off = mask_reasoning({"question": Q, "evidence": EV, "iterations": PAST}, rt(mask_reasoning=False))["prompt"]
    assert off == MASKED.replace("\n\nReason about", f"\n\n{history}\n\nReason about")
    ircot = keep_reasoning({"question": Q, "evidence": EV, "iterations": PAST}, rt())["prompt"]
    assert history in ircot and "write one search query in `queries`" in ircot


def test_first_prompt_without_evidence():
    out = mask_reasoning({"question": Q}, rt(n_candidates=2))["prompt"]
    assert out.startswith(f"Question: {Q}\n\nEvidence gathered so far: none yet.\n\nReason about")
    assert "write 2 different search queries" in out


def test_propose_candidates_deduplicated_and_bounded():
    model = ScriptedChatModel(replies=[Proposal(thought="need the founder", action="search",
                                                queries=["Founder of Iskax Mills", "founder of iskax mills!", " ", "Iskax Mills",
                                                         "Bruno Yoren", "extra"])])
    out = make_propose()({"question": Q, "prompt": "P", "temperature": 1.0}, rt(model))
    (it,) = out["iterations"]
    assert [c.query for c in it.candidates] == ["Founder of Iskax Mills", "Iskax Mills", "Bruno Yoren"]
    assert it.index == 1 and it.temperature == 1.0 and it.masked and it.pick is None and it.thought == "need the founder"
    assert model.prompts[0][-1].content == "P" and "stop_reason" not in out


def test_propose_answer_ends_and_ircot_picks_its_one_query():
    model = ScriptedChatModel(replies=[Proposal(thought="t", action="answer", answer=" Valmouth "),
                                       Proposal(thought="t2", action="search", queries=["a", "b"])])
    out = make_propose()({"question": Q, "prompt": "P", "iterations": PAST}, rt(model))
    assert out["answer"] == "Valmouth" and out["stop_reason"] == "answered" and out["iterations"][0].index == 2
    assert out["iterations"][0].temperature == 0.2  # tp0 before any repeat
    out = make_propose(single_query=True)({"question": Q, "prompt": "P"}, rt(model, temperature=0.0))
    it = out["iterations"][0]
    assert [c.query for c in it.candidates] == ["a"] and it.pick == 0 and it.query == "a" and it.assessor == "single"
    assert it.temperature == 0.0 and not it.masked


def test_proposal_schema_requires_queries_or_answer_and_failure_is_recorded():
    with pytest.raises(ValueError):
        Proposal(thought="t", action="search", queries=[])
    with pytest.raises(ValueError):
        Proposal(thought="t", action="answer")
    model = ScriptedChatModel(replies=["no json here"] * 3)
    out = make_propose()({"question": Q, "prompt": "P"}, rt(model))
    assert out["stop_reason"] == "llm_unparseable" and out["error"].startswith("propose: no valid Proposal")
    model = ScriptedChatModel(replies=[ConnectionError("down")])
    out = make_propose()({"question": Q, "prompt": "P"}, rt(model))
    assert out["stop_reason"] == "llm_error" and len(model.prompts) == 1


class TempModel(ScriptedChatModel):
    """A scripted model with a temperature field; ``seen`` (shared by copies) logs the temperature of every call."""

    temperature: float = 0.0
    seen: list = []  # pydantic gives each instance its own list; copies (model_copy) share it

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(self.temperature)
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_per_call_temperature_on_a_model_object():
    model = TempModel(responder=lambda m, s: Proposal(thought="t", action="search", queries=["q"]))
    for t in (0.2, 1.0, 1.8, 0.2):
        make_propose()({"question": Q, "prompt": "P", "temperature": t}, rt(model))
    assert model.seen == [0.2, 1.0, 1.8, 0.2] and model.temperature == 0.0
    assert chat_model_at(FuRePAContext(model="-", chat_model=model), 1.0) is chat_model_at(FuRePAContext(model="-", chat_model=model), 1.0)
    plain = ScriptedChatModel(replies=[])  # no temperature field: used as it is
    assert chat_model_at(FuRePAContext(model="-", chat_model=plain), 1.0) is plain


def test_temperature_schedule():
    assert raised_temperature(0.2, 0.8, 2.0) == 1.0
    assert raised_temperature(1.0, 0.8, 2.0) == 1.8
    assert raised_temperature(1.8, 0.8, 2.0) == 2.0
    assert raised_temperature(1.0, 0.5, 2.0) == 1.5  # the paper's second setting


def _picked(query, index=2):
    return Iteration(index=index, temperature=0.2, candidates=[Candidate(query=query)], pick=0, query=query, assessor="first")


def _last(state, out):
    """The current iteration once the node's change is merged (a node after propose writes only what it changed)."""
    return merge_iterations(state["iterations"], out["iterations"])[-1]


def test_repetition_raises_then_stops_and_a_fresh_query_resets():
    ctx = dict(tp0=0.2, delta_tp=0.8, max_temperature_raises=2, repeat_similarity=1.0)
    state = {"question": Q, "iterations": PAST + [_picked("iskax  mills?")]}
    out = repetition_control(state, rt(**ctx))
    it = _last(state, out)
    assert it.repeated and it.repeat_of == "Iskax Mills" and it.similarity == 1.0
    assert out["temperature"] == 1.0 and out["raises"] == 1 and "stop_reason" not in out
    (change,) = out["temperature_changes"]
    assert (change.iteration, change.before, change.after) == (2, 0.2, 1.0) and "Iskax Mills" in change.reason
    out = repetition_control({**state, "temperature": 1.0, "raises": 1}, rt(**ctx))
    assert out["temperature"] == 1.8 and out["raises"] == 2
    out = repetition_control({**state, "temperature": 1.8, "raises": 2}, rt(**ctx))
    assert out["stop_reason"] == "repetition" and "temperature_changes" not in out
    fresh = {"question": Q, "iterations": PAST + [_picked("Bruno Yoren")], "temperature": 1.8, "raises": 2}
    out = repetition_control(fresh, rt(**ctx))
    assert not _last(fresh, out).repeated and out["temperature"] == 0.2 and out["raises"] == 0
    assert out["temperature_changes"][0].reason == "a fresh query: back to tp0"
    first = {"question": Q, "iterations": [_picked("x", 1)]}
    assert repetition_control(first, rt(**ctx)) == {"iterations": [
        {"index": 1, "similarity": None, "repeat_check_error": "", "repeated": False, "repeat_of": ""}]}


def test_a_repeat_on_the_last_iteration_goes_to_the_answer():
    state = {"question": Q, "iterations": PAST + [_picked("Iskax Mills")]}
    out = repetition_control(state, rt(max_iterations=2, repeat_similarity=1.0))
    assert out["stop_reason"] == "max_iterations" and _last(state, out).repeated
    # no proposal follows, so no raise is recorded (it would inflate temperature_raises)
    assert "temperature_changes" not in out and "temperature" not in out and "raises" not in out


def test_a_failing_embedding_model_falls_back_to_exact_repeats(monkeypatch):
    """get_embedder or encode failing does not crash the run: exact repeats still count, and the iteration says why."""
    import ragplan.tools.embeddings as embeddings
    from ragplan.graphs.furepa import FAMILY

    def no_model(path=""):
        raise embeddings.EmbeddingModelError(f"{path}: not a sentence-transformers model folder")

    monkeypatch.setattr(embeddings, "get_embedder", no_model)
    ctx = dict(repeat_similarity=0.9, embedding_model="/nowhere/model")
    state = {"question": Q, "iterations": PAST + [_picked("Bruno Yoren")]}
    out = repetition_control(state, rt(**ctx))
    it = _last(state, out)
    assert not it.repeated and it.similarity is None and "stop_reason" not in out
    assert "similarity check failed (EmbeddingModelError: /nowhere/model" in it.repeat_check_error
    assert it.repeat_check_error.endswith("exact repeats only")
    repeat = {"question": Q, "iterations": PAST + [_picked("ISKAX mills")]}
    out = repetition_control(repeat, rt(**ctx))
    it = _last(repeat, out)
    assert it.repeated and it.repeat_of == "Iskax Mills" and out["raises"] == 1 and it.repeat_check_error
    lines: list[str] = []
    FAMILY.trace("repetition_control", out, lines.append)
    assert lines[0].startswith("  Repeat check: similarity check failed") and "Repeats the executed query" in lines[1]

    class Broken:
        def encode(self, texts):
            raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(embeddings, "get_embedder", lambda path="": Broken())
    out = repetition_control(state, rt(**ctx))
    assert "RuntimeError: CUDA out of memory" in _last(state, out).repeat_check_error
    ok = repetition_control(state, rt(repeat_similarity=1.0))
    assert _last(state, ok).repeat_check_error == ""  # exact-only by setting: nothing to report


def test_embedding_similarity_counts_as_a_repeat():
    from ragplan.tools.embeddings import get_embedder

    emb = get_embedder("")
    rep, sim = find_repeat("Who founded the company Iskax Mills?", ["founder of Iskax Mills", "Valmouth river"], 0.7, emb)
    assert rep == "founder of Iskax Mills" and 0.7 <= sim < 1.0
    rep, sim = find_repeat("river of Valmouth city", ["founder of Iskax Mills"], 0.95, emb)
    assert rep == "" and sim is not None and sim < 0.95
    assert find_repeat("anything", [], 0.5, emb) == ("", None)


def test_assess_plan_modes_and_refusal_without_a_model(monkeypatch):
    cands = [Candidate(query=q) for q in ("the answer", "Bruno Yoren", "Iskax Mills")]
    state = {"question": Q, "evidence": EV, "iterations": [Iteration(index=2, candidates=cands)]}
    assert _last(state, assess_plan(state, rt(assessor_mode="first"))).query == "the answer"
    picks = {_last(state, assess_plan(state, rt(assessor_mode="random", assessor_seed=s))).pick for s in range(12)}
    assert len(picks) > 1 and _last(state, assess_plan(state, rt(assessor_mode="random"))).pick == \
        _last(state, assess_plan(state, rt(assessor_mode="random"))).pick  # seeded: repeatable
    out = assess_plan(state, rt(assessor_mode="trained", assessor_dir=""))
    assert out["stop_reason"] == "assessor_error" and NO_ASSESSOR in out["error"]

    class Stub:
        def score(self, question, evidence, queries):
            assert question == Q and evidence == [("Iskax Mills", EV[0].text)]
            return [0.1, 0.9, 0.9]

    import ragplan.nodes.furepa.assess_plan as node
    import ragplan.methods.furepa.scorer as scorer

    monkeypatch.setattr(scorer, "load_assessor", lambda d: Stub())
    monkeypatch.setattr(node, "assessor_problem", lambda ctx: None)
    it = _last(state, assess_plan(state, rt(assessor_mode="trained", assessor_dir="x")))
    assert it.pick == 1 and it.query == "Bruno Yoren" and [c.score for c in it.candidates] == [0.1, 0.9, 0.9]


class ListRetriever:
    name = "local"

    def __init__(self, passages, fail=False):
        self.passages, self.fail, self.calls = passages, fail, []

    def search(self, query, k=5):
        self.calls.append((query, k))
        if self.fail:
            raise RuntimeError("index gone")
        return self.passages[:k]


def test_retrieve_appends_new_passages_with_source_and_deduplicates():
    r = ListRetriever([Passage("p1", "Iskax Mills", "old"), Passage("p2", "Bruno Yoren", "Bruno was born in Valmouth. " * 80, 0.7, "local")])
    state = {"question": Q, "evidence": EV, "iterations": PAST + [_picked("Bruno Yoren")]}
    out = retrieve_passages(state, rt(retriever_object=r, retrieval_k=4, passage_chars=50))
    it = _last(state, out)
    assert "thought" not in out["iterations"][0] and it.query == "Bruno Yoren"  # only what retrieval changed
    assert r.calls == [("Bruno Yoren", 4)] and it.executed and it.retrieved == ["p1", "p2"] and it.new_evidence == 1
    (p,) = out["evidence"]
    assert (p.title, p.source, p.query, p.iteration, p.rank) == ("Bruno Yoren", "local", "Bruno Yoren", 2, 2)
    assert len(p.text) <= 52 and p.text.endswith("…")
    assert out["retrieval_count"] == 2 and out["retrieval_errors"] == 0 and "stop_reason" not in out
    assert [e.id for e in merge_evidence(EV, out["evidence"] + EV)] == ["p1", "p2"]
    failed = retrieve_passages(state, rt(retriever_object=ListRetriever([], fail=True), max_iterations=2))
    assert _last(state, failed).retrieval_error == "RuntimeError: index gone" and failed["retrieval_errors"] == 1
    assert failed["stop_reason"] == "max_iterations"


def test_answer_from_evidence_names_why_searching_stopped():
    model = ScriptedChatModel(replies=[EvidenceAnswer(reasoning="the founder is Bruno", answer="Valmouth")])
    out = answer_from_evidence({"question": Q, "evidence": EV, "stop_reason": "repetition"}, rt(model))
    assert out["answer"] == "Valmouth" and out["reasoning"] == "the founder is Bruno" and "stop_reason" not in out
    prompt = model.prompts[0][-1].content
    assert "kept repeating queries" in prompt and "[1] Iskax Mills (local)" in prompt
    out = answer_from_evidence({"question": Q, "error": "propose: bad"}, rt(ScriptedChatModel(replies=[ConnectionError("x")])))
    assert out["stop_reason"] == "llm_error" and out["error"].startswith("propose: bad; answer:")


def test_distinct_queries():
    assert distinct_queries(["A b", "a B.", "", "c"], 5) == ["A b", "c"]
    assert distinct_queries(["x", "y"], 1) == ["x"]


def test_assess_plan_records_a_scoring_failure(monkeypatch):
    import ragplan.nodes.furepa.assess_plan as node
    import ragplan.methods.furepa.scorer as scorer

    def broken(d):
        raise OSError("model file gone")

    monkeypatch.setattr(scorer, "load_assessor", broken)
    monkeypatch.setattr(node, "assessor_problem", lambda ctx: None)
    state = {"question": Q, "iterations": [Iteration(index=1, candidates=[Candidate(query="a"), Candidate(query="b")])]}
    out = assess_plan(state, rt(assessor_mode="trained", assessor_dir="x"))
    assert out["stop_reason"] == "assessor_error" and "OSError: model file gone" in out["error"]
