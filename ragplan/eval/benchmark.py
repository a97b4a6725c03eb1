"""What a benchmark gives the runner: items to run, a grader, and the columns of its tables; registered by
name with a factory ``(data_path, **options) -> Benchmark`` (:mod:`ragplan.eval.registry`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Item", "Benchmark", "ComparedRun"]


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


@dataclass
class ComparedRun:
    """One run as ``ragplan eval report`` hands it to a benchmark's ``compare`` hook."""

    label: str
    """The run's name in every table and figure (:func:`ragplan.eval.report.run_labels`)."""
    settings: Any
    """Its :class:`~ragplan.eval.runfolder.RunSettings`."""
    records: list[dict[str, Any]]
    """Its finished records (``results.jsonl``), in file order."""


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
    #   metrics: tuple[str, ...] — numeric record fields averaged in every summary table (e.g. ("em", "f1")).
    #   prepare(run_dir, context) -> dict — context settings for every item, computed once per run.
    #   report(records) -> str — extra Markdown tables for the summary (e.g. per-class P/R/F1).
    #   plot_metrics: tuple[str, ...] — the shares plot.png and a sweep's figure draw (default: accuracy).
    #   compare(runs: list[ComparedRun]) -> str — extra Markdown for ``ragplan eval report`` when every run is of
    #       this benchmark (built from the first run's settings: it must not need to read the data).
