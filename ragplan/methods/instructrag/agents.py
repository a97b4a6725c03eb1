"""An agents folder: ``rl_agent.pt`` / ``ml_agent.pt`` with their ``.json`` settings, ``agents.json`` (training report)
and, after few-shot adaptation, each task's pair in ``tasks/<task>/``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from ragplan.methods.instructrag.ml_agent import MLAgent
from ragplan.methods.instructrag.rl_agent import RLAgent

__all__ = ["AGENTS_FILE", "task_slug", "load_agents", "untrained_agents", "training_seed"]

AGENTS_FILE = "agents.json"


def task_slug(task: str) -> str:
    """A folder name for a task label (``group/org`` -> ``group-org``)."""
    return re.sub(r"[^a-z0-9]+", "-", task.casefold()).strip("-") or "task"


def load_agents(agents_dir: str | Path, task: str = "") -> tuple[RLAgent, MLAgent]:
    """The agents of ``agents_dir``; a task's adapted agents (``tasks/<task>/``) when they exist."""
    root = Path(agents_dir)
    sub = root / "tasks" / task_slug(task) if task else None
    if sub is not None and sub.is_dir():
        return RLAgent.load(sub), MLAgent.load(sub)
    return RLAgent.load(root), MLAgent.load(root)


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
