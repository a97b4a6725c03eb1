"""Tool suites by name: the registries a planner can plan over (``tool_suite`` / ``--tools retail``).

The interface is :mod:`ragplan.tools.registry`; the suites are built here from their packages (the
built-in ``retail`` suite from :mod:`ragplan.tools.retail`), so the interface and the tools never
import each other. :func:`suite_for` gives a run its registry bound to its store, built once.
"""

from __future__ import annotations

from typing import Any, Callable

from ragplan.tools.registry import ToolRegistry

__all__ = ["register_suite", "get_suite", "suite_names", "suite_for"]


_SUITES: dict[str, Callable[..., ToolRegistry]] = {}


def register_suite(name: str, factory: Callable[..., ToolRegistry]) -> None:
    """Make a tool suite available by name (``--tools retail``); ``factory(**options) -> ToolRegistry``."""
    _SUITES[name] = factory


def get_suite(name: str, **options: Any) -> ToolRegistry:
    """The registry of the suite ``name`` (specs only unless options bind it to a store)."""
    if name == "retail" and name not in _SUITES:
        from ragplan.tools.retail.tools import build_retail_registry

        _SUITES["retail"] = build_retail_registry
    if name not in _SUITES:
        raise KeyError(f"unknown tool suite {name!r}; known: {', '.join(sorted(_SUITES)) or '(none)'}")
    return _SUITES[name](**options)


def suite_names() -> list[str]:
    """Registered suite names."""
    return sorted(_SUITES)


_bound: dict[tuple, ToolRegistry] = {}


def suite_for(ctx: Any) -> ToolRegistry:
    """The run's tool registry, bound to its store (``tool_suite``, ``shop_dir``, ``include_new_tool``), built once.

    A Python caller may put a ready registry in the context as ``tool_registry``.
    """
    given = getattr(ctx, "tool_registry", None)
    if given is not None:
        return given
    key = (ctx.tool_suite, getattr(ctx, "shop_dir", ""), getattr(ctx, "include_new_tool", True))
    if key not in _bound:
        options: dict[str, Any] = {"include_new_tool": key[2]}
        if key[1]:
            options["shop_dir"] = key[1]
        _bound[key] = get_suite(key[0], **options)
    return _bound[key]
