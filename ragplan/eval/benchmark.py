"""What a benchmark gives the runner: items to run, a grader, and the columns of its tables.

A benchmark is registered by name (``dqa-locating``, ``dqa-building``, later ``hotpotqa`` …) with a
factory ``(data_path, options) -> Benchmark``. Items carry the question text, the per-item context
(which graph or corpus to use) and metadata the summary groups by (scenario, year, …).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Item", "Benchmark"]


@dataclass
class Item:
    """One question of a benchmark."""

    id: str
    """Stable id, unique within the benchmark (the resume key)."""
    question: str
    """The text given to the method."""
    gold: str
    """The gold answer as the dataset states it."""
    context: dict[str, Any] = field(default_factory=dict)
    """Context settings for this item (e.g. graph_path of its script)."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Values the summary groups by (e.g. scenario, year) and anything worth keeping in the record."""
    inputs: dict[str, Any] = field(default_factory=dict)
    """Extra graph inputs beside ``question`` (e.g. REAPER's ``page_context``)."""


class Benchmark(Protocol):
    """The interface the runner needs."""

    name: str
    group_by: list[str]
    """Meta keys that get an accuracy table each, in order (e.g. ["scenario", "year"])."""

    def items(self) -> list[Item]:
        """Every item to run, in order, after the benchmark's own filters (limit, year …)."""

    def grade(self, item: Item, output: dict[str, Any]) -> dict[str, Any]:
        """Fields for the record: at least ``correct`` (bool) and ``chosen`` (the normalised answer)."""

    # Optional:
    #   metrics: tuple[str, ...] — numeric record fields (from grade) averaged in every summary table
    #       (e.g. ("em", "f1", "retrieval_ratio")); accuracy of ``correct`` is always reported.
    #   prepare(run_dir, context) -> dict — context settings for every item, computed once per run
    #       (e.g. a local index built from the dataset's own context paragraphs).
    #   report(records) -> str — extra Markdown tables for the summary (e.g. per-class P/R/F1).
