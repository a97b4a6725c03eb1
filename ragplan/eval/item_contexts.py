"""The context each question of a run gets, its data (:meth:`~ragplan.family.MethodFamily.data_key`) prepared
once per run, shared by its questions and let go after the last; a failed ``prepare`` hands nothing on."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import fields
from typing import Any, Iterable

from ragplan.eval.benchmark import Item
from ragplan.family import MethodFamily

__all__ = ["ItemContexts", "data_keys"]


def data_keys(family: MethodFamily, items: Iterable[Item]) -> list[str]:
    """Each question's data key, in order (questions with the same key read the same data)."""
    names = family.context_fields()
    return [family.data_key({k: v for k, v in it.context.items() if k in names}) for it in items]


class ItemContexts:
    """Contexts of a run's questions, the family's data prepared once per distinct data."""

    def __init__(self, family: MethodFamily, method: str, base: dict[str, Any], items: Iterable[Item]) -> None:
        """``base``: the settings every question shares; ``items``: the questions this invocation will run."""
        self.family, self.method, self.base = family, method, base
        self.fields = family.context_fields()
        self._pending: Counter[str] = Counter(self._key(it) for it in items)
        self._handles: dict[str, dict[str, Any]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.prepared = 0
        """How many distinct data were prepared (each distinct script loaded once: this many loads)."""

    def _own(self, item: Item) -> dict[str, Any]:
        return {k: v for k, v in item.context.items() if k in self.fields}

    def _key(self, item: Item) -> str:
        return self.family.data_key(self._own(item))

    def _prepare(self, ctx: Any) -> dict[str, Any]:
        """Run ``prepare`` on ``ctx``; the fields it set (the data's handles), or nothing when it failed."""
        before = {f.name: getattr(ctx, f.name) for f in fields(ctx)}
        try:
            problem = self.family.prepare(self.method, ctx)
        except Exception:  # the graph opens the data itself and records why it cannot
            return {}
        if problem:
            return {}
        return {k: getattr(ctx, k) for k, v in before.items() if getattr(ctx, k) is not v}

    async def get(self, item: Item) -> Any:
        """A fresh context for ``item``, with its data's prepared handles."""
        key = self._key(item)
        ctx = self.family.context(**{**self.base, **self._own(item)})
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._handles:
                self._handles[key] = await asyncio.to_thread(self._prepare, ctx)
                self.prepared += 1
                return ctx
        for name, value in self._handles[key].items():
            setattr(ctx, name, value)
        return ctx

    def release(self, item: Item) -> None:
        """``item`` is done: when it was the last question of its data, let the data go."""
        key = self._key(item)
        self._pending[key] -= 1
        if self._pending[key] <= 0:
            self._handles.pop(key, None)
            self._locks.pop(key, None)
