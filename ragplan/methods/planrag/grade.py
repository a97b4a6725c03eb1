"""Grading a DQA decision by simulation, not by string match: the answer is normalised to an option
(a trade node name, a building id) and simulated against the best ("+1.3 % vs best +16.6 %").
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from ragplan.methods.planrag.building import BuildingSolution, solve_building
from ragplan.methods.planrag.data import DQAQuestion, load_scenario
from ragplan.methods.planrag.locating import LocatingSolution, solve_locating

__all__ = ["Verdict", "solve_question", "normalise_node", "normalise_building", "grade"]


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
    note: str = ""
    """Why no option was recognised, when known (e.g. the answer names the home node)."""

    def describe(self) -> str:
        """One line for a person: ``node_03: +1.3 % vs best node_05 +16.6 %``."""
        if self.chosen is None:
            best = f"best {self.best} ({self._fmt(self.best_effect)})" if self.best else "no option improves on the script"
            return f"no option recognised in the answer{self.note and ' (' + self.note + ')'}; {best}"
        if self.best is None:
            return f"{self.chosen}: {self._fmt(self.chosen_effect)}; no option improves on the script"
        verdict = "best" if self.correct else f"vs best {self.best} {self._fmt(self.best_effect)}"
        return f"{self.chosen}: {self._fmt(self.chosen_effect)} {verdict}"

    def _fmt(self, v: float | None) -> str:
        return "n/a" if v is None else f"{v:+.1f} %" if self.unit == "%" else f"price {v:.2f}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {**asdict(self), "text": self.describe()}


def _squash(s: str) -> str:
    return re.sub(r"[\s_\-'\"`.]+", "", s.lower())


def normalise_node(answer: str, names: list[str]) -> str | None:
    """The trade node an answer names: exact, then loose (case/spacing), then the first name mentioned."""
    a = (answer or "").strip().strip("'\"`. ")
    if a in names:
        return a
    loose = {_squash(n): n for n in names}
    if _squash(a) in loose:
        return loose[_squash(a)]
    text = " " + re.sub(r"[^a-z0-9_]+", " ", (answer or "").lower()) + " "
    found: dict[str, int] = {}
    for n in names:
        for form in {n.lower(), n.lower().replace("_", " ")}:
            pos = text.find(f" {form} ")
            if pos >= 0:
                found[n] = min(found.get(n, pos), pos)
    # a name inside a longer mentioned name ("java" in "java sea") is not a mention of its own
    kept = [n for n in found if not any(n != m and n.lower() in m.lower() for m in found)]
    return min(kept, key=lambda n: found[n]) if kept else None  # the option the answer names first


def normalise_building(answer: str, ids: list[int]) -> int | None:
    """The building id an answer names: the first integer in it that is a building id."""
    return next((int(tok) for tok in re.findall(r"\d+", answer or "") if int(tok) in ids), None)


def solve_question(q: DQAQuestion) -> LocatingSolution | BuildingSolution:
    """Simulate every option of a question (scripts parsed once per process)."""
    sc = load_scenario(q.script, q.scenario)
    return solve_locating(sc, q.country, q.home) if q.scenario == "locating" else solve_building(sc, q.goods)


def grade(q: DQAQuestion, answer: str) -> Verdict:
    """Normalise ``answer`` to an option of ``q`` and simulate it against the best."""
    sol = solve_question(q)
    sc = load_scenario(q.script, q.scenario)
    note = ""
    if isinstance(sol, LocatingSolution):
        chosen: Any = normalise_node(answer, [n for n in sc.names if n != q.home])
        if chosen is None and normalise_node(answer, sc.names) == q.home:
            note = f"{q.home} is the home node, not an option"
        unit, value, effect, no_best = "%", (lambda o: o.profit), (lambda o: o.change_pct), 0.0
    else:
        chosen = normalise_building(answer, sc.building_ids)
        unit, value, effect, no_best = "price", (lambda o: o.price), (lambda o: o.price), sol.script_price
    option: Any = sol.option  # a node name or a building id, as the scenario has it
    best = option(sol.best) if sol.best is not None else None
    opt = option(chosen) if chosen is not None else None
    correct = chosen is not None and (chosen == sol.best or (opt is not None and best is not None
                                                             and abs(value(opt) - value(best)) < 1e-12))
    return Verdict(None if chosen is None else str(chosen), None if sol.best is None else str(sol.best), correct,
                   effect(opt) if opt else None, effect(best) if best else no_best, unit, note)
