"""LLM-free figures of InstructRAG: how good is the selected path, without asking an LLM to plan with it?

For held-out questions (a query set) whose own successful path is known, every selection method picks
one path and it is compared with the question's own path:

* ``action match`` — 1 − normalised edit distance between the two action sequences
  (``Search Search Lookup Finish``), i.e. does the plan have the right shape;
* ``instruction F1`` — the same instructions (case-insensitive), i.e. the right entities and keywords;
* ``proxy reward`` — the retrieval-only reward of the executed path (supporting-title recall, answer
  reached) when a corpus index is given;
* ``ms`` — selection time per question (walk + pick, embeddings cached).

Methods: ``instructrag`` (RL-Agent → ML-Agent), ``threshold`` (threshold walk → ML-Agent; no
RL-Agent), ``no_ml`` (RL-Agent's first path), ``rap`` (the most similar stored question's path, no
graph), ``random`` (a random stored path: the floor).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ragplan.methods.instructrag.graph import InstructionGraph
from ragplan.methods.instructrag.ml_agent import MLAgent, path_backbone_vectors
from ragplan.methods.instructrag.paths import Instruction, InstructionPath
from ragplan.methods.instructrag.reward import PathReward, QueryExample, instruction_f1
from ragplan.methods.instructrag.rl_agent import RLAgent, threshold_decider, traverse

__all__ = ["SELECTION_METHODS", "SelectionRow", "action_match", "select_path_offline", "selection_quality", "format_selection_rows"]

SELECTION_METHODS = ("instructrag", "threshold", "no_ml", "rap", "random")


def action_match(a: list[Instruction], b: list[Instruction]) -> float:
    """1 − normalised Levenshtein distance between the action sequences of two paths."""
    x, y = [i.action for i in a], [i.action for i in b]
    if not x and not y:
        return 1.0
    d = list(range(len(y) + 1))
    for i, ca in enumerate(x, start=1):
        prev, d[0] = d[0], i
        for j, cb in enumerate(y, start=1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (ca != cb))
    return 1.0 - d[len(y)] / max(len(x), len(y))


def select_path_offline(method: str, graph: InstructionGraph, rl: RLAgent | None, ml: MLAgent | None, ex: QueryExample,
                        embedder: Any, *, k: int = 3, threshold: float = 0.4, rng: random.Random | None = None) -> list[Instruction]:
    """The path ``method`` selects for ``ex`` (empty when it finds none)."""
    g = graph
    if method in ("rap", "random"):
        live = list(range(len(g.paths)))  # the whole store, noisy paths included (the paper's RAP keeps them)
        if not live:
            return []
        if method == "random":
            return g.path_instructions((rng or random.Random(0)).choice(live))
        sims = g.qvectors @ ex.qvec
        best = max(live, key=lambda i: (float(sims[g.paths[i]["question"]]), -i))
        return g.path_instructions(best)
    if method == "threshold":
        res = traverse(g, ex.qvec, threshold_decider(threshold), k=k)
    else:
        if rl is None:
            raise ValueError(f"{method} needs an RL-Agent")
        res = traverse(g, ex.qvec, rl.greedy(), k=k, start_nodes=rl.start_nodes, max_len=rl.max_len)
    paths = [[g.instruction(i) for i in p] for p in res.paths]
    if not paths:
        return []
    if method == "no_ml" or ml is None:
        return paths[0]
    vecs = path_backbone_vectors([[i.text for i in p] for p in paths], embedder, g.instruction_vectors())
    return paths[ml.pick(ex.qvec, vecs)]


@dataclass
class SelectionRow:
    """Mean figures of one method over the query questions."""

    method: str
    questions: int
    found: float
    """Share of questions with a path."""
    action_match: float
    instruction_f1: float
    proxy_reward: float | None
    ms: float


def selection_quality(graph: InstructionGraph, rl: RLAgent | None, ml: MLAgent | None, query: list[InstructionPath],
                      embedder: Any, *, methods: tuple[str, ...] = SELECTION_METHODS, reward: PathReward | None = None,
                      k: int = 3, threshold: float = 0.4, seed: int = 0,
                      agents_for: Callable[[str], tuple[RLAgent, MLAgent]] | None = None) -> list[SelectionRow]:
    """One :class:`SelectionRow` per method (see the module docstring); ``agents_for(task)`` gives per-task (adapted) agents."""
    from ragplan.methods.instructrag.meta import query_examples

    exs = query_examples(query, embedder)
    rows = []
    for m in methods:
        rng = random.Random(seed)
        am, f1, rw, found = [], [], [], 0
        t0 = time.perf_counter()
        picks = []
        for ex in exs:
            a_rl, a_ml = agents_for(ex.task) if agents_for is not None else (rl, ml)
            picks.append(select_path_offline(m, graph, a_rl, a_ml, ex, embedder, k=k, threshold=threshold, rng=rng))
        ms = 1000 * (time.perf_counter() - t0) / max(1, len(exs))
        for ex, p in zip(exs, picks):
            found += bool(p)
            am.append(action_match(p, ex.own_path))
            f1.append(instruction_f1(p, ex.own_path))
            if reward is not None:
                rw.append(reward(ex, p) if p else 0.0)
        rows.append(SelectionRow(m, len(exs), round(found / max(1, len(exs)), 3), round(float(np.mean(am)) if am else 0.0, 3),
                                 round(float(np.mean(f1)) if f1 else 0.0, 3),
                                 round(float(np.mean(rw)), 3) if rw else None, round(ms, 2)))
    return rows


def format_selection_rows(rows: list[SelectionRow]) -> str:
    """A plain table of selection-quality rows."""
    head = ["method", "questions", "found", "action match", "instruction F1", "proxy reward", "ms/question"]
    body = [[r.method, str(r.questions), f"{r.found:.2f}", f"{r.action_match:.3f}", f"{r.instruction_f1:.3f}",
             "-" if r.proxy_reward is None else f"{r.proxy_reward:.3f}", f"{r.ms:.1f}"] for r in rows]
    widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in [head] + body)
