"""A synthetic multi-hop QA demo corpus with gold supporting passages (smoke tests, not figures): a fictional world of
rivers, cities, people, companies and novels, bridge and comparison questions among distractors, as FlashRAG-style
JSON Lines (:func:`write_synthetic`). Deterministic for a seed."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ragplan.jsonl import atomic_write, jsonl_text

__all__ = ["SyntheticWorld", "make_synthetic_world", "synthetic_records", "write_synthetic"]

_ON = ["val", "mar", "tor", "bel", "dun", "kes", "lor", "mir", "ost", "pra", "quen", "rav", "sol", "tam", "ul", "ver",
       "wes", "yor", "zan", "cal", "bren", "fal", "gor", "hal", "isk", "jor", "kal", "lum", "nor", "per"]
_MID = ["a", "e", "i", "o", "u", "an", "en", "ar", "or", "il", "el", "ad"]
_END = ["ton", "via", "mouth", "dale", "burg", "ford", "ria", "stad", "holm", "mere", "wick", "port", "ley", "grad"]
_FIRST = ["Ada", "Bruno", "Clara", "Dario", "Elin", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Kira", "Lukas", "Mira",
          "Nils", "Olga", "Pavel", "Rosa", "Soren", "Tilda", "Umar", "Vera", "Wim", "Yara", "Zeno", "Alma", "Bela",
          "Cyril", "Dora", "Emil", "Fenna", "Gideon", "Hanne", "Ivo", "Juna", "Kasimir", "Lene"]
_LAST_END = ["ani", "berg", "ski", "ova", "sen", "ard", "etti", "mann", "ez", "ström", "vic", "oux", "ley", "ida"]
_INDUSTRY = ["shipbuilding", "software", "textile", "pharmaceutical", "brewing", "railway", "optics", "publishing"]
_SUFFIX = ["Works", "Labs", "Industries", "Group", "Company", "Systems", "Holdings", "Mills"]
_PROFESSION = ["chemist", "painter", "engineer", "novelist", "architect", "composer", "economist", "botanist"]
_GENRE = ["historical", "detective", "adventure", "satirical", "pastoral", "war"]
_COUNTRY = ["Estmark", "Valdoria", "Kessia", "Norland", "Ostravia", "Pellucia"]
_RANGE = ["Grey", "Iron", "Silver", "Amber", "Frost", "Cedar"]


@dataclass
class SyntheticWorld:
    """The fictional world: entities by kind, each with its facts and its encyclopedia paragraph."""

    rivers: list[dict[str, Any]] = field(default_factory=list)
    cities: list[dict[str, Any]] = field(default_factory=list)
    people: list[dict[str, Any]] = field(default_factory=list)
    companies: list[dict[str, Any]] = field(default_factory=list)
    novels: list[dict[str, Any]] = field(default_factory=list)

    def all(self) -> list[dict[str, Any]]:
        """Every entity (each has ``title`` and ``sentences``)."""
        return [e for f in fields(self) for e in getattr(self, f.name)]


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def _namer(rng: random.Random):
    used: set[str] = set()

    def name(kind: str) -> str:
        """A fresh name of that kind (person, company, novel, river, city)."""
        for _ in range(1000):
            if kind == "person":
                n = f"{rng.choice(_FIRST)} {rng.choice(_ON).capitalize()}{rng.choice(_MID)}{rng.choice(_LAST_END)}"
            elif kind == "company":
                n = f"{rng.choice(_ON).capitalize()}{rng.choice(_MID)}{rng.choice(['x', 'n', 'r', 'l'])} {rng.choice(_SUFFIX)}"
            elif kind == "novel":
                n = f"The {rng.choice(['Last', 'Silent', 'Hidden', 'Broken', 'Golden', 'Winter', 'Far'])} " \
                    f"{rng.choice(['Harbour', 'Garden', 'Letter', 'Bridge', 'Orchard', 'Tower', 'Voyage', 'Crown'])} of " \
                    f"{rng.choice(_ON).capitalize()}{rng.choice(_END)}"
            elif kind == "river":
                n = f"{rng.choice(_ON).capitalize()}{rng.choice(_MID)}{rng.choice(['n', 'l', 'r', 's'])} River"
            else:
                n = f"{rng.choice(_ON).capitalize()}{rng.choice(_MID)}{rng.choice(_END)}"
            if n not in used:
                used.add(n)
                return n
        raise RuntimeError("ran out of synthetic names")

    return name


def make_synthetic_world(n_questions: int, seed: int = 0) -> SyntheticWorld:
    """A world big enough for ``n_questions`` questions with distractors (deterministic for ``seed``)."""
    rng = random.Random(seed)
    name = _namer(rng)
    w = SyntheticWorld()
    for _ in range(max(4, n_questions // 8)):
        r = {"title": name("river"), "range": rng.choice(_RANGE), "km": rng.randint(40, 900), "country": rng.choice(_COUNTRY)}
        r["sentences"] = [f"The {r['title']} is a river in {r['country']}.",
                          f"It rises in the {r['range']} Mountains and is {r['km']} kilometres long."]
        w.rivers.append(r)
    for _ in range(max(6, n_questions // 4)):
        river = rng.choice(w.rivers)
        c = {"title": name("city"), "river": river["title"], "country": river["country"],
             "founded": rng.randint(900, 1700), "pop": rng.randint(8, 900) * 1000}
        c["sentences"] = [f"{c['title']} is a city in {c['country']} with about {c['pop']:,} inhabitants.",
                          f"It lies on the {c['river']} and was granted a charter in {c['founded']}."]
        w.cities.append(c)
    for _ in range(max(10, n_questions)):
        city = rng.choice(w.cities)
        p = {"title": name("person"), "born": rng.randint(1820, 1990), "city": city["title"],
             "profession": rng.choice(_PROFESSION)}
        p["sentences"] = [f"{p['title']} (born {p['born']}) is {_a(p['profession'])}.",
                          f"{p['title'].split()[0]} was born in {p['city']} and later taught at a school there."]
        w.people.append(p)
    for _ in range(max(6, n_questions // 2)):
        founder, hq = rng.choice(w.people), rng.choice(w.cities)
        co = {"title": name("company"), "founder": founder["title"], "year": rng.randint(1850, 2015), "hq": hq["title"],
              "industry": rng.choice(_INDUSTRY)}
        co["sentences"] = [f"{co['title']} is {_a(co['industry'])} company founded in {co['year']} by {co['founder']}.",
                           f"Its headquarters are in {co['hq']}."]
        w.companies.append(co)
    for _ in range(max(4, n_questions // 3)):
        author = rng.choice(w.people)
        b = {"title": name("novel"), "author": author["title"], "year": rng.randint(1860, 2020), "genre": rng.choice(_GENRE)}
        b["sentences"] = [f"{b['title']} is {_a(b['genre'])} novel published in {b['year']}.",
                          f"It was written by {b['author']}."]
        w.novels.append(b)
    return w


# bridge questions: the start entity's kind, the facts followed from it (each a title of the next entity, the last the
# answer), the question and its decomposition; each fact's sentence in its entity's paragraph
_BRIDGES = {
    "founder_city": ("companies", ("founder", "city"), "In which city was the founder of {} born?",
                     ("Who founded {}?", "In which city was #1 born?")),
    "author_born": ("novels", ("author", "born"), "In what year was the author of {} born?",
                    ("Who wrote {}?", "In what year was #1 born?")),
    "person_river": ("people", ("city", "river"), "On which river lies the city where {} was born?",
                     ("Where was {} born?", "On which river does #1 lie?")),
    "founder_river": ("companies", ("founder", "city", "river"), "On which river lies the birthplace of the founder of {}?",
                      ("Who founded {}?", "Where was #1 born?", "On which river does #2 lie?")),
    "hq_country": ("companies", ("hq", "country"), "In which country does {} have its headquarters?",
                   ("Where are the headquarters of {}?", "In which country is #1?")),
}
_FACT_SENTENCE = {"founder": 0, "city": 1, "author": 1, "born": 0, "river": 1, "hq": 1, "country": 0}


def _question(world: SyntheticWorld, rng: random.Random) -> dict[str, Any]:
    """One question: its text, answer, type, gold chain (title, fact sentence index) and decomposition."""
    ents = {e["title"]: e for e in world.all()}
    kind = rng.choice(["founder_city", "founder_city", "author_born", "person_river", "founder_river", "hq_country",
                       "compare_founded"])
    if kind in _BRIDGES:
        group, facts, question, decomposition = _BRIDGES[kind]
        e = start = rng.choice(getattr(world, group))
        chain = []
        for fact in facts:
            chain.append((e["title"], _FACT_SENTENCE[fact]))
            value = e[fact]
            e = ents.get(value, e)
        return {"type": "bridge", "question": question.format(start["title"]), "answer": str(value), "chain": chain,
                "decomposition": [d.format(start["title"]) for d in decomposition]}
    a, b = rng.sample(world.companies, 2)
    while a["year"] == b["year"]:
        a, b = rng.sample(world.companies, 2)
    first = a if a["year"] < b["year"] else b
    return {"type": "comparison", "question": f"Which company was founded earlier, {a['title']} or {b['title']}?",
            "answer": first["title"], "chain": [(a["title"], 0), (b["title"], 0)],
            "decomposition": [f"When was {a['title']} founded?", f"When was {b['title']} founded?"]}


def synthetic_records(n: int, seed: int = 0, distractors: int = 6) -> list[dict[str, Any]]:
    """``n`` FlashRAG-style records over one world (gold paragraphs mixed with ``distractors`` of the same kinds)."""
    world = make_synthetic_world(n, seed)
    ents = {e["title"]: e for e in world.all()}
    kinds = {e["title"]: f.name for f in fields(world) for e in getattr(world, f.name)}
    rng = random.Random(seed + 1)
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for _ in range(n * 20):
        if len(out) >= n:
            break
        q = _question(world, rng)
        if q["question"] in seen:
            continue
        seen.add(q["question"])
        gold = [t for t, _ in q["chain"]]
        pool = [e["title"] for e in world.all() if e["title"] not in gold and kinds[e["title"]] in {kinds[t] for t in gold}]
        titles = gold + rng.sample(pool, min(distractors, len(pool)))
        rng.shuffle(titles)
        out.append({"id": f"syn-{seed}-{len(out):05d}", "question": q["question"], "golden_answers": [q["answer"]],
                    "metadata": {"dataset": "synthetic-multihop", "type": q["type"],
                                 "context": [[t, list(ents[t]["sentences"])] for t in titles],
                                 "supporting_facts": [[t, i] for t, i in q["chain"]],
                                 "decomposition": q["decomposition"]}})
    return out


def write_synthetic(path: str | Path, n: int, seed: int = 0, distractors: int = 6) -> Path:
    """Write :func:`synthetic_records` as JSON Lines to ``path``."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(p, jsonl_text(synthetic_records(n, seed, distractors)))
    return p
