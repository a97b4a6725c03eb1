"""InstructRAG's training and commands: determinism for a seed, ablations, adaptation, rewards, LLM-free figures."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from ragplan.cli import main
from ragplan.nodes.instructrag.plan_step import TAODecision
from ragplan.state.instructrag import InstructRAGContext
from ragplan.methods.instructrag.figures import SELECTION_METHODS, action_match, selection_quality
from ragplan.methods.instructrag.graph import build_instruction_graph, embedder_for_graph
from ragplan.methods.instructrag.selection import load_agents
from ragplan.methods.instructrag.meta import MetaSettings, adapt_agents, meta_train, query_examples
from ragplan.methods.instructrag.paths import Instruction, parse_instruction
from ragplan.methods.instructrag.reward import LLMF1Reward, PathMatchReward, ProxyReward
from ragplan.methods.instructrag.synth import make_world, split_paths
from tests.scripted import ScriptedChatModel


@pytest.fixture(scope="module")
def world():
    w = make_world(72, seed=1)
    return w, split_paths(w.successful, seed=1)


@pytest.fixture(scope="module")
def graph(world):
    _, parts = world
    return build_instruction_graph(parts["support_seen"], embedder=embedder_for_graph())


@pytest.fixture(scope="module")
def untrained_weights(world, graph) -> list[torch.Tensor]:
    """The agents' weights of ``meta_train`` with ``epochs=0, questions_per_task=2`` (deterministic for its seed, as
    test_training_is_deterministic_for_a_seed shows): made once for the tests that compare against them."""
    _, parts = world
    rl, ml, _ = meta_train(graph, parts["query_seen"], embedder_for_graph(), PathMatchReward(),
                           MetaSettings(epochs=0, questions_per_task=2))
    return _weights(rl, ml)


@pytest.fixture(scope="module")
def trained_agents(world, graph, tmp_path_factory):
    """``meta_train`` with ``epochs=1, questions_per_task=2``, saved: ``(rl, ml, folder)``, trained once for the tests
    that start from it (deterministic for its seed); a test that adapts them copies the folder first."""
    _, parts = world
    out = tmp_path_factory.mktemp("agents") / "a"
    rl, ml, _ = meta_train(graph, parts["query_seen"], embedder_for_graph(), PathMatchReward(),
                           MetaSettings(epochs=1, questions_per_task=2), out)
    return rl, ml, out


@pytest.fixture(scope="module")
def passage_index(world, tmp_path_factory):
    """The world's passages in a local index (built once for the reward tests)."""
    from ragplan.tools.textindex import build_index

    w, _ = world
    tmp = tmp_path_factory.mktemp("passages")
    (tmp / "p.jsonl").write_text("".join(json.dumps({"id": str(i), **p}) + "\n" for i, p in enumerate(w.passages)))
    build_index(tmp / "p.jsonl", tmp / "idx", progress=False)
    return tmp / "idx"


def _weights(rl, ml) -> list[torch.Tensor]:
    return [t.detach().clone() for t in list(rl.net.state_dict().values()) + list(ml.heads.state_dict().values())]


def test_training_is_deterministic_for_a_seed(world, graph):
    _, parts = world
    emb = embedder_for_graph()
    s = MetaSettings(epochs=2, questions_per_task=3, seed=3)
    a = meta_train(graph, parts["query_seen"], emb, PathMatchReward(), s)
    b = meta_train(graph, parts["query_seen"], emb, PathMatchReward(), s)
    c = meta_train(graph, parts["query_seen"], emb, PathMatchReward(), MetaSettings(epochs=2, questions_per_task=3, seed=4))
    assert all(torch.equal(x, y) for x, y in zip(_weights(a[0], a[1]), _weights(b[0], b[1])))
    assert a[2].curves == b[2].curves and set(a[2].curves) == {"ws", "pg", "pt", "ft", "reward", "reward_sd"}
    assert not all(torch.equal(x, y) for x, y in zip(_weights(a[0], a[1]), _weights(c[0], c[1])))


@pytest.mark.parametrize("off", ["ws", "pg", "pt", "ft"])
def test_each_loss_can_be_switched_off(world, graph, off, untrained_weights):
    _, parts = world
    rl, ml, rep = meta_train(graph, parts["query_seen"], embedder_for_graph(), PathMatchReward(),
                             MetaSettings(epochs=1, questions_per_task=2, **{off: False}))
    assert off not in rep.curves or off in ("ws", "pt")  # ws/pt are still reported (zeros) when the outer loss is off
    fresh = untrained_weights  # meta_train(..., MetaSettings(epochs=0, questions_per_task=2))'s
    assert not all(torch.equal(x, y) for x, y in zip(_weights(rl, ml), fresh))  # something trained


def test_agents_save_load_and_curves(world, graph, tmp_path):
    _, parts = world
    rl, ml, rep = meta_train(graph, parts["query_seen"], embedder_for_graph(), PathMatchReward(),
                             MetaSettings(epochs=2, questions_per_task=2), tmp_path / "agents")
    rl2, ml2 = load_agents(tmp_path / "agents")
    assert all(torch.equal(x, y) for x, y in zip(_weights(rl, ml), _weights(rl2, ml2)))
    meta = json.loads((tmp_path / "agents" / "agents.json").read_text())
    assert meta["report"]["curves"] == rep.curves and (tmp_path / "agents" / "curves.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="train"):
        load_agents(tmp_path)


def test_rewards_without_an_llm(world, passage_index):
    w, parts = world
    from ragplan.tools.textindex import TextIndex

    proxy = ProxyReward(TextIndex.open(passage_index))
    ex = query_examples([p for p in parts["query_seen"] if p.task == "date"][:1], embedder_for_graph())[0]
    assert proxy(ex, ex.own_path) == 1.0  # the own path reaches both supporting pages and the answer
    assert proxy(ex, ex.own_path[:1]) == 0.25  # one of two pages, no answer
    assert proxy(ex, [Instruction("Finish", "nobody")]) == 0.0
    match = PathMatchReward()
    assert match(ex, ex.own_path) == pytest.approx(1.0, abs=1e-5) and match(ex, ex.own_path[:2]) == pytest.approx(2 / 3, abs=1e-5)
    assert action_match(ex.own_path, ex.own_path[:2]) == 0.5


def test_llm_reward_plans_with_the_path(world, passage_index):
    w, parts = world
    ex = query_examples(parts["query_seen"][:1], embedder_for_graph())[0]
    model = ScriptedChatModel(replies=[TAODecision(thought="t", action="Finish", argument=ex.answer)])
    reward = LLMF1Reward(InstructRAGContext(chat_model=model, retriever="local", index_dir=str(passage_index)))
    assert reward(ex, ex.own_path) == 1.0 and reward(ex, ex.own_path) == 1.0 and reward.calls == 1  # cached
    assert ex.own_path[0].text in model.prompts[0][-1].content


def test_selection_quality_table(world, graph, trained_agents):
    _, parts = world
    emb = embedder_for_graph()
    rl, ml, _ = trained_agents  # meta_train(..., MetaSettings(epochs=1, questions_per_task=2))'s
    rows = selection_quality(graph, rl, ml, parts["query_seen"], emb)
    assert [r.method for r in rows] == list(SELECTION_METHODS)
    assert all(0 <= r.action_match <= 1 and 0 <= r.path_match <= 1 and r.questions == len(parts["query_seen"]) for r in rows)


def test_commands_end_to_end(tmp_path, capsys):
    out = tmp_path
    assert main(["instructrag", "synth", "--out", str(out / "w"), "--questions", "60", "--seed", "2"]) == 0
    assert main(["instructrag", "split", "--paths", str(out / "w" / "paths.jsonl"), "--out", str(out / "s")]) == 0
    assert main(["instructrag", "build-graph", "--paths", str(out / "s" / "support_seen.jsonl"), "--out", str(out / "g"),
                 "--json", "--no-progress"]) == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["delta"] == 0.4 and stats["nodes"] >= 2 and stats["paths"] > 0
    assert main(["instructrag", "build-graph", "--paths", str(out / "s" / "support_unseen.jsonl"), "--out", str(out / "g"),
                 "--insert", "--json", "--no-progress"]) == 0
    grown = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert grown["paths"] > stats["paths"] and grown["tasks"] == 12
    assert main(["instructrag", "train", "--graph", str(out / "g"), "--paths", str(out / "s" / "query_seen.jsonl"),
                 "--out", str(out / "a"), "--epochs", "1", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "path-match reward" in printed and "reward (path-match) per epoch, mean ± spread: 0." in printed
    assert main(["instructrag", "train", "--graph", str(out / "g"), "--paths", str(out / "s" / "query_seen.jsonl"),
                 "--out", str(out / "zero"), "--epochs", "0", "--no-progress"]) == 2
    assert "--epochs 0" in capsys.readouterr().err and not (out / "zero").exists()  # nothing saved untrained
    assert main(["instructrag", "adapt", "--graph", str(out / "g"), "--agents", str(out / "a"), "--paths",
                 str(out / "s" / "support_unseen.jsonl"), "--out", str(out / "ad"), "--shots", "2", "--steps", "1",
                 "--no-progress"]) == 0
    assert (out / "ad" / "graph" / "graph.json").is_file() and len(list((out / "ad" / "tasks").iterdir())) == 6
    capsys.readouterr()
    assert main(["instructrag", "figures", "--graph", str(out / "g"), "--agents", str(out / "a"), "--paths",
                 str(out / "s" / "query_unseen.jsonl"), "--json"]) == 0
    assert {r["method"] for r in json.loads(capsys.readouterr().out)} == set(SELECTION_METHODS)
    assert main(["instructrag", "train", "--graph", str(out / "g"), "--paths", str(out / "s" / "query_seen.jsonl"),
                 "--out", str(out / "b"), "--reward", "proxy"]) == 2
    assert "--index" in capsys.readouterr().err
    run = out / "run"
    run.mkdir()
    (run / "results.jsonl").write_text(
        json.dumps({"id": "q1", "method": "instructrag", "question": "Who directed Alien?", "gold": "Ridley Scott",
                    "f1": 1.0, "em": 1.0}) + "\n"
        + json.dumps({"id": "q2", "method": "instructrag", "question": "Which band is she in?", "gold": "The Vessa",
                      "f1": 0.5, "em": 0.0}) + "\n"
        + '{"id": "q3", "method": "instructrag", "f1": 1.0')  # the torn last line of a killed run
    with pytest.warns(RuntimeWarning, match=r"results\.jsonl:3: not JSON"):  # named, not silently skipped
        assert main(["instructrag", "report", str(run), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)  # a run without settings.json: the default selection
    rep = row["groups"]
    assert row["selection"] == "agents" and row["method"] == "instructrag" and rep["seen"] == {"n": 1, "f1": 1.0, "em": 1.0} and rep["unseen"] == {"n": 1, "f1": 0.5, "em": 0.0}


def test_paths_parse_helper():
    assert parse_instruction("lookup[ year ]") == Instruction("Lookup", "year") and parse_instruction("Think[x]") is None


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


def _rl_w(rl) -> list[torch.Tensor]:
    return [t.detach().clone() for t in rl.net.state_dict().values()]


def _ml_w(ml) -> list[torch.Tensor]:
    return [t.detach().clone() for t in ml.heads.state_dict().values()]


def test_each_outer_loss_alone_moves_its_agent_in_meta_training(world, graph):
    _, parts = world
    emb = embedder_for_graph()
    off = {"ws": False, "pg": False, "pt": False, "ft": False}
    init = meta_train(graph, parts["query_seen"], emb, PathMatchReward(), MetaSettings(epochs=0))
    pg = meta_train(graph, parts["query_seen"], emb, PathMatchReward(), MetaSettings(epochs=1, questions_per_task=2, **{**off, "pg": True}))
    ft = meta_train(graph, parts["query_seen"], emb, PathMatchReward(), MetaSettings(epochs=1, questions_per_task=2, **{**off, "ft": True}))
    assert not _same(_rl_w(pg[0]), _rl_w(init[0])) and _same(_ml_w(pg[1]), _ml_w(init[1]))
    assert not _same(_ml_w(ft[1]), _ml_w(init[1])) and _same(_rl_w(ft[0]), _rl_w(init[0]))


def test_few_shot_adaptation_applies_the_pg_and_ft_updates(world, graph, tmp_path, trained_agents):
    """Regression: the PG / FT gradients were asked of the WS / PT step's output, came back None, and changed nothing."""
    from ragplan.methods.instructrag.graph import InstructionGraph

    _, parts = world
    emb = embedder_for_graph()
    shutil.copytree(trained_agents[2], tmp_path / "a")  # meta_train(..., MetaSettings(epochs=1, questions_per_task=2), tmp_path / "a")
    graph.save(tmp_path / "g")
    task = sorted({p.task for p in parts["support_unseen"]})[0]
    support = [p for p in parts["support_unseen"] if p.task == task][:3]
    base_rl, base_ml = load_agents(tmp_path / "a")

    def adapt(name: str, **kw: bool):
        adapt_agents(InstructionGraph.load(tmp_path / "g"), tmp_path / "a", support, emb, PathMatchReward(),
                     MetaSettings(adapt_steps=2, seed=5, **kw), tmp_path / name)
        return load_agents(tmp_path / name, task)

    off = {"ws": False, "pg": False, "pt": False, "ft": False}
    nothing = adapt("nothing", **off)
    only_pg = adapt("pg", **{**off, "pg": True})
    only_ft = adapt("ft", **{**off, "ft": True})
    assert _same(_rl_w(nothing[0]), _rl_w(base_rl)) and _same(_ml_w(nothing[1]), _ml_w(base_ml))
    assert not _same(_rl_w(only_pg[0]), _rl_w(base_rl)) and _same(_ml_w(only_pg[1]), _ml_w(base_ml))  # ∇L_PG ≠ 0
    assert not _same(_ml_w(only_ft[1]), _ml_w(base_ml)) and _same(_rl_w(only_ft[0]), _rl_w(base_rl))  # ∇L_FT ≠ 0
    full, no_pg_ft = adapt("full"), adapt("no_pg_ft", pg=False, ft=False)
    assert not _same(_rl_w(full[0]), _rl_w(no_pg_ft[0])) and not _same(_ml_w(full[1]), _ml_w(no_pg_ft[1]))


def test_a_gradient_of_parameters_the_loss_was_not_computed_on_raises():
    from ragplan.methods.instructrag.meta import _grads

    theta = {"w": torch.ones(2, requires_grad=True)}
    stepped = {"w": theta["w"] - 0.1}
    loss = (theta["w"] ** 2).sum()
    assert torch.equal(_grads(loss, theta)["w"], torch.full((2,), 2.0))
    with pytest.raises(RuntimeError):
        _grads((theta["w"] ** 2).sum(), stepped)  # what adaptation used to do, silently
    assert torch.equal(_grads(torch.zeros(()), theta)["w"], torch.zeros(2))  # no data: no update


def test_split_writes_failed_paths_per_set_and_noise_stays_in_the_support_set(tmp_path, capsys):
    from ragplan.methods.instructrag.graph import InstructionGraph
    from ragplan.methods.instructrag.paths import read_paths_jsonl

    out = tmp_path
    assert main(["instructrag", "synth", "--out", str(out / "w"), "--questions", "36", "--seed", "2"]) == 0
    assert main(["instructrag", "split", "--paths", str(out / "w" / "paths.jsonl"), "--out", str(out / "s")]) == 0
    sets = {n: read_paths_jsonl(out / "s" / f"{n}.jsonl") for n in ("support_seen", "query_seen", "support_unseen", "query_unseen")}
    for name, rep in sets.items():
        failed = read_paths_jsonl(out / "s" / f"failed_{name}.jsonl").failed
        assert failed and {p.question for p in failed} <= {p.question for p in rep.successful}
    assert "failed_unmatched: 0 paths" in capsys.readouterr().out
    assert not (out / "s" / "failed.jsonl").exists()
    # --noise-rate with no failed paths of the support questions: a warning, nothing inserted
    assert main(["instructrag", "build-graph", "--paths", str(out / "s" / "support_seen.jsonl"), "--out", str(out / "g0"),
                 "--noise-rate", "0.3", "--json", "--no-progress"]) == 0
    cap = capsys.readouterr()
    assert "warning: --noise-rate 0.3 but no failed paths" in cap.err and json.loads(cap.out.splitlines()[-1])["noisy_paths"] == 0
    # with the set's failed paths (and, by mistake, the query set's): noise of the support questions only
    assert main(["instructrag", "build-graph", "--paths", str(out / "s" / "support_seen.jsonl"),
                 str(out / "s" / "failed_support_seen.jsonl"), str(out / "s" / "failed_query_seen.jsonl"),
                 str(out / "s" / "failed_support_unseen.jsonl"), "--out", str(out / "g"), "--noise-rate", "0.3", "--json",
                 "--no-progress"]) == 0
    cap = capsys.readouterr()
    stats = json.loads(cap.out.splitlines()[-1])
    assert stats["noisy_paths"] > 0 and "not used as noise" in cap.err
    g = InstructionGraph.load(out / "g")
    assert {q["text"] for q in g.questions} == {p.question for p in sets["support_seen"].successful}
    # --insert keeps the graph's δ and model and refuses flags it would ignore
    base = ["instructrag", "build-graph", "--paths", str(out / "s" / "support_unseen.jsonl"), "--out", str(out / "g"),
            "--insert", "--no-progress"]
    assert main(base + ["--delta", "0.6"]) == 2 and "δ = 0.4" in capsys.readouterr().err
    assert main(base + ["--noise-rate", "0.2"]) == 2 and "--noise-rate" in capsys.readouterr().err
    meta = json.loads((out / "g" / "graph.json").read_text())
    (out / "g" / "graph.json").write_text(json.dumps({**meta, "model_fingerprint": "another-model"}))
    assert main(base) == 2 and "another embedding model" in capsys.readouterr().err
    (out / "g" / "graph.json").write_text(json.dumps(meta))
    assert main(base + ["--delta", "0.4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["delta"] == 0.4


def test_synth_rotates_past_exhausted_tasks_and_says_so(tmp_path, capsys):
    """Regression: asked for 240 questions, the world stopped at 149 without a word."""
    w = make_world(240, seed=0)
    assert len(w.successful) == 240 == len({p.question for p in w.successful}) and w.exhausted
    assert len({p.task for p in w.successful}) == 12
    assert main(["instructrag", "synth", "--out", str(tmp_path / "w"), "--questions", "900"]) == 0
    out = capsys.readouterr().out
    assert "note: made 765 distinct questions of the 900 asked for: every task ran out" in out
    assert "questions per task: person 24," in out


def test_llm_reward_failures_score_zero_and_are_counted(world, graph):
    """Regression: an exception from the planning run stopped training, though the docstring promised 0."""
    _, parts = world

    class Down:
        def invoke(self, *a, **kw):
            raise ConnectionError("endpoint down")

    reward = LLMF1Reward(InstructRAGContext(retriever="local", index_dir="unused"))
    reward._graph = Down()
    ex = query_examples(parts["query_seen"][:1], embedder_for_graph())[0]
    assert reward(ex, ex.own_path) == 0.0 and reward(ex, ex.own_path) == 0.0
    assert reward.failures == 2 and "endpoint down" in reward.last_error  # not cached: a later call tries again
    _, _, rep = meta_train(graph, parts["query_seen"], embedder_for_graph(), reward, MetaSettings(epochs=1, questions_per_task=1))
    assert rep.reward_failures > 2 and "ConnectionError" in rep.reward_error
