"""Every method graph of ragplan by name, with its builder and a one-line summary.

The CLI (`ragplan graphs`, `ragplan ask`) and the evaluation runner look methods up here; each
method family module under ``graphs/`` contributes its ``GRAPHS`` mapping.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["graph_registry", "GraphEntry"]

GraphEntry = tuple[Callable[[], Any], str]


def graph_registry() -> dict[str, GraphEntry]:
    """Graph name -> (builder of the uncompiled StateGraph, one-line summary)."""
    from ragplan.graphs import planrag, reaper, think_then_act

    return {**planrag.GRAPHS, **think_then_act.GRAPHS, **reaper.GRAPHS}
