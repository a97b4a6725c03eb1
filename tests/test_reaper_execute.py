"""REAPER plan execution: dependency order, parallel independent steps, #Ej substitution, failures,
timeouts. Parallelism is shown by overlapping tool-call intervals, never by timing thresholds."""

from __future__ import annotations

import asyncio
import json
import threading
import time

from langchain_core.tools import StructuredTool, tool
from pydantic import BaseModel

from ragplan.methods.reaper.execute import render_for_text, run_plan_async, run_plan, to_jsonable
from ragplan.methods.reaper.plan import parse_plan
from ragplan.methods.reaper.validate import check_plan
from ragplan.tools.registry import ArgSpec, ToolRegistry, ToolSpec

SLEEP = 0.15
CALLS: list[tuple[str, dict]] = []


class Order(BaseModel):
    product_id: str
    title: str
    eta: str


@tool
async def date_math(expr: str, operation: str = "", fmt: str = "") -> dict:
    """Date range for an expression."""
    await asyncio.sleep(SLEEP)
    CALLS.append(("date_math", {"expr": expr}))
    return {"start": "2024-05-02", "end": "2024-05-02", "expr": expr}


@tool
def shipment_status(keywords: str = "", date_range: dict | None = None) -> list[Order]:
    """Orders (a sync tool: runs in a thread)."""
    time.sleep(SLEEP)
    CALLS.append(("shipment_status", {"keywords": keywords, "date_range": date_range}))
    return [Order(product_id="B0SHEETPAN", title=f"{keywords} (range {type(date_range).__name__})", eta="10:00")]


@tool
async def prod_search(query: str) -> list[str]:
    """Search."""
    await asyncio.sleep(SLEEP)
    return [f"result for {query}"]


@tool
async def prod_qna(product_id: str, question: str) -> str:
    """Answer about a product."""
    CALLS.append(("prod_qna", {"product_id": product_id, "question": question}))
    return f"{product_id}: {question}"


def _broken(product_id: str) -> str:
    raise ValueError(f"no reviews for {product_id}")


review_summary = StructuredTool.from_function(_broken, name="review_summary", description="Reviews (fails).")

RELEASE = threading.Event()


def _stuck_sync(question: str) -> str:
    RELEASE.wait(30)
    return "too late"


async def _stuck_async(question: str) -> str:
    await asyncio.sleep(30)
    return "too late"


def registry(*, stuck_sync: bool = False) -> ToolRegistry:
    stuck = (StructuredTool.from_function(_stuck_sync, name="customer_support", description="stuck")
             if stuck_sync else StructuredTool.from_function(coroutine=_stuck_async, name="customer_support",
                                                             description="stuck"))
    reg = ToolRegistry(name="test")
    for t, example in [(date_math, "#E1 = date_math(\"tomorrow\")"), (shipment_status, "#E1 = shipment_status()"),
                       (prod_search, "#E1 = prod_search(\"x\")"), (prod_qna, "#E1 = prod_qna(\"a\", \"b\")"),
                       (review_summary, "#E1 = review_summary(\"a\")"), (stuck, "#E1 = customer_support(\"q\")")]:
        reg.add(t, example)
    return reg


def plan(text: str):
    r = parse_plan(text)
    assert not r.errors, r.errors
    return r.plan


def overlap(a, b) -> bool:
    a_end, b_end = a.started + a.elapsed_ms / 1000, b.started + b.elapsed_ms / 1000
    return a.started < b_end and b.started < a_end


def all_ok(res) -> bool:
    """Every step succeeded."""
    return all(e.status == "ok" for e in res.evidence)


def outputs(res) -> dict:
    """``{"E1": output, …}`` for the steps that succeeded."""
    return {e.evidence_var: e.output for e in res.evidence if e.status == "ok"}


def called(res) -> list[int]:
    """Step numbers in the order their tools were called (by each call's start time)."""
    return [e.index for e in sorted(res.evidence, key=lambda e: e.started) if e.started is not None]


def test_dependency_order_and_parallel_waves():
    CALLS.clear()
    p = plan('Step 1: Fetch the date range - #E1 = date_math("tomorrow")\n'
             'Step 2: Search - #E2 = prod_search("sheet pan")\n'
             'Step 3: Fetch shipment status - #E3 = shipment_status(date_range=#E1, keywords="sheet pan")\n'
             'Step 4: Ask - #E4 = prod_qna("B0X", "Does #E3 arrive with #E2?")')
    res = run_plan(p, registry())
    assert all_ok(res), [e.error for e in res.evidence]
    e1, e2, e3, e4 = res.evidence
    assert res.waves == [[1, 2], [3], [4]]
    assert overlap(e1, e2)  # independent steps ran at the same time
    assert e3.started >= e1.started + e1.elapsed_ms / 1000 - 1e-3  # a dependant starts after its dependency ends
    assert e4.started >= max(e2.started + e2.elapsed_ms / 1000, e3.started + e3.elapsed_ms / 1000) - 1e-3
    order = called(res)
    assert order.index(3) > order.index(1) and order[-1] == 4
    assert [e.status for e in res.evidence] == ["ok"] * 4
    json.dumps(res.model_dump())  # the whole result is JSON-able


def test_sync_tools_run_in_parallel_threads():
    p = plan('#E1 = shipment_status(keywords="a")\n#E2 = shipment_status(keywords="b")\n'
             '#E3 = shipment_status(keywords="c")')
    res = run_plan(p, registry(), max_parallel=3)
    a, b, c = res.evidence
    assert all_ok(res) and overlap(a, b) and overlap(b, c) and overlap(a, c)
    assert res.waves == [[1, 2, 3]]


def test_max_parallel_bounds_concurrency():
    p = plan('#E1 = prod_search("a")\n#E2 = prod_search("b")\n#E3 = prod_search("c")')
    res = run_plan(p, registry(), max_parallel=1)
    a, b, c = res.evidence
    assert all_ok(res) and not overlap(a, b) and not overlap(b, c) and not overlap(a, c)


def test_whole_reference_passes_the_object_and_template_gets_compact_json():
    CALLS.clear()
    p = plan('#E1 = date_math("tomorrow")\n#E2 = shipment_status(keywords="pan", date_range=#E1)\n'
             '#E3 = prod_qna("B0", "Is #E1 ok? and #E2")\n#E4 = shipment_status("mug", "#E1")')
    res = run_plan(p, registry())
    assert all_ok(res), [e.error for e in res.evidence]
    got = dict(CALLS[1][1])
    assert got["date_range"] == {"start": "2024-05-02", "end": "2024-05-02", "expr": "tomorrow"}  # the object
    assert res.evidence[1].output[0]["title"] == "pan (range dict)"
    q = next(c for c in CALLS if c[0] == "prod_qna")[1]["question"]
    assert q.startswith('Is {"start":"2024-05-02","end":"2024-05-02","expr":"tomorrow"} ok? and [{"product_id":')
    assert res.evidence[2].args == {"product_id": "B0", "question": q}
    assert res.evidence[3].output[0]["title"] == "mug (range dict)"  # a quoted "#E1" is a whole reference too
    assert res.evidence[1].output == [{"product_id": "B0SHEETPAN", "title": "pan (range dict)", "eta": "10:00"}]


def test_text_output_is_inserted_as_text():
    CALLS.clear()
    p = plan('#E1 = prod_qna("A", "tread depth?")\n#E2 = prod_qna("B", "Is tread depth #E1 between 0.15 and 0.25?")')
    res = run_plan(p, registry())
    assert res.evidence[1].args["question"] == "Is tread depth A: tread depth? between 0.15 and 0.25?"


def test_failed_step_skips_its_dependants_only():
    p = plan('Step 1: s - #E1 = prod_search("coins")\nStep 2: r - #E2 = review_summary("B0 #E1")\n'
             'Step 3: q - #E3 = prod_qna("B0", "about #E2")\nStep 4: d - #E4 = date_math("today")\n'
             'Step 5: q2 - #E5 = prod_qna(#E3, "x")')
    res = run_plan(p, registry())
    st = {e.index: e for e in res.evidence}
    assert st[1].status == "ok" and st[4].status == "ok"
    assert st[2].status == "error" and "ValueError" in st[2].error and "no reviews for" in st[2].error
    assert st[2].args == {"product_id": 'B0 ["result for coins"]'}
    assert st[3].status == "skipped" and "depends on #E2 (step 2), which failed: ValueError" in st[3].error
    assert st[5].status == "skipped" and "#E3" in st[5].error and st[5].started is None
    assert not all_ok(res) and set(outputs(res)) == {"E1", "E4"}


def test_timeout_async_tool_does_not_hang():
    p = plan('#E1 = customer_support("cancel?")\n#E2 = prod_qna("B0", "#E1")\n#E3 = prod_search("x")')
    res = run_plan(p, registry(), timeout_s=0.3)
    assert [e.status for e in res.evidence] == ["timeout", "skipped", "ok"]
    assert res.evidence[0].error == "timed out after 0.3 s"
    assert "which failed: timed out" in res.evidence[1].error
    assert res.elapsed_ms < 20_000  # far below the tool's 30 s: the run did not wait for it


def test_timeout_sync_tool_does_not_hang():
    RELEASE.clear()
    try:
        res = run_plan(plan('#E1 = customer_support("cancel?")'), registry(stuck_sync=True), timeout_s=0.3)
        assert res.evidence[0].status == "timeout"
        assert res.elapsed_ms < 20_000
    finally:
        RELEASE.set()  # let the abandoned thread finish


def test_unknown_unbound_and_unreachable_steps_are_recorded_not_raised():
    specs_only = ToolRegistry([ToolSpec("prod_search", "", [ArgSpec("query")], "")])
    res = run_plan(plan('#E1 = prod_search("x")\n#E2 = nope(#E1)'), specs_only)
    assert res.evidence[0].status == "error" and "not bound" in res.evidence[0].error
    assert res.evidence[1].status == "skipped"
    res = run_plan(plan('#E1 = nope("x")'), registry())
    assert res.evidence[0].status == "error" and "unknown tool" in res.evidence[0].error
    res = run_plan(plan('#E1 = prod_qna(#E2, "q")\n#E2 = prod_qna(#E1, "q")\n#E3 = prod_qna(#E9, "q")\n'
                        '#E4 = prod_search("ok")\n#E5 = prod_qna(#E4, "q", "extra")'), registry())
    s = [e.status for e in res.evidence]
    assert s == ["skipped", "skipped", "skipped", "ok", "error"]
    assert "reference cycle" in res.evidence[0].error and "no step assigns" in res.evidence[2].error
    assert "at most 2 arguments" in res.evidence[4].error
    assert res.waves == [[4], [5]]


def test_forward_reference_still_runs_in_dependency_order():
    res = run_plan(plan('#E1 = shipment_status(date_range=#E2)\n#E2 = date_math("today")'), registry())
    assert all_ok(res) and called(res) == [2, 1] and res.waves == [[2], [1]]


def test_plain_callables_and_empty_plan():
    async def aecho(text: str) -> str:
        return text.upper()

    reg = ToolRegistry([ToolSpec("echo", "", [ArgSpec("text")], "", tool=lambda text: text * 2),
                        ToolSpec("aecho", "", [ArgSpec("text")], "", tool=aecho)])
    res = run_plan(plan('#E1 = echo("ab")\n#E2 = aecho(#E1)'), reg)
    assert outputs(res) == {"E1": "abab", "E2": "ABAB"}
    empty = run_plan(parse_plan("No retrieval needed").plan, reg)
    assert all_ok(empty) and empty.evidence == [] and empty.waves == []


def test_execute_plan_is_async_and_run_plan_works_inside_a_loop():
    p = plan('#E1 = prod_search("x")')

    async def main():
        a = await run_plan_async(p, registry())
        b = run_plan(p, registry())  # called from inside a running loop: uses a helper thread
        return a, b

    a, b = asyncio.run(main())
    assert outputs(a) == outputs(b) == {"E1": ["result for x"]}

def test_object_reference_fits_a_text_parameter_by_its_name():
    from langchain_core.tools import StructuredTool

    from ragplan.methods.reaper.execute import run_plan
    from ragplan.methods.reaper.plan import parse_plan
    from ragplan.tools.registry import ArgSpec, ToolRegistry, ToolSpec

    orders = StructuredTool.from_function(lambda keywords: [{"order_id": "O1", "product_id": "ABC123"}],
                                          name="shipment_status", description="orders")
    qna = StructuredTool.from_function(lambda product_id, question: {"asked": product_id, "q": question},
                                       name="prod_qna", description="product answers")
    reg = ToolRegistry([ToolSpec("shipment_status", "orders", [ArgSpec("keywords")], "", orders),
                        ToolSpec("prod_qna", "answers", [ArgSpec("product_id"), ArgSpec("question")], "", qna)])
    plan = parse_plan('#E1 = shipment_status(keywords="desk")\n#E2 = prod_qna(#E1, "How tall is it?")').plan
    res = run_plan(plan, reg)
    assert res.evidence[1].output == {"asked": "ABC123", "q": "How tall is it?"}


def test_a_step_the_validator_rejects_is_skipped_with_the_validators_reason():
    p = parse_plan('#E1 = prod_qna(#E1, "q")\n#E2 = prod_qna(#E9, "q")\n#E2 = prod_search("x")').plan
    reasons = {e.index: e.error for e in run_plan(p, registry()).evidence}
    errors = [e for e in check_plan(p, registry()) if e.kind in ("self_ref", "missing_ref", "duplicate_var")]
    assert [e.kind for e in errors] == ["self_ref", "missing_ref", "duplicate_var"]
    for e in errors:
        assert reasons[e.step] == "skipped: " + e.message.split(": ", 1)[1]


def test_set_valued_outputs_are_recorded_sorted():
    """A set in a tool's output (at any depth) is recorded in sorted order, whatever the hash seed."""
    words = {f"w{k:02d}" for k in range(30)}
    value = {"tags": words, "nested": [{"ids": frozenset(range(40, 0, -3))}], 7: ("a", {"z", "y"})}
    assert to_jsonable(value) == {"tags": sorted(words), "nested": [{"ids": sorted(range(40, 0, -3))}],
                                  "7": ["a", ["y", "z"]]}
    assert render_for_text({"b", "a", "c"}) == '["a","b","c"]' and to_jsonable({2, "1"}) == ["1", 2]


def test_documents_and_messages_are_recorded_as_their_text():
    """A LangChain Document is its text and metadata and a message its content: no model fields (ids, usage,
    response metadata) crowd the evidence the responder reads."""
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage

    doc = Document(page_content="Order 7 shipped.", metadata={"order": 7, "tags": {"b", "a"}}, id="d1")
    msg = AIMessage(content="It shipped.", response_metadata={"model": "x"}, id="m1")
    assert to_jsonable([doc, msg]) == [{"page_content": "Order 7 shipped.", "metadata": {"order": 7, "tags": ["a", "b"]}},
                                       "It shipped."]


def test_a_step_the_runner_breaks_on_is_an_internal_error_and_its_dependants_are_skipped(monkeypatch):
    """A bug in the runner on one step (here its argument coercion) is that step's internal error; a step that
    depends on it is skipped, naming it, instead of failing on the missing record."""
    from ragplan.methods.reaper import execute

    reg = ToolRegistry([ToolSpec("echo", "", [ArgSpec("text")], "", tool=lambda text: text * 2)])
    real = execute._coerce
    monkeypatch.setattr(execute, "_coerce", lambda k, t, v, lim: (1 / 0) if v == "boom" else real(k, t, v, lim))
    res = run_plan(plan('#E1 = echo("boom")\n#E2 = echo(#E1)'), reg)
    first, second = res.evidence
    assert first.status == "error" and first.error == "internal error"
    assert second.status == "skipped" and second.error.startswith("skipped: depends on #E1 (step 1), which failed")
