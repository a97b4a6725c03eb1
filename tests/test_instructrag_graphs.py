"""InstructRAG's graphs end to end: scripted model, a real FAISS index of the synthetic world, a trained graph and agents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from ragplan.graphs.instructrag import (
    FAMILY, build_instructrag, build_instructrag_no_ml, build_instructrag_rap, build_instructrag_threshold, build_react,
)
from ragplan.nodes.instructrag.answer import PlannedAnswer
from ragplan.nodes.instructrag.plan_step import TAODecision
from ragplan.state.instructrag import InstructRAGContext, InstructRAGResult
from tests.family_data.instructrag import build_parts
from tests.scripted import ScriptedChatModel

QUESTION = "Who directed The Distant Signal?"


@pytest.fixture(scope="module")
def parts(every_family_data):
    """(world, index, graph, agents) folders: the InstructRAG family's test data, built once per test run (the tests
    copy what they change)."""
    return build_parts(Path(every_family_data["instructrag"].api("instructrag")["index_dir"]).parent)


def _ctx(parts, model, **kw) -> InstructRAGContext:
    _, index, graph, agents = parts
    return InstructRAGContext(chat_model=model, retriever="local", index_dir=str(index), instruction_graph_dir=str(graph),
                              **{"agents_dir": str(agents), **kw})


def run(builder, replies, parts, question=QUESTION, inputs=None, **kw):
    model = ScriptedChatModel(replies=replies)
    nodes, lines = [], []
    g = builder().compile()
    state: dict = {}
    for chunk in g.stream({"question": question, **(inputs or {})}, context=_ctx(parts, model, **kw), stream_mode="updates"):
        for node, update in chunk.items():
            nodes.append(node)
            FAMILY.trace(node, update or {}, lines.append)
    out = g.invoke({"question": question, **(inputs or {})}, context=_ctx(parts, ScriptedChatModel(replies=replies), **kw))
    return InstructRAGResult.from_state(out), model, nodes, lines, state


def _prompt(model, i: int) -> str:
    return "\n".join(m.content for m in model.prompts[i] if isinstance(m, HumanMessage))


SEARCH = TAODecision(thought="I look up the film.", action="Search", argument="The Distant Signal")
LOOKUP = TAODecision(thought="Who directed it?", action="Lookup", argument="directed")
FINISH = TAODecision(thought="The page names the director.", action="Finish", argument="Mira Sorensen")


def test_instructrag_selects_a_path_and_plans_with_it(parts):
    res, model, nodes, lines, _ = run(build_instructrag, [SEARCH, LOOKUP, FINISH], parts)
    assert nodes == ["retrieve_paths", "select_path", "review_plan", "plan_step", "observe", "plan_step", "observe", "plan_step"]
    assert res.answer == "Mira Sorensen" and res.stop_reason == "answered" and not res.error
    assert res.task == "person" and res.task_split == "seen" and res.selection == "ml_agent"
    assert 1 <= len(res.candidate_paths) <= 3 and res.selected_path in res.candidate_paths
    assert all(p.score is not None and p.source == "rl_agent" and p.nodes for p in res.candidate_paths)
    assert res.selected_path.score == max(p.score for p in res.candidate_paths)
    s1, s2, s3 = res.steps
    assert s1.title == "The Distant Signal" and "directed by Mira Sorensen" in s1.observation
    assert s2.observation.startswith("(Result 1 / 1)") and "Mira Sorensen" in s2.observation
    assert s3.action == "Finish" and s3.observation == ""
    assert res.retrievals() == 2 and res.executed_queries() == ["The Distant Signal"] and res.retrieval_errors() == 0
    first = _prompt(model, 0)
    assert "Here is an action sequence that solved similar questions" in first and res.selected_path.text in first
    assert "Search[entity]" in first and "Here are some examples." in first and first.rstrip().endswith("Action 1.")
    assert "Observation 1: The Distant Signal is" in _prompt(model, 1)
    assert lines[0] == "Task: person (seen)" and any(ln.startswith("Selected (ml_agent)") for ln in lines)
    # each candidate printed once (after retrieve_paths), then the ML-Agent's scores of them
    assert sum(ln.lstrip().startswith("Candidate ") for ln in lines) == len(res.candidate_paths)
    assert sum(ln.startswith("ML-Agent scores: 1: ") for ln in lines) == 1
    assert all(p.derived_from for p in res.candidate_paths)
    assert "Action 1: Search[The Distant Signal]" in lines and any(ln.startswith("Observation 2: (Result 1 / 1)") for ln in lines)
    assert res.record()["selected_path"]["instructions"] == res.selected_path.instructions


def test_the_step_bound_ends_in_an_answer(parts):
    res, model, nodes, _, _ = run(build_instructrag, [SEARCH, SEARCH, PlannedAnswer(answer="Mira Sorensen")], parts, max_steps=2)
    assert nodes[-3:] == ["plan_step", "observe", "answer_from_steps"]
    assert res.stop_reason == "max_steps" and res.answer == "Mira Sorensen" and len(res.steps) == 2
    assert "ended before an answer was given (max_steps)" in _prompt(model, 2)


@pytest.mark.parametrize("builder,first,selection,source", [
    (build_instructrag_threshold, "retrieve_paths", "ml_agent", "threshold"),
    (build_instructrag_no_ml, "retrieve_paths", "first", "rl_agent"),
    (build_instructrag_rap, "retrieve_stored_paths", "stored", "stored"),
])
def test_baselines_find_their_path_their_way(parts, builder, first, selection, source):
    res, _, nodes, _, _ = run(builder, [SEARCH, FINISH], parts)
    assert nodes[0] == first and res.answer == "Mira Sorensen"
    assert res.selection == selection and res.selected_path is not None and res.selected_path.source == source
    if builder is build_instructrag_rap:  # the stored path of the most similar past question
        assert res.selected_path.derived_from and res.selected_path.score is not None


def test_react_plans_without_a_path_or_with_a_given_one(parts):
    res, model, nodes, _, _ = run(build_react, [SEARCH, FINISH], parts)
    assert nodes == ["plan_step", "observe", "plan_step"] and res.selected_path is None
    assert "action sequence" not in _prompt(model, 0)
    given = ["Search[The Velvet Garden]", "Finish[x]"]
    res, model, _, _, _ = run(build_react, [SEARCH, FINISH], parts, inputs={"given_path": given})
    assert res.selection == "given" and res.selected_path.instructions == given
    assert "Search[The Velvet Garden] → Finish[x]" in _prompt(model, 0)


def test_a_missing_graph_ends_the_run_before_any_llm_call(parts, tmp_path):
    model = ScriptedChatModel(replies=[])
    out = build_instructrag().compile().invoke(
        {"question": QUESTION}, context=InstructRAGContext(chat_model=model, retriever="local", index_dir=str(parts[1]),
                                                           instruction_graph_dir=str(tmp_path / "none"), agents_dir=str(parts[3])))
    res = InstructRAGResult.from_state(out)
    assert res.stop_reason == "setup_error" and "build-graph" in res.error and model.prompts == []


def test_prepare_names_what_is_missing(parts, tmp_path):
    _, index, graph, agents = parts
    ctx = InstructRAGContext(retriever="local", index_dir=str(index))
    assert "--instruction-graph DIR" in FAMILY.prepare("instructrag", ctx)
    ctx.instruction_graph_dir = str(graph)
    assert "--agents DIR" in FAMILY.prepare("instructrag", ctx)
    assert FAMILY.prepare("instructrag_rap", ctx) is None and FAMILY.prepare("react", ctx) is None
    ctx.agents_dir = str(tmp_path)
    assert "train" in FAMILY.prepare("instructrag", ctx)
    ctx.agents_dir = str(agents)
    assert FAMILY.prepare("instructrag", ctx) is None


def test_task_label_and_adapted_agents_are_used(parts, tmp_path):
    from ragplan.methods.instructrag.graph import InstructionGraph, embedder_for_graph
    from ragplan.methods.instructrag.meta import MetaSettings, adapt_agents
    from ragplan.methods.instructrag.paths import read_paths_jsonl
    from ragplan.methods.instructrag.reward import PathMatchReward

    world, _, graph, agents = parts
    unseen = [p for p in read_paths_jsonl(world / "paths.jsonl").successful if p.task == "event"][:2]
    rep = adapt_agents(InstructionGraph.load(graph), agents, unseen, embedder_for_graph(), PathMatchReward(),
                       MetaSettings(adapt_steps=1), tmp_path / "adapted")
    assert set(rep.tasks) == {"event"} and (tmp_path / "adapted" / "tasks" / "event" / "rl_agent.pt").is_file()
    assert json.loads((tmp_path / "adapted" / "adapt.json").read_text())["tasks"]["event"]["shots"] == 2
    _, index, _, _ = parts
    model = ScriptedChatModel(replies=[SEARCH, FINISH])
    out = build_instructrag().compile().invoke(
        {"question": QUESTION, "task": "event"},
        context=InstructRAGContext(chat_model=model, retriever="local", index_dir=str(index),
                                   instruction_graph_dir=str(tmp_path / "adapted" / "graph"), agents_dir=str(tmp_path / "adapted")))
    res = InstructRAGResult.from_state(out)
    assert res.task == "event" and res.task_split == "unseen" and res.answer == "Mira Sorensen"


def test_path_selection_baselines_and_untrained_agents(parts, tmp_path):
    """``path_selection``: the constant plan and the majority path go into the prompt as they are; ``untrained`` walks
    and picks with freshly initialised agents, seeded as training seeded the agents folder's."""
    import shutil
    from collections import Counter

    import torch

    from ragplan.methods.instructrag.selection import untrained_agents
    from ragplan.methods.instructrag.graph import InstructionGraph, embedder_for_graph
    from ragplan.methods.instructrag.meta import MetaSettings, meta_train
    from ragplan.methods.instructrag.reward import PathMatchReward
    from ragplan.methods.instructrag.selection import load_parts, ml_pick

    res, model, nodes, lines, _ = run(build_instructrag, [SEARCH, FINISH], parts, path_selection="constant")
    assert res.selection == "constant" and res.selected_path.instructions == ["Search[]", "Search[]", "Finish[]"]
    assert res.answer == "Mira Sorensen" and "Search[] → Search[] → Finish[]" in _prompt(model, 0)
    assert nodes[:3] == ["retrieve_paths", "select_path", "review_plan"] and "Selected (constant): Search[] → " \
        "Search[] → Finish[]" in lines
    g = InstructionGraph.load(parts[2])
    acts = Counter(tuple(g.instructions[i]["action"] for i in p["instructions"]) for p in g.paths)
    res, *_ = run(build_instructrag, [SEARCH, FINISH], parts, path_selection="majority")
    assert res.selection == "majority" and res.selected_path.source == "majority" and res.selected_path.derived_from
    assert tuple(i.split("[")[0] for i in res.selected_path.instructions) == acts.most_common(1)[0][0]
    agents = tmp_path / "agents"  # the folder's training seed (agents.json) seeds the untrained agents
    shutil.copytree(parts[3], agents)
    meta = json.loads((agents / "agents.json").read_text())
    (agents / "agents.json").write_text(json.dumps({**meta, "settings": {**meta["settings"], "seed": 7}}))
    start, _, _ = meta_train(g, [], embedder_for_graph(), PathMatchReward(), MetaSettings(epochs=0, seed=7))
    p = load_parts(str(parts[2]), str(agents))
    rl, ml = p.agents("person", True, untrained=True)
    assert all(torch.equal(a, b) for a, b in zip(rl.net.state_dict().values(), start.net.state_dict().values()))
    assert not all(torch.equal(a, b) for a, b in zip(rl.net.state_dict().values(),
                                                      untrained_agents(384, 0)[0].net.state_dict().values()))
    res, *_ = run(build_instructrag, [SEARCH, FINISH], parts, path_selection="untrained", agents_dir=str(agents))
    assert res.selection in ("ml_agent", "none") or res.selection.startswith("none:")
    if res.candidate_paths:  # scored by the untrained ML-Agent, not the trained one
        assert [c.score for c in res.candidate_paths] == ml_pick(p, QUESTION, ml, res.candidate_paths)[1]
    assert FAMILY.prepare("instructrag", InstructRAGContext(
        retriever="local", index_dir=str(parts[1]), instruction_graph_dir=str(parts[2]), path_selection="constant")) is None


def test_eval_runs_of_each_path_selection_and_their_report(parts, tmp_path, capsys):
    """Four ``ragplan eval`` runs, one per ``--path-selection``; ``instructrag report`` labels and groups them."""
    from ragplan.cli import main
    from tests.auto_reply import auto_responder
    from tests.family_data.instructrag import make
    from tests.openai_server import OpenAIStub

    d = make(parts[0].parent)
    runs = {}
    with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
        for sel in ("constant", "untrained", "agents", "majority"):
            runs[sel] = tmp_path / sel
            flags = [] if sel == "agents" else ["--path-selection", sel]
            assert main(["eval", "--method", "instructrag", *d.eval("instructrag"), *flags, "--limit", "1", "--model",
                         "openai:stub-model", "--base-url", stub.base_url, "--out", str(runs[sel]), "--no-progress"]) == 0
    rec = json.loads((runs["constant"] / "results.jsonl").read_text().splitlines()[0])
    assert rec["selection"] == "constant" and rec["selected_path"]["instructions"] == ["Search[]", "Search[]", "Finish[]"]
    capsys.readouterr()
    assert main(["instructrag", "report", *map(str, runs.values())]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:5] == ["selection", "method", "n", "F1", "EM"]
    assert [ln.split()[0] for ln in out[1:5]] == ["agents", "untrained", "majority", "constant"]
    assert all(ln.split()[1:3] == ["instructrag", "1"] for ln in out[1:5])
    assert any(ln.startswith("task") for ln in out[5:]) and str(runs["majority"]) in "\n".join(out[5:])
    assert main(["instructrag", "report", *map(str, runs.values()), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["selection"], r["run"]) for r in rows] == [(s, str(runs[s])) for s in ("agents", "untrained", "majority",
                                                                                       "constant")]
    assert all(r["groups"]["all"]["n"] == 1 and 0 <= r["groups"]["all"]["f1"] <= 1 for r in rows)
