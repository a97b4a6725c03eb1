"""InstructRAG on published trajectories (tests/samples: a trimmed Reflexion log): the meaning-matched reward, the
order-aware path encoding, the calibrated threshold walk, the refusals to save agents that learned nothing, and the
baseline rows and explanations the commands print."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ragplan.cli import main
from ragplan.methods.instructrag.graph import InstructionGraph, build_instruction_graph, embedder_for_graph
from ragplan.methods.instructrag.meta import MetaSettings, NothingLearned, meta_train
from ragplan.methods.instructrag.ml_agent import MLAgent, path_backbone_vectors
from ragplan.methods.instructrag.paths import parse_instruction, read_paths
from ragplan.methods.instructrag.reward import PathMatchReward, QueryExample
from ragplan.methods.instructrag.rl_agent import threshold_decider, traverse
from ragplan.nodes.instructrag.retrieve_paths import make_retrieve_paths
from ragplan.state.instructrag import InstructRAGContext
from tests.test_instructrag import TABLE, VecEmbedder, _p

SAMPLE = Path(__file__).parent / "samples" / "reflexion_react_sample.txt"


def _path(text: str) -> list:
    return [parse_instruction(s) for s in text.split(" → ")]


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """The sample's first 20 successful paths in a saved graph, the other 10 as new questions."""
    paths = read_paths([SAMPLE]).successful
    emb = embedder_for_graph()
    out = tmp_path_factory.mktemp("real") / "graph"
    build_instruction_graph(paths[:20], embedder=emb).save(out)
    return out, paths[20:], emb


def test_path_match_reward_matches_paraphrased_instructions_by_meaning():
    reward = PathMatchReward(embedder_for_graph())
    own = _path("Search[Scott Derrickson] → Search[Ed Wood] → Finish[yes]")
    ex = QueryExample("Were Scott Derrickson and Ed Wood of the same nationality?", "yes/no", "yes", own)
    paraphrase = _path("Search[Derrickson, Scott] → Search[Edward Wood Jr.] → Finish[yes, both]")
    other = _path("Search[Boston Celtics] → Lookup[founded] → Finish[1946]")
    assert not {i.text.casefold() for i in paraphrase} & {i.text.casefold() for i in own}  # no instruction text in common
    assert reward(ex, own) == pytest.approx(1.0, abs=1e-5)
    assert reward(ex, paraphrase) > 0.6 > reward(ex, other) > 0.0  # signal that tells the two apart


def test_ml_agent_scores_a_path_as_an_ordered_sequence():
    emb = embedder_for_graph()
    q = emb.encode(["Were Scott Derrickson and Ed Wood of the same nationality?"])[0]
    orders = [["Search[Scott Derrickson]", "Search[Ed Wood]", "Finish[yes]"],
              ["Search[Ed Wood]", "Search[Scott Derrickson]", "Finish[yes]"],
              ["Finish[yes]", "Search[Scott Derrickson]", "Search[Ed Wood]"]]
    scores = MLAgent().scores(q, path_backbone_vectors(orders, emb))
    assert len({round(float(s), 5) for s in scores}) == 3  # a swap and Finish first each change the score


def _tiny_graph():
    emb = VecEmbedder(TABLE)
    paths = [_p("Were Scott Derrickson and Ed Wood of the same nationality?", "T1", "Search[Scott Derrickson]",
                "Search[Ed Wood]", "Lookup[nationality]"),
             _p("Where was Christopher Nolan born?", "T1", "Search[Christopher Nolan]", "Lookup[birthplace]"),
             _p("When was Scott Derrickson's studio founded?", "T2", "Search[Scott Derrickson]", "Lookup[year of founding]")]
    return build_instruction_graph(paths, embedder=emb), paths, emb


def test_training_refuses_to_save_when_the_reward_never_varied(tmp_path):
    g, paths, emb = _tiny_graph()

    def flat(ex, path):
        return 0.0

    with pytest.raises(NothingLearned, match="reward was 0.000 for all"):
        meta_train(g, paths, emb, flat, MetaSettings(epochs=2, questions_per_task=3), tmp_path / "agents")
    assert not (tmp_path / "agents").exists()
    meta_train(g, paths, emb, PathMatchReward(emb), MetaSettings(epochs=2, questions_per_task=3), tmp_path / "agents")
    assert (tmp_path / "agents" / "rl_agent.pt").is_file()  # a reward that varies trains and saves


def test_training_refuses_to_save_agents_whose_weights_did_not_move(tmp_path):
    g, paths, emb = _tiny_graph()
    with pytest.raises(NothingLearned, match="RL-Agent's weights did not change"):
        meta_train(g, paths, emb, PathMatchReward(emb), MetaSettings(epochs=1, ws=False, pg=False), tmp_path / "a")
    assert not (tmp_path / "a").exists()


def test_train_command_exits_1_and_saves_nothing_when_nothing_was_learned(real, tmp_path, capsys):
    graph, new, _ = real
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(p.to_dict()) + "\n" for p in new))
    code = main(["instructrag", "train", "--graph", str(graph), "--paths", str(tmp_path / "q.jsonl"), "--out",
                 str(tmp_path / "agents"), "--epochs", "1", "--no-ws", "--no-pg", "--no-progress"])
    assert code == 1 and "RL-Agent's weights did not change" in capsys.readouterr().err
    assert not (tmp_path / "agents").exists()


def test_the_calibrated_threshold_walk_finds_paths_for_real_questions(real):
    graph, new, emb = real
    g = InstructionGraph.load(graph)
    assert 0 < g.threshold == json.loads((graph / "graph.json").read_text())["threshold"]
    qvecs = emb.encode([p.question for p in new])
    found = sum(bool(traverse(g, q, threshold_decider(g.threshold)).paths) for q in qvecs)
    fixed = sum(bool(traverse(g, q, threshold_decider(0.4)).paths) for q in qvecs)
    assert found > len(new) / 2 and found > fixed, (found, fixed)  # the former fixed 0.4 found fewer on real questions


def test_the_threshold_graph_says_when_no_path_was_found(real):
    graph, new, _ = real
    node = make_retrieve_paths("threshold")
    ask = {"question": new[0].question}
    run = SimpleNamespace(context=InstructRAGContext(instruction_graph_dir=str(graph), traversal_threshold=0.99))
    out = node(ask, run)
    assert out["candidate_paths"] == [] and out["selection"].startswith("none: no path found in the instruction graph")
    assert "threshold 0.990" in out["selection"] and "as react" in out["selection"]
    run.context.traversal_threshold = -1.0  # the graph's calibrated threshold
    assert node(ask, run)["candidate_paths"] and "selection" not in node(ask, run)


def test_figures_print_the_baseline_rows(real, tmp_path, capsys):
    graph, new, _ = real
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(p.to_dict()) + "\n" for p in new))
    assert main(["instructrag", "figures", "--graph", str(graph), "--paths", str(tmp_path / "q.jsonl"), "--json"]) == 0
    rows = {r["method"]: r for r in json.loads(capsys.readouterr().out)}
    assert {"untrained", "threshold", "rap", "majority", "constant", "random"} <= set(rows)
    assert rows["constant"]["found"] == 1.0 and rows["constant"]["action_match"] > 0.5  # real paths are mostly S→S→F


def test_build_graph_explains_failed_kept(tmp_path, capsys):
    def rec(q: str, ok: bool, *steps: str) -> str:
        return json.dumps({"question": q, "answer": "x", "success": ok, "path": list(steps)}) + "\n"

    (tmp_path / "none.jsonl").write_text(rec("Who wrote Dune?", True, "Search[Dune]", "Finish[Frank Herbert]")
                                         + rec("Who wrote Emma?", False, "Search[Emma]", "Finish[Austen]"))
    assert main(["instructrag", "build-graph", "--paths", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "g1"),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "failed_kept: 0 failed path(s) of the 0 question(s) with both" in out and "cannot run" in out
    (tmp_path / "both.jsonl").write_text(rec("Who wrote Dune?", False, "Search[Dune novel]", "Finish[Asimov]"))
    assert main(["instructrag", "build-graph", "--paths", str(tmp_path / "none.jsonl"), str(tmp_path / "both.jsonl"),
                 "--out", str(tmp_path / "g2"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "failed_kept: 1 failed path(s) of the 1 question(s) with both" in out and "'Who wrote Dune?'" in out


def test_semantic_reward_gives_signal_on_the_published_paths(real):
    _, new, emb = real
    reward = PathMatchReward(emb)
    own = [QueryExample(p.question, p.task, p.answer, p.instructions) for p in new]
    scores = [reward(a, b.instructions) for a in own for b in new if a.question != b.question]
    assert np.std(scores) > 0.02 and min(scores) < max(scores)  # exact instruction text matched almost never


def test_a_save_that_fails_midway_leaves_the_earlier_agent_whole(tmp_path, monkeypatch):
    """Each file is written through a temporary file and a rename: a save killed or failing while it writes leaves
    the agent saved before, loadable, and no stray file."""
    import torch

    from ragplan.methods.instructrag import rl_agent
    from ragplan.methods.instructrag.rl_agent import RLAgent

    RLAgent(k=2).save(tmp_path)
    before = (tmp_path / "rl_agent.pt").read_bytes()

    def torn(obj, f, *a, **k):
        f.write(b"PK\x03\x04 half a zip")
        raise OSError("disk full")

    monkeypatch.setattr(rl_agent.torch, "save", torn)
    with pytest.raises(OSError, match="disk full"):
        RLAgent(k=5).save(tmp_path)
    monkeypatch.setattr(rl_agent.torch, "save", torch.save)
    assert (tmp_path / "rl_agent.pt").read_bytes() == before and RLAgent.load(tmp_path).k == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rl_agent.json", "rl_agent.pt"]
