"""Synthetic DQA-style scenarios in a clone's file layout (the project's own test data): DQA's dialect and mess,
gold answers from ragplan's simulators, same seed same files; ``small`` or ``official`` size."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragplan.jsonl import atomic_write
from ragplan.methods.planrag.building import scenario_from_data as building_scenario, simulate_prices, solve_building
from ragplan.methods.planrag.cql import graph_data_from_text
from ragplan.methods.planrag.data import CLONE_PATHS
from ragplan.methods.planrag.locating import merchant_power, scenario_from_data as locating_scenario, solve_locating

__all__ = ["generate_clone", "max_questions", "locating_script", "building_script", "Size", "SIZES", "LOCATING_RULES",
           "BUILDING_RULES"]


@dataclass(frozen=True)
class Size:
    """How big generated scripts are."""

    trade_nodes: int
    countries: int
    records_per_country: float
    goods: int
    buildings: int
    locating_per_script: int
    """At most this many locating questions share one script's content (each question has its own ``q<N>.cql``)."""
    building_per_script: int


SIZES = {
    "small": Size(trade_nodes=7, countries=6, records_per_country=2.0, goods=6, buildings=8,
                  locating_per_script=1, building_per_script=3),
    # as the official clone: 200 locating question files over 10 contents, a building script per question
    "official": Size(trade_nodes=80, countries=665, records_per_country=1.0, goods=50, buildings=250,
                     locating_per_script=20, building_per_script=1),
}

LOCATING_RULES = (
    "Trade value flows from upstream trade nodes to downstream ones. In every node, each country's share of the "
    "node's total trading power decides how much of the value it collects there or sends downstream. A country "
    "earns profit only in its home node: the value that stays there plus what flows in from upstream, in "
    "proportion to its share of power. A merchant placed in a node where the country has trading power adds "
    "power there (more in inland nodes, depending on the country's development) and steers the node's outgoing "
    "trade toward the country's home node."
)
BUILDING_RULES = (
    "Each building consumes input goods up to its maximum demand and produces output goods up to its maximum "
    "supply; a building that gets only part of its inputs produces the same part of its outputs. Raising a "
    "building's level scales its demand and supply with the level. A goods' market price rises above its base "
    "price when demand (population plus buildings) exceeds supply and falls below it when supply exceeds demand."
)
YEARS = (1445, 1500, 1600)
GOODS = ["grain", "fish", "wood", "iron", "coal", "tools", "furniture", "clothes", "fabric", "steel", "glass",
         "paper", "sugar", "tea", "coffee", "wine", "liquor", "fertilizer", "explosives", "dye", "silk", "oil"]


def _messy(stmt: str, rng: random.Random) -> str:
    """Make a statement as untidy as DQA's lines: usually ';'-terminated, spacing varying, a blank line now and then."""
    if rng.random() < 0.1:
        stmt = stmt.replace(":Trade_node {", ":Trade_node{", 1).replace("(n: ", "(n:", 1)
    stmt = stmt if rng.random() < 0.08 else stmt + ";"
    return stmt + "\n" if rng.random() < 0.02 else stmt


def locating_script(rng: random.Random, size: Size) -> tuple[str, list[dict[str, Any]]]:
    """A random locating graph (a DAG of trade nodes with countries' records) and its countries."""
    n = size.trade_nodes
    names = [f"node_{i:02d}" for i in range(n)]
    rank = list(range(n))
    rng.shuffle(rank)  # flow goes from lower to higher rank: a DAG whose file order differs from its topology
    by_rank = sorted(range(n), key=lambda i: rank[i])
    edges: list[tuple[int, int]] = []
    for pos, a in enumerate(by_rank[:-1]):
        later = by_rank[pos + 1:]
        edges += [(a, b) for b in rng.sample(later, k=min(len(later), rng.choice([1, 1, 2, 2, 3])))]
    inland = [rng.random() < 0.3 for _ in range(n)]
    lv = [round(rng.uniform(0.5, 9.0), 3) for _ in range(n)]
    countries = [f"C{i:02d}" if n < 100 else f"K{i:03d}" for i in range(size.countries)]
    dev = {c: round(rng.uniform(3, 160), 3) for c in countries}
    home = {c: rng.randrange(n) for c in countries}
    records = []
    for c in countries:
        records.append((c, home[c], True, False, round(rng.uniform(5, 60), 1)))
        extra = max(1, int(rng.expovariate(1 / size.records_per_country)))
        upstream = [i for i in range(n) if rank[i] < rank[home[c]]]
        others = [i for i in range(n) if rank[i] > rank[home[c]]]
        pool = rng.sample(upstream, len(upstream)) + rng.sample(others, len(others))
        if rng.random() < 0.3:
            rng.shuffle(pool)
        for node in pool[:extra]:  # mostly upstream of home, where a merchant can matter
            records.append((c, node, False, rng.random() < 0.15, round(rng.uniform(1, 25), 1)))
    power = [0.0] * n
    for c, node, _, merch, base in records:
        power[node] += merchant_power(base, dev[c], inland[node]) if merch else base
    lines = ["// synthetic DQA-style locating scenario (ragplan generate)"]
    for i in range(n):
        sp = " " if rng.random() < 0.5 else ""
        lines.append(_messy(
            f'CREATE ({names[i]}:Trade_node {{name:"{names[i]}", local_value:{lv[i]}, is_inland:{str(inland[i]).lower()}, '
            f'total_power:{round(2 * power[i], 3)},{sp}outgoing:{round(rng.uniform(0, 3), 3)}, ingoing:{round(rng.uniform(0, 3), 3)}}})', rng))
    for c in countries:
        lines.append(_messy(f'CREATE ({c}:Country {{name:"{c}", home_node:"{names[home[c]]}", development:{dev[c]}}})', rng))
    for a, b in edges:
        lines.append(_messy(f'MATCH (a:Trade_node {{name:"{names[a]}"}}), (b:Trade_node {{name:"{names[b]}"}}) '
                            f'CREATE (a)-[r:source{{flow:{round(rng.uniform(0, 2), 3)}}}]->(b)', rng))
    for c, node, is_home, merch, base in records:
        key = "has_has_merchant" if rng.random() < 0.03 else "has_merchant"
        calc = round(merchant_power(base, dev[c], inland[node]) if merch else base, 3)
        lines.append(_messy(
            f'MATCH (t:Trade_node {{name:"{names[node]}"}}), ({c}:Country {{name:"{c}"}}) CREATE ({c})-[r:NodeCountry'
            f'{{is_home: {str(is_home).lower()}, {key}: "{merch}",base_trading_power: {base},'
            f'calculated_trading_power: {calc}}}]->(t)', rng))
    options, merchants = Counter(r[0] for r in records if not r[2] and not r[3]), {r[0] for r in records if r[3]}
    candidates = [{"country": c, "home": names[home[c]]} for c in countries if options[c] >= 2 and c not in merchants]
    return "\n".join(lines) + "\n", candidates


def building_script(rng: random.Random, size: Size, country: str) -> str:
    """A random market of goods and buildings with demand and supply edges; each goods' ``current_price`` is the
    price with nothing raised (as in a game save), so "strictly below the script's price" is meaningful."""
    goods = [(GOODS[i] if i < len(GOODS) else f"goods_{i}", i + 1) for i in range(size.goods)]
    goods_specs = [(name, code, rng.choice([20, 30, 40, 50, 60]), round(rng.uniform(0, 200), 2), rng.random() < 0.08)
                   for name, code in goods]
    body = []
    rel_lines = []
    for bid in rng.sample(range(1000, 1000 + 20 * size.buildings), size.buildings):
        level = rng.randint(1, 12)
        body.append(_messy(f'CREATE (n: Building {{id: {bid}, name:"building_{bid}", level:{level}}})', rng))
        n_in = rng.choice([0, 1, 1, 2, 2, 3])
        picks = rng.sample(goods, k=min(len(goods), n_in + rng.choice([1, 1, 2])))
        for _, code in picks[:n_in]:
            md = round(rng.uniform(5, 60), 2)
            rel_lines.append(_messy(f"MATCH (g: Goods{{code: {code}}}), (b: Building{{id:{bid}}}) CREATE (g)-[r:Demand"
                                    f"{{max_demand: {md}, current_input: {round(md * rng.uniform(0.3, 1), 2)}, level: {level}}}]->(b)", rng))
        for _, code in picks[n_in:]:
            ms = round(rng.uniform(10, 90), 2)
            rel_lines.append(_messy(f"MATCH (g: Goods{{code: {code}}}), (b: Building{{id:{bid}}}) CREATE (b)-[r:Supply"
                                    f"{{max_supply: {ms}, current_output: {round(ms * rng.uniform(0.5, 1.05), 2)},level: {level}}}]->(g)", rng))

    def compose(prices: list[float]) -> str:
        head = [f"// synthetic DQA-style building scenario for {country} (ragplan generate)"]
        for (name, code, base, pop, no_semi), price in zip(goods_specs, prices):
            head.append(f'CREATE (n: Goods {{name:"{name}", code: {code}, base_price:{base}, current_price:{round(price, 4)}, '
                        f'pop_demand:{pop}}})' + ("" if no_semi else ";"))
        return "\n".join(head + body + rel_lines) + "\n"

    draft = compose([float(spec[2]) for spec in goods_specs])
    prices = simulate_prices(building_scenario(graph_data_from_text(draft, country)), raised=[-1])[0]
    return compose([float(p) for p in prices])


#: Generated scripts in a row that may add no new question before :func:`generate_clone` gives up (a bound, never reached
#: below the maximum in practice: 42 small locating questions take about 250 scripts).
MAX_FRUITLESS_SCRIPTS = 20_000


def max_questions(scenario: str, size: str = "small") -> int | None:
    """How many distinct questions ``scenario`` can have at ``size``: one per (country, home node); building: no limit."""
    sz = SIZES[size]
    return sz.countries * sz.trade_nodes if scenario == "locating" else None


def generate_clone(out_dir: str | Path, scenario: str, n: int, seed: int = 0, size: str = "small") -> list[dict[str, Any]]:
    """Write ``n`` questions of ``scenario`` with scripts and gold answers and return them; ``ValueError`` past
    :func:`max_questions` at ``size``, or when :data:`MAX_FRUITLESS_SCRIPTS` scripts in a row give no question."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, not {size!r}")
    if scenario not in CLONE_PATHS:
        raise ValueError("scenario must be locating or building")
    if n < 0:
        raise ValueError(f"the number of questions must be 0 or more, not {n}")
    sz = SIZES[size]
    top = max_questions(scenario, size)
    if top is not None and n > top:
        raise ValueError(f"at most {top} distinct {scenario} questions exist at size {size} ({sz.countries} countries x "
                         f"{sz.trade_nodes} home nodes); ask for --n {top} or fewer"
                         + (", or use --size official" if size != "official" else ""))
    rng = random.Random(f"{scenario}:{seed}:{size}")
    qfile, sdir = (Path(out_dir) / rel for rel in CLONE_PATHS[scenario])
    sdir.mkdir(parents=True, exist_ok=True)
    questions: list[dict[str, Any]] = []
    fruitless = scripts = 0
    while len(questions) < n:
        if fruitless == MAX_FRUITLESS_SCRIPTS:
            raise ValueError(f"only {len(questions)} of {n} {scenario} questions could be made at size {size} "
                             f"({MAX_FRUITLESS_SCRIPTS} scripts in a row gave no new one)")
        scripts += 1
        made = (_locating_questions(rng, sz, sdir, questions, n) if scenario == "locating"
                else _building_questions(rng, sz, sdir, questions, n, scripts))
        fruitless = 0 if made else fruitless + 1
    qfile.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(qfile, json.dumps(questions, indent=1))  # (last: no question names a script not yet written)
    return questions


def _locating_questions(rng: random.Random, sz: Size, sdir: Path, questions: list[dict[str, Any]], n: int) -> bool:
    """One new script and up to ``sz.locating_per_script`` questions about (country, home) pairs not asked yet whose
    best answer is a real improvement, each question with its own copy of the script."""
    text, cands = locating_script(rng, sz)
    asked = {(q["country"], q["home"]) for q in questions}
    cands = [c for c in cands if (c["country"], c["home"]) not in asked]  # every question reads differently
    if not cands:
        return False
    sc = locating_scenario(graph_data_from_text(text))
    want = min(sz.locating_per_script, n - len(questions))
    wrote = 0
    for _ in range(1 if want == 1 else len(cands)):  # (one pick per script when one is wanted)
        if wrote == want or not cands:
            break
        pick = rng.choice(cands)
        cands.remove(pick)
        sol = solve_locating(sc, pick["country"], pick["home"])
        best = sol.option(sol.best) if sol.best else None
        if best is None or not best.has_presence or best.change_pct <= 0.01:
            continue
        num = len(questions) + 1
        atomic_write(sdir / f"q{num}.cql", text)
        questions.append({
            "question_num": num, "country": pick["country"], "home": pick["home"], "year": rng.choice(YEARS),
            "business_rules": LOCATING_RULES,
            "question": f"We are {pick['country']} with home trade node {pick['home']} and one merchant to place. "
                        f"In which trade node should we place the merchant?",
            "goal": f"Maximise {pick['country']}'s profit in its home trade node {pick['home']}.",
            "answer": sol.best, "target_gdb": f"q{num}",
        })
        wrote += 1
    return wrote > 0


def _building_questions(rng: random.Random, sz: Size, sdir: Path, questions: list[dict[str, Any]], n: int, k: int) -> bool:
    """One new market script and up to ``sz.building_per_script`` questions about its goods whose best answer really
    lowers the price."""
    country = f"C{k:02d}{rng.choice(YEARS)}"
    text = building_script(rng, sz, country)
    sc = building_scenario(graph_data_from_text(text, country))
    prices = simulate_prices(sc)
    goods_order = list(sc.goods_names)
    rng.shuffle(goods_order)
    wrote = False
    for goods in goods_order[: min(sz.building_per_script, n - len(questions))]:  # (at most one question per goods)
        sol = solve_building(sc, goods, prices)
        best = sol.option(sol.best) if sol.best is not None else None
        if best is None or best.change_pct > -0.5:
            continue
        if not wrote:
            atomic_write(sdir / f"{country}.cql", text)
            wrote = True
        questions.append({
            "question_num": len(questions) + 1, "country": country, "goods": goods,
            "question": f"Which building id should we increase a level by 5 to maximally decrease the market price of {goods}?",
            "business_rules": BUILDING_RULES, "answer": sol.best, "target_gdb": country,
        })
    return wrote
