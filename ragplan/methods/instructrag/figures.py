"""LLM-free figures of InstructRAG: each method's selected path against a held-out question's own successful path
(action match, path match, proxy reward, ms per question) beside one-line baselines."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ragplan.methods.instructrag.graph import InstructionGraph
from ragplan.methods.instructrag.meta import query_examples
from ragplan.methods.instructrag.ml_agent import MLAgent, path_backbone_vectors
from ragplan.methods.instructrag.paths import Instruction, InstructionPath
from ragplan.methods.instructrag.reward import PathMatchReward, PathReward, QueryExample
from ragplan.methods.instructrag.rl_agent import RLAgent
from ragplan.methods.instructrag.selection import CONSTANT_PLAN, stored_path, untrained_agents, walk

__all__ = ["SELECTION_METHODS", "CONSTANT_PLAN", "SelectionRow", "action_match", "select_path_offline", "selection_quality",
           "format_selection_rows"]

SELECTION_METHODS = ("instructrag", "untrained", "threshold", "no_ml", "rap", "majority", "constant", "random")
"""The trained selection, its ablations and the one-line baselines: untrained agents (same seed), the stored path of
the nearest question with the store's most common action sequence, the constant plan, a random stored path."""


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
                        embedder: Any, *, k: int = 3, threshold: float | None = None,
                        rng: random.Random | None = None) -> list[Instruction]:
    """The path ``method`` selects for ``ex`` (empty when it finds none); ``threshold`` None = the graph's own."""
    g = graph
    if method == "constant":
        return list(CONSTANT_PLAN)
    if method in ("rap", "random", "majority"):
        i = stored_path(g, ex.qvec, method, rng)
        return g.path_instructions(i) if i >= 0 else []
    if method != "threshold" and rl is None:
        raise ValueError(f"{method} needs an RL-Agent")
    res = walk(g, ex.qvec, None if method == "threshold" else rl, k=k, threshold=-1.0 if threshold is None else threshold)
    paths = [[g.instruction(i) for i in p] for p in res.paths]
    if not paths or method == "no_ml" or ml is None:
        return paths[0] if paths else []
    vecs = path_backbone_vectors([[i.text for i in p] for p in paths], embedder, g.instruction_vectors)
    return paths[int(np.argmax(ml.scores(ex.qvec, vecs)))]


@dataclass
class SelectionRow:
    """Mean figures of one method over the query questions."""

    method: str
    questions: int
    found: float  # share of questions with a path
    action_match: float
    path_match: float  # the path-match reward: instructions matched by meaning
    proxy_reward: float | None
    ms: float


def selection_quality(graph: InstructionGraph, rl: RLAgent | None, ml: MLAgent | None, query: list[InstructionPath],
                      embedder: Any, *, methods: tuple[str, ...] = SELECTION_METHODS, reward: PathReward | None = None,
                      k: int = 3, threshold: float | None = None, seed: int = 0,
                      agents_for: Callable[[str], tuple[RLAgent, MLAgent]] | None = None) -> list[SelectionRow]:
    """One :class:`SelectionRow` per method; ``agents_for(task)`` gives per-task (adapted) agents."""
    exs = query_examples(query, embedder)
    n = max(1, len(exs))
    match, rows = PathMatchReward(embedder, graph.instruction_vectors), []
    untrained = untrained_agents(int(graph.vectors.shape[1]) if graph.vectors.ndim == 2 else 384, seed)
    for m in methods:
        rng = random.Random(seed)
        t0 = time.perf_counter()
        picks = [select_path_offline(m, graph, *(untrained if m == "untrained" else agents_for(ex.task)
                                                 if agents_for is not None else (rl, ml)),
                                     ex, embedder, k=k, threshold=threshold, rng=rng) for ex in exs]
        ms = 1000 * (time.perf_counter() - t0) / n
        pairs = list(zip(exs, picks))
        am = [action_match(p, ex.own_path) for ex, p in pairs]
        pm = [match(ex, p) for ex, p in pairs]
        rw = [reward(ex, p) if p else 0.0 for ex, p in pairs] if reward is not None else []
        rows.append(SelectionRow(m, len(exs), round(sum(map(bool, picks)) / n, 3), round(float(np.mean(am or 0)), 3),
                                 round(float(np.mean(pm or 0)), 3), round(float(np.mean(rw)), 3) if rw else None,
                                 round(ms, 2)))
    return rows


def format_selection_rows(rows: list[SelectionRow]) -> str:
    """A plain table of selection-quality rows."""
    body = [[r.method, str(r.questions), f"{r.found:.2f}", f"{r.action_match:.3f}", f"{r.path_match:.3f}",
             "-" if r.proxy_reward is None else f"{r.proxy_reward:.3f}", f"{r.ms:.1f}"] for r in rows]
    from ragplan.eval.figures import format_table

    return format_table(["method", "questions", "found", "action match", "path match", "proxy reward",
                         "ms/question"], body, style="plain", right=True)
