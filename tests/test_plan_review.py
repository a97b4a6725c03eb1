"""Plan review by a person (issue 12 §1): every plan-writing graph pauses, shows its plan, and resumes with
approve, an edited plan validated like the LLM's, or reject.

Graphs run through :func:`ragplan.api.ask` with a ``review`` callback (checkpoints in memory) over each
family's test data (tests/family_data) and the local OpenAI-compatible stub, so the real client, the real
stores and the real interrupt/resume path are used. The callback records each payload and how many LLM
requests had been made when the graph paused, so "no LLM call after a rejection" is checked on the wire.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from ragplan.api import ask
from ragplan.nodes.common.review_plan import parse_decision
from ragplan.nodes.planrag.answer import FinalAnswer
from ragplan.nodes.planrag.plan import Plan
from ragplan.nodes.planrag.replan import ReplanDecision
from ragplan.nodes.planrag.retrieve import RetrievalAction
from ragplan.nodes.planrag.review import EDITED_REASON
from ragplan.registry import family_of
from ragplan.state.review import PLAN_REJECTED, PlanReview
from tests.auto_reply import auto_responder
from tests.data import QUESTION
from tests.family_data import FamilyData
from tests.openai_server import OpenAIStub
from tests.scripted import ScriptedChatModel

MODEL = "openai:stub-model"
REVIEWED = ["planrag", "planrag_no_replan", "reaper", "furepa", "instructrag", "instructrag_threshold", "instructrag_no_ml",
            "instructrag_rap"]
NO_PLAN = ["iter_rag", "single_rag", "agent_planner", "classifier_planner", "ircot", "react"]


@pytest.fixture(scope="module")
def data(every_family_data) -> dict[str, FamilyData]:
    """Test data of the families that write a plan (tests/family_data/, built once per test run)."""
    return {f: every_family_data[f] for f in ("planrag", "reaper", "furepa", "instructrag")}


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


_SERVER: list[OpenAIStub] = []


@pytest.fixture(scope="module", autouse=True)
def _one_server() -> Iterator[None]:
    """One stub server for the module: stopping a server waits for its serve loop's half-second poll, so a server
    per run sat idle for seconds over the module. Each run gets it through :func:`stub_for`."""
    with OpenAIStub() as server:
        _SERVER.append(server)
        try:
            yield
        finally:
            _SERVER.clear()


@contextmanager
def stub_for(responder: Callable[[Any], Any]) -> Iterator[OpenAIStub]:
    """The module's stub server answering with ``responder`` and an empty request log, as a new server would."""
    stub = _SERVER[0]
    stub.responder, stub.requests = responder, []
    try:
        yield stub
    finally:
        stub.responder, stub.requests = None, []


def run(method: str, d: FamilyData, decide: Callable[[dict[str, Any], int], Any] | None, **settings: Any):
    """``ask`` with review on; returns the result, the payloads seen (with the requests made by then), the requests."""
    seen: list[tuple[dict[str, Any], int]] = []
    with stub_for(auto_responder(d.overrides, d.text)) as stub:
        def review(payload: dict[str, Any]) -> Any:
            seen.append((payload, len(stub.requests)))
            assert decide is not None, f"{method} paused for review: {payload}"
            return decide(payload, len(seen))

        res = ask(d.question, method, model=MODEL, base_url=stub.base_url, review=review,
                  **{"review_plan": True, **settings}, **d.api(method))
        return res, seen, list(stub.requests)


def _data(data: dict[str, FamilyData], method: str) -> FamilyData:
    return data[family_of(method).name]


@pytest.mark.parametrize("method", REVIEWED)
def test_each_plan_pauses_and_approve_runs_it_as_without_review(method, data):
    d = _data(data, method)
    res, seen, reqs = run(method, d, lambda p, n: {"action": "approve"})
    assert res.answer and not res.error, (res.stop_reason, res.error)
    [(payload, _)] = seen
    assert payload["method"] == method and payload["kind"] == "plan" and payload["question"] == d.question
    assert payload["plan"].strip() and isinstance(payload["steps"], list) and payload["format"]
    assert '"approve"' in payload["accepts"] and payload["round"] == 1 and payload["error"] == ""
    assert [r.action for r in res.plan_reviews] == ["approve"] and res.plan_reviews[0].plan == payload["plan"]
    with stub_for(auto_responder(d.overrides, d.text)) as stub:  # the same run without review
        plain = ask(d.question, method, model=MODEL, base_url=stub.base_url, **d.api(method))
        assert [r.forced_tool for r in stub.requests] == [r.forced_tool for r in reqs]
    assert plain.answer == res.answer and plain.plan_reviews == []


@pytest.mark.parametrize("method", REVIEWED)
def test_reject_ends_the_run_without_retrieval_or_answer(method, data):
    res, seen, reqs = run(method, _data(data, method), lambda p, n: {"action": "reject", "reason": "too costly"})
    [(_, made)] = seen
    assert len(reqs) == made, "no LLM call after the plan was rejected"
    assert res.stop_reason == PLAN_REJECTED and res.answer == "" and not res.error
    assert res.retrievals() == 0
    assert [(r.action, r.reason) for r in res.plan_reviews] == [("reject", "too costly")]


@pytest.mark.parametrize("method", NO_PLAN)
def test_graphs_without_a_plan_never_pause(method, data):
    res, seen, _ = run(method, _data(data, method), None)
    assert seen == [] and res.answer and res.plan_reviews == []


def test_review_off_passes_straight_through(data):
    res, seen, _ = run("reaper", data["reaper"], None, review_plan=False)
    assert seen == [] and res.answer and res.plan_reviews == []


def test_bare_strings_and_bounded_unreadable_answers(data):
    d = data["planrag"]
    res, seen, _ = run("planrag", d, lambda p, n: "approve")
    assert res.answer and [r.action for r in res.plan_reviews] == ["approve"]
    res, seen, reqs = run("planrag", d, lambda p, n: "maybe later")
    assert [p["round"] for p, _ in seen] == [1, 2, 3] and "unreadable answer" in seen[1][0]["error"]
    assert res.stop_reason == PLAN_REJECTED and "no acceptable answer in 3 rounds" in res.error
    assert [r.action for r in res.plan_reviews] == ["invalid"] * 3 and len(reqs) == seen[0][1]
    res, seen, _ = run("planrag", d, lambda p, n: {"action": "approve"} if n == 2 else {"action": "edit"}, max_review_rounds=2)
    assert res.answer and [r.action for r in res.plan_reviews] == ["invalid", "approve"]
    assert "an edit needs the new plan" in res.plan_reviews[0].error


def test_planrag_edit_is_validated_then_followed(data):
    d = data["planrag"]
    answers = [{"action": "edit", "plan": "-\n1.\n"}, {"action": "edit", "plan": "1. Count the trade nodes twice\nStep 2: Sum them"}]
    res, seen, _ = run("planrag", d, lambda p, n: answers[n - 1])
    assert "at least one step" in seen[1][0]["error"] and seen[1][0]["round"] == 2
    assert res.plan == ["Count the trade nodes twice", "Sum them"] and res.answer
    assert [v.reason for v in res.plan_history][-1] == EDITED_REASON and res.plan_history[0].steps == ["Count the trade nodes"]
    assert res.steps[0].plan_step_text == "Count the trade nodes twice"
    assert [r.action for r in res.plan_reviews] == ["invalid", "edit"]
    assert res.plan_reviews[1].edited == "1. Count the trade nodes twice\n2. Sum them"


def test_planrag_replans_are_reviewed_with_review_replans(trade_cql: Path):
    q = "MATCH (t:Trade_node) RETURN count(t) AS n"

    def model() -> ScriptedChatModel:
        return ScriptedChatModel(replies=[
            Plan(steps=["a", "b"]), RetrievalAction(thought="t", action="graph_db", action_input=q),
            ReplanDecision(replan=True, reason="b is wrong", new_steps=["c"]),
            RetrievalAction(thought="t", action="graph_db", action_input=q), ReplanDecision(replan=False, reason="ok"),
            RetrievalAction(thought="t", action="graph_db", action_input=q), ReplanDecision(replan=False, reason="ok"),
            FinalAnswer(answer="lubeck")])

    seen: list[dict[str, Any]] = []

    def review(p: dict[str, Any]) -> Any:
        seen.append(p)
        return "approve" if p["kind"] == "plan" else {"action": "edit", "plan": "d\ne"}

    m = model()
    res = ask(QUESTION, "planrag", model=m, store=str(trade_cql), review_plan=True, review_replans=True, review=review)
    assert [p["kind"] for p in seen] == ["plan", "replan"] and seen[1]["steps"] == ["c"]
    assert "Steps done:" in seen[1]["plan"] and "1. a" in seen[1]["plan"] and "2. c" in seen[1]["plan"]
    assert res.plan == ["a", "d", "e"] and res.answer == "lubeck" and m.remaining == 0
    assert [s.plan_step_text for s in res.steps] == ["a", "d", "e"]
    assert [(r.kind, r.action) for r in res.plan_reviews] == [("plan", "approve"), ("replan", "edit")]
    assert [v.reason for v in res.plan_history] == ["", "b is wrong", EDITED_REASON]
    # without review_replans only the first plan pauses
    seen.clear()
    m = model()
    m.replies[5:7] = []  # plan a, c: two retrievals
    res = ask(QUESTION, "planrag", model=m, store=str(trade_cql), review_plan=True, review=review)
    assert [p["kind"] for p in seen] == ["plan"] and res.plan == ["a", "c"] and res.answer == "lubeck"


def test_reaper_edit_goes_through_the_parser_and_validator(data):
    d = data["reaper"]
    bad = 'Step 1: Teleport it - #E1 = teleport("blender")'
    good = 'Step 1: Ask the help centre - #E1 = customer_support("can I return a blender after 40 days")'
    res, seen, _ = run("reaper", d, lambda p, n: {"action": "edit", "plan": bad if n == 1 else good})
    assert "teleport" in seen[1][0]["error"] and "does not validate" in seen[1][0]["error"]
    assert seen[0][0]["steps"] == ['Step 1: Ask the help centre - #E1 = customer_support("how do I return an item")']
    assert res.answer and [r.action for r in res.plan_reviews] == ["invalid", "edit"]
    assert res.plan_text == good
    [ev] = res.evidence
    assert ev["tool"] == "customer_support" and ev["args"] == {"question": "can I return a blender after 40 days"}
    assert len(res.plan_calls) == 1 and "how do I return an item" in res.plan_calls[0].raw  # the planner's plan, as graded


def test_furepa_edit_replaces_the_pick(data):
    d = data["furepa"]
    res, seen, reqs = run("furepa", d, lambda p, n: {"action": "edit", "plan": "a\nb" if n == 1 else "Alien 1979 director"})
    first = seen[0][0]
    assert first["kind"] == "plan" and "Candidates" in first["plan"] and len(first["steps"]) == 1
    assert "one search query on one line" in seen[1][0]["error"]
    assert res.executed_queries() == ["Alien 1979 director"] and res.answer == "Ridley Scott"
    it = res.iterations[0]
    assert it.assessor == "edited" and it.query == it.candidates[it.pick].query == "Alien 1979 director"


def test_instructrag_edit_is_read_by_the_path_parser(data):
    d = data["instructrag"]
    path = "Search[The Distant Signal] → Lookup[directed]"
    res, seen, reqs = run("instructrag", d, lambda p, n: {"action": "edit", "plan": "Jump[there]" if n == 1 else path})
    assert "Jump[there]" in seen[1][0]["error"] and "Search[…]" in seen[1][0]["error"]
    assert res.selected_path is not None and res.selected_path.text == path and res.selection == "edited"
    assert res.answer == "Mira Sorensen"
    planning = [r for r in reqs if r.forced_tool == "TAODecision"]
    assert planning and all(path in r.prompt_text for r in planning)


def test_parse_decision_forms():
    assert parse_decision("approve").action == "approve" and parse_decision(" Reject ").action == "reject"
    assert parse_decision({"action": "reject", "reason": "no"}).reason == "no"
    assert parse_decision({"action": "edit", "plan": ["a", "b"]}).plan == "a\nb"
    for bad in ("ok", {"action": "edit", "plan": "  "}, {"action": "skip"}, 3, None, {"plan": "x"}):
        with pytest.raises(ValueError):
            parse_decision(bad)


def test_trace_prints_every_review_answer():
    lines: list[str] = []
    fam = family_of("planrag")
    reviews = [PlanReview(kind="plan", action="invalid", error="bad"), PlanReview(kind="plan", round=2, action="edit", edited="1. x"),
               PlanReview(kind="replan", action="reject", reason="enough").model_dump()]
    fam.trace("review_plan", {"plan_reviews": reviews}, lines.append)
    assert lines == ["Review of the plan: answer refused: bad", "Review of the plan: edited", "  1. x",
                     "Review of the re-plan: rejected: enough"]



def test_furepa_later_picks_are_replans_and_pass_without_review_replans():
    from ragplan.nodes.furepa.review import FuRePAReviewer
    from ragplan.state.furepa import Candidate, FuRePAContext, Iteration

    picked = lambda i, q: Iteration(index=i, candidates=[Candidate(query=q, score=0.5)], pick=0, query=q, assessor="first")  # noqa: E731
    reviewer, ctx = FuRePAReviewer(), FuRePAContext(model="-", review_plan=True)
    first = reviewer.pending({"iterations": [picked(1, "Alien")]}, ctx)
    later = reviewer.pending({"iterations": [picked(1, "Alien"), Iteration(index=2, answer="x"), picked(3, "Ridley Scott")]}, ctx)
    assert first is not None and first.kind == "plan" and first.steps == ["Alien"] and "→ 0.500  Alien" in first.plan
    assert later is not None and later.kind == "replan" and later.steps == ["Ridley Scott"]
    assert reviewer.pending({"iterations": [Iteration(index=1, answer="x")]}, ctx) is None  # answered: nothing to review
    edit = reviewer.apply_edit({"iterations": [picked(1, "Alien")]}, ctx, "  alien   ")  # the same candidate, normalised
    assert edit.update["iterations"][0]["pick"] == 0 and edit.text == "Alien"


@pytest.mark.parametrize("method", ["planrag", "reaper", "furepa", "instructrag"])
def test_a_server_resume_without_the_runs_context_is_refused_and_stays_paused(method, data):
    """As on a LangGraph server (a store beside the checkpointer): a resume whose context lacks the run's settings
    (the SDK call without ``context=``) is refused before any LLM call, the thread stays paused, and the resume with
    the run's context finishes it."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore
    from langgraph.types import Command

    from ragplan.nodes.common.review_plan import PAUSED_CONTEXTS, ResumeContextMismatch

    d, fam = _data(data, method), family_of(method)
    store = InMemoryStore()
    graph = fam.graph(method).build().compile(checkpointer=InMemorySaver(), store=store)
    cfg: Any = {"configurable": {"thread_id": "t1"}, "recursion_limit": 200}
    with stub_for(auto_responder(d.overrides, d.text)) as stub:
        ctx = fam.make_context(method, model=MODEL, base_url=stub.base_url, review_plan=True, **d.api(method))
        graph.invoke(fam.graph_input(d.question, {}), config=cfg, context=ctx)
        assert graph.get_state(cfg).interrupts
        made = len(stub.requests)
        bare = fam.make_context(method, review_plan=True, **d.api(method))  # the server's, without context=
        with pytest.raises(ResumeContextMismatch, match=f"model='{MODEL}'"):
            graph.invoke(Command(resume={"action": "approve"}), config=cfg, context=bare)
        assert graph.get_state(cfg).interrupts and len(stub.requests) == made  # still paused, nothing sent
        out = graph.invoke(Command(resume={"action": "approve"}), config=cfg, context=ctx)
    assert out["answer"] and not out.get("error") and [r.action for r in out["plan_reviews"]] == ["approve"]
    assert store.search(PAUSED_CONTEXTS) == []  # answered: the kept settings are gone
