"""``ragplan instructrag …``: data, instruction graph (Algorithm 1), meta-training (2), adaptation (3) and LLM-free
path-selection figures (docs/methods/instructrag.md). Exit codes: 0 done; 2 bad input."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter, defaultdict
from dataclasses import asdict
from functools import cache
from pathlib import Path
from typing import Any, get_args, get_type_hints

from ragplan.cli.errors import fail
from ragplan.methods.instructrag.paths import read_paths, write_paths_jsonl
from ragplan.methods.instructrag.synth import split_failed, split_paths, write_world
from ragplan.methods.instructrag.tasks import answer_type, task_split

__all__ = ["add_parser", "run", "make_reward"]


def _reward_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reward", choices=("proxy", "path-match", "llm"), default=None,
                   help="proxy: retrieval-only over --index (default with --index); path-match: the question's own "
                        "path, instructions matched by meaning (default without); llm: answer F1 of planning with the path (needs --model)")
    p.add_argument("--index", default="", metavar="DIR", help="the local passage index for the proxy or LLM reward")
    p.add_argument("--model", default="", help="llm reward: chat model provider:name [env RAGPLAN_MODEL]")
    p.add_argument("--base-url", default="", help="llm reward: OpenAI-compatible endpoint [env RAGPLAN_BASE_URL]")
    p.add_argument("--epochs", type=int, default=10, help="meta-training epochs (default 10)")
    p.add_argument("--k", type=int, default=3, help="K candidate paths (default 3)")
    p.add_argument("--no-ws", action="store_true", help="ablation: no warm start (BCE) of the RL-Agent")
    p.add_argument("--no-pg", action="store_true", help="ablation: no policy gradient (REINFORCE) of the RL-Agent")
    p.add_argument("--no-pt", action="store_true", help="ablation: no pre-training (QPA + QPM) of the ML-Agent")
    p.add_argument("--no-ft", action="store_true", help="ablation: no fine-tuning of the ML-Agent")
    p.add_argument("--first-order", action="store_true", help="first-order MAML (drop second-order terms)")


def add_parser(sub: Any) -> None:
    """The ``instructrag`` command and its sub-commands."""
    top = sub.add_parser("instructrag", help="InstructRAG: instruction graph, RL-/ML-Agent training, few-shot adaptation",
                         description="InstructRAG (Wang et al., SIGIR 2025): build the instruction graph, meta-train and "
                                     "adapt the agents, and measure path selection without an LLM.")
    s = top.add_subparsers(dest="instructrag_command", metavar="SUBCOMMAND", required=True)
    seed, as_json, progress, graph, out = (argparse.ArgumentParser(add_help=False) for _ in range(5))  # shared flags
    seed.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    out.add_argument("--out", required=True, metavar="DIR")
    graph.add_argument("--graph", required=True, metavar="DIR", help="the instruction graph (train: the support set's)")
    as_json.add_argument("--json", action="store_true", help="print JSON")
    progress.add_argument("--no-progress", action="store_true", help="no progress bar")
    p = s.add_parser("synth", parents=[seed, out], help="write a synthetic multi-hop world (passages, paths, HotpotQA)")
    p.add_argument("--questions", type=int, default=240, help="questions (default 240)")
    p = s.add_parser("split", parents=[seed, out], help="split paths into support/query sets of seen and unseen tasks")
    p.add_argument("--paths", nargs="+", required=True, metavar="FILE")
    p.add_argument("--query-fraction", type=float, default=0.3, help="share of each task's paths in its query set (0.3)")
    p = s.add_parser("build-graph", parents=[seed, as_json, progress, out],
                     help="build (or extend) the instruction graph from successful paths (Algorithm 1)")
    p.add_argument("--paths", nargs="+", required=True, metavar="FILE", help="JSONL paths or ReAct/Reflexion trajectory logs")
    p.add_argument("--delta", type=float, default=None, help="δ: similarity to join a node (default and paper: 0.4)")
    p.add_argument("--insert", action="store_true", help="insert into the graph already in --out (incremental; keeps its δ "
                   "and embedding model: a different --delta or --model-path is refused, --noise-rate too)")
    p.add_argument("--noise-rate", type=float, default=0.0, help="share of the graph's paths that are failed paths of the "
                   "support questions, inserted as noise (robustness; pass the set's failed_*.jsonl too)")
    p.add_argument("--model-path", default="", metavar="DIR", help="a local Sentence-BERT model (default all-MiniLM-L6-v2; "
                   "with --insert, the graph's own)")
    s.add_parser("stats", parents=[as_json, graph], help="print an instruction graph's statistics")
    p = s.add_parser("train", parents=[seed, progress, graph], help="meta-train the RL- and ML-Agent (Algorithm 2)")
    p.add_argument("--paths", nargs="+", required=True, metavar="FILE", help="the query set's paths")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the agents")
    _reward_args(p)
    p = s.add_parser("adapt", parents=[seed, progress, graph], help="few-shot adaptation to unseen tasks (Algorithm 3)")
    p.add_argument("--agents", required=True, metavar="DIR")
    p.add_argument("--paths", nargs="+", required=True, metavar="FILE", help="the unseen tasks' support paths")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the extended graph (OUT/graph) and the agents")
    p.add_argument("--shots", type=int, default=0, help="paths per task (0 = all)")
    p.add_argument("--steps", type=int, default=5, help="adaptation gradient steps per task (default 5)")
    _reward_args(p)
    p = s.add_parser("figures", parents=[as_json, graph],
                     help="path-selection quality on held-out questions, without an LLM")
    p.add_argument("--agents", default="", metavar="DIR")
    p.add_argument("--paths", nargs="+", required=True, metavar="FILE", help="held-out questions' own successful paths")
    p.add_argument("--index", default="", metavar="DIR", help="a local index: adds the proxy reward")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--threshold", type=float, default=None, help="the threshold walk's inclusion threshold (default: the "
                   "graph's calibrated one)")
    p = s.add_parser("report", parents=[as_json],
                     help="F1 and EM of `ragplan eval` runs by seen / unseen task and by task")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR")


def run(args: argparse.Namespace) -> int:
    """Run the chosen ``instructrag`` sub-command."""
    try:
        return {"synth": run_synth, "split": run_split, "build-graph": run_build_graph, "stats": run_stats, "train": run_train,
                "adapt": run_adapt, "figures": run_figures, "report": run_report}[args.instructrag_command](args)
    except (OSError, ValueError) as exc:  # a missing or unreadable file or folder, a flag that cannot be used, no reward
        return fail(str(exc))


def run_synth(args: argparse.Namespace) -> int:
    """Write a synthetic world."""
    w = write_world(args.out, args.questions, args.seed)
    print(f"{len(w.passages)} passages, {len(w.successful)} successful and {len(w.failed)} failed paths, "
          f"{len(w.hotpot)} HotpotQA-format questions in {args.out}")
    print("questions per task: " + ", ".join(f"{t} {n}" for t, n in Counter(p.task for p in w.successful).items()))
    limit = f"ran out of distinct questions (the world's {len(w.passages)} entities allow no more)"
    if len(w.successful) < args.questions:
        print(f"note: made {len(w.successful)} distinct questions of the {args.questions} asked for: every task {limit}")
    elif w.exhausted:
        print(f"note: {', '.join(w.exhausted)} {limit}; the other tasks made up the count")
    return 0


def run_split(args: argparse.Namespace) -> int:
    """Split paths into support/query sets of seen and unseen tasks; ``failed_<set>.jsonl`` holds the failed paths of
    that set's questions (the noise of a graph built from it), ``failed_unmatched.jsonl`` those of the others."""
    rep = read_paths(args.paths)
    parts = split_paths(rep.successful, query_fraction=args.query_fraction, seed=args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, paths in {**parts, **split_failed(parts, rep.failed)}.items():
        write_paths_jsonl(paths, out / f"{name}.jsonl")
        about = (f", tasks {', '.join(sorted({p.task for p in paths})) or '-'}" if name in parts
                 else " (questions with no successful path: never noise)" if name == "failed_unmatched" else "")
        print(f"{name}: {len(paths)} paths{about}")
    print("noise experiment: build-graph --paths support_seen.jsonl failed_support_seen.jsonl --noise-rate R")
    return 0


def _print_stats(stats: Any, as_json: bool) -> None:
    d = asdict(stats)
    print(json.dumps(d) if as_json else "\n".join(f"{k:>15}: {v}" for k, v in d.items()))


def run_build_graph(args: argparse.Namespace) -> int:
    """Build an instruction graph, or with ``--insert`` extend the one in ``--out`` keeping its δ and model."""
    from ragplan.methods.instructrag.graph import (
        GRAPH_FILE, InstructionGraph, build_instruction_graph, embedder_for_graph, graph_embedder, noise_pool,
    )

    rep = read_paths(args.paths)
    if not rep.successful:
        return fail(f"no successful paths in {', '.join(args.paths)} ({rep.skipped} skipped: {'; '.join(rep.problems[:3])})")
    if not 0 <= args.noise_rate < 1:
        return fail(f"--noise-rate must be in [0, 1), not {args.noise_rate}")
    pool = noise_pool(rep.successful, rep.failed)
    if args.insert and (Path(args.out) / GRAPH_FILE).is_file():
        g = InstructionGraph.load(args.out)
        if args.delta is not None and float(args.delta) != g.delta:
            return fail(f"the graph at {args.out} was built with δ = {g.delta}; --insert keeps it (drop --delta, or "
                        "rebuild without --insert)")
        if args.noise_rate > 0:
            return fail("--noise-rate applies when a graph is built, not to --insert (rebuild without --insert)")
        g.insert(sorted(rep.successful, key=lambda p: p.task), graph_embedder(g, args.model_path, where=args.out),
                 progress=not args.no_progress)
        g.failed += pool
    else:
        if args.noise_rate > 0 and not pool:
            print(f"warning: --noise-rate {args.noise_rate} but no failed paths of the support questions in the --paths "
                  f"files ({len(rep.failed)} failed path(s) read); no noise is inserted. Add the set's failed paths, e.g. "
                  "--paths sets/support_seen.jsonl sets/failed_support_seen.jsonl (written by `ragplan instructrag "
                  "split`)", file=sys.stderr)
        elif args.noise_rate > 0 and len(pool) < len(rep.failed):
            print(f"note: {len(rep.failed) - len(pool)} failed path(s) of other questions are not used as noise (they "
                  "may be query questions or unseen tasks)", file=sys.stderr)
        g = build_instruction_graph(rep.successful, delta=0.4 if args.delta is None else args.delta, failed=rep.failed,
                                    noise_rate=args.noise_rate, seed=args.seed, embedder=embedder_for_graph(args.model_path),
                                    progress=not args.no_progress)
    g.save(args.out)
    if rep.skipped:
        print(f"skipped {rep.skipped} log block(s): {'; '.join(rep.problems[:3])}", file=sys.stderr)
    _print_stats(g.stats(), args.json)
    both = sorted({p.question for p in rep.successful} & {p.question for p in rep.failed})
    print(f"failed_kept: {len(g.failed)} failed path(s) of the {len(both)} question(s) with both a failed and a successful "
          "trajectory in --paths" + (f" (e.g. {both[0]!r}); --noise-rate inserts them as noise" if both else
                                     "; with none, the noise experiment (--noise-rate) cannot run on these files"),
          file=sys.stderr if args.json else sys.stdout)
    return 0


def run_stats(args: argparse.Namespace) -> int:
    """Print a graph's statistics."""
    from ragplan.methods.instructrag.graph import InstructionGraph

    _print_stats(InstructionGraph.load(args.graph).stats(), args.json)
    return 0


def make_reward(args: argparse.Namespace, embedder: Any = None) -> Any:
    """The reward the flags name (ValueError when it cannot be built); ``embedder`` is the graph's."""
    from ragplan.methods.instructrag.reward import LLMF1Reward, PathMatchReward, ProxyReward

    kind = args.reward or ("proxy" if args.index else "path-match")
    if kind == "path-match":
        return PathMatchReward(embedder)
    if not args.index:
        raise ValueError(f"the {kind} reward needs --index DIR (a local passage index: `ragplan index build`)")
    from ragplan.state.instructrag import InstructRAGContext
    from ragplan.tools.retrievers import make_retriever

    if kind == "proxy":
        return ProxyReward(make_retriever(InstructRAGContext(retriever="local", index_dir=args.index)))
    model = args.model or os.environ.get("RAGPLAN_MODEL", "")
    if not model:
        raise ValueError("the llm reward needs --model provider:name (and --base-url for a local server)")
    from ragplan.llm import endpoint_problem

    base = args.base_url or os.environ.get("RAGPLAN_BASE_URL", "")
    if problem := endpoint_problem(model, base):
        raise ValueError(problem)
    return LLMF1Reward(InstructRAGContext(model=model, base_url=base, retriever="local", index_dir=args.index))


def _settings(args: argparse.Namespace) -> Any:
    from ragplan.methods.instructrag.meta import MetaSettings

    return MetaSettings(epochs=args.epochs, k=args.k, seed=args.seed, ws=not args.no_ws, pg=not args.no_pg, pt=not args.no_pt,
                        ft=not args.no_ft, first_order=args.first_order, adapt_steps=getattr(args, "steps", 5))


def _graph(args: argparse.Namespace) -> tuple[Any, Any]:
    """The graph of ``--graph`` and its embedder."""
    from ragplan.methods.instructrag.graph import InstructionGraph, graph_embedder

    g = InstructionGraph.load(args.graph)
    return g, graph_embedder(g, where=args.graph)


def run_train(args: argparse.Namespace) -> int:
    """Meta-train the agents and print the curves."""
    from ragplan.methods.instructrag.meta import NothingLearned, meta_train

    if args.epochs < 1:
        return fail(f"--epochs {args.epochs}: train at least one epoch (0 would save the agents untrained)")
    g, emb = _graph(args)
    reward, rep = make_reward(args, emb), read_paths(args.paths)
    if not rep.successful:
        return fail("no successful query paths to train on")
    try:
        _, _, report = meta_train(g, rep.successful, emb, reward, _settings(args), args.out, progress=not args.no_progress)
    except NothingLearned as exc:
        return fail(str(exc), 1)
    print(f"trained on {report.support} support and {report.query} query paths of {len(report.tasks)} task(s) "
          f"({', '.join(report.tasks)}) with the {report.reward} reward in {report.seconds:.1f} s")
    curves = dict(report.curves)
    if "reward" in curves:
        print(f"  reward ({report.reward}) per epoch, mean ± spread: " + " ".join(
            f"{m:.3f}±{d:.3f}" for m, d in zip(curves.pop("reward"), curves.pop("reward_sd"))))
    for k, v in curves.items():
        print(f"  {k:>6}: {' '.join(f'{x:.3f}' for x in v)}")
    if report.reward_failures:
        print(f"warning: {report.reward_failures} reward run(s) failed and scored 0 (last: {report.reward_error})", file=sys.stderr)
    print(f"saved to {args.out} (curves.png: the training curves)")
    return 0


def run_adapt(args: argparse.Namespace) -> int:
    """Few-shot adaptation to unseen tasks."""
    from ragplan.methods.instructrag.meta import adapt_agents

    g, emb = _graph(args)
    reward = make_reward(args, emb)
    report = adapt_agents(g, args.agents, read_paths(args.paths).successful, emb, reward, _settings(args), args.out,
                          shots=args.shots, progress=not args.no_progress)
    print(f"inserted the support paths into the graph in {report.insert_seconds:.2f} s; adapted {len(report.tasks)} task(s) "
          f"in {report.seconds:.2f} s")
    for task, d in report.tasks.items():
        print(f"  {task:<18} {int(d['shots'])} shots  {d['seconds']:.2f} s")
    print(f"saved to {args.out}: graph/ (G′), the base agents and tasks/<task>/ (use --instruction-graph {args.out}/graph "
          f"--agents {args.out})")
    return 0


def run_figures(args: argparse.Namespace) -> int:
    """Path-selection quality table."""
    from ragplan.methods.instructrag.selection import load_agents
    from ragplan.methods.instructrag.figures import SELECTION_METHODS, format_selection_rows, selection_quality

    g, emb = _graph(args)
    rl, ml = load_agents(args.agents) if args.agents else (None, None)
    query = read_paths(args.paths).successful
    reward = make_reward(argparse.Namespace(reward="proxy", index=args.index)) if args.index else None
    agents_for = cache(lambda task: load_agents(args.agents, task))  # a task's adapted agents when the folder has them
    rows = selection_quality(g, rl, ml, query, emb, reward=reward, k=args.k,
                             methods=tuple(m for m in SELECTION_METHODS if rl or m not in ("instructrag", "no_ml")),
                             threshold=args.threshold, agents_for=agents_for if rl is not None else None)
    print(json.dumps([r.__dict__ for r in rows]) if args.json else format_selection_rows(rows))
    return 0


def run_report(args: argparse.Namespace) -> int:
    """F1 / EM of eval runs, one row per run labelled with its ``path_selection`` (trained agents, untrained agents,
    majority path, constant plan), overall, by seen / unseen task and by task (from the gold answer and question)."""
    from ragplan.eval.figures import format_table
    from ragplan.eval.runfolder import RunFolder, RunSettings
    from ragplan.state.instructrag import InstructRAGContext

    order = get_args(get_type_hints(InstructRAGContext)["path_selection"])
    runs: list[dict[str, Any]] = []
    for run_dir in args.runs:
        folder = RunFolder(run_dir)
        if not folder.results_file.is_file():
            return fail(f"no results.jsonl in {run_dir}")
        st = RunSettings.load(folder.settings_file) if folder.settings_file.is_file() else None
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in folder.load_records().values():  # a bad line is named (file:line) and left out
            task = answer_type(str(r.get("gold", "")), str(r.get("question", "")))
            for key in ("all", task_split(task), f"task: {task}"):
                groups[key].append(r)
        stats = {k: {"n": len(v), **{m: round(sum(float(x.get(m) or 0) for x in v) / len(v), 4) for m in ("f1", "em")}}
                 for k, v in sorted(groups.items(), key=lambda kv: (kv[0].startswith("task"), kv[0]))}
        method = st.method if st else next((str(r.get("method", "")) for r in groups.get("all", [])), "")
        selection = str(st.context.get("path_selection", "agents")) if st else "agents"  # the context's default
        runs.append({"run": run_dir, "method": method, "selection": selection, "groups": stats})
    runs.sort(key=lambda r: order.index(r["selection"]) if r["selection"] in order else len(order))
    if args.json:
        print(json.dumps(runs))
        return 0

    def cells(g: dict[str, Any] | None) -> list[str]:
        return [f"{g['f1']:.3f}", f"{g['em']:.3f}"] if g else ["-", "-"]

    print(format_table(["selection", "method", "n", "F1", "EM", "seen F1", "seen EM", "unseen F1", "unseen EM", "run"], [
        [r["selection"], r["method"], r["groups"].get("all", {}).get("n", 0),
         *[c for k in ("all", "seen", "unseen") for c in cells(r["groups"].get(k))], r["run"]] for r in runs], style="plain"))
    tasks = sorted({k for r in runs for k in r["groups"] if k.startswith("task: ")})
    print("\n" + format_table(["task", "selection", "n", "F1", "EM", "run"], [
        [t[6:], r["selection"], r["groups"][t]["n"], *cells(r["groups"][t]), r["run"]]
        for t in tasks for r in runs if t in r["groups"]], style="plain"))
    return 0
