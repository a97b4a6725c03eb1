"""The RL-Agent (InstructRAG §4.3): a DFS over the instruction graph deciding node by node, include or exclude, with
Eq. 1's state and a 3 → 20 tanh → 2 policy. Rules: no ``Lookup`` before a ``Search`` (the paper's); ours: no
``Finish`` before a ``Search``, no instruction twice in a path (a ``Lookup`` may repeat on another page)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

import numpy as np
import torch
from torch import nn

from ragplan.jsonl import atomic_write, saved_bytes
from ragplan.methods.instructrag.graph import START, Edge, InstructionGraph, StateBuilder

__all__ = ["PolicyNet", "StateBuilder", "TraversalResult", "traverse", "RLAgent", "threshold_decider", "policy_decider",
           "save_weights", "load_weights"]

RL_FILE = "rl_agent.pt"
M = TypeVar("M", bound=nn.Module)


def save_weights(out_dir: str | Path, name: str, module: nn.Module, settings: dict[str, Any]) -> None:
    """Write ``<name>.pt`` (the module's weights) and ``<name>.json`` (its settings) into ``out_dir``, each whole
    (through a temporary file and a rename: a kill leaves the earlier file, never a torn one)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / f"{name}.pt", saved_bytes(lambda f: torch.save(module.state_dict(), f)))
    atomic_write(out / f"{name}.json", json.dumps(settings))


def load_weights(agent_dir: str | Path, name: str, what: str,
                 make: Callable[[dict[str, Any]], M]) -> tuple[M, dict[str, Any]]:
    """``make(settings)`` with the weights of ``<name>.pt``, and the settings (ValueError naming ``what``)."""
    root, pt, js = Path(agent_dir), f"{name}.pt", f"{name}.json"
    if not (root / pt).is_file():
        raise ValueError(f"no {what} at {root} (no {pt}); train one with `ragplan instructrag train`")
    try:
        meta: dict[str, Any] = json.loads((root / js).read_text()) if (root / js).is_file() else {}
        module = make(meta)
        module.load_state_dict(torch.load(root / pt, weights_only=True))
    except Exception as exc:  # torch raises many kinds for a file cut off or of another shape
        raise ValueError(f"the {what} at {root} cannot be read ({js} / {pt}): {type(exc).__name__}: "
                         f"{str(exc)[:200]}") from exc
    module.eval()
    return module, meta


class PolicyNet(nn.Module):
    """π_θ(a | s): 3 state features → 20 tanh units → 2 logits (exclude, include)."""

    def __init__(self, hidden: int = 20) -> None:
        """The paper's sizes (20 hidden units)."""
        super().__init__()
        self.layer1 = nn.Linear(3, hidden)
        self.layer2 = nn.Linear(hidden, 2)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        """Logits ``(n, 2)`` for states ``(n, 3)``."""
        return self.layer2(torch.tanh(self.layer1(states)))


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
    """DFS from the nodes of ``qvec``'s nearest instructions with ``decide(state) -> 0|1``: include appends the node's
    best allowed instruction and goes on to its successors; exclude, a dead end, ``Finish`` or ``max_len`` closes the
    path; it stops at ``k`` distinct paths or ``max_visits``."""
    out = TraversalResult()
    if not graph.nodes:
        return out
    sb = StateBuilder(graph, qvec)
    ins_of = graph.instructions
    seen: set[tuple[int, ...]] = set()
    near = graph.nearest_instructions(qvec, max(start_nodes * 4, 8))  # their distinct nodes, nearest first
    starts = list(dict.fromkeys(int(ins_of[iid]["node"]) for iid, _ in near))[:start_nodes]

    def done() -> bool:
        return len(out.paths) >= k or out.visits >= max_visits

    def emit(ins: list[int], nodes: list[int]) -> None:
        if ins and tuple(ins) not in seen and len(out.paths) < k:
            seen.add(tuple(ins))
            out.paths.append(list(ins))
            out.path_nodes.append(list(nodes))

    def allowed(iid: int, ins: list[int]) -> bool:
        action, text = ins_of[iid]["action"], ins_of[iid]["text"]
        searched = [j for j in ins if ins_of[j]["action"] == "Search"]
        if action in ("Lookup", "Finish") and not searched:
            return False  # no Lookup / Finish before a Search
        since = ins[ins.index(searched[-1]) + 1:] if action == "Lookup" else ins  # a Lookup may repeat on another page
        return all(ins_of[j]["text"] != text for j in since)

    def dfs(node: int, edge: Edge | None, ins: list[int], nodes: list[int], used_edges: set[Edge]) -> None:
        if done():
            return
        out.visits += 1
        options = sorted((i for i in graph.nodes[node] if allowed(i, ins)), key=lambda i: (-float(sb.isim[i]), i))
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
        ins2, nodes2 = ins + [options[0]], nodes + [node]
        children = [b for b in graph.out_neighbours(node) if (node, b) not in used_edges]
        if ins_of[options[0]]["action"] == "Finish" or len(ins2) >= max_len or not children:
            emit(ins2, nodes2)
            return
        children.sort(key=lambda b: (-max(float(sb.isim[i]) for i in graph.nodes[b]), b))
        for b in children[:branch]:
            dfs(b, (node, b), ins2, nodes2, used_edges | {(node, b)})
            if done():
                return

    for s in starts:
        dfs(s, (START, s) if (START, s) in graph.edges else None, [], [], set())
        if done():
            break
    return out


def policy_decider(params: dict[str, torch.Tensor], draw: Callable[[], float] | None = None) -> Decider:
    """The decision of the policy with ``params`` (NumPy, fast for walks): include when P(include | s) ≥ 0.5,
    or, given ``draw`` (uniform in [0, 1)), when ``draw() < P(include | s)`` (the sampled walk of training)."""
    w1, b1, w2, b2 = (params[k].detach().numpy().astype(np.float64)
                      for k in ("layer1.weight", "layer1.bias", "layer2.weight", "layer2.bias"))

    def decide(s: np.ndarray) -> int:
        z = w2 @ np.tanh(w1 @ np.asarray(s, dtype=np.float64) + b1) + b2
        p = float(1.0 / (1.0 + np.exp(z[0] - z[1])))
        return int(p >= 0.5) if draw is None else int(draw() < p)

    return decide


def threshold_decider(threshold: float) -> Decider:
    """The ablation without the RL-Agent: include a node when the mean of its state features reaches ``threshold``
    (:attr:`InstructionGraph.threshold` calibrates it on the graph's own similarities)."""
    return lambda s: int(float(np.mean(s)) >= threshold)


class RLAgent:
    """The trained policy with its walk settings; saved and loaded by folder."""

    def __init__(self, net: PolicyNet | None = None, *, k: int = 3, max_len: int = 8, start_nodes: int = 5) -> None:
        """A policy (random init when ``net`` is None) and its walk bounds."""
        self.net = net or PolicyNet()
        self.k, self.max_len, self.start_nodes = k, max_len, start_nodes

    def greedy(self) -> Decider:
        """Include when P(include) ≥ 0.5 (run time)."""
        return policy_decider(dict(self.net.named_parameters()))

    def save(self, out_dir: str | Path) -> None:
        """Write ``rl_agent.pt`` (weights) and ``rl_agent.json`` (settings) into ``out_dir``."""
        save_weights(out_dir, "rl_agent", self.net, {"k": self.k, "max_len": self.max_len,
                                                     "start_nodes": self.start_nodes, "hidden": self.net.layer1.out_features})

    @classmethod
    def load(cls, agent_dir: str | Path) -> "RLAgent":
        """Read an agent folder written by :meth:`save` (ValueError when it has none)."""
        net, meta = load_weights(agent_dir, "rl_agent", "RL-Agent", lambda m: PolicyNet(int(m.get("hidden", 20))))
        return cls(net, k=int(meta.get("k", 3)), max_len=int(meta.get("max_len", 8)),
                   start_nodes=int(meta.get("start_nodes", 5)))
