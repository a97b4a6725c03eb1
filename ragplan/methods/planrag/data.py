"""Reading a clone of the DQA repository (layout: shared/DQA.md; ``CLONE`` is its root or ``data/``): its questions
and scripts; :func:`load_scenario` caches compiled scripts by the hash of their bytes (200 questions, 10 scripts)."""

from __future__ import annotations

import copy
import gc
import hashlib
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ragplan.jsonl import read_json
from ragplan.methods.planrag.cql import graph_data_from_text
from ragplan.tools.graphdb.script import decode_script

__all__ = [
    "DQAQuestion", "DQAError", "load_questions", "load_scenario", "clear_scenario_cache", "data_root", "Scenario",
    "SCENARIO_CACHE_SIZE", "LOCATING_QUESTIONS", "LOCATING_SCRIPTS", "BUILDING_QUESTIONS", "BUILDING_SCRIPTS",
    "CLONE_PATHS",
]

Scenario = Literal["locating", "building"]

LOCATING_QUESTIONS = "data/locating/questions/simulated_question.json"
LOCATING_SCRIPTS = "data/locating/queries/LPG_format"
BUILDING_QUESTIONS = "data/building/questions/simulated_questions.json"
BUILDING_SCRIPTS = "data/building/queries/LPG_format"
#: Per scenario, where a clone keeps its questions file and its scripts folder.
CLONE_PATHS: dict[str, tuple[str, str]] = {"locating": (LOCATING_QUESTIONS, LOCATING_SCRIPTS),
                                           "building": (BUILDING_QUESTIONS, BUILDING_SCRIPTS)}


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


#: Fields every question must hold, non-empty (without them there is nothing to ask or to grade).
REQUIRED_FIELDS = ("question", "answer", "country")


def load_questions(clone: str | Path, scenario: Scenario) -> list[DQAQuestion]:
    """Every question of ``scenario`` in file order; a missing or empty required field (``question``,
    ``answer``, ``country``) raises :class:`DQAError` naming the file, the record and the field."""
    root = data_root(clone)
    rel, scripts_rel = CLONE_PATHS[scenario]
    path = root / rel
    if not path.exists() and scenario == "building":  # tolerate the singular spelling
        alt = root / rel.replace("simulated_questions", "simulated_question")
        path = alt if alt.exists() else path
    if not path.exists():
        raise DQAError(f"missing {path}")
    raw = read_json(path, DQAError)
    if isinstance(raw, dict):
        raw = raw.get("questions") or list(raw.values())
    if not isinstance(raw, list):
        raise DQAError(f"{path} should hold a JSON list of questions, not {type(raw).__name__}")
    out = []
    scripts = root / scripts_rel
    for i, q in enumerate(raw):
        where = f"{path}: question #{i + 1}" + (f" (question_num {q.get('question_num')})"
                                                  if isinstance(q, dict) and "question_num" in q else "")
        if not isinstance(q, dict):
            raise DQAError(f"{where} is a {type(q).__name__}, not a JSON object")
        if missing := [k for k in REQUIRED_FIELDS if not str(q.get(k) if q.get(k) is not None else "").strip()]:
            raise DQAError(f"{where} has no {' / '.join(repr(k) for k in missing)}")
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
            raise DQAError(f"{where} cannot be read ({type(exc).__name__}: {exc})") from exc
    return out


#: How many compiled scripts :func:`load_scenario` keeps (least recently used first out).
SCENARIO_CACHE_SIZE = 64
_cache: OrderedDict[tuple[bytes, str], Any] = OrderedDict()
_cache_lock = threading.Lock()


def _compile(data: bytes, source: str, scenario: str) -> Any:
    from ragplan.methods.planrag import building, locating  # here: NumPy is imported when a building script is first read

    compile_graph = locating.scenario_from_data if scenario == "locating" else building.scenario_from_data
    # Parsing makes ~10k short-lived objects without cycles; the collections they would set off walk the
    # whole heap and cost more than the parse, so the collector pauses (process-wide) meanwhile.
    collecting = gc.isenabled()
    gc.disable()
    try:
        text = decode_script(data, source)
        fast = building.official_scenario(text, source) if scenario == "building" else None
        if fast is not None:  # a building script in the official form, read without the general parser
            return fast
        rows = graph_data_from_text(text, source)
        if not rows.nodes:  # a comments-only or truncated file would compile to a scenario without options
            raise DQAError(f"{source}:1: the script creates no nodes (an empty or truncated file?)")
        return compile_graph(rows)
    finally:
        if collecting:
            gc.enable()


def load_scenario(path: str | Path, scenario: Scenario) -> Any:
    """The compiled :class:`LocatingScenario` / :class:`BuildingScenario` of a script, parsed once per content
    (a SHA-256 hash of its bytes) and shown under the path asked for (its ``source``)."""
    p = Path(path).resolve()
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise DQAError(f"missing script {p}") from exc
    if not data.strip():
        raise DQAError(f"{p}:1: the script is empty")
    key = (hashlib.sha256(data).digest(), scenario)  # (OpenSSL, with CPU SHA instructions: faster than blake2b)
    with _cache_lock:
        sc = _cache.get(key)
        if sc is not None:
            _cache.move_to_end(key)
    if sc is None:
        sc = _compile(data, str(p), scenario)
        with _cache_lock:
            _cache[key] = sc
            while len(_cache) > SCENARIO_CACHE_SIZE:
                _cache.popitem(last=False)
    if sc.source != str(p):  # the same bytes under another name: a shallow copy keeps what was compiled and simulated
        sc = copy.copy(sc)
        sc.source = str(p)
    return sc


def clear_scenario_cache() -> None:
    """Forget every compiled script (benchmarks time cold runs with it)."""
    with _cache_lock:
        _cache.clear()
