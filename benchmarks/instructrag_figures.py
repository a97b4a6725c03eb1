"""InstructRAG's LLM-free figures on the synthetic world: ablations (Table 5), unseen tasks before and after adaptation,
δ and K sweeps, noise; the LLM F1 needs ``ragplan eval --method instructrag`` and ``ragplan instructrag report``.
Usage: python benchmarks/instructrag_figures.py [--questions 240] [--seed 0] [--epochs 10] [--out DIR]"""

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
from ragplan.methods.instructrag.figures import format_selection_rows, format_table, selection_quality  # noqa: E402
from ragplan.methods.instructrag.graph import build_instruction_graph, embedder_for_graph  # noqa: E402
from ragplan.methods.instructrag.meta import MetaSettings, adapt_agents, meta_train  # noqa: E402
from ragplan.methods.instructrag.ml_agent import MLAgent  # noqa: E402
from ragplan.methods.instructrag.rl_agent import RLAgent  # noqa: E402
from ragplan.methods.instructrag.reward import ProxyReward  # noqa: E402
from ragplan.methods.instructrag.synth import split_failed, split_paths, write_world  # noqa: E402


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
    seen, unseen = sets["query_seen"], sets["query_unseen"]
    print(f"world: {len(world.passages)} passages, {len(world.successful)} questions "
          f"({', '.join(f'{k} {len(v)}' for k, v in sets.items())}); setup {time.perf_counter() - t0:.1f} s\n")

    def graph(**kw: object):  # the seen support set's graph
        return build_instruction_graph(sets["support_seen"], embedder=emb, **{"delta": 0.4, **kw})

    def quality(g, agents, query, **kw):
        return selection_quality(g, *agents, query, emb, reward=reward, **kw)

    def one(g, agents, query, **kw):
        return quality(g, agents, query, methods=("instructrag",), **kw)[0]

    def figures(r) -> list[str]:
        return [f"{r.action_match:.3f}", f"{r.instruction_f1:.3f}", f"{r.proxy_reward:.3f}"]

    g0 = graph()
    settings = MetaSettings(epochs=args.epochs, seed=args.seed)
    agents, times = {}, {}
    for name, kw in [("instructrag", {}), ("w/o WS", {"ws": False}), ("w/o PG", {"pg": False}),
                     ("w/o PT", {"pt": False}), ("w/o FT", {"ft": False})]:
        t1 = time.perf_counter()
        rl, ml, rep = meta_train(g0, seen, emb, reward, MetaSettings(**{**settings.__dict__, **kw}),
                                 out / "agents" / name.replace("/", "").replace(" ", "_"))
        times[name], agents[name] = time.perf_counter() - t1, (rl, ml)
        results.setdefault("curves", rep.curves)
    print(f"1. Selection quality on the seen tasks' held-out questions (δ = 0.4, K = 3, proxy reward; "
          f"training {times['instructrag']:.1f} s for {args.epochs} epochs)")
    base = agents["instructrag"]
    rows = quality(g0, base, seen)
    for name in ("w/o WS", "w/o PG", "w/o PT", "w/o FT"):
        rows.append(one(g0, agents[name], seen))
        rows[-1].method = f"instructrag {name}"
    names = {"instructrag": "instructrag (RL-Agent → ML-Agent)", "threshold": "w/o RL-Agent (threshold walk)",
             "no_ml": "w/o ML-Agent (RL-Agent's first path)", "rap": "w/o graph (RAP-style stored path)",
             "random": "random stored path"}
    for r in rows:
        r.method = names.get(r.method, r.method)
    print(format_selection_rows(rows) + "\n")
    results["seen"] = [r.__dict__ for r in rows]

    print("2. Unseen tasks: before and after few-shot adaptation (Algorithm 3: G → G′, per-task agents)")
    tasks = {p.task for p in unseen}
    before = quality(g0, base, unseen, methods=("instructrag", "rap"))
    g_prime = graph()  # G stays for the sweeps below
    t1 = time.perf_counter()
    arep = adapt_agents(g_prime, out / "agents" / "instructrag", sets["support_unseen"], emb, reward, settings,
                        out / "adapted")
    adapt_s = time.perf_counter() - t1
    after = quality(g_prime, base, unseen, methods=("instructrag", "rap"),
                    agents_for=_loaded_agents(out / "adapted", tasks))
    base_on_g_prime = one(g_prime, base, unseen)
    g_abl = graph()  # the adaptation ablation: the same G′, agents adapted with the WS / PT steps only
    adapt_agents(g_abl, out / "agents" / "instructrag", sets["support_unseen"], emb, reward,
                 MetaSettings(**{**settings.__dict__, "pg": False, "ft": False}), out / "adapted_no_pg_ft")
    abl = one(g_abl, base, unseen, agents_for=_loaded_agents(out / "adapted_no_pg_ft", tasks))
    for rs, note in ((before, "G, base agents"), (after, "G′, adapted agents"), ([base_on_g_prime], "G′, base agents"),
                     ([abl], "G′, adapted w/o PG, FT")):
        for r in rs:
            r.method += f" ({note})"
    unseen_rows = before + [base_on_g_prime, abl] + after
    print(format_selection_rows(unseen_rows))
    per_task = ", ".join(f"{t} {d['seconds']:.1f} s" for t, d in arep.tasks.items())
    print(f"few-shot adaptation: {adapt_s:.1f} s for {len(arep.tasks)} tasks "
          f"(graph insertion {arep.insert_seconds:.2f} s; {per_task})\n")
    results["unseen"] = [r.__dict__ for r in unseen_rows]
    results["adapt"] = {"seconds": round(adapt_s, 2), "tasks": arep.tasks}

    print("3. δ sweep (Table 6): graph size, build time, training time, selection quality (seen held-out questions)")
    body, results["delta"] = [], []
    for delta in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0):
        g = graph(delta=delta)
        st = g.stats()
        t1 = time.perf_counter()
        trained = meta_train(g, seen, emb, reward, settings)[:2]
        train_s = time.perf_counter() - t1
        r = one(g, trained, seen)
        body.append([f"{delta:.1f}", str(st.nodes), str(st.edges), str(st.junction_nodes), f"{st.build_seconds:.3f}",
                     f"{train_s:.1f}", *figures(r), f"{r.ms:.1f}"])
        results["delta"].append({"delta": delta, **st.to_dict(), "train_s": round(train_s, 2), **r.__dict__})
    print(format_table(["δ", "nodes", "edges", "junctions", "build s", "train s", "action match", "instr F1", "proxy",
                        "ms/q"], body) + "\n")

    print("4. K sweep (Table 7): candidate paths per question")
    body, results["k"] = [], []
    for k in (1, 2, 3, 4, 5):
        r = one(g0, base, seen, k=k)
        body.append([str(k), *figures(r), f"{r.ms:.1f}"])
        results["k"].append({"k": k, **r.__dict__})
    print(format_table(["K", "action match", "instr F1", "proxy", "ms/q"], body))

    print("\n5. Noise (Table 4): failed paths of the support questions inserted into G as if they had succeeded; "
          "agents trained on the noisy graph; the RAP-style store holds the noisy paths too")
    failed_support = split_failed(sets, world.failed)["failed_support_seen"]
    body, results["noise"] = [], []
    for rate in (0.0, 0.1, 0.3, 0.5):
        g = graph(failed=failed_support, noise_rate=rate, seed=args.seed)
        rows_n = quality(g, base if rate == 0 else meta_train(g, seen, emb, reward, settings)[:2], seen,
                         methods=("instructrag", "rap"))
        st = g.stats()
        body.append([f"{rate:.1f}", f"{st.noisy_paths}/{st.paths}"] + [" / ".join(figures(r)) for r in rows_n])
        results["noise"].append({"noise_rate": rate, "noisy_paths": st.noisy_paths, "paths": st.paths,
                                 "rows": [r.__dict__ for r in rows_n]})
    print(format_table(["noise", "noisy/paths", "instructrag (action / F1 / proxy)", "RAP-style (action / F1 / proxy)"],
                       body))
    print(f"\ntraining curves: {out / 'agents' / 'instructrag' / 'curves.png'}; total {time.perf_counter() - t0:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
