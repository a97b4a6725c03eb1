"""InstructRAG's LLM-free figures on the synthetic world: ablations (Table 5), δ sweep (Table 6), K sweep, few-shot time.

What can be measured without an LLM is how good the *selected path* is for held-out questions whose
own successful path is known (:mod:`ragplan.methods.instructrag.figures`): the action-sequence match,
the instruction F1 and the retrieval-only proxy reward of the executed path over the world's local
index. The LLM's F1 with that path in its prompt (the paper's numbers) needs an endpoint:
``ragplan eval --method instructrag … --benchmark hotpotqa`` then ``ragplan instructrag report``.

Steps: a synthetic world (``--questions``, ``--seed``) → its local FAISS index → support/query sets of
the 6 seen and 6 unseen tasks → the instruction graph of the seen support set (δ = 0.4) →
meta-training with the proxy reward (full, and with WS / PG / PT / FT switched off) → few-shot
adaptation on the unseen support set → tables:

1. selection quality on the seen query set for every method and ablation (Table 5's rows);
2. the same on the unseen query set before and after few-shot adaptation, with adaptation time;
3. δ sweep: graph size, build time, training time and selection quality (Table 6);
4. K sweep: selection quality and time per question (Table 7);
5. noise: failed paths of the support questions in the graph (and in the RAP-style store), 0–50 % (Table 4);
and the training curves as ``curves.png`` in the output folder. A measurement, not a test.

    python benchmarks/instructrag_figures.py [--questions 240] [--seed 0] [--epochs 10] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragplan.state.instructrag import InstructRAGContext  # noqa: E402
from ragplan.tools.retrievers import make_retriever  # noqa: E402
from ragplan.tools.textindex import build_index  # noqa: E402
from ragplan.methods.instructrag.agents import load_agents  # noqa: E402
from ragplan.methods.instructrag.figures import format_selection_rows, selection_quality  # noqa: E402
from ragplan.methods.instructrag.graph import build_instruction_graph, embedder_for_graph  # noqa: E402
from ragplan.methods.instructrag.meta import MetaSettings, adapt_agents, meta_train  # noqa: E402
from ragplan.methods.instructrag.ml_agent import MLAgent  # noqa: E402
from ragplan.methods.instructrag.rl_agent import RLAgent  # noqa: E402
from ragplan.methods.instructrag.reward import ProxyReward  # noqa: E402
from ragplan.methods.instructrag.synth import split_failed, split_paths, write_world  # noqa: E402


def _table(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in [head] + rows)


def _loaded_agents(folder: Path, tasks: set[str]) -> Callable[[str], tuple[RLAgent, MLAgent]]:
    """Each task's adapted agents, loaded once before the clock starts (as the CLI and a running graph keep them)."""
    loaded = {t: load_agents(folder, t) for t in sorted(tasks)}
    return lambda task: loaded[task] if task in loaded else load_agents(folder, task)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=240)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--out", default="")
    ap.add_argument("--json", default="", help="also write every figure to this JSON file")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = Path(args.out or tempfile.mkdtemp(prefix="instructrag-figures-"))
    results: dict = {}
    t0 = time.perf_counter()
    world = write_world(out / "world", args.questions, args.seed)
    build_index(out / "world" / "passages.jsonl", out / "index", progress=False)
    emb = embedder_for_graph()
    reward = ProxyReward(make_retriever(InstructRAGContext(retriever="local", index_dir=str(out / "index"))))
    sets = split_paths(world.successful, seed=args.seed)
    print(f"world: {len(world.passages)} passages, {len(world.successful)} questions "
          f"({', '.join(f'{k} {len(v)}' for k, v in sets.items())}); setup {time.perf_counter() - t0:.1f} s\n")

    graph = build_instruction_graph(sets["support_seen"], delta=0.4, embedder=emb)
    settings = MetaSettings(epochs=args.epochs, seed=args.seed)
    agents = {}
    times = {}
    for name, kw in [("instructrag", {}), ("w/o WS", {"ws": False}), ("w/o PG", {"pg": False}), ("w/o PT", {"pt": False}),
                     ("w/o FT", {"ft": False})]:
        s = MetaSettings(**{**settings.__dict__, **kw})
        t1 = time.perf_counter()
        rl, ml, rep = meta_train(graph, sets["query_seen"], emb, reward, s, out / "agents" / name.replace("/", "").replace(" ", "_"))
        times[name] = time.perf_counter() - t1
        agents[name] = (rl, ml)
        if name == "instructrag":
            results["curves"] = rep.curves
    print(f"1. Selection quality on the seen tasks' held-out questions (δ = 0.4, K = 3, proxy reward; "
          f"training {times['instructrag']:.1f} s for {args.epochs} epochs)")
    rl, ml = agents["instructrag"]
    rows = selection_quality(graph, rl, ml, sets["query_seen"], emb, reward=reward)
    for name in ("w/o WS", "w/o PG", "w/o PT", "w/o FT"):
        r = selection_quality(graph, *agents[name], sets["query_seen"], emb, methods=("instructrag",), reward=reward)[0]
        r.method = f"instructrag {name}"
        rows.append(r)
    names = {"instructrag": "instructrag (RL-Agent → ML-Agent)", "threshold": "w/o RL-Agent (threshold walk)",
             "no_ml": "w/o ML-Agent (RL-Agent's first path)", "rap": "w/o graph (RAP-style stored path)",
             "random": "random stored path"}
    for r in rows:
        r.method = names.get(r.method, r.method)
    print(format_selection_rows(rows) + "\n")
    results["seen"] = [r.__dict__ for r in rows]

    print("2. Unseen tasks: before and after few-shot adaptation (Algorithm 3: G → G′, per-task agents)")
    before = selection_quality(graph, rl, ml, sets["query_unseen"], emb, methods=("instructrag", "rap"), reward=reward)
    g_prime = build_instruction_graph(sets["support_seen"], delta=0.4, embedder=emb)  # G stays for the sweeps below
    t1 = time.perf_counter()
    adapted_dir = out / "adapted"
    arep = adapt_agents(g_prime, out / "agents" / "instructrag", sets["support_unseen"], emb, reward, settings, adapted_dir)
    adapt_s = time.perf_counter() - t1
    unseen_tasks = {p.task for p in sets["query_unseen"]}
    after = selection_quality(g_prime, rl, ml, sets["query_unseen"], emb, methods=("instructrag", "rap"), reward=reward,
                              agents_for=_loaded_agents(adapted_dir, unseen_tasks))
    base_on_g_prime = selection_quality(g_prime, rl, ml, sets["query_unseen"], emb, methods=("instructrag",), reward=reward)
    # the adaptation ablation: the same G′, agents adapted with the WS / PT steps only (no PG / FT step)
    g_abl = build_instruction_graph(sets["support_seen"], delta=0.4, embedder=emb)
    abl_dir = out / "adapted_no_pg_ft"
    adapt_agents(g_abl, out / "agents" / "instructrag", sets["support_unseen"], emb, reward,
                 MetaSettings(**{**settings.__dict__, "pg": False, "ft": False}), abl_dir)
    abl = selection_quality(g_abl, rl, ml, sets["query_unseen"], emb, methods=("instructrag",), reward=reward,
                            agents_for=_loaded_agents(abl_dir, unseen_tasks))
    for r in before:
        r.method += " (G, base agents)"
    for r in after:
        r.method += " (G′, adapted agents)"
    base_on_g_prime[0].method += " (G′, base agents)"
    abl[0].method += " (G′, adapted w/o PG, FT)"
    print(format_selection_rows(before + base_on_g_prime + abl + after))
    per_task = ", ".join(f"{t} {d['seconds']:.1f} s" for t, d in arep.tasks.items())
    print(f"few-shot adaptation: {adapt_s:.1f} s for {len(arep.tasks)} tasks (graph insertion {arep.insert_seconds:.2f} s; "
          f"{per_task})\n")
    results["unseen"] = [r.__dict__ for r in before + base_on_g_prime + abl + after]
    results["adapt"] = {"seconds": round(adapt_s, 2), "tasks": arep.tasks}

    print("3. δ sweep (Table 6): graph size, build time, training time, selection quality (seen held-out questions)")
    body = []
    sweep = []
    for delta in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0):
        g = build_instruction_graph(sets["support_seen"], delta=delta, embedder=emb)
        st = g.stats()
        t1 = time.perf_counter()
        rl_d, ml_d, _ = meta_train(g, sets["query_seen"], emb, reward, settings)
        train_s = time.perf_counter() - t1
        r = selection_quality(g, rl_d, ml_d, sets["query_seen"], emb, methods=("instructrag",), reward=reward)[0]
        body.append([f"{delta:.1f}", str(st.nodes), str(st.edges), str(st.junction_nodes), f"{st.build_seconds:.3f}",
                     f"{train_s:.1f}", f"{r.action_match:.3f}", f"{r.instruction_f1:.3f}", f"{r.proxy_reward:.3f}", f"{r.ms:.1f}"])
        sweep.append({"delta": delta, **st.to_dict(), "train_s": round(train_s, 2), **r.__dict__})
    print(_table(["δ", "nodes", "edges", "junctions", "build s", "train s", "action match", "instr F1", "proxy", "ms/q"], body) + "\n")
    results["delta"] = sweep

    print("4. K sweep (Table 7): candidate paths per question")
    body = []
    ks = []
    for k in (1, 2, 3, 4, 5):
        r = selection_quality(graph, rl, ml, sets["query_seen"], emb, methods=("instructrag",), reward=reward, k=k)[0]
        body.append([str(k), f"{r.action_match:.3f}", f"{r.instruction_f1:.3f}", f"{r.proxy_reward:.3f}", f"{r.ms:.1f}"])
        ks.append({"k": k, **r.__dict__})
    print(_table(["K", "action match", "instr F1", "proxy", "ms/q"], body))
    results["k"] = ks

    print("\n5. Noise (Table 4): failed paths of the support questions inserted into G as if they had succeeded; agents "
          "trained on the noisy graph; the RAP-style store holds the noisy paths too")
    failed_support = split_failed(sets, world.failed)["failed_support_seen"]
    body = []
    noise = []
    for rate in (0.0, 0.1, 0.3, 0.5):
        g = build_instruction_graph(sets["support_seen"], delta=0.4, failed=failed_support, noise_rate=rate, seed=args.seed,
                                    embedder=emb)
        rl_n, ml_n = (rl, ml) if rate == 0 else meta_train(g, sets["query_seen"], emb, reward, settings)[:2]
        rows_n = selection_quality(g, rl_n, ml_n, sets["query_seen"], emb, methods=("instructrag", "rap"), reward=reward)
        st = g.stats()
        body.append([f"{rate:.1f}", f"{st.noisy_paths}/{st.paths}"] +
                    [f"{r.action_match:.3f} / {r.instruction_f1:.3f} / {r.proxy_reward:.3f}" for r in rows_n])
        noise.append({"noise_rate": rate, "noisy_paths": st.noisy_paths, "paths": st.paths, "rows": [r.__dict__ for r in rows_n]})
    print(_table(["noise", "noisy/paths", "instructrag (action / F1 / proxy)", "RAP-style (action / F1 / proxy)"], body))
    results["noise"] = noise
    print(f"\ntraining curves: {out / 'agents' / 'instructrag' / 'curves.png'}; total {time.perf_counter() - t0:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
