"""A small synthetic multi-hop world for InstructRAG's tests and LLM-free figures: people, films, bands and cities, and
questions of the 12 answer types with a successful and a failed path each (:func:`write_world`)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ragplan.jsonl import atomic_write, jsonl_text
from ragplan.methods.instructrag.paths import Instruction, InstructionPath, write_paths_jsonl
from ragplan.methods.instructrag.tasks import task_split

__all__ = ["SynthWorld", "make_world", "write_world", "split_paths", "split_failed"]

_FIRST = ["Ada", "Bruno", "Clara", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kaia", "Luca", "Mira",
          "Nils", "Olga", "Pavel", "Quinn", "Rosa", "Stefan", "Tove", "Umar", "Vera", "Wendell", "Yara"]
_LAST = ["Almqvist", "Brandt", "Castell", "Dunmore", "Ekberg", "Falk", "Garnier", "Holm", "Ivers", "Jaramillo", "Kovac",
         "Lindqvist", "Moreau", "Novak", "Ortega", "Petrov", "Quist", "Rinaldi", "Sorensen", "Tamura"]
_NATIONS = [("Sweden", "Swedish"), ("France", "French"), ("Italy", "Italian"), ("Japan", "Japanese"), ("Canada", "Canadian"),
            ("Brazil", "Brazilian"), ("Norway", "Norwegian"), ("Spain", "Spanish")]
_CITIES = ["Marlow Bay", "Eastvale", "Port Ilsen", "Kestrel Hill", "Vantmoor", "Ostrava Nova", "Lindenfeld", "Calder Springs"]
_NICK = ["the City of Bridges", "the Amber Harbour", "the Windy Crossing", "the Lantern Town", "the Salt Gate",
         "the Clockwork City", "the Green Terrace", "the Iron Quay"]
_ADJ = ["Silent", "Crimson", "Hollow", "Northern", "Paper", "Velvet", "Broken", "Golden", "Distant", "Midnight"]
_NOUN = ["Harbor", "Orchard", "Lantern", "Meridian", "Tide", "Garden", "Signal", "Frontier", "Mirror", "Canyon"]
_FESTIVALS = ["Lakeshore Film Festival", "Aurora Screen Festival", "Riverside Cinema Week", "Northlight Film Festival"]
_AWARDS = ["Silver Heron Prize", "Golden Compass Award", "Blue Lantern Prize", "Crystal Reel Award"]
_INSTRUMENTS = ["guitar", "cello", "saxophone", "piano", "drums", "violin"]
_GENRES = ["indie rock", "jazz fusion", "folk pop", "synth pop"]
_LABELS = ["Harbourline Records", "Northgate Music", "Bluefield Records", "Copperleaf Sounds"]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November",
           "December"]


@dataclass
class SynthWorld:
    """Passages, questions with paths, and HotpotQA-format records of one generated world."""

    passages: list[dict[str, str]] = field(default_factory=list)
    successful: list[InstructionPath] = field(default_factory=list)
    failed: list[InstructionPath] = field(default_factory=list)
    hotpot: list[dict[str, Any]] = field(default_factory=list)
    exhausted: list[str] = field(default_factory=list)
    """Tasks whose questions ran out (the world's entities allow no more distinct ones), in the order they did."""


_MAX_REPEATS = 300
"""Draws of an already asked question after which a task counts as exhausted."""


Made = tuple[str, str, list[Instruction], list[str]]
"""A question, its answer, its path and its supporting titles."""


def _path(*steps: str) -> list[Instruction]:
    """``_path("Search", "A", "Finish", "b")`` -> ``[Search[A], Finish[b]]``."""
    return [Instruction(a, b) for a, b in zip(steps[::2], steps[1::2])]


def make_world(n_questions: int = 120, seed: int = 0, n_people: int = 24) -> SynthWorld:
    """A world of up to ``n_questions`` distinct questions, round robin over the tasks (one that runs out leaves)."""
    rng = random.Random(seed)
    names = rng.sample([f"{f} {l}" for f in _FIRST for l in _LAST], n_people)
    people: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(names):
        country, adj = rng.choice(_NATIONS)
        people[name] = {"name": name, "country": country, "adj": adj, "city": rng.choice(_CITIES),
                        "born": f"{rng.randint(1, 28)} {rng.choice(_MONTHS)} {rng.randint(1935, 1990)}",
                        "role": "director" if i % 2 == 0 else "musician", "films": [], "instrument": rng.choice(_INSTRUMENTS)}
    directors = [p for p in people.values() if p["role"] == "director"]
    musicians = [p for p in people.values() if p["role"] == "musician"]
    titles = rng.sample([f"The {a} {n}" for a in _ADJ for n in _NOUN], max(8, len(directors) * 2))
    films: dict[str, dict[str, Any]] = {}
    for i, title in enumerate(titles):
        d = directors[i % len(directors)]
        films[title] = {"title": title, "director": d["name"], "year": 1970 + rng.randint(0, 45),
                        "festival": rng.choice(_FESTIVALS), "award": rng.choice(_AWARDS)}
        d["films"].append(title)
    bands: dict[str, dict[str, Any]] = {}
    for i, m in enumerate(musicians):
        band = f"The {rng.choice(_ADJ)} {rng.choice(_NOUN)}s"
        while band in bands or band in films:
            band = f"The {rng.choice(_ADJ)} {rng.choice(_NOUN)}s"
        bands[band] = {"name": band, "members": rng.randint(3, 7), "genre": rng.choice(_GENRES), "label": rng.choice(_LABELS),
                       "member": m["name"]}
        m["band"] = band
    cities = {c: {"name": c, "nick": _NICK[i % len(_NICK)], "country": rng.choice(_NATIONS)[0]} for i, c in enumerate(_CITIES)}
    w = SynthWorld()
    for p in people.values():
        pro = "he" if rng.random() < 0.5 else "she"
        text = (f"{p['name']} is a {p['adj']} {p['role']}. {pro.capitalize()} was born on {p['born']} in {p['city']}. "
                f"{p['name']} has {p['adj']} nationality.")
        if p["role"] == "director":
            text += " " + " ".join(f"In {films[t]['year']}, {p['name']} directed {t}." for t in p["films"])
        else:
            text += f" {pro.capitalize()} plays the {p['instrument']} and is a member of the band {p['band']}."
        w.passages.append({"title": p["name"], "text": text})
    for f in films.values():
        w.passages.append({"title": f["title"], "text": f"{f['title']} is a {f['year']} film directed by {f['director']}. "
                           f"The film premiered at the {f['festival']}. {f['title']} won the {f['award']}."})
    for b in bands.values():
        w.passages.append({"title": b["name"], "text": f"{b['name']} is a {b['genre']} band signed to {b['label']}. "
                           f"The band has {b['members']} members, among them {b['member']}."})
    for c in cities.values():
        w.passages.append({"title": c["name"], "text": f"{c['name']} is a city in {c['country']}. "
                           f"The city is known as {c['nick']}."})

    film_list = list(films.values())

    def q_person() -> Made:
        f = rng.choice(film_list)
        t, d = f["title"], f["director"]
        return f"Who directed {t}?", d, _path("Search", t, "Finish", d), [t]

    def q_via_director(what: str) -> Made:
        f = rng.choice(film_list)
        d, t = people[f["director"]], f["title"]
        word, ans, q = {"date": ("born", d["born"], f"When was the director of {t} born?"),
                        "location": ("born", d["city"], f"Where was the director of {t} born?"),
                        "adjective": ("nationality", d["adj"], f"What nationality is the director of {t}?")}[what]
        return q, ans, _path("Search", t, "Search", d["name"], "Lookup", word, "Finish", ans), [t, d["name"]]

    def q_yesno() -> Made:
        a, b = rng.sample(list(people.values()), 2)
        ans = "yes" if a["adj"] == b["adj"] else "no"
        return (f"Are {a['name']} and {b['name']} of the same nationality?", ans,
                _path("Search", a["name"], "Lookup", "nationality", "Search", b["name"], "Lookup", "nationality",
                      "Finish", ans), [a["name"], b["name"]])

    def q_number() -> Made:
        m = rng.choice(musicians)
        name, n = m["name"], str(bands[m["band"]]["members"])
        return (f"How many members does the band of {name} have?", n,
                _path("Search", name, "Search", m["band"], "Lookup", "members", "Finish", n), [name, m["band"]])

    Ask = Callable[[dict[str, Any]], tuple[str, str, str, str]]

    def one_page(pool: list[dict[str, Any]], ask: Ask) -> Callable[[], Made]:
        """A maker of questions one page answers: ``ask(entity)`` gives (page, question, lookup keyword, answer)."""
        def make() -> Made:
            page, question, keyword, answer = ask(rng.choice(pool))
            return question, answer, _path("Search", page, "Lookup", keyword, "Finish", answer), [page]
        return make

    def q_other() -> Made:
        m = rng.choice(musicians)
        name, c = m["name"], cities[people[m["name"]]["city"]]
        return (f"What is the hometown of {name} known as?", c["nick"],
                _path("Search", name, "Lookup", "born", "Search", c["name"], "Lookup", "known as", "Finish", c["nick"]),
                [name, c["name"]])

    makers = {
        "person": q_person, "date": lambda: q_via_director("date"), "location": lambda: q_via_director("location"),
        "adjective": lambda: q_via_director("adjective"), "yes/no": q_yesno, "number": q_number,
        "group/org": one_page(musicians, lambda m: (m["name"], f"Which band is {m['name']} a member of?", "member",
                                                    m["band"])),
        "artwork": one_page(film_list, lambda f: (f["director"], f"Which film did {f['director']} direct in {f['year']}?",
                                                  str(f["year"]), f["title"])),
        "event": one_page(film_list, lambda f: (f["title"], f"At which festival did {f['title']} premiere?", "premiered",
                                                f["festival"])),
        "other proper noun": one_page(film_list, lambda f: (f["title"], f"What prize did the film {f['title']} win?",
                                                            "won", f["award"])),
        "common noun": one_page(musicians, lambda m: (m["name"], f"What instrument does {m['name']} play?", "plays",
                                                      m["instrument"])),
        "other": q_other}
    paragraphs = {p["title"]: p["text"] for p in w.passages}
    seen_q: set[str] = set()
    active = list(makers)  # round robin over the tasks; a task whose questions run out leaves it
    turn = misses = 0
    while len(w.successful) < n_questions and active:
        task = active[turn % len(active)]
        q, ans, path, titles = makers[task]()
        if q in seen_q:
            misses += 1
            if misses >= _MAX_REPEATS:  # no new question in this many draws: the task is exhausted
                active.remove(task)
                w.exhausted.append(task)
                misses = 0
            continue
        seen_q.add(q)
        misses = 0
        turn += 1
        qid = f"synth-{len(w.successful):04d}"
        w.successful.append(InstructionPath(q, ans, path, True, task=task, id=qid, source="synth", supporting_titles=titles))
        wrong = rng.choice([p for p in people if p not in titles] or list(people))
        w.failed.append(InstructionPath(q, ans, _path("Search", wrong) + path[1:-1] + _path("Finish", wrong), False,
                                        task=task, id=qid + "-f1", source="synth", supporting_titles=titles))
        distract = rng.sample([t for t in paragraphs if t not in titles], 2)
        w.hotpot.append({"_id": qid, "question": q, "answer": ans, "type": "bridge" if len(titles) > 1 else "comparison",
                         "level": "easy", "supporting_facts": [[t, 0] for t in titles],
                         "context": [[t, [s.strip() + ("" if s.strip().endswith(".") else ".") for s in paragraphs[t].split(". ") if s.strip()]]
                                     for t in titles + distract]})
    return w


def split_paths(paths: list[InstructionPath], *, query_fraction: float = 0.3, seed: int = 0) -> dict[str, list[InstructionPath]]:
    """Support / query sets of the seen and unseen tasks (``support_seen``, ``query_seen``, ``support_unseen``,
    ``query_unseen``); a task's questions are split, so all paths of one question land in the same set."""
    rng = random.Random(seed)
    out: dict[str, list[InstructionPath]] = {k: [] for k in ("support_seen", "query_seen", "support_unseen", "query_unseen")}
    by_task: dict[str, dict[str, list[InstructionPath]]] = {}
    for p in paths:
        by_task.setdefault(p.task, {}).setdefault(p.question, []).append(p)
    for task in sorted(by_task):
        items = list(by_task[task].values())
        rng.shuffle(items)
        nq = max(1, int(round(len(items) * query_fraction))) if len(items) > 1 else 0
        split = "unseen" if task_split(task) == "unseen" else "seen"
        out[f"query_{split}"] += [p for q in items[:nq] for p in q]
        out[f"support_{split}"] += [p for q in items[nq:] for p in q]
    return out


def split_failed(parts: dict[str, list[InstructionPath]], failed: list[InstructionPath]) -> dict[str, list[InstructionPath]]:
    """Failed paths by the set their question is in (``failed_<set>``; so a support set's noise never holds a
    query question or an unseen task), and ``failed_unmatched`` for questions in no set (never noise)."""
    where = {p.question: name for name, paths in parts.items() for p in paths}
    out: dict[str, list[InstructionPath]] = {f"failed_{name}": [] for name in [*parts, "unmatched"]}
    for p in failed:
        out[f"failed_{where[p.question]}" if p.question in where else "failed_unmatched"].append(p)
    return out


def write_world(out_dir: str | Path, n_questions: int = 120, seed: int = 0) -> SynthWorld:
    """Write ``passages.jsonl``, ``paths.jsonl`` and ``hotpot.json`` of a generated world into ``out_dir``."""
    w = make_world(n_questions, seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "passages.jsonl", jsonl_text({"id": str(i), **p} for i, p in enumerate(w.passages)))
    write_paths_jsonl(w.successful + w.failed, out / "paths.jsonl")
    atomic_write(out / "hotpot.json", json.dumps(w.hotpot, indent=1))
    return w
