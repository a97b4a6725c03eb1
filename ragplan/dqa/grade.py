"""Grading a DQA decision by simulation, not by string match.

An answer is normalised to an option (a trade node name, a building id) — tolerant of case, quotes,
spaces/underscores and a sentence around it — and then simulated: the verdict says whether it is the
annotator's best decision and what the chosen option does compared with the best
("+1.3 % vs best +16.6 %").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ragplan.dqa.building import BuildingScenario, BuildingSolution, solve_building
from ragplan.dqa.data import DQAQuestion, load_scenario
from ragplan.dqa.locating import LocatingScenario, LocatingSolution, solve_locating

__all__ = ["Verdict", "solve_question", "normalise_node", "normalise_building", "grade", "best_decision"]


@dataclass
class Verdict:
    """How good a decision is, by the simulator."""

    chosen: str | None
    """The option the answer was normalised to (None: no option recognised)."""
    best: str | None
    """The simulator's best decision."""
    correct: bool
    """Whether the chosen option is the best one (or as good as it: same effect)."""
    chosen_effect: float | None
    """Locating: profit change in % of the chosen node; building: price of the goods after the choice."""
    best_effect: float | None
    """The same for the best decision."""
    unit: str
    """``%`` (locating profit change) or ``price`` (building)."""

    def describe(self) -> str:
        """One line for a person: ``node_03: +1.3 % vs best node_05 +16.6 %``."""
        if self.chosen is None:
            return f"no option recognised in the answer; best {self.best} ({self._fmt(self.best_effect)})"
        verdict = "best" if self.correct else f"vs best {self.best} {self._fmt(self.best_effect)}"
        return f"{self.chosen}: {self._fmt(self.chosen_effect)} {verdict}"

    def _fmt(self, v: float | None) -> str:
        if v is None:
            return "n/a"
        return f"{v:+.1f} %" if self.unit == "%" else f"price {v:.2f}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"chosen": self.chosen, "best": self.best, "correct": self.correct, "chosen_effect": self.chosen_effect,
                "best_effect": self.best_effect, "unit": self.unit, "text": self.describe()}


def _squash(s: str) -> str:
    return re.sub(r"[\s_\-'\"`.]+", "", s.lower())


def normalise_node(answer: str, names: list[str]) -> str | None:
    """The trade node an answer names: exact, then loose (case/spacing), then the longest name mentioned."""
    a = (answer or "").strip().strip("'\"`. ")
    if a in names:
        return a
    loose = {_squash(n): n for n in names}
    if _squash(a) in loose:
        return loose[_squash(a)]
    text = " " + re.sub(r"[^a-z0-9_]+", " ", (answer or "").lower()) + " "
    hits = [n for n in names if f" {n.lower()} " in text or f" {n.lower().replace('_', ' ')} " in text]
    return max(hits, key=len) if hits else None


def normalise_building(answer: str, ids: list[int]) -> int | None:
    """The building id an answer names: the first integer in it that is a building id."""
    for tok in re.findall(r"\d+", answer or ""):
        if int(tok) in ids:
            return int(tok)
    return None


def solve_question(q: DQAQuestion) -> LocatingSolution | BuildingSolution:
    """Simulate every option of a question (scripts parsed once per process)."""
    sc = load_scenario(q.script, q.scenario)
    if q.scenario == "locating":
        return solve_locating(sc, q.country, q.home)
    return solve_building(sc, q.goods)


def best_decision(q: DQAQuestion) -> str | None:
    """The simulator's best decision as a string (node name or building id)."""
    best = solve_question(q).best
    return None if best is None else str(best)


def grade(q: DQAQuestion, answer: str) -> Verdict:
    """Normalise ``answer`` to an option of ``q`` and simulate it against the best."""
    sol = solve_question(q)
    if isinstance(sol, LocatingSolution):
        sc: LocatingScenario = load_scenario(q.script, q.scenario)
        chosen = normalise_node(answer, [n for n in sc.names if n != q.home])
        best = sol.option(sol.best) if sol.best else None
        opt = sol.option(chosen) if chosen else None
        eff = opt.change_pct if opt else None
        best_eff = best.change_pct if best else 0.0
        correct = chosen is not None and (chosen == sol.best or (eff is not None and best is not None and abs(opt.profit - best.profit) < 1e-12))
        return Verdict(chosen, sol.best, correct, eff, best_eff, "%")
    bsc: BuildingScenario = load_scenario(q.script, q.scenario)
    chosen_id = normalise_building(answer, bsc.building_ids)
    best_b = sol.option(sol.best) if sol.best is not None else None
    opt_b = sol.option(chosen_id) if chosen_id is not None else None
    correct = chosen_id is not None and (chosen_id == sol.best or (opt_b is not None and best_b is not None and abs(opt_b.price - best_b.price) < 1e-12))
    return Verdict(None if chosen_id is None else str(chosen_id), None if sol.best is None else str(sol.best), correct,
                   opt_b.price if opt_b else None, best_b.price if best_b else sol.script_price, "price")
