"""Tool suites by name (``tool_suite`` / ``--tools retail``): :func:`suite_for` binds one to a run's store, once."""

from __future__ import annotations

from typing import Any

from ragplan.tools.registry import ToolRegistry

__all__ = ["get_suite", "suite_for"]


def get_suite(name: str, **options: Any) -> ToolRegistry:
    """The registry of the suite ``name`` (specs only unless options bind it to a store)."""
    if name != "retail":
        raise KeyError(f"unknown tool suite {name!r}; known: retail")
    from ragplan.tools.retail.tools import build_retail_registry

    return build_retail_registry(**options)


_bound: dict[tuple, ToolRegistry] = {}


def suite_for(ctx: Any) -> ToolRegistry:
    """The run's ``tool_registry``, or its ``tool_suite`` bound to ``shop_dir`` (built once), without the tools named
    in ``removed_tools`` (REAPER's instruction-following experiment; a name the registry lacks is a ValueError)."""
    removed = [t.strip() for t in str(getattr(ctx, "removed_tools", "") or "").split(",") if t.strip()]
    if (given := getattr(ctx, "tool_registry", None)) is not None:
        return _without(given, removed)
    key = (ctx.tool_suite, getattr(ctx, "shop_dir", ""), getattr(ctx, "include_new_tool", True), tuple(removed))
    if key not in _bound:
        _bound[key] = _without(get_suite(key[0], shop_dir=key[1] or None, include_new_tool=key[2]), removed)
    return _bound[key]


def _without(registry: ToolRegistry, removed: list[str]) -> ToolRegistry:
    if not removed:
        return registry
    if unknown := [t for t in removed if t not in registry]:
        raise ValueError(f"removed_tools: {', '.join(unknown)} is not a tool of the registry; tools: "
                         f"{', '.join(registry.names())}")
    return registry.subset([n for n in registry.names() if n not in removed])
