"""Every method family and graph by name: each module of :mod:`ragplan.graphs` that exports ``FAMILY`` (a
:class:`~ragplan.family.MethodFamily`), so a new ``graphs/<family>.py`` is found without edits."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections import Counter
from typing import Any, Callable

from ragplan.family import MethodFamily

__all__ = ["families", "family_of", "graph_registry", "langgraph_graphs"]


@functools.cache
def families() -> list[MethodFamily]:
    """Every family, in listing order (found once per process)."""
    import ragplan.graphs as pkg

    mods = [importlib.import_module(f"{pkg.__name__}.{m.name}") for m in pkgutil.iter_modules(pkg.__path__)]
    found = [f for f in (getattr(m, "FAMILY", None) for m in mods) if isinstance(f, MethodFamily)]
    if dup := sorted(n for n, c in Counter(g.name for f in found for g in f.graphs).items() if c > 1):
        raise RuntimeError(f"graph names used by two families: {', '.join(dup)}")
    return sorted(found, key=lambda f: (f.order, f.name))


def family_of(method: str) -> MethodFamily:
    """The family that has the graph ``method`` (KeyError with the known names otherwise)."""
    for fam in families():
        if any(g.name == method for g in fam.graphs):
            return fam
    raise KeyError(f"unknown method {method!r}; known: {', '.join(graph_registry())}")


def graph_registry() -> dict[str, tuple[Callable[[], Any], str]]:
    """Graph name -> (builder of the uncompiled StateGraph, one-line summary)."""
    return {g.name: (g.build, g.summary) for f in families() for g in f.graphs}


def langgraph_graphs() -> dict[str, str]:
    """The ``graphs`` section langgraph.json must have: ``ragplan.graphs.<family>:<name>``, by module (a file path
    would make ``langgraph dev`` load ``./graphs/<family>.py`` a second time under another module name)."""
    return {g.name: f"ragplan.graphs.{f.name}:{g.name}" for f in families() for g in f.graphs}
