"""kglite stays in the graph store's worker processes: a plain Python process runs PlanRAG and then
Think-then-Act (torch + faiss) without GLIBC_TUNABLES, and never imports kglite itself.

kglite's, torch's and faiss's native libraries together need more of glibc's static TLS than a
process reserves by default ("cannot allocate memory in static TLS block"); the graph store loads
the script, reads the schema and runs every query in its workers, so the process that runs the
graphs (a notebook, a script calling ``ragplan.api``, ``langgraph dev``) only ever holds torch and faiss.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import json, sys
    from ragplan.api import ask
    from ragplan.nodes.planrag.answer import FinalAnswer
    from ragplan.nodes.planrag.plan import Plan
    from ragplan.nodes.planrag.replan import ReplanDecision
    from ragplan.nodes.planrag.retrieve import RetrievalAction
    from ragplan.nodes.think_then_act.answer_subquery import ShortAnswer
    from ragplan.nodes.think_then_act.assess_query import QueryAssessment
    from ragplan.nodes.think_then_act.confidence_gate import Confidence
    from ragplan.tools.textindex import build_index
    from tests.scripted import ScriptedChatModel

    out = {}
    planner = ScriptedChatModel(replies=[
        Plan(steps=["List the trade nodes"], reason="need the nodes"),
        RetrievalAction(thought="nodes", action="graph_db",
                        action_input="MATCH (t:Trade_node) RETURN t.name AS node ORDER BY node"),
        ReplanDecision(replan=False, reason="enough"),
        FinalAnswer(answer="genoa", rationale="home node"),
    ])
    res = ask(sys.argv[1], method="planrag", model=planner, store=sys.argv[2])
    out["planrag"] = {"answer": res.answer, "stop_reason": res.stop_reason, "observation": res.steps[0].observation,
                      "schema_in_prompt": "(:Trade_node {" in planner.prompts[0][0].content}
    out["kglite_after_planrag"] = "kglite" in sys.modules

    build_index(sys.argv[3], sys.argv[4], progress=False)
    def respond(messages, schema):
        return {"QueryAssessment": QueryAssessment(category="CLEAR AND COMPLETE"),
                "Confidence": Confidence(probability=0.1, reason="unsure"),
                "ShortAnswer": ShortAnswer(answer="Canberra")}[schema]
    res = ask("What is the capital of Australia?", method="think_then_act", model=ScriptedChatModel(responder=respond),
              retriever="local", index_dir=sys.argv[4])
    out["think_then_act"] = {"answer": res.answer, "retrieval_count": res.retrieval_count,
                             "evidence": [e["title"] for q in res.queries for e in q.evidence]}
    out["loaded"] = sorted(m for m in ("kglite", "torch", "faiss") if m in sys.modules)
    print(json.dumps(out))
''')

PASSAGES = [
    ("Canberra", "Canberra is the capital city of Australia. It was selected as the site of the capital in 1908."),
    ("Mount Everest", "Mount Everest is Earth's highest mountain above sea level, in the Himalayas."),
    ("Photosynthesis", "Photosynthesis is the process by which green plants turn light into chemical energy."),
]


@pytest.fixture(scope="module")
def plain_process_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Run PlanRAG over examples/trade_network.cql, then Think-then-Act over a FAISS index, in one `python -c`."""
    tmp = tmp_path_factory.mktemp("one_process")
    passages = tmp / "passages.jsonl"
    passages.write_text("".join(json.dumps({"id": f"p{i}", "title": t, "contents": c}) + "\n"
                                for i, (t, c) in enumerate(PASSAGES)))
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               RAGPLAN_CHECKPOINT_DB=str(tmp / "checkpoints.sqlite"))
    question = (ROOT / "examples" / "trade_question.txt").read_text()
    proc = subprocess.run([sys.executable, "-c", SCRIPT, question, str(ROOT / "examples" / "trade_network.cql"),
                           str(passages), str(tmp / "index")], cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_planrag_then_think_then_act_in_one_plain_process(plain_process_run: dict) -> None:
    planrag, tta = plain_process_run["planrag"], plain_process_run["think_then_act"]
    assert (planrag["answer"], planrag["stop_reason"]) == ("genoa", "plan_done")
    assert planrag["schema_in_prompt"] and "ivory_coast" in planrag["observation"]  # real rows from the script's graph
    assert tta["answer"] == "Canberra" and tta["retrieval_count"] == 1 and tta["evidence"][0] == "Canberra"
    assert plain_process_run["loaded"] == ["faiss", "torch"]


def test_main_process_never_imports_kglite(plain_process_run: dict) -> None:
    assert plain_process_run["kglite_after_planrag"] is False
