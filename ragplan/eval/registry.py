"""Benchmarks by name (``ragplan eval --benchmark NAME``): each module in :data:`BENCHMARK_MODULES` exports
``BENCHMARKS`` (name -> factory ``(data_path, **options) -> Benchmark``); :func:`register` adds a user's own. An option
that a factory's signature does not name is refused here, for every benchmark."""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any, Callable

from ragplan.eval.benchmark import Benchmark

__all__ = ["register", "get_benchmark", "BENCHMARK_MODULES"]

#: Modules whose ``BENCHMARKS`` mapping is loaded on first use.
BENCHMARK_MODULES = (
    "ragplan.methods.planrag.benchmark",  # dqa-locating, dqa-building
    "ragplan.eval.benchmarks.textqa",  # hotpotqa, 2wikimultihopqa, musique, strategyqa, fever, flashrag
    "ragplan.methods.reaper.benchmark",  # reaper-retail
)

_REGISTRY: dict[str, Callable[..., Benchmark]] = {}


def register(name: str, factory: Callable[..., Benchmark]) -> None:
    """Make a benchmark available to ``ragplan eval --benchmark name``."""
    _REGISTRY[name] = factory


@functools.cache
def _registry() -> dict[str, Callable[..., Benchmark]]:
    """The registry, with the built-in benchmarks loaded (once; a registered name wins)."""
    for mod in BENCHMARK_MODULES:
        for name, factory in importlib.import_module(mod).BENCHMARKS.items():
            _REGISTRY.setdefault(name, factory)
    return _REGISTRY


def get_benchmark(name: str, data: str, **options: Any) -> Benchmark:
    """Build the benchmark ``name`` over ``data`` with its options (limit, year, …); ValueError for an option the
    factory does not take (a factory with ``**options`` checks its own)."""
    if name not in _registry():
        raise KeyError(f"unknown benchmark {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    params = list(inspect.signature(_REGISTRY[name]).parameters.values())
    known = [p.name for p in params[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = sorted(set(options) - set(known))
    if unknown and all(p.kind is not p.VAR_KEYWORD for p in params):
        raise ValueError(f"benchmark {name!r} has no option {', '.join(unknown)}; options: {', '.join(known)}")
    return _REGISTRY[name](data, **options)
