"""Think-then-Act and its baselines end to end: scripted model, real Sentence-BERT + FAISS over a small corpus.

The scripted model answers by the schema it is asked for (and the question in the prompt), so parallel
sub-query branches get the right replies whatever order they run in.
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage

from ragplan.graphs.think_then_act import (
    build_cot, build_flare, build_retrieve_then_read, build_standard, build_think_then_act,
)
from ragplan.nodes.think_then_act.answer_subquery import ShortAnswer
from ragplan.nodes.think_then_act.assess_query import QueryAssessment
from ragplan.nodes.think_then_act.confidence_gate import Confidence, DirectDecision, needs_retrieval
from ragplan.nodes.think_then_act.direct_answer import ChainOfThought
from ragplan.state.context import ThinkThenActContext
from ragplan.state.think_then_act import TextQAResult
from tests.scripted import ScriptedChatModel

CORPUS = [
    ("Canberra", "Canberra is the capital city of Australia. It was selected as the site of the capital in 1908."),
    ("Ada Lovelace", "Ada Lovelace was an English mathematician. She died on 27 November 1852 in London."),
    ("Email", "Electronic mail was invented in 1971 when Ray Tomlinson sent the first networked message."),
    ("Blade Runner", "Blade Runner is a 1982 science fiction film directed by Ridley Scott."),
    ("Mount Everest", "Mount Everest is Earth's highest mountain above sea level, in the Himalayas."),
    ("Photosynthesis", "Photosynthesis is the process by which green plants turn light into chemical energy."),
]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> str:
    from ragplan.tools.textindex import build_index

    root = tmp_path_factory.mktemp("tta")
    src = root / "passages.jsonl"
    src.write_text("".join(json.dumps({"id": f"p{i}", "title": t, "contents": c}) + "\n" for i, (t, c) in enumerate(CORPUS)))
    build_index(src, root / "index", progress=False)
    return str(root / "index")


def run(builder, responder, index_dir, question, **settings):
    model = ScriptedChatModel(responder=responder)
    ctx = ThinkThenActContext(model="-", chat_model=model, retriever="local", index_dir=index_dir, **settings)
    out = builder().compile().invoke({"question": question}, context=ctx)
    return TextQAResult.from_state(out), model


def agent(assessment, betas=None, answers=None, final="final"):
    """Reply by schema: the assessment, β per query text, an answer per query text, the final composition."""
    betas, answers = betas or {}, answers or {}

    def respond(messages, schema):
        text = messages[-1].content
        if schema == "QueryAssessment":
            return assessment
        if schema in ("Confidence", "DirectDecision"):
            for key, v in betas.items():
                if f"Question: {key}" in text:
                    return v if not isinstance(v, float) else Confidence(probability=v, reason="r")
            return Confidence(probability=0.5, reason="default")
        if schema == "ShortAnswer":
            if "Using the sub-answers" in text:
                return ShortAnswer(answer=final)
            for key, v in answers.items():
                if f"Question: {key}" in text:
                    return ShortAnswer(answer=v)
            return ShortAnswer(answer="unknown")
        raise AssertionError(f"unexpected schema {schema}")

    return respond


def test_clear_query_below_threshold_retrieves_top_sentences(index_dir):
    q = "What is the capital of Australia?"
    res, model = run(build_think_then_act, agent(QueryAssessment(category="CLEAR AND COMPLETE"), {q: 0.2}, {q: "Canberra"}),
                     index_dir, q)
    assert res.assessment == "CLEAR AND COMPLETE" and res.answer == "Canberra"
    sub = res.queries[0]
    assert sub.beta == 0.2 and sub.retrieve and "β = 0.20 < β′ = 0.5" in sub.decision
    assert len(sub.evidence) == 3 and sub.evidence[0]["title"] == "Canberra"
    assert "capital city of Australia" in sub.evidence[0]["sentence"]
    assert res.retrieval_ratio == 1.0 and res.retrieval_count == 1
    assert res.usage.llm_calls == 3  # assess, gate, answer (a single query's answer is final)
    assert "capital city of Australia" in model.prompts[-1][-1].content  # the evidence reached the answer prompt


def test_gate_above_threshold_answers_unaided(index_dir):
    q = "What is the capital of Australia?"
    res, model = run(build_think_then_act, agent(QueryAssessment(category="CLEAR AND COMPLETE"), {q: 0.9}, {q: "Canberra"}),
                     index_dir, q)
    assert not res.queries[0].retrieve and res.queries[0].evidence == [] and res.retrieval_ratio == 0.0
    assert "Context:" not in model.prompts[-1][-1].content


def test_incomplete_query_is_completed(index_dir):
    q = "Who directed it, the 1982 replicant film?"
    full = "Who directed the 1982 film Blade Runner?"
    res, _ = run(build_think_then_act, agent(QueryAssessment(category="INCOMPLETE", rewritten=full), {full: 0.1},
                                             {full: "Ridley Scott"}), index_dir, q)
    assert res.assessment == "INCOMPLETE" and [x.text for x in res.queries] == [full]
    assert res.answer == "Ridley Scott" and res.queries[0].evidence[0]["title"] == "Blade Runner"


def test_ambiguous_question_sub_queries_in_waves_with_references(index_dir):
    subs = ["When did Ada Lovelace die?", "When was email invented?", "Is #2 earlier than #1?"]
    a = QueryAssessment(category="AMBIGUOUS", sub_queries=subs)
    answers = {subs[0]: "1852", subs[1]: "1971", "Is 1971 earlier than 1852?": "no"}
    betas = {subs[0]: 0.3, subs[1]: 0.8, "Is 1971 earlier than 1852?": 0.95}
    res, model = run(build_think_then_act, agent(a, betas, answers, final="no"), index_dir,
                     "Could Ada Lovelace have sent an email?")
    assert res.assessment == "AMBIGUOUS" and res.answer == "no"
    q1, q2, q3 = res.queries
    assert q3.depends_on == [1, 2] and q3.resolved == "Is 1971 earlier than 1852?"
    assert [q.retrieve for q in res.queries] == [True, False, False] and res.retrieval_ratio == pytest.approx(1 / 3, abs=1e-4)
    assert q1.evidence[0]["title"] == "Ada Lovelace" and q1.answer == "1852"
    # q3 was asked after q1 and q2 were answered (its prompt shows their answers)
    q3_prompt = next(m[-1].content for m in model.prompts if "Question: Is 1971 earlier than 1852?" in m[-1].content
                     and "Answer from what you know" in m[-1].content)
    assert "When did Ada Lovelace die? -> 1852" in q3_prompt
    assert res.usage.llm_calls == 1 + 3 * 2 + 1


@pytest.mark.parametrize("beta,retrieves", [(0.0, False), (1.0, True)])
def test_threshold_zero_never_one_always_without_asking(index_dir, beta, retrieves):
    q = "What is the capital of Australia?"
    res, model = run(build_think_then_act, agent(QueryAssessment(category="CLEAR AND COMPLETE"), {}, {q: "Canberra"}),
                     index_dir, q, beta_threshold=beta)
    assert res.queries[0].retrieve is retrieves and res.queries[0].beta is None
    assert "fixes the decision" in res.queries[0].decision
    assert res.usage.llm_calls == 2  # no confidence question was asked
    assert needs_retrieval(0.99, 1.0) and not needs_retrieval(0.0, 0.0) and needs_retrieval(0.49, 0.5) and not needs_retrieval(0.5, 0.5)


def test_direct_decision_mode(index_dir):
    q = "What is Earth's highest mountain?"
    decision = DirectDecision(decision="RETRIEVAL", reason="check")
    res, _ = run(build_think_then_act, agent(QueryAssessment(category="CLEAR AND COMPLETE"), {q: decision}, {q: "Mount Everest"}),
                 index_dir, q, gate_mode="direct")
    assert res.queries[0].retrieve and res.queries[0].decision.startswith("RETRIEVAL: check")
    assert res.queries[0].evidence[0]["title"] == "Mount Everest"


def test_retrieval_failure_is_recorded_and_answered_without(tmp_path):
    q = "What is the capital of Australia?"
    res, _ = run(build_think_then_act, agent(QueryAssessment(category="CLEAR AND COMPLETE"), {q: 0.1}, {q: "Canberra"}),
                 str(tmp_path / "no-index"), q)
    assert res.queries[0].retrieve and res.queries[0].evidence == [] and res.queries[0].retrieval_error
    assert res.answer == "Canberra"


def test_standard_and_cot_baselines(index_dir):
    q = "What is the capital of Australia?"
    res, model = run(build_standard, lambda m, s: ShortAnswer(answer="Canberra"), index_dir, q)
    assert res.answer == "Canberra" and res.retrieval_ratio == 0.0 and res.usage.llm_calls == 1
    res, model = run(build_cot, lambda m, s: ChainOfThought(reasoning="Australia's capital is Canberra.", answer="Canberra"),
                     index_dir, q)
    assert res.reasoning.startswith("Australia") and "step by step" in model.prompts[0][-1].content
    for build in (build_standard, build_cot):  # the examples first, the question after the last of them
        _, model = run(build, lambda m, s: ChainOfThought(reasoning="r", answer="Paris"), index_dir, "Where is the Louvre?")
        text = model.prompts[0][-1].content
        assert text.index("Question: Where is the Louvre?") > text.rindex("Question: What is the capital of Australia?")


@pytest.mark.parametrize("builder, reply", [
    (build_standard, "Canberra"), (build_cot, "Australia's capital was chosen in 1908.\nSo the answer is Canberra."),
    (build_retrieve_then_read, "Answer: Canberra.")])
def test_text_mode_answers_from_a_plain_text_reply(index_dir, builder, reply):
    """A small local model in ``text`` mode replies in prose, not JSON: the answer steps still answer."""
    res, model = run(builder, lambda m, s: reply, index_dir, "What is the capital of Australia?", structured_output="text")
    assert res.answer == "Canberra" and res.stop_reason == "answered" and not res.error and res.usage.llm_calls == 1


def test_retrieve_then_read_always_retrieves(index_dir):
    q = "Who directed Blade Runner?"
    res, model = run(build_retrieve_then_read, lambda m, s: ShortAnswer(answer="Ridley Scott"), index_dir, q)
    assert res.retrieval_ratio == 1.0 and res.queries[0].evidence[0]["title"] == "Blade Runner"
    assert res.usage.llm_calls == 1 and "directed by Ridley Scott" in model.prompts[0][-1].content


def test_flare_stated_confidence_retrieves_when_low(index_dir):
    q = "When did Ada Lovelace die?"

    def respond(messages, schema):
        if schema is None:
            return "1850"  # the draft (plain generation, no log-probabilities from this model)
        if schema == "Confidence":
            return Confidence(probability=0.2, reason="unsure")
        return ShortAnswer(answer="27 November 1852")

    res, _ = run(build_flare, respond, index_dir, q)
    assert res.confidence_source == "stated" and res.queries[0].retrieve and res.queries[0].beta == 0.2
    assert res.answer == "27 November 1852" and res.queries[0].evidence[0]["title"] == "Ada Lovelace"


def test_flare_uses_token_logprobs_when_the_endpoint_returns_them(index_dir):
    draft = AIMessage(content="Canberra", response_metadata={"logprobs": {"content": [
        {"token": "Can", "logprob": -0.01}, {"token": "berra", "logprob": -0.05}]}})
    res, model = run(build_flare, lambda m, s: draft, index_dir, "What is the capital of Australia?")
    assert res.confidence_source == "logprobs" and not res.queries[0].retrieve
    assert res.answer == "Canberra" and res.usage.llm_calls == 1 and res.queries[0].beta > 0.9


class _SearchLog:
    """A retriever that records what it was asked and fails when told to."""

    name = "local"

    def __init__(self, inner=None, fail: bool = False):
        self.inner, self.fail, self.queries = inner, fail, []

    def search(self, query, k=5):
        self.queries.append(query)
        if self.fail:
            raise ConnectionError("index server down")
        return self.inner.search(query, k)


def _run_with(builder, responder, retriever, question, **inputs):
    model = ScriptedChatModel(responder=responder)
    ctx = ThinkThenActContext(model="-", chat_model=model, retriever_object=retriever, beta_threshold=1.0)
    out = builder().compile().invoke({"question": question, **inputs}, context=ctx)
    return TextQAResult.from_state(out), model


@pytest.mark.parametrize("builder", [build_think_then_act, build_retrieve_then_read, build_flare])
def test_instructions_reach_the_answer_prompt_but_never_the_search(builder, index_dir):
    from ragplan.tools.textindex import TextIndex

    claim = "Canberra is the capital city of Australia."
    instructions = "Answer SUPPORTS, REFUTES or NOT ENOUGH INFO."
    log = _SearchLog(TextIndex.open(index_dir))

    def respond(messages, schema):
        if schema == "QueryAssessment":
            return QueryAssessment(category="CLEAR AND COMPLETE")
        if schema == "Confidence":
            return Confidence(probability=0.0, reason="draft not trusted")
        return ShortAnswer(answer="SUPPORTS")

    res, model = _run_with(builder, respond, log, claim, instructions=instructions)
    assert res.answer == "SUPPORTS"
    assert log.queries and all("SUPPORTS" not in q and "Answer" not in q for q in log.queries)
    assert log.queries[0].startswith(claim)
    assert f"Instructions: {instructions}" in model.prompts[-1][-1].content
    # without instructions the prompt has no such line
    res, model = _run_with(builder, respond, _SearchLog(TextIndex.open(index_dir)), claim)
    assert "Instructions:" not in model.prompts[-1][-1].content


def test_sub_queries_get_no_label_instructions_but_the_composition_does(index_dir):
    from ragplan.tools.textindex import TextIndex

    claim = "Ada Lovelace could have sent an email."
    subs = ["When did Ada Lovelace die?", "When was email invented?"]

    def respond(messages, schema):
        if schema == "QueryAssessment":
            return QueryAssessment(category="AMBIGUOUS", sub_queries=subs)
        return ShortAnswer(answer="REFUTES" if "Using the sub-answers" in messages[-1].content else "1852")

    res, model = _run_with(build_think_then_act, respond, _SearchLog(TextIndex.open(index_dir)), claim,
                           instructions="Answer SUPPORTS, REFUTES or NOT ENOUGH INFO.")
    sub_prompts = [p[-1].content for p in model.prompts if "Using the sub-answers" not in p[-1].content
                   and "Overall question" in p[-1].content]
    assert len(sub_prompts) == 2 and all("Instructions:" not in p for p in sub_prompts)
    assert "Instructions: Answer SUPPORTS" in model.prompts[-1][-1].content and res.answer == "REFUTES"


def test_failed_retrievals_are_not_retrievals(index_dir):
    q = "What is the capital of Australia?"

    def respond(messages, schema):
        if schema == "QueryAssessment":
            return QueryAssessment(category="CLEAR AND COMPLETE")
        return ShortAnswer(answer="Canberra")

    res, _ = _run_with(build_think_then_act, respond, _SearchLog(fail=True), q)
    assert res.retrievals() == 1 and res.retrieval_errors() == 1
    assert res.retrieval_count == 1 and res.retrieval_ratio == 0.0       # ran once, retrieved nothing
    assert "ConnectionError" in res.queries[0].retrieval_error
    assert "(0 retrieved, 1 failed)" in res.summary_lines()[-1]


def test_references_resolve_once_and_by_whole_number():
    """#k is replaced by sub-query k's answer in one pass: #12 is not read as #1, an unknown reference stays, and an
    answer that itself contains "#2" is not resolved again."""
    from ragplan.nodes.think_then_act.answer_subquery import resolve_text
    from ragplan.state.think_then_act import SubQuery

    prior = [SubQuery(index=1, text="a", answer="Track #2"), SubQuery(index=2, text="b", answer="1971")]
    q = SubQuery(index=3, text="Did #1 chart before #2 and #12?")
    assert resolve_text(q, prior) == "Did Track #2 chart before 1971 and #12?"
