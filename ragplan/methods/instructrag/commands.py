"""The ``ragplan instructrag`` sub-commands (argument parsing is in :mod:`ragplan.methods.instructrag.cli`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["run_synth", "run_split", "run_build_graph", "run_stats", "run_train", "run_adapt", "run_figures", "run_report",
           "make_reward"]


def _err(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _read(files: list[str]) -> Any:
    from ragplan.methods.instructrag.paths import read_paths

    return read_paths(files)


def run_synth(args: argparse.Namespace) -> int:
    """Write a synthetic world."""
    from ragplan.methods.instructrag.synth import write_world

    w = write_world(args.out, args.questions, args.seed)
    print(f"{len(w.passages)} passages, {len(w.successful)} successful and {len(w.failed)} failed paths, "
          f"{len(w.hotpot)} HotpotQA-format questions in {args.out}")
    counts: dict[str, int] = defaultdict(int)
    for p in w.successful:
        counts[p.task] += 1
    print("questions per task: " + ", ".join(f"{t} {n}" for t, n in counts.items()))
    limit = f"ran out of distinct questions (the world's {len(w.passages)} entities allow no more)"
    if len(w.successful) < args.questions:
        print(f"note: made {len(w.successful)} distinct questions of the {args.questions} asked for: every task {limit}")
    elif w.exhausted:
        print(f"note: {', '.join(w.exhausted)} {limit}; the other tasks made up the count")
    return 0


def run_split(args: argparse.Namespace) -> int:
    """Split paths into support/query sets of seen and unseen tasks; failed paths follow their question's set.

    ``failed_<set>.jsonl`` holds the failed paths of that set's questions (``failed_support_seen.jsonl``
    is the noise of a graph built from ``support_seen.jsonl``); ``failed_unmatched.jsonl`` those of
    questions with no successful path.
    """
    from ragplan.methods.instructrag.paths import write_paths_jsonl
    from ragplan.methods.instructrag.synth import split_failed, split_paths

    try:
        rep = _read(args.paths)
    except (OSError, ValueError) as exc:
        return _err(str(exc))
    parts = split_paths(rep.successful, query_fraction=args.query_fraction, seed=args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, paths in parts.items():
        write_paths_jsonl(paths, out / f"{name}.jsonl")
        print(f"{name}: {len(paths)} paths, tasks {', '.join(sorted({p.task for p in paths})) or '-'}")
    for name, paths in split_failed(parts, rep.failed).items():
        write_paths_jsonl(paths, out / f"{name}.jsonl")
        print(f"{name}: {len(paths)} paths" + (" (questions with no successful path: never noise)"
                                               if name == "failed_unmatched" else ""))
    print("noise experiment: build-graph --paths support_seen.jsonl failed_support_seen.jsonl --noise-rate R")
    return 0


def _print_stats(stats: Any, as_json: bool) -> None:
    d = stats.to_dict()
    if as_json:
        print(json.dumps(d))
        return
    for k, v in d.items():
        print(f"{k:>15}: {v}")


def _noise_note(rep: Any, rate: float) -> None:
    """Say on stderr what ``--noise-rate`` can insert: nothing without failed paths of the support questions."""
    from ragplan.methods.instructrag.graph import noise_pool

    pool = noise_pool(rep.successful, rep.failed)
    if not pool:
        print(f"warning: --noise-rate {rate} but no failed paths of the support questions in the --paths files "
              f"({len(rep.failed)} failed path(s) read); no noise is inserted. Add the set's failed paths, e.g. "
              "--paths sets/support_seen.jsonl sets/failed_support_seen.jsonl (written by `ragplan instructrag split`)",
              file=sys.stderr)
    elif len(pool) < len(rep.failed):
        print(f"note: {len(rep.failed) - len(pool)} failed path(s) of other questions are not used as noise (they may be "
              "query questions or unseen tasks)", file=sys.stderr)


def _insert_into(args: argparse.Namespace, rep: Any) -> Any:
    """``--insert``: the graph in ``--out`` extended with its own δ and embedding model (ValueError on a conflicting flag)."""
    from ragplan.methods.instructrag.graph import InstructionGraph, graph_embedder, noise_pool

    g = InstructionGraph.load(args.out)
    if args.delta is not None and float(args.delta) != g.delta:
        raise ValueError(f"the graph at {args.out} was built with δ = {g.delta}; --insert keeps it (drop --delta, or rebuild "
                         "without --insert)")
    if args.noise_rate > 0:
        raise ValueError("--noise-rate applies when a graph is built, not to --insert (rebuild without --insert)")
    emb = graph_embedder(g, args.model_path, where=args.out)
    g.insert(sorted(rep.successful, key=lambda p: p.task), emb, progress=not args.no_progress)
    g.failed += noise_pool(rep.successful, rep.failed)
    return g


def run_build_graph(args: argparse.Namespace) -> int:
    """Build or extend an instruction graph."""
    from ragplan.methods.instructrag.graph import GRAPH_FILE, build_instruction_graph, embedder_for_graph

    try:
        rep = _read(args.paths)
    except (OSError, ValueError) as exc:
        return _err(str(exc))
    if not rep.successful:
        return _err(f"no successful paths in {', '.join(args.paths)} ({rep.skipped} skipped: {'; '.join(rep.problems[:3])})")
    if not 0 <= args.noise_rate < 1:
        return _err(f"--noise-rate must be in [0, 1), not {args.noise_rate}")
    try:
        if args.insert and (Path(args.out) / GRAPH_FILE).is_file():
            g = _insert_into(args, rep)
        else:
            if args.noise_rate > 0:
                _noise_note(rep, args.noise_rate)
            g = build_instruction_graph(rep.successful, delta=0.4 if args.delta is None else args.delta, failed=rep.failed,
                                        noise_rate=args.noise_rate, seed=args.seed, embedder=embedder_for_graph(args.model_path),
                                        progress=not args.no_progress)
    except ValueError as exc:
        return _err(str(exc))
    g.save(args.out)
    if rep.skipped:
        print(f"skipped {rep.skipped} block(s)/line(s): {'; '.join(rep.problems[:3])}", file=sys.stderr)
    _print_stats(g.stats(), args.json)
    return 0


def run_stats(args: argparse.Namespace) -> int:
    """Print a graph's statistics."""
    from ragplan.methods.instructrag.graph import InstructionGraph

    try:
        g = InstructionGraph.load(args.graph)
    except ValueError as exc:
        return _err(str(exc))
    _print_stats(g.stats(), args.json)
    return 0


def make_reward(args: argparse.Namespace) -> Any:
    """The reward the flags name (ValueError when it cannot be built)."""
    from ragplan.methods.instructrag.reward import LLMF1Reward, PathMatchReward, ProxyReward

    kind = args.reward or ("proxy" if args.index else "path-match")
    if kind == "path-match":
        return PathMatchReward()
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
    problem = endpoint_problem(model, base)
    if problem:
        raise ValueError(problem)
    return LLMF1Reward(InstructRAGContext(model=model, base_url=base, retriever="local", index_dir=args.index))


def _settings(args: argparse.Namespace) -> Any:
    from ragplan.methods.instructrag.meta import MetaSettings

    return MetaSettings(epochs=args.epochs, k=args.k, seed=args.seed, ws=not args.no_ws, pg=not args.no_pg, pt=not args.no_pt,
                        ft=not args.no_ft, first_order=args.first_order, adapt_steps=getattr(args, "steps", 5))


def _graph_and_reward(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    from ragplan.methods.instructrag.graph import InstructionGraph, graph_embedder

    g = InstructionGraph.load(args.graph)
    emb = graph_embedder(g, where=args.graph)
    return g, emb, make_reward(args)


def run_train(args: argparse.Namespace) -> int:
    """Meta-train the agents and print the curves."""
    from ragplan.methods.instructrag.meta import meta_train

    try:
        g, emb, reward = _graph_and_reward(args)
        rep = _read(args.paths)
    except (OSError, ValueError) as exc:
        return _err(str(exc))
    if not rep.successful:
        return _err("no successful query paths to train on")
    _, _, report = meta_train(g, rep.successful, emb, reward, _settings(args), args.out, progress=not args.no_progress)
    print(f"trained on {report.support} support and {report.query} query paths of {len(report.tasks)} task(s) "
          f"({', '.join(report.tasks)}) with the {report.reward} reward in {report.seconds:.1f} s")
    for k, v in report.curves.items():
        print(f"  {k:>6}: {' '.join(f'{x:.3f}' for x in v)}")
    if report.reward_failures:
        print(f"warning: {report.reward_failures} reward run(s) failed and scored 0 (last: {report.reward_error})", file=sys.stderr)
    print(f"saved to {args.out} (curves.png: the training curves)")
    return 0


def run_adapt(args: argparse.Namespace) -> int:
    """Few-shot adaptation to unseen tasks."""
    from ragplan.methods.instructrag.meta import adapt_agents

    try:
        g, emb, reward = _graph_and_reward(args)
        rep = _read(args.paths)
        report = adapt_agents(g, args.agents, rep.successful, emb, reward, _settings(args), args.out, shots=args.shots,
                              progress=not args.no_progress)
    except (OSError, ValueError) as exc:
        return _err(str(exc))
    print(f"inserted the support paths into the graph in {report.insert_seconds:.2f} s; adapted {len(report.tasks)} task(s) "
          f"in {report.seconds:.2f} s")
    for task, d in report.tasks.items():
        print(f"  {task:<18} {int(d['shots'])} shots  {d['seconds']:.2f} s")
    print(f"saved to {args.out}: graph/ (G′), the base agents and tasks/<task>/ (use --instruction-graph {args.out}/graph "
          f"--agents {args.out})")
    return 0


def run_figures(args: argparse.Namespace) -> int:
    """Path-selection quality table."""
    from ragplan.methods.instructrag.figures import SELECTION_METHODS, format_selection_rows, selection_quality
    from ragplan.methods.instructrag.graph import InstructionGraph, graph_embedder
    from ragplan.methods.instructrag.agents import load_agents

    try:
        g = InstructionGraph.load(args.graph)
        emb = graph_embedder(g, where=args.graph)
        rl, ml = load_agents(args.agents) if args.agents else (None, None)
        rep = _read(args.paths)
        reward = make_reward(argparse.Namespace(reward="proxy", index=args.index)) if args.index else None
    except (OSError, ValueError) as exc:
        return _err(str(exc))
    methods = SELECTION_METHODS if rl is not None else ("threshold", "rap", "random")
    cache: dict[str, Any] = {}

    def agents_for(task: str) -> Any:  # the task's adapted agents when the folder has them (ragplan instructrag adapt)
        if task not in cache:
            cache[task] = load_agents(args.agents, task)
        return cache[task]

    rows = selection_quality(g, rl, ml, rep.successful, emb, methods=methods, reward=reward, k=args.k, threshold=args.threshold,
                             agents_for=agents_for if rl is not None else None)
    if args.json:
        print(json.dumps([r.__dict__ for r in rows]))
    else:
        print(format_selection_rows(rows))
    return 0


def run_report(args: argparse.Namespace) -> int:
    """F1 / EM of eval runs grouped by seen / unseen task (the task from the gold answer and question)."""
    from ragplan.methods.instructrag.tasks import answer_type, task_split

    out: dict[str, Any] = {}
    for run_dir in args.runs:
        f = Path(run_dir) / "results.jsonl"
        if not f.is_file():
            return _err(f"no results.jsonl in {run_dir}")
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        method = ""
        for line in f.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError:
                continue
            method = r.get("method", method)
            task = answer_type(str(r.get("gold", "")), str(r.get("question", "")))
            for key in ("all", task_split(task), f"task: {task}"):
                groups[key].append(r)
        out[f"{run_dir} ({method})"] = {k: {"n": len(v), "f1": round(sum(float(x.get("f1") or 0) for x in v) / len(v), 4),
                                            "em": round(sum(float(x.get("em") or 0) for x in v) / len(v), 4)}
                                        for k, v in sorted(groups.items(), key=lambda kv: (kv[0].startswith("task"), kv[0]))}
    if args.json:
        print(json.dumps(out))
        return 0
    for run, groups_ in out.items():
        print(run)
        for k, v in groups_.items():
            print(f"  {k:<26} n={v['n']:<5} F1 {v['f1']:.3f}  EM {v['em']:.3f}")
    return 0
