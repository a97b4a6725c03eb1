"""Path selection, at run time and in the LLM-free figures: the graph and agents folders (``rl_agent.pt`` / ``ml_agent.pt``,
``agents.json``, adapted pairs in ``tasks/<task>/``) loaded once per process, the walk's K candidates (RL-Agent or
threshold), the stored paths of the baselines (RAP-style, majority), the constant plan and the ML-Agent's pick."""

from __future__ import annotations

import json
import random
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ragplan.state.instructrag import PlannedPath
from ragplan.methods.instructrag.graph import InstructionGraph, graph_embedder
from ragplan.methods.instructrag.ml_agent import MLAgent, path_backbone_vectors
from ragplan.methods.instructrag.paths import Instruction
from ragplan.methods.instructrag.rl_agent import RLAgent, TraversalResult, threshold_decider, traverse

__all__ = ["AGENTS_FILE", "task_slug", "load_agents", "untrained_agents", "training_seed", "PlannerParts", "CONSTANT_PLAN",
           "load_parts", "walk", "stored_path", "graph_candidates",
           "stored_candidates", "ml_pick", "derived_from"]

AGENTS_FILE = "agents.json"


def task_slug(task: str) -> str:
    """A folder name for a task label (``group/org`` -> ``group-org``)."""
    return re.sub(r"[^a-z0-9]+", "-", task.casefold()).strip("-") or "task"


def load_agents(agents_dir: str | Path, task: str = "") -> tuple[RLAgent, MLAgent]:
    """The agents of ``agents_dir``; a task's adapted agents (``tasks/<task>/``) when they exist."""
    sub = Path(agents_dir) / "tasks" / task_slug(task)
    folder = sub if task and sub.is_dir() else Path(agents_dir)
    return RLAgent.load(folder), MLAgent.load(folder)


def untrained_agents(dim: int, seed: int = 0) -> tuple[RLAgent, MLAgent]:
    """Fresh agents as training starts them for ``seed`` (the untrained baseline; the global RNG is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return RLAgent(), MLAgent(dim=dim or 384)


def training_seed(agents_dir: str | Path) -> int:
    """The seed the agents of ``agents_dir`` were trained with (``agents.json``; 0 without one)."""
    f = Path(agents_dir) / AGENTS_FILE
    try:
        return int(json.loads(f.read_text())["settings"]["seed"]) if agents_dir and f.is_file() else 0
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{f}: no training seed ({type(exc).__name__}: {exc}); train the agents again") from None


CONSTANT_PLAN = [Instruction("Search", ""), Instruction("Search", ""), Instruction("Finish", "")]
"""The constant plan ``Search → Search → Finish`` (no arguments: the planner fills them in)."""


@dataclass
class PlannerParts:
    """A loaded instruction graph with its agents and embedder."""

    graph: InstructionGraph
    embedder: Any
    agents_dir: str = ""
    _agents: dict[str, tuple[RLAgent, MLAgent]] = field(default_factory=dict)

    def agents(self, task: str = "", adapted: bool = True, untrained: bool = False) -> tuple[RLAgent, MLAgent]:
        """The RL-Agent and ML-Agent for ``task`` (its adapted pair when there is one and ``adapted``); ``untrained``:
        freshly initialised agents, seeded with the agents folder's training seed (0 without one)."""
        key = "\0untrained" if untrained else task if adapted else ""
        if untrained and key not in self._agents:
            self._agents[key] = untrained_agents(int(self.graph.vectors.shape[1]), training_seed(self.agents_dir))
        elif key not in self._agents:
            if not self.agents_dir:
                raise ValueError("no agents folder: set agents_dir (--agents DIR; train with `ragplan instructrag train`)")
            self._agents[key] = load_agents(self.agents_dir, key)
        return self._agents[key]

    def vector(self, text: str) -> np.ndarray:
        """The unit embedding of ``text``."""
        return np.asarray(self.embedder.encode([text])[0], dtype=np.float32)


_lock = threading.Lock()
_parts: dict[tuple, PlannerParts] = {}


def _stamp(folder: str) -> tuple:
    p = Path(folder)
    return tuple(sorted((f.name, f.stat().st_mtime_ns) for f in p.glob("*") if f.is_file())) if p.is_dir() else ()


def load_parts(graph_dir: str, agents_dir: str = "", embedding_model: str = "") -> PlannerParts:
    """The graph (and agents folder) by path, loaded once per process (ValueError naming what is missing)."""
    if not graph_dir:
        raise ValueError("no instruction graph: set instruction_graph_dir (--instruction-graph DIR; build one with "
                         "`ragplan instructrag build-graph --paths FILE… --out DIR`)")
    if agents_dir and not Path(agents_dir).is_dir():
        raise ValueError(f"no agents folder at {agents_dir}; train the agents with `ragplan instructrag train`")
    key = (str(Path(graph_dir).resolve()), str(Path(agents_dir).resolve()) if agents_dir else "", embedding_model,
           _stamp(graph_dir), _stamp(agents_dir) if agents_dir else ())
    with _lock:
        if key not in _parts:
            graph = InstructionGraph.load(graph_dir)
            _parts[key] = PlannerParts(graph, graph_embedder(graph, embedding_model, where=graph_dir), agents_dir)
        return _parts[key]


def derived_from(g: InstructionGraph, instruction_ids: list[int]) -> list[str]:
    """The past questions whose stored paths the instructions come from (the paper's "Derived from combining tasks")."""
    paths = (g.paths[int(g.instructions[i]["path"])] for i in instruction_ids)
    return list(dict.fromkeys(g.questions[int(p["question"])]["text"] for p in paths))


def walk(g: InstructionGraph, qvec: np.ndarray, rl: RLAgent | None, *, k: int = 3, threshold: float = -1.0,
         max_len: int | None = None) -> TraversalResult:
    """K candidate walks of the graph: the RL-Agent's, or with ``rl`` None the threshold rule's (a negative
    ``threshold`` = the graph's calibrated one)."""
    if rl is None:
        decide = threshold_decider(g.threshold if threshold < 0 else threshold)
        return traverse(g, qvec, decide, k=k, max_len=max_len or 8)
    return traverse(g, qvec, rl.greedy(), k=k, start_nodes=rl.start_nodes, max_len=max_len or rl.max_len)


def stored_path(g: InstructionGraph, qvec: np.ndarray, method: str = "rap", rng: random.Random | None = None) -> int:
    """The stored path (index; -1 for an empty store) a one-line baseline takes: ``rap`` the nearest question's,
    ``majority`` the nearest question's whose path has the store's commonest action sequence, ``random`` any."""
    if not g.paths:  # the whole store, noisy paths included (the paper's RAP keeps them)
        return -1
    if method == "random":
        return (rng or random.Random(0)).choice(range(len(g.paths)))
    sims = g.qvectors @ qvec
    if method == "majority":
        sims = np.where(g.majority_questions, sims, -9)
    return int(g.questions[int(np.argmax(sims))]["path"])


def graph_candidates(parts: PlannerParts, question: str, rl: RLAgent | None, *, k: int = 3, threshold: float = -1.0,
                     max_len: int = 8) -> list[PlannedPath]:
    """K candidate paths from a walk of the graph (:func:`walk`: the RL-Agent's, or the threshold rule's)."""
    g = parts.graph
    res = walk(g, parts.vector(question), rl, k=k, threshold=threshold, max_len=max_len)
    return [PlannedPath(instructions=[g.instructions[i]["text"] for i in p], source="threshold" if rl is None else
                        "rl_agent", nodes=list(nodes), derived_from=derived_from(g, p))
            for p, nodes in zip(res.paths, res.path_nodes)]


def stored_candidates(parts: PlannerParts, question: str, k: int = 3, how: str = "stored") -> list[PlannedPath]:
    """RAP-style (``stored``): the stored paths of the ``k`` past questions most similar to ``question`` (the graph's
    whole store); ``majority``: the path :func:`stored_path` picks; ``constant``: :data:`CONSTANT_PLAN`."""
    g = parts.graph
    if how == "constant":
        return [PlannedPath(instructions=[i.text for i in CONSTANT_PLAN], source=how)]
    if not len(g.qvectors):
        return []
    qvec = parts.vector(question)
    sims = g.qvectors @ qvec
    best = ([int(g.paths[stored_path(g, qvec, how)]["question"])] if how == "majority"
            else [int(qi) for qi in np.argsort(-sims, kind="stable")[:max(1, k)]])
    return [PlannedPath(instructions=[i.text for i in g.path_instructions(int(g.questions[qi]["path"]))],
                        source=how, derived_from=[g.questions[qi]["text"]], score=round(float(sims[qi]), 4))
            for qi in best]


def ml_pick(parts: PlannerParts, question: str, ml: MLAgent, candidates: list[PlannedPath]) -> tuple[int, list[float]]:
    """The ML-Agent's pick among ``candidates`` (index, cosine per candidate); -1 when there are none."""
    if not candidates:
        return -1, []
    scores = ml.scores(parts.vector(question), path_backbone_vectors([c.instructions for c in candidates],
                                                                      parts.embedder, parts.graph.instruction_vectors))
    return int(np.argmax(scores)), [round(float(s), 4) for s in scores]
