"""Issue 8 regressions: REAPER-family runs graded on what they did, and the plan kept typed between nodes.

* an invalid plan (still invalid after the repair round) and a failed run are wrong, never "no retrieval";
* agent_planner is graded on its executed tool calls, with the same metrics and Table 1;
* the first planner call is graded apart from the plan after the repair round;
* the plan travels typed (``plan: list[PlanStep]``) from validate_plan to execute_plan, the result and the trace.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ragplan.methods.reaper.benchmark import ReaperBenchmark
from ragplan.eval.runfolder import RunSettings
from ragplan.eval.runner import evaluate
from ragplan.graphs.reaper import FAMILY, build_agent_planner, build_reaper
from ragplan.nodes.reaper.agent_step import AgentAction
from ragplan.nodes.reaper.respond import Response
from ragplan.methods.reaper.plan import PlanCall, PlanStep
from ragplan.methods.reaper.validate import bind_args
from ragplan.methods.reaper.plan import format_plan, parse_plan
from ragplan.state.context import ReaperContext
from ragplan.state.reaper import ReaperResult
from ragplan.tools.retail import build_retail_registry
from tests.scripted import ScriptedChatModel

INVENTED = 'Step 1: Track it - #E1 = order_tracker("where is it")'
CATEGORIES = ("no_retrieval", "customer_support", "prod_search", "shipment_status", "date_shipment", "review_summary")


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> Path:
    from ragplan.tools.retail import generate_shop

    return generate_shop(tmp_path_factory.mktemp("shop") / "shop", seed=0, n_products=60, n_orders=30)


@pytest.fixture(scope="module")
def bench(shop) -> ReaperBenchmark:
    return ReaperBenchmark(str(shop), split="all")


def _goldfile(shop: Path, tmp: Path, per_category: int = 3, categories=CATEGORIES) -> tuple[Path, list[Any]]:
    """A gold-set file with a few questions of each category (no-retrieval ones included)."""
    items = ReaperBenchmark(str(shop), split="all").items()
    picked = [i for c in categories for i in [i for i in items if i.meta["category"] == c][:per_category]]
    rows = [json.loads(x) for x in (shop / "goldset.jsonl").read_text().splitlines()]
    keep = {i.id for i in picked}
    path = tmp / "gold.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["id"] in keep))
    return path, picked


def _eval(method: str, shop: Path, gold: Path, run: Path, model: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    settings = RunSettings(method=method, benchmark="reaper-retail", data=str(gold), context={"shop_dir": str(shop)},
                           benchmark_options={"split": "all"}, concurrency=2)
    summary = asyncio.run(evaluate(settings, run, chat_model=model))
    return summary, [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]


def _ctx(shop, planner, responder=None, **kw) -> ReaperContext:
    responder = responder or ScriptedChatModel(responder=lambda m, s: Response(answer="ok"))
    return ReaperContext(model="-", planner_chat_model=planner, responder_chat_model=responder, shop_dir=str(shop), **kw)


# ---------------------------------------------------------------------------------------------- 1. invalid and failed

def test_invented_tool_planner_scores_zero_even_on_no_retrieval_questions(shop, tmp_path):
    """Before issue 8 the still-invalid plan was graded as a valid zero-step plan: 28 of 360 gold questions (every
    no-retrieval one) were 'correct' with plan validity 1.0. An invalid plan is invalid and wrong."""
    gold, items = _goldfile(shop, tmp_path)

    def reply(messages, schema):
        return Response(answer="I could not look that up.") if schema == "Response" else INVENTED

    summary, recs = _eval("reaper", shop, gold, tmp_path / "run", ScriptedChatModel(responder=reply))
    assert len(recs) == len(items) and any(r["category"] == "no_retrieval" for r in recs)
    assert sum(bool(r["correct"]) for r in recs) == 0
    assert all(r["plan_status"] == "invalid" and r["plan_valid"] == 0.0 and r["tool_accuracy"] == 0.0 for r in recs)
    assert all(r["argument_accuracy"] in (0.0, None) for r in recs)
    assert all(r["pred_classes"] == ["no_valid_plan"] and r["chosen"] == "invalid" for r in recs)
    assert all(r["stop_reason"] == "invalid_plan" and len(r["plan_calls"]) == 2 for r in recs)  # one repair round
    o = summary["overall"]
    assert o["correct"] == 0 and o["tool_accuracy"] == 0.0 and o["plan_valid"] == 0.0
    assert o["argument_accuracy"] == 0.0 and o["tool_accuracy_first_call"] == 0.0
    assert summary["groups"]["category"]["no_retrieval"]["correct"] == 0
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "| no_retrieval | 0.000 | 0.000 | 0.000 | 3 | 0 |" in md and "| no_valid_plan | 0.000 | 0.000 | 0.000 | 0 | 18 |" in md


def test_failed_runs_are_wrong(shop, bench, tmp_path):
    nr = next(i for i in bench.items() if i.meta["category"] == "no_retrieval")
    # the planner's endpoint fails: the graph ends with llm_error and no plan
    planner = ScriptedChatModel(replies=[RuntimeError("503 Service Unavailable")])
    out = build_reaper().compile().invoke({"question": nr.question, "page_context": nr.inputs["page_context"]},
                                          context=_ctx(shop, planner))
    assert out["stop_reason"] == "llm_error" and not out.get("plan")
    g = bench.grade(nr, out)
    assert g["correct"] is False and g["plan_status"] == "failed" and g["tool_accuracy"] == 0.0
    assert g["plan_valid"] == 0.0 and not g["correct_first_call"]
    # the responder fails after a right plan: still a failed run
    planner = ScriptedChatModel(replies=["No retrieval needed."])
    responder = ScriptedChatModel(replies=[RuntimeError("500 boom")])
    out = build_reaper().compile().invoke({"question": nr.question, "page_context": nr.inputs["page_context"]},
                                          context=_ctx(shop, planner, responder))
    assert out["stop_reason"] == "llm_error" and bench.grade(nr, out)["correct"] is False
    # what the runner records for a crash or a timeout, and an empty output
    for o in ({"answer": "", "error": "KeyError: 'x'", "stop_reason": "crash"},
              {"answer": "", "error": "ran past item_timeout_s=1", "stop_reason": "item_timeout"}, {}, None):
        g = bench.grade(nr, o)
        assert g["correct"] is False and g["plan_status"] == "failed" and g["pred_classes"] == ["no_valid_plan"], o
    # a run whose planner crashes inside the runner: recorded and wrong
    gold, _ = _goldfile(shop, tmp_path, per_category=2, categories=("no_retrieval",))

    def crash(messages, schema):
        raise ValueError("planner exploded")

    summary, recs = _eval("reaper", shop, gold, tmp_path / "run", ScriptedChatModel(responder=crash))
    assert recs and all(r["error"] and r["correct"] is False and r["plan_status"] == "failed" for r in recs)
    assert summary["overall"]["correct"] == 0


# ---------------------------------------------------------------------------------------------- 2. agent_planner

def _gold_call(step: PlanStep, outputs: dict[int, Any]) -> AgentAction:
    """The agent's call for a gold step: its arguments by name, a reference replaced by that step's output."""
    bound, _, _ = bind_args(step, build_retail_registry())
    args = {k: outputs[a.refs[0]] if a.kind == "ref" else a.value for k, a in bound.items()}
    return AgentAction(thought=f"call {step.tool}", tool=step.tool, args=args)


def _agent_replies(question_to_gold: dict[str, Any]):
    """A scripted agent that makes the gold plan's calls one by one (reading earlier outputs from the prompt)."""

    def reply(messages, schema):
        if schema == "Response":
            return Response(answer="Here you go.")
        text = messages[-1].content
        question = text.split("Customer question: ", 1)[1].split("\n", 1)[0]
        steps = question_to_gold[question].steps
        done = text.count("\n#E")
        if done >= len(steps):
            return AgentAction(thought="enough", done=True)
        outputs = {}
        for k, block in enumerate(text.split("\n#E")[1:], 1):
            outputs[k] = json.loads(block.split("  -> ", 1)[1].split("\n")[0])
        return _gold_call(steps[done], outputs)

    return reply


def test_agent_planner_is_graded_on_its_tool_calls(shop, bench):
    it = next(i for i in bench.items() if i.meta["category"] == "date_shipment" and "keywords=" in i.gold)
    model = ScriptedChatModel(responder=_agent_replies({it.question: parse_plan(it.gold).plan}))
    out = build_agent_planner().compile().invoke({"question": it.question, "page_context": it.inputs["page_context"]},
                                                 context=_ctx(shop, model, model))
    res = ReaperResult.from_state(out)
    assert [s.tool for s in res.plan] == [e["tool"] for e in res.evidence] == ["date_math", "shipment_status"]
    assert all(isinstance(s, PlanStep) for s in out["plan"])
    # the agent passed date_math's output (a resolved date range) as a literal: it matches the gold #E1 by its dates
    assert res.plan[1].kwargs["date_range"].value == res.evidence[0]["output"]
    g = bench.grade(it, out)
    assert g["correct"] and g["tool_accuracy"] == 1.0 and g["argument_accuracy"] == 1.0 and g["plan_valid"] == 1.0
    assert g["chosen"] == "date_math > shipment_status" and g["correct_first_call"]  # no repair round: first = final
    # an agent that calls the wrong order keyword is wrong on arguments
    wrong = parse_plan(it.gold.replace('keywords="', 'keywords="blue ')).plan
    model = ScriptedChatModel(responder=_agent_replies({it.question: wrong}))
    out = build_agent_planner().compile().invoke({"question": it.question, "page_context": it.inputs["page_context"]},
                                                 context=_ctx(shop, model, model))
    g = bench.grade(it, out)
    assert g["tool_accuracy"] == 1.0 and g["argument_accuracy"] == 0.0 and not g["correct"]
    # an agent that invents a tool made an invalid plan
    model = ScriptedChatModel(responder=lambda m, s: Response(answer="x") if s == "Response" else (
        AgentAction(thought="t", tool="order_tracker", args={"q": "pan"}) if "Evidence: none" in m[-1].content
        else AgentAction(thought="enough", done=True)))
    out = build_agent_planner().compile().invoke({"question": it.question, "page_context": it.inputs["page_context"]},
                                                 context=_ctx(shop, model, model))
    g = bench.grade(it, out)
    assert g["plan_status"] == "invalid" and not g["correct"] and "order_tracker" in " ".join(g["pred_errors"])


def test_eval_agent_planner_reports_table_one(shop, tmp_path):
    """Before issue 8 every agent run was graded as an empty plan: only no-retrieval questions could be right."""
    gold, items = _goldfile(shop, tmp_path, per_category=2)
    model = ScriptedChatModel(responder=_agent_replies({i.question: parse_plan(i.gold).plan for i in items}))
    summary, recs = _eval("agent_planner", shop, gold, tmp_path / "run", model)
    assert len(recs) == len(items) and all(r["error"] == "" for r in recs)
    assert all(r["correct"] for r in recs), [(r["id"], r["chosen"], r["pred_errors"]) for r in recs if not r["correct"]]
    assert summary["overall"]["tool_accuracy"] == 1.0 and summary["overall"]["argument_accuracy"] == 1.0
    retrieving = [r for r in recs if r["category"] != "no_retrieval"]
    assert retrieving and all(r["retrievals"] == len(r["gold_tools"]) >= 1 for r in retrieving)
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "| shipment_status | 1.000 | 1.000 | 1.000 |" in md and "| prod_search | 1.000 | 1.000 | 1.000 |" in md


# ---------------------------------------------------------------------------------------------- 3. first call

def test_first_call_and_after_repair_are_graded_apart(shop, bench, tmp_path):
    it = next(i for i in bench.items() if i.meta["category"] == "shipment_status")
    planner = ScriptedChatModel(replies=[INVENTED, it.gold])
    out = build_reaper().compile().invoke({"question": it.question, "page_context": it.inputs["page_context"]},
                                          context=_ctx(shop, planner))
    calls = [PlanCall.model_validate(c) for c in out["plan_calls"]]
    assert [c.attempt for c in calls] == [1, 2] and [c.valid for c in calls] == [False, True]
    assert calls[0].raw == INVENTED and calls[0].steps[0].tool == "order_tracker" and calls[0].errors[0].kind == "unknown_tool"
    assert calls[0].latency_s > 0 and format_plan(calls[1].plan) == it.gold
    g = bench.grade(it, out)
    assert g["correct"] and g["tool_accuracy"] == 1.0 and g["plan_valid"] == 1.0
    assert not g["correct_first_call"] and g["tool_accuracy_first_call"] == 0.0 and g["plan_valid_first_call"] == 0.0
    assert g["argument_accuracy_first_call"] == 0.0 and g["first_call"]["status"] == "invalid"
    # through the runner: summary metrics and the report carry both
    gold, items = _goldfile(shop, tmp_path, per_category=2)
    golds = {i.question: i.gold or "No retrieval needed." for i in items}

    def reply(messages, schema):
        if schema == "Response":
            return Response(answer="ok")
        question = next(q for q in golds if json.dumps(q, ensure_ascii=False) in messages[1].content.split("### Input")[-1])
        return golds[question] if isinstance(messages[-1], type(messages[1])) and "cannot be run" in messages[-1].content \
            else INVENTED

    summary, recs = _eval("reaper", shop, gold, tmp_path / "run", ScriptedChatModel(responder=reply))
    o = summary["overall"]
    assert o["correct"] == len(items) and o["tool_accuracy"] == 1.0 and o["plan_valid"] == 1.0
    assert o["tool_accuracy_first_call"] == 0.0 and o["plan_valid_first_call"] == 0.0
    assert o["argument_accuracy_first_call"] == 0.0 and o["argument_accuracy"] == 1.0
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "tool_accuracy_first_call" in md and "| metric | first planner call | after the repair round |" in md
    assert "| tool accuracy | 0.000 | 1.000 |" in md and "| plan validity | 0.000 | 1.000 |" in md
    assert "first planner call (the paper's one-call setting)" in md and "final plan, after the repair round" in md


# ---------------------------------------------------------------------------------------------- 5. typed plan

def test_plan_stays_typed_from_validation_to_execution(shop, monkeypatch):
    plan = ('Step 1: Fetch the date range - #E1 = date_math("tomorrow")\n'
            'Step 2: Fetch shipment status - #E2 = shipment_status(date_range=#E1, keywords="sheet pan")')
    import ragplan.methods.reaper.plan as plan_module

    parses = []
    real = plan_module.parse_plan
    monkeypatch.setattr("ragplan.nodes.reaper.validate_plan.parse_plan", lambda t: parses.append(t) or real(t))
    out = build_reaper().compile().invoke({"question": "When does my sheet pan arrive tomorrow?"},
                                          context=_ctx(shop, ScriptedChatModel(replies=[plan])))
    assert parses == [plan]  # parsed once, by validate_plan; execute_plan runs the typed steps
    assert all(isinstance(s, PlanStep) for s in out["plan"]) and [s.tool for s in out["plan"]] == ["date_math", "shipment_status"]
    assert out["plan_text"] == format_plan(parse_plan(plan).plan)
    assert [e["tool"] for e in out["evidence"]] == ["date_math", "shipment_status"]
    # dicts from a LangGraph server or a run record load back typed, and grade the same
    dumped = json.loads(json.dumps(ReaperResult.from_state(out).record()))
    res = ReaperResult.from_state({**dumped, "stop_reason": out["stop_reason"]})
    assert res.plan == list(out["plan"]) and isinstance(res.plan_calls[0], PlanCall) and res.plan_calls[0].valid
    assert res.retrievals() == 2 and "Plan steps: 2" in res.summary_lines()[-1]


def test_execute_plan_runs_typed_steps_without_plan_text(shop):
    from langgraph.runtime import Runtime

    from ragplan.nodes.reaper.execute_plan import execute_plan

    steps = parse_plan('#E1 = date_math("tomorrow")').plan.steps
    rt = Runtime(context=_ctx(shop, ScriptedChatModel(replies=[])))
    for plan in (steps, [s.model_dump(mode="json") for s in steps]):  # typed, or dumps from a server
        out = execute_plan({"plan": plan}, rt)
        assert [e["tool"] for e in out["evidence"]] == ["date_math"] and out["evidence"][0]["status"] == "ok"
    assert execute_plan({"plan_text": 'Step 1: #E1 = date_math("tomorrow")'}, rt) == {"evidence": []}
    bad = execute_plan({"plan": [{"what": 1}]}, rt)
    assert bad["evidence"] == [] and "not a list of plan steps" in bad["error"]


def test_trace_prints_each_planner_calls_plan(shop):
    planner = ScriptedChatModel(replies=[INVENTED, 'Step 1: Ask the help centre - #E1 = customer_support("returns")'])
    graph = build_reaper().compile()
    lines: list[str] = []
    for chunk in graph.stream({"question": "how do I return it?"}, context=_ctx(shop, planner), stream_mode="updates"):
        for node, update in chunk.items():
            FAMILY.trace(node, update or {}, lines.append)
    text = "\n".join(lines)
    assert "Plan 1 invalid:" in text and "order_tracker" in text
    assert "Plan 2 valid, 1 step." in text and 'customer_support("returns")' in text
    assert "[#E1] customer_support(" in text


def test_agent_output_without_a_plan_is_graded_on_its_evidence(shop, bench):
    """An agent record from before the agent kept its plan: the evidence (tool calls in call order) is the plan."""
    it = next(i for i in bench.items() if i.meta["category"] == "date_shipment" and "keywords=" in i.gold)
    model = ScriptedChatModel(responder=_agent_replies({it.question: parse_plan(it.gold).plan}))
    out = build_agent_planner().compile().invoke({"question": it.question, "page_context": it.inputs["page_context"]},
                                                 context=_ctx(shop, model, model))
    old = {k: v for k, v in json.loads(json.dumps(ReaperResult.from_state(out).record())).items()
           if k not in ("plan", "plan_text")}
    g = bench.grade(it, {**old, "stop_reason": out["stop_reason"], "answer": out["answer"]})
    assert g["correct"] and g["chosen"] == "date_math > shipment_status" and g["argument_accuracy"] == 1.0


def test_agent_that_retrieves_nothing_made_an_empty_plan(shop, bench):
    nr = next(i for i in bench.items() if i.meta["category"] == "no_retrieval")
    model = ScriptedChatModel(responder=lambda m, s: Response(answer="Hi!") if s == "Response"
                              else AgentAction(thought="small talk", done=True))
    out = build_agent_planner().compile().invoke({"question": nr.question}, context=_ctx(shop, model, model))
    assert out["plan"] == [] and out["plan_text"] == "" and not out.get("evidence")
    g = bench.grade(nr, out)
    assert g["correct"] and g["plan_status"] == "valid" and g["pred_classes"] == ["no_retrieval"]
