"""The RL-Agent (InstructRAG §4.3): walks the instruction graph by DFS and decides, node by node, include or exclude.

* **State** (Eq. 1) for a question Q̂ at node 𝕀 reached over edge 𝕋: the highest cosine between Q̂ and
  an instruction of 𝕀; the highest cosine between Q̂ and a task of 𝕋 (a task's vector is the mean of
  its questions' vectors — here the questions the edge recorded for that task); the highest cosine
  between Q̂ and a question of that most similar task. A node reached first (from the question's most
  similar instructions) uses its start edge, else all its in-edges together.
* **Policy**: a 2-layer MLP, 20 tanh units, 2 outputs (exclude, include) — the paper's network.
* **Traversal**: nearest-neighbour search over all instructions for Q̂ gives the start nodes (most
  similar first). DFS from each: *include* appends the node's instruction most similar to Q̂ (one not
  yet used in this path when the node has one) and goes on to the node's successors (most similar
  first, no edge twice in one path); *exclude* — or a dead end, a ``Finish`` instruction, or the length
  bound — closes the path built so far, and the search backtracks. It stops at K distinct paths or the
  visit bound.
* **Rules** that constrain the actions (the paper allows such rules, §4.3). A node none of whose
  instructions may be added is excluded without asking the policy; otherwise the node's most similar
  instruction that may be added is the one included.

  1. no ``Lookup`` before a ``Search`` — the paper's own example (from KnowAgent);
  2. no ``Finish`` before a ``Search`` — *our* rule: without it the walk returned bare ``Finish[X]``
     paths (the question's nearest instructions are often answers of similar questions), which plan
     nothing;
  3. an instruction text already in the path is not added again — *our* rule: without it the walk
     repeated the same ``Search[X]`` from a junction node. A ``Lookup`` may repeat after a different
     ``Search`` (``Search[A] → Lookup[nationality] → Search[B] → Lookup[nationality]`` is the paper's
     own path); it may not repeat on the same page.

:func:`traverse` takes the decision function, so the same walk serves the greedy policy (run time),
the sampled policy (training, with a seeded generator) and the threshold baseline (no RL-Agent).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ragplan.methods.instructrag.graph import START, InstructionGraph

__all__ = ["STATE_SIZE", "PolicyNet", "StateBuilder", "TraversalResult", "traverse", "RLAgent", "threshold_decider",
           "include_decider", "include_probability_np", "policy_weights"]

STATE_SIZE = 3
RL_FILE, RL_META = "rl_agent.pt", "rl_agent.json"


class PolicyNet(nn.Module):
    """π_θ(a | s): 3 state features → 20 tanh units → 2 logits (exclude, include)."""

    def __init__(self, hidden: int = 20) -> None:
        """The paper's sizes (20 hidden units)."""
        super().__init__()
        self.layer1 = nn.Linear(STATE_SIZE, hidden)
        self.layer2 = nn.Linear(hidden, 2)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        """Logits ``(n, 2)`` for states ``(n, 3)``."""
        return self.layer2(torch.tanh(self.layer1(states)))


class StateBuilder:
    """Eq. 1's three cosine features for one question over one graph (task vectors cached per edge)."""

    def __init__(self, graph: InstructionGraph, qvec: np.ndarray) -> None:
        """``qvec`` is the question's unit embedding (the graph's model)."""
        self.graph, self.q = graph, np.asarray(qvec, dtype=np.float32).reshape(-1)
        self.isim = graph.vectors @ self.q if len(graph.vectors) else np.zeros(0, dtype=np.float32)
        self.qsim = graph.qvectors @ self.q if len(graph.qvectors) else np.zeros(0, dtype=np.float32)
        self._cache: dict[tuple[int, tuple[int, int] | None], np.ndarray] = {}

    def instruction_similarity(self, iid: int) -> float:
        """cos(Q̂, instruction ``iid``)."""
        return float(self.isim[iid])

    def _tasks(self, node: int, edge: tuple[int, int] | None) -> dict[str, list[int]]:
        if edge is not None and edge in self.graph.edges:
            return self.graph.edges[edge]
        merged: dict[str, list[int]] = {}
        for e in self.graph.in_edges(node):
            for t, qs in self.graph.edges[e].items():
                merged.setdefault(t, []).extend(qs)
        return merged

    def state(self, node: int, edge: tuple[int, int] | None) -> np.ndarray:
        """``[max cos(Q̂, I ∈ 𝕀), max cos(Q̂, T ∈ 𝕋), max cos(Q̂, Q ∈ T_c)]`` (cached per node and edge)."""
        key = (node, edge)
        if key not in self._cache:
            self._cache[key] = self._state(node, edge)
        return self._cache[key].copy()

    def _state(self, node: int, edge: tuple[int, int] | None) -> np.ndarray:
        ids = self.graph.nodes[node]
        s1 = float(max(self.isim[i] for i in ids)) if ids else 0.0
        s2 = s3 = 0.0
        best = -2.0
        for _, qs in self._tasks(node, edge).items():
            if not qs:
                continue
            v = self.graph.qvectors[qs].mean(axis=0)
            nv = float(np.linalg.norm(v))
            sim = float(v @ self.q / nv) if nv > 0 else 0.0
            if sim > best:
                best, s2, s3 = sim, sim, float(max(self.qsim[q] for q in qs))
        return np.array([s1, s2, s3], dtype=np.float32)


@dataclass
class TraversalResult:
    """The K candidate paths of one walk and every decision taken (for REINFORCE)."""

    paths: list[list[int]] = field(default_factory=list)
    """Each candidate as instruction ids, in order."""
    path_nodes: list[list[int]] = field(default_factory=list)
    states: list[np.ndarray] = field(default_factory=list)
    actions: list[int] = field(default_factory=list)
    visits: int = 0


Decider = Callable[[np.ndarray], int]


def traverse(graph: InstructionGraph, qvec: np.ndarray, decide: Decider, *, k: int = 3, start_nodes: int = 5,
             max_len: int = 8, max_visits: int = 200, branch: int = 4) -> TraversalResult:
    """DFS over ``graph`` for the question vector ``qvec`` with ``decide(state) -> 0|1`` (see the module docstring)."""
    out = TraversalResult()
    if not graph.nodes:
        return out
    sb = StateBuilder(graph, qvec)
    seen: set[tuple[int, ...]] = set()
    starts: list[int] = []
    for iid, _ in graph.nearest_instructions(qvec, max(start_nodes * 4, 8)):
        n = int(graph.instructions[iid]["node"])
        if n not in starts:
            starts.append(n)
        if len(starts) >= start_nodes:
            break

    def emit(ins: list[int], nodes: list[int]) -> None:
        key = tuple(ins)
        if ins and key not in seen and len(out.paths) < k:
            seen.add(key)
            out.paths.append(list(ins))
            out.path_nodes.append(list(nodes))

    def allowed(iid: int, ins: list[int]) -> bool:
        rec = graph.instructions[iid]
        searched = [j for j in ins if graph.instructions[j]["action"] == "Search"]
        if rec["action"] in ("Lookup", "Finish") and not searched:
            return False  # rules 1 and 2: no Lookup / Finish before a Search
        if rec["action"] == "Lookup":  # rule 3 for Lookup: not twice on the same page
            since = ins[ins.index(searched[-1]) + 1:]
            return all(graph.instructions[j]["text"] != rec["text"] for j in since)
        return all(graph.instructions[j]["text"] != rec["text"] for j in ins)  # rule 3

    def dfs(node: int, edge: tuple[int, int] | None, ins: list[int], nodes: list[int], used_edges: set[tuple[int, int]]) -> None:
        if len(out.paths) >= k or out.visits >= max_visits:
            return
        out.visits += 1
        options = sorted((i for i in graph.nodes[node] if allowed(i, ins)), key=lambda i: (-sb.instruction_similarity(i), i))
        if not options:
            emit(ins, nodes)  # the rules exclude the node without asking the policy
            return
        st = sb.state(node, edge)
        a = int(decide(st))
        out.states.append(st)
        out.actions.append(a)
        if a == 0:
            emit(ins, nodes)
            return
        iid = options[0]
        ins2, nodes2 = ins + [iid], nodes + [node]
        children = [b for b in graph.out_neighbours(node) if (node, b) not in used_edges]
        if graph.instructions[iid]["action"] == "Finish" or len(ins2) >= max_len or not children:
            emit(ins2, nodes2)
            return
        children.sort(key=lambda b: (-max(sb.instruction_similarity(i) for i in graph.nodes[b]), b))
        for b in children[:branch]:
            dfs(b, (node, b), ins2, nodes2, used_edges | {(node, b)})
            if len(out.paths) >= k or out.visits >= max_visits:
                return

    for s in starts:
        dfs(s, (START, s) if (START, s) in graph.edges else None, [], [], set())
        if len(out.paths) >= k or out.visits >= max_visits:
            break
    return out


def include_probability_np(weights: tuple[np.ndarray, ...], state: np.ndarray) -> float:
    """P(include | s) of the policy with NumPy weights ``(W1, b1, W2, b2)`` (fast path for walks)."""
    w1, b1, w2, b2 = weights
    z = w2 @ np.tanh(w1 @ state + b1) + b2
    return float(1.0 / (1.0 + np.exp(z[0] - z[1])))


def policy_weights(params: dict[str, torch.Tensor]) -> tuple[np.ndarray, ...]:
    """``(W1, b1, W2, b2)`` as NumPy arrays from policy parameters (a state dict or functional parameters)."""
    return tuple(params[k].detach().numpy().astype(np.float64) for k in
                 ("layer1.weight", "layer1.bias", "layer2.weight", "layer2.bias"))


def include_decider(params: dict[str, torch.Tensor]) -> Decider:
    """The greedy decision of a policy's parameters: include when P(include) ≥ 0.5."""
    w = policy_weights(params)
    return lambda s: int(include_probability_np(w, np.asarray(s, dtype=np.float64)) >= 0.5)


def threshold_decider(threshold: float = 0.4) -> Decider:
    """The ablation without the RL-Agent: include a node when the mean of its state features reaches ``threshold``."""
    return lambda s: int(float(np.mean(s)) >= threshold)


class RLAgent:
    """The trained policy with its walk settings; saved and loaded by folder."""

    def __init__(self, net: PolicyNet | None = None, *, k: int = 3, max_len: int = 8, start_nodes: int = 5) -> None:
        """A policy (random init when ``net`` is None) and its walk bounds."""
        self.net = net or PolicyNet()
        self.k, self.max_len, self.start_nodes = k, max_len, start_nodes

    def include_probability(self, states: np.ndarray) -> np.ndarray:
        """P(include | s) for a batch of states."""
        with torch.no_grad():
            logits = self.net(torch.as_tensor(np.asarray(states, dtype=np.float32).reshape(-1, STATE_SIZE)))
            return torch.softmax(logits, dim=-1)[:, 1].numpy()

    def greedy(self) -> Decider:
        """Include when P(include) ≥ 0.5 (run time)."""
        return include_decider({k: v.detach() for k, v in self.net.named_parameters()})

    def candidates(self, graph: InstructionGraph, qvec: np.ndarray, k: int | None = None) -> TraversalResult:
        """The K candidate paths for a question vector with the greedy policy."""
        return traverse(graph, qvec, self.greedy(), k=k or self.k, start_nodes=self.start_nodes, max_len=self.max_len)

    def save(self, out_dir: str | Path) -> None:
        """Write ``rl_agent.pt`` (weights) and ``rl_agent.json`` (settings) into ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        torch.save(self.net.state_dict(), out / RL_FILE)
        (out / RL_META).write_text(json.dumps({"k": self.k, "max_len": self.max_len, "start_nodes": self.start_nodes,
                                               "hidden": self.net.layer1.out_features}))

    @classmethod
    def load(cls, agent_dir: str | Path) -> "RLAgent":
        """Read an agent folder written by :meth:`save` (ValueError when it has none)."""
        root = Path(agent_dir)
        if not (root / RL_FILE).is_file():
            raise ValueError(f"no RL-Agent at {root} (no {RL_FILE}); train one with `ragplan instructrag train`")
        try:
            meta: dict[str, Any] = json.loads((root / RL_META).read_text()) if (root / RL_META).is_file() else {}
            net = PolicyNet(int(meta.get("hidden", 20)))
            net.load_state_dict(torch.load(root / RL_FILE, weights_only=True))
        except Exception as exc:  # torch raises many kinds for a file cut off or of another shape (unpickling, zip, size)
            raise ValueError(f"the RL-Agent at {root} cannot be read ({RL_META} / {RL_FILE}): {type(exc).__name__}: "
                             f"{str(exc)[:200]}") from exc
        net.eval()
        return cls(net, k=int(meta.get("k", 3)), max_len=int(meta.get("max_len", 8)), start_nodes=int(meta.get("start_nodes", 5)))
