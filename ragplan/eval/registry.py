"""Benchmarks by name: what ``ragplan eval --benchmark NAME`` finds.

Each module under :mod:`ragplan.eval.benchmarks` exports ``BENCHMARKS`` (name -> factory
``(data_path, **options) -> Benchmark``); this registry imports those modules on first use, so the
interface (:mod:`ragplan.eval.benchmark`) and the benchmarks never import each other. A user's own
benchmark is added with :func:`register`.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from ragplan.eval.benchmark import Benchmark

__all__ = ["register", "get_benchmark", "benchmark_names", "comparison_hook", "BENCHMARK_MODULES"]

#: Modules whose ``BENCHMARKS`` mapping is loaded on first use.
BENCHMARK_MODULES = (
    "ragplan.methods.planrag.benchmark",  # dqa-locating, dqa-building
    "ragplan.eval.benchmarks.textqa",  # hotpotqa, 2wikimultihopqa, musique, strategyqa, fever, flashrag
    "ragplan.methods.reaper.benchmark",  # reaper-retail
)

_REGISTRY: dict[str, Callable[..., Benchmark]] = {}
_loaded = False


def register(name: str, factory: Callable[..., Benchmark]) -> None:
    """Make a benchmark available to ``ragplan eval --benchmark name``."""
    _REGISTRY[name] = factory


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    for mod in BENCHMARK_MODULES:
        for name, factory in importlib.import_module(mod).BENCHMARKS.items():
            _REGISTRY.setdefault(name, factory)
    _loaded = True


def get_benchmark(name: str, data: str, **options: Any) -> Benchmark:
    """Build the benchmark ``name`` over ``data`` with its options (limit, year, …)."""
    _load_builtin()
    if name not in _REGISTRY:
        raise KeyError(f"unknown benchmark {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name](data, **options)


def benchmark_names() -> list[str]:
    """Every registered benchmark name."""
    _load_builtin()
    return sorted(_REGISTRY)


def comparison_hook(benchmark: str, data: str, options: dict[str, Any] | None = None) -> Callable[..., str] | None:
    """The ``compare(runs)`` hook of the benchmark ``benchmark`` (built over ``data`` with ``options``), or None
    when it has none, is unknown or cannot be built (the report then prints the common table only)."""
    try:
        bench = get_benchmark(benchmark, data, **(options or {}))
    except Exception:  # noqa: BLE001  (an unknown benchmark or options a report cannot honour: no hook)
        return None
    hook = getattr(bench, "compare", None)
    return hook if callable(hook) else None
