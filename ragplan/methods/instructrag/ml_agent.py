"""The ML-Agent (InstructRAG §4.4): small heads ``v = unit(x + W tanh(S x))`` over frozen Sentence-BERT vectors (an
untrained agent ranks by plain cosine) and a QPM matching head; losses QPA (Eq. 7), QPM (Eq. 8), FT (Eq. 10).
A path's backbone vector weighs its steps by position (order matters); the pick is the highest cosine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ragplan.methods.instructrag.rl_agent import load_weights, save_weights

__all__ = ["MLHeads", "MLAgent", "POSITION_DECAY", "qpa_loss", "ft_loss", "path_backbone_vectors"]


POSITION_DECAY = 0.8
"""Step i of a path weighs ``POSITION_DECAY ** i`` in its backbone vector (a positional encoding: order matters)."""


def path_backbone_vectors(paths: list[list[str]], embedder: Any, known: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """Unit backbone vectors of paths of instruction texts: the position-weighted sum of their instructions' vectors
    (``known``, else embedded), so swapping two different steps changes it."""
    known = known if known is not None else {}
    todo = list(dict.fromkeys(t for p in paths for t in p if t not in known))
    extra = dict(zip(todo, embedder.encode(todo))) if todo else {}
    dim = next((len(v) for vectors in (known, extra) for v in vectors.values()), 384)
    out = np.zeros((len(paths), dim), dtype=np.float32)
    for i, p in enumerate(paths):
        if p:
            v = sum(POSITION_DECAY ** j * np.asarray(known[t] if t in known else extra[t]) for j, t in enumerate(p))
            out[i] = v / max(float(np.linalg.norm(v)), 1e-12)
    return out


class MLHeads(nn.Module):
    """Trainable heads over frozen Sentence-BERT vectors (see the module docstring)."""

    def __init__(self, dim: int = 384, hidden: int = 128) -> None:
        """``dim`` is the backbone's embedding size."""
        super().__init__()
        self.shared = nn.Linear(dim, hidden)
        self.question_out = nn.Linear(hidden, dim)
        self.path_out = nn.Linear(hidden, dim)
        self.match = nn.Linear(2 * dim, 1)
        for layer in (self.question_out, self.path_out):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor, side: str) -> torch.Tensor:
        """Unit vectors of one ``side`` (``question`` or ``path``) from backbone vectors ``(n, dim)``."""
        out = self.question_out if side == "question" else self.path_out
        return F.normalize(x + out(torch.tanh(self.shared(x))), dim=-1)


def _neg_logsumexp(sims: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.logsumexp(sims.masked_fill(~mask, float("-inf")), dim=-1)


def qpa_loss(q: torch.Tensor, p: torch.Tensor, tau: float, same: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. 7 on encoded pairs ``q[i] ↔ p[i]``; ``same[i, j]`` marks pairs that are not negatives (same path)."""
    n = q.shape[0]
    sims = q @ p.T / tau
    neg = ~torch.eye(n, dtype=torch.bool) if same is None else ~(same | torch.eye(n, dtype=torch.bool))
    rows_ok = neg.any(dim=1)
    if not bool(rows_ok.any()):  # fewer than two different paths: no negatives
        return q.sum() * 0.0
    pos = sims.diagonal()
    l_qp = (-pos + _neg_logsumexp(sims, neg))[rows_ok].mean()
    l_pq = (-pos + _neg_logsumexp(sims.T, neg.T))[rows_ok].mean()
    return (l_qp + l_pq) / 2


def ft_loss(q: torch.Tensor, pools: list[torch.Tensor], best: list[int], tau: float) -> torch.Tensor:
    """Eq. 10: each query question's best path against its pool, and that path against the other questions."""
    terms = []
    for i, (pool, b) in enumerate(zip(pools, best)):
        if pool.shape[0] < 2:
            continue
        sims = pool @ q[i] / tau
        mask = torch.ones(pool.shape[0], dtype=torch.bool)
        mask[b] = False
        loss = -sims[b] + torch.logsumexp(sims[mask], dim=0)
        if q.shape[0] > 1:  # and the path against the other questions
            others = torch.cat([q[:i], q[i + 1:]])
            loss = (loss + (-sims[b] + torch.logsumexp(others @ pool[b] / tau, dim=0))) / 2
        terms.append(loss)
    return torch.stack(terms).mean() if terms else q.sum() * 0.0


class MLAgent:
    """The heads with the backbone that feeds them; picks a path among candidates."""

    def __init__(self, heads: MLHeads | None = None, *, tau: float = 0.1, dim: int = 384) -> None:
        """Heads (fresh when None) and the contrastive temperature τ."""
        self.heads = heads or MLHeads(dim)
        self.tau = tau

    def scores(self, qvec: np.ndarray, path_vecs: np.ndarray) -> np.ndarray:
        """Cosine between the encoded question and each encoded path (backbone vectors in)."""
        with torch.no_grad():
            q = self.heads(torch.as_tensor(np.asarray(qvec, dtype=np.float32).reshape(1, -1)), "question")
            p = self.heads(torch.as_tensor(np.asarray(path_vecs, dtype=np.float32).reshape(len(path_vecs), -1)), "path")
            return (p @ q[0]).numpy()

    def save(self, out_dir: str | Path) -> None:
        """Write ``ml_agent.pt`` and ``ml_agent.json`` into ``out_dir``."""
        save_weights(out_dir, "ml_agent", self.heads, {"tau": self.tau, "dim": self.heads.shared.in_features,
                                                       "hidden": self.heads.shared.out_features})

    @classmethod
    def load(cls, agent_dir: str | Path) -> "MLAgent":
        """Read an agent folder written by :meth:`save` (ValueError when it has none)."""
        heads, meta = load_weights(agent_dir, "ml_agent", "ML-Agent",
                                   lambda m: MLHeads(int(m.get("dim", 384)), int(m.get("hidden", 128))))
        return cls(heads, tau=float(meta.get("tau", 0.1)), dim=int(meta.get("dim", 384)))
