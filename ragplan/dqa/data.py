"""Reading a clone of the DQA repository: its questions and their scripts, as they are.

Layout (shared/DQA.md): ``data/locating/questions/simulated_question.json`` with one script
``data/locating/queries/LPG_format/q<N>.cql`` per question, and
``data/building/questions/simulated_questions.json`` with one script per country+year
``data/building/queries/LPG_format/<C><YEAR>.cql``. ``CLONE`` may be the repository root or its
``data/`` folder. Scripts are parsed once per process (:func:`load_scenario` is cached), since many
building questions share one script.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from ragplan.dqa.cql import read_graph_data

__all__ = [
    "DQAQuestion", "DQAError", "load_questions", "load_scenario", "data_root", "Scenario",
    "LOCATING_QUESTIONS", "LOCATING_SCRIPTS", "BUILDING_QUESTIONS", "BUILDING_SCRIPTS",
]

Scenario = Literal["locating", "building"]

LOCATING_QUESTIONS = "data/locating/questions/simulated_question.json"
LOCATING_SCRIPTS = "data/locating/queries/LPG_format"
BUILDING_QUESTIONS = "data/building/questions/simulated_questions.json"
BUILDING_SCRIPTS = "data/building/queries/LPG_format"


class DQAError(ValueError):
    """The clone is missing a file or holds a question that cannot be read; says which."""


@dataclass
class DQAQuestion:
    """One DQA question with the path of its script."""

    scenario: Scenario
    num: int
    country: str
    year: int | None
    question: str
    business_rules: str
    goal: str
    answer: str
    script: Path
    home: str = ""
    goods: str = ""

    @property
    def prompt(self) -> str:
        """The text given to a method: business rules + question + goal (as PlanRAG does)."""
        return "\n".join(p.strip() for p in (self.business_rules, self.question, self.goal) if p and p.strip())

    @property
    def id(self) -> str:
        """A stable id such as ``locating-17``."""
        return f"{self.scenario}-{self.num}"


def data_root(clone: str | Path) -> Path:
    """The folder that holds ``data/`` (accepts the repository root or its data folder)."""
    p = Path(clone).expanduser()
    if (p / "data" / "locating").is_dir() or (p / "data" / "building").is_dir():
        return p
    if p.name == "data" and ((p / "locating").is_dir() or (p / "building").is_dir()):
        return p.parent
    raise DQAError(f"{p} is not a clone of the DQA repository (no data/locating or data/building folder)")


def _year(q: dict[str, Any], country: str) -> int | None:
    if q.get("year") not in (None, ""):
        try:
            return int(q["year"])
        except (TypeError, ValueError):
            return None
    m = re.search(r"(\d{3,4})$", country)
    return int(m.group(1)) if m else None


def load_questions(clone: str | Path, scenario: Scenario) -> list[DQAQuestion]:
    """Every question of ``scenario`` in file order; a missing field names the question."""
    root = data_root(clone)
    rel = LOCATING_QUESTIONS if scenario == "locating" else BUILDING_QUESTIONS
    path = root / rel
    if not path.exists() and scenario == "building":  # tolerate the singular spelling
        alt = root / rel.replace("simulated_questions", "simulated_question")
        path = alt if alt.exists() else path
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise DQAError(f"missing {path}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DQAError(f"{path} is not valid JSON: {exc}") from exc
    if isinstance(raw, dict):
        raw = raw.get("questions") or list(raw.values())
    if not isinstance(raw, list):
        raise DQAError(f"{path} should hold a JSON list of questions, not {type(raw).__name__}")
    out = []
    scripts = root / (LOCATING_SCRIPTS if scenario == "locating" else BUILDING_SCRIPTS)
    for i, q in enumerate(raw):
        try:
            num = int(q.get("question_num", i + 1))
            country = str(q["country"]).strip()
            script = scripts / (f"q{num}.cql" if scenario == "locating" else f"{country}.cql")
            out.append(DQAQuestion(
                scenario=scenario, num=num, country=country, year=_year(q, country),
                question=str(q.get("question", "")), business_rules=str(q.get("business_rules", "")),
                goal=str(q.get("goal", "")), answer=str(q.get("answer", "")).strip(), script=script,
                home=str(q.get("home", "")).strip(), goods=str(q.get("goods", "")).strip(),
            ))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DQAError(f"{path}: question #{i + 1} cannot be read ({type(exc).__name__}: {exc})") from exc
    return out


@lru_cache(maxsize=64)
def _scenario(path: str, stamp: tuple[int, int, int], scenario: str) -> Any:
    data = read_graph_data(path)
    if scenario == "locating":
        from ragplan.dqa.locating import scenario_from_data
    else:
        from ragplan.dqa.building import scenario_from_data
    return scenario_from_data(data)


def load_scenario(path: str | Path, scenario: Scenario) -> Any:
    """The compiled :class:`LocatingScenario` / :class:`BuildingScenario` of a script, parsed once per process."""
    p = Path(path).resolve()
    try:
        st = p.stat()
    except OSError as exc:
        raise DQAError(f"missing script {p}") from exc
    return _scenario(str(p), (st.st_mtime_ns, st.st_size, st.st_ino), scenario)
