"""An agents folder: ``rl_agent.pt`` / ``ml_agent.pt`` with their ``.json`` settings, ``agents.json`` (training report)
and, after few-shot adaptation, each task's pair in ``tasks/<task>/``."""

from __future__ import annotations

import re
from pathlib import Path

from ragplan.methods.instructrag.ml_agent import MLAgent
from ragplan.methods.instructrag.rl_agent import RLAgent

__all__ = ["AGENTS_FILE", "task_slug", "load_agents"]

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
