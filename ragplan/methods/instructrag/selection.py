"""Path selection at run time: the graph and agents folders loaded once per process (reloaded when their files
change), the walk's K candidates (RL-Agent or threshold), the RAP-style stored candidates, the ML-Agent's pick."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ragplan.state.instructrag import PlannedPath
from ragplan.methods.instructrag.graph import GRAPH_FILE, InstructionGraph, graph_embedder
from ragplan.methods.instructrag.agents import load_agents
from ragplan.methods.instructrag.ml_agent import MLAgent, path_backbone_vectors
from ragplan.methods.instructrag.rl_agent import RLAgent, threshold_decider, traverse

__all__ = ["PlannerParts", "load_parts", "graph_candidates", "stored_candidates", "ml_pick", "derived_from"]


@dataclass
class PlannerParts:
    """A loaded instruction graph with its agents and embedder."""

    graph: InstructionGraph
    embedder: Any
    agents_dir: str = ""
    _agents: dict[str, tuple[RLAgent, MLAgent]] = field(default_factory=dict)

    def agents(self, task: str = "", adapted: bool = True) -> tuple[RLAgent, MLAgent]:
        """The RL-Agent and ML-Agent for ``task`` (its adapted pair when there is one and ``adapted``)."""
        key = task if adapted else ""
        if key not in self._agents:
            if not self.agents_dir:
                raise ValueError("no agents folder: set agents_dir (--agents DIR; train with `ragplan instructrag train`)")
            self._agents[key] = load_agents(self.agents_dir, key)
        return self._agents[key]

    @cached_property
    def known(self) -> dict[str, np.ndarray]:
        """The graph's instruction vectors by text."""
        return self.graph.instruction_vectors()

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
    if not (Path(graph_dir) / GRAPH_FILE).is_file():
        raise ValueError(f"no instruction graph at {graph_dir}; build one with `ragplan instructrag build-graph --paths FILE… "
                         f"--out {graph_dir}`")
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


def graph_candidates(parts: PlannerParts, question: str, task: str, *, mode: str = "rl_agent", k: int = 3,
                     threshold: float = -1.0, max_len: int = 8, adapted: bool = True) -> list[PlannedPath]:
    """K candidate paths from a walk of the graph: the RL-Agent's (``rl_agent``) or the threshold rule's (``threshold``;
    a negative one = the graph's calibrated threshold)."""
    g = parts.graph
    qvec = parts.vector(question)
    if mode == "threshold":
        res = traverse(g, qvec, threshold_decider(g.threshold if threshold < 0 else threshold), k=k, max_len=max_len)
    else:
        rl, _ = parts.agents(task, adapted)
        res = traverse(g, qvec, rl.greedy(), k=k, start_nodes=rl.start_nodes, max_len=max_len)
    return [PlannedPath(instructions=[g.instructions[i]["text"] for i in p], source=mode, nodes=list(nodes),
                        derived_from=derived_from(g, p)) for p, nodes in zip(res.paths, res.path_nodes)]


def stored_candidates(parts: PlannerParts, question: str, k: int = 3) -> list[PlannedPath]:
    """RAP-style: the stored paths of the ``k`` past questions most similar to ``question`` (the graph's whole store)."""
    g = parts.graph
    if not len(g.qvectors):
        return []
    sims = g.qvectors @ parts.vector(question)
    best = [int(qi) for qi in np.argsort(-sims, kind="stable")[:max(1, k)]]  # noisy paths too: RAP's store holds them
    return [PlannedPath(instructions=[i.text for i in g.path_instructions(int(g.questions[qi]["path"]))],
                        source="stored", derived_from=[g.questions[qi]["text"]], score=round(float(sims[qi]), 4))
            for qi in best]


def ml_pick(parts: PlannerParts, question: str, task: str, candidates: list[PlannedPath], adapted: bool = True) -> tuple[int, list[float]]:
    """The ML-Agent's pick among ``candidates`` (index, cosine per candidate); -1 when there are none."""
    if not candidates:
        return -1, []
    _, ml = parts.agents(task, adapted)
    pv = path_backbone_vectors([c.instructions for c in candidates], parts.embedder, parts.known)
    scores = ml.scores(parts.vector(question), pv)
    return int(np.argmax(scores)), [round(float(s), 4) for s in scores]
