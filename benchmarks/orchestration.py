"""CPU per question of ragplan's orchestration against a bare LangGraph graph, per node, with a zero-latency model.

A PlanRAG run over ``examples/trade_network.cql`` with a scripted chat model that answers at once
(tests/scripted.py: a one-step plan, one Cypher query, "no re-plan", an answer) — its nodes read_schema,
plan, review_plan, retrieve, replan, answer, check_decision and four structured decisions — is compared
with a bare LangGraph graph of the same nodes on the same path, whose decision nodes make one plain call
of the same model and return a fixed update (what a minimal hand-written graph costs). Per node: the mean
milliseconds inside the node (wall; the graph-DB query's worker process is not counted as CPU), then the
whole question: wall and CPU of ``graph.invoke`` (and ``ainvoke``, the runner's path). The store and its
query worker are loaded before the timed part.

    .venv/bin/python benchmarks/orchestration.py [--n 300] [--save FILE.json] [--baseline FILE.json] [--profile]

Target (issue 13): a PlanRAG question ≤ 5 ms of CPU. ``--profile`` prints the top of a cProfile of the
ragplan path instead of the table.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import os
import pstats
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, TypedDict

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.common import load_baseline, print_rows, save_report  # noqa: E402

SCRIPT = ROOT / "examples" / "trade_network.cql"
QUERY = "MATCH (t:Trade_node) RETURN t.name AS name, t.local_value AS v ORDER BY v DESC LIMIT 3"
QUESTION = "Which trade node should Sweden's merchant go to?"


def scripted_model() -> Any:
    """A chat model that answers every PlanRAG decision at once (no latency)."""
    from ragplan.nodes.planrag.answer import FinalAnswer
    from ragplan.nodes.planrag.plan import Plan
    from ragplan.nodes.planrag.replan import ReplanDecision
    from ragplan.nodes.planrag.retrieve import RetrievalAction
    from tests.scripted import ScriptedChatModel

    replies = {"Plan": Plan(steps=["Find the trade nodes with the highest local value"]),
               "RetrievalAction": RetrievalAction(thought="look at the values", action="graph_db", action_input=QUERY),
               "ReplanDecision": ReplanDecision(replan=False, reason="the plan is done"),
               "FinalAnswer": FinalAnswer(answer="lubeck", rationale="highest value")}

    class Model(ScriptedChatModel):
        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            self._prompts.clear()  # keep no history: a benchmark makes thousands of calls
            return super()._generate(messages, stop, run_manager, **kwargs)

    return Model(responder=lambda messages, tool: replies.get(tool or "", "lubeck"))


class BareState(TypedDict, total=False):
    """The bare graph's state."""

    question: str
    plan: list[str]
    observation: str
    answer: str


def bare_graph(model: Any, store: Any) -> Any:
    """The same path as PlanRAG's, each node the least a hand-written LangGraph graph would do."""
    from langchain_core.messages import HumanMessage
    from langgraph.graph import END, START, StateGraph

    def call(state: BareState) -> str:
        return str(model.invoke([HumanMessage(state["question"])]).content)

    nodes: dict[str, Callable[[BareState], dict[str, Any]]] = {
        "read_schema": lambda s: {"observation": ""},
        "plan": lambda s: {"plan": [call(s)]},
        "review_plan": lambda s: {},
        "retrieve": lambda s: {"observation": str(store.query(QUERY, row_cap=20, timeout_s=5).rows) + call(s)},
        "replan": lambda s: {"plan": [call(s)]},
        "answer": lambda s: {"answer": call(s)},
        "check_decision": lambda s: {},
    }
    g: Any = StateGraph(BareState)
    prev = START
    for name, fn in nodes.items():
        g.add_node(name, fn)
        g.add_edge(prev, name)
        prev = name
    g.add_edge(prev, END)
    return g


def timed_nodes(builder: Any, spent: dict[str, list[float]]) -> Any:
    """Wrap every node of an uncompiled graph so the time inside it is added to ``spent[name]``."""
    for name, spec in builder.nodes.items():
        run = spec.runnable
        fn = getattr(run, "func", None)
        if fn is None:
            continue

        def wrap(f: Callable[..., Any], key: str = name) -> Callable[..., Any]:
            @functools.wraps(f)
            def inner(*a: Any, **kw: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return f(*a, **kw)
                finally:
                    spent[key].append(time.perf_counter() - t0)
            return inner

        run.func = wrap(fn)
    return builder


def measure(n: int) -> list[dict[str, Any]]:
    """The table rows: per node, then per question (sync and async), ragplan against the bare graph."""
    from ragplan.graphs.planrag import build_planrag
    from ragplan.state.context import PlanRAGContext
    from ragplan.tools.graphdb import StoreSpec, open_store

    store = open_store(StoreSpec(graph_path=str(SCRIPT)))
    store.query(QUERY, row_cap=20, timeout_s=5)  # the query worker is started and warm
    model = scripted_model()
    ctx = PlanRAGContext(model="-", chat_model=model, graph_store=store)
    ours: dict[str, list[float]] = defaultdict(list)
    bare: dict[str, list[float]] = defaultdict(list)
    g_ours = timed_nodes(build_planrag(), ours).compile()
    g_bare = timed_nodes(bare_graph(model, store), bare).compile()
    config: Any = {"recursion_limit": 100}

    def run_ours() -> dict[str, Any]:
        return g_ours.invoke({"question": QUESTION}, context=ctx, config=config)

    def run_bare() -> dict[str, Any]:
        return g_bare.invoke({"question": QUESTION}, config=config)

    out = run_ours()
    assert out.get("answer") == "lubeck" and not out.get("error"), out  # the path really ran
    run_bare()

    def per_question(fn: Callable[[], Any]) -> tuple[float, float]:
        for spent in (ours, bare):
            spent.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n * 1000, (time.process_time() - c0) / n * 1000

    async def many(graph: Any, kw: dict[str, Any]) -> None:
        for _ in range(n):
            await graph.ainvoke({"question": QUESTION}, config=config, **kw)

    def per_question_async(graph: Any, kw: dict[str, Any]) -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        asyncio.run(many(graph, kw))
        return (time.perf_counter() - t0) / n * 1000, (time.process_time() - c0) / n * 1000

    bare_wall, bare_cpu = per_question(run_bare)
    bare_nodes = {k: sum(v) / n * 1000 for k, v in bare.items()}
    ours_wall, ours_cpu = per_question(run_ours)
    ours_nodes = {k: sum(v) / n * 1000 for k, v in ours.items()}
    a_ours_wall, a_ours_cpu = per_question_async(g_ours, {"context": ctx})
    a_bare_wall, a_bare_cpu = per_question_async(g_bare, {})
    rows: list[dict[str, Any]] = []
    for name in ours_nodes:
        rows.append({"part": f"node {name}", "ragplan_ms": ours_nodes[name], "bare_ms": bare_nodes.get(name)})
    rows += [
        {"part": "question, invoke: wall", "ragplan_ms": ours_wall, "bare_ms": bare_wall},
        {"part": "question, invoke: CPU", "ragplan_ms": ours_cpu, "bare_ms": bare_cpu},
        {"part": "question, ainvoke: wall", "ragplan_ms": a_ours_wall, "bare_ms": a_bare_wall},
        {"part": "question, ainvoke: CPU", "ragplan_ms": a_ours_cpu, "bare_ms": a_bare_cpu},
    ]
    for r in rows:
        r["ragplan_ms"] = round(r["ragplan_ms"], 3)
        r["bare_ms"] = None if r["bare_ms"] is None else round(r["bare_ms"], 3)
        r["ratio"] = round(r["ragplan_ms"] / r["bare_ms"], 2) if r["bare_ms"] else None
    return rows


def profile(n: int) -> None:
    """A cProfile of ``n`` ragplan questions (sorted by own time, then cumulative)."""
    from ragplan.graphs.planrag import build_planrag
    from ragplan.state.context import PlanRAGContext
    from ragplan.tools.graphdb import StoreSpec, open_store

    store = open_store(StoreSpec(graph_path=str(SCRIPT)))
    store.query(QUERY, row_cap=20, timeout_s=5)
    ctx = PlanRAGContext(model="-", chat_model=scripted_model(), graph_store=store)
    g = build_planrag().compile()
    g.invoke({"question": QUESTION}, context=ctx, config={"recursion_limit": 100})
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        g.invoke({"question": QUESTION}, context=ctx, config={"recursion_limit": 100})
    pr.disable()
    st = pstats.Stats(pr)
    st.sort_stats("tottime").print_stats(25)
    st.sort_stats("cumulative").print_stats(40)


def main(argv: list[str] | None = None) -> int:
    """Print the table (or a profile)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=300, help="questions per measurement (default 300)")
    ap.add_argument("--save", type=Path, help="write this run's rows as JSON")
    ap.add_argument("--baseline", type=Path, help="a report saved with --save: show its figures and the ratio")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of the ragplan path instead")
    args = ap.parse_args(argv)
    if args.profile:
        profile(args.n)
        return 0
    rows = measure(args.n)
    print(f"PlanRAG path (read_schema, plan, review_plan, retrieve, replan, answer, check_decision; 4 decisions), "
          f"{args.n} questions, zero-latency scripted model; ms per question")
    print_rows(rows, [("part", "s"), ("ragplan_ms", ".3f"), ("bare_ms", ".3f"), ("ratio", ".2f")], key="part",
               baseline=load_baseline(args.baseline), compare="ragplan_ms")
    cpu = next(r["ragplan_ms"] for r in rows if r["part"] == "question, invoke: CPU")
    print(f"target: ≤ 5 ms of CPU per question — {'met' if cpu <= 5 else 'NOT met'} ({cpu:.2f} ms)")
    save_report(args.save, "orchestration", rows, n=args.n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
