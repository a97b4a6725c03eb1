"""DQA as a benchmark of the runner: items from a clone, graded by simulation (not string match)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragplan.methods.planrag.data import DQAQuestion, load_questions
from ragplan.methods.planrag.grade import grade
from ragplan.eval.benchmark import Item

__all__ = ["DQABenchmark"]


@dataclass
class DQABenchmark:
    """``dqa-locating`` / ``dqa-building`` over a clone of the DQA repository."""

    scenario: str
    data: str
    limit: int | None = None
    year: int | None = None
    group_by: tuple[str, ...] = ("scenario", "year")

    @property
    def name(self) -> str:
        """The benchmark's registered name."""
        return f"dqa-{self.scenario}"

    def _questions(self) -> list[DQAQuestion]:
        qs = load_questions(self.data, self.scenario)  # type: ignore[arg-type]
        if self.year is not None:
            qs = [q for q in qs if q.year == self.year]
        return qs[: self.limit] if self.limit else qs

    def items(self) -> list[Item]:
        """One item per question: its prompt, its script as the graph, and the decision-check fields."""
        return [Item(q.id, q.prompt, q.answer,
                     {"graph_path": str(q.script.resolve()), "dqa_scenario": q.scenario, "dqa_country": q.country,
                      "dqa_home": q.home, "dqa_goods": q.goods},
                     {"scenario": q.scenario, "year": q.year, "question_num": q.num, "country": q.country,
                      "home": q.home, "goods": q.goods, "_question": q}) for q in self._questions()]

    def grade(self, item: Item, output: dict[str, Any]) -> dict[str, Any]:
        """``correct``: the chosen option is the gold answer; ``simulator_correct``: it is the simulator's best."""
        q: DQAQuestion = item.meta["_question"]
        v = grade(q, output.get("answer") or "")
        correct = v.chosen is not None and v.chosen.strip().lower() == item.gold.strip().lower()
        return {"correct": correct, "simulator_correct": v.correct, "chosen": v.chosen, "simulated_best": v.best,
                "effect": v.chosen_effect, "best_effect": v.best_effect, "effect_unit": v.unit, "verdict": v.describe()}


def _factory(scenario: str):
    def make(data: str, limit: int | None = None, year: int | None = None, **unknown: Any) -> DQABenchmark:
        if unknown:
            raise ValueError(f"dqa-{scenario} takes no option {', '.join(sorted(unknown))} (only --limit and --year)")
        return DQABenchmark(scenario, data, limit=limit, year=year)
    return make


#: Benchmark name -> factory, for :mod:`ragplan.eval.registry`.
BENCHMARKS = {"dqa-locating": _factory("locating"), "dqa-building": _factory("building")}
