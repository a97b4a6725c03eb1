"""The building scenario: which building, raised by 5 levels, lowers the price of goods G the most? The annotator's
rules of shared/DQA.md, quirks included; all options simulated at once in NumPy, near-ties (:data:`NEAR_TIE_REL`)
re-simulated in the annotator's order. A level-0 building is raised by 5 / 1; ``max_demand`` 0 counts as satisfied."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ragplan.methods.planrag.cql import GraphData
from ragplan.tools.graphdb.script import ScriptError

__all__ = ["BuildingScenario", "BuildingOption", "BuildingSolution", "scenario_from_data", "simulate_prices",
           "sequential_prices", "solve_building", "official_scenario", "RAISE_LEVELS", "ROUNDS", "NEAR_TIE_REL"]

RAISE_LEVELS = 5
ROUNDS = 10
#: Options whose fast price is within this relative distance of the best are re-checked sequentially
#: (the fast and the sequential arithmetic differ by ~1e-15 relative; real differences are far larger).
NEAR_TIE_REL = 1e-9


@dataclass
class BuildingScenario:
    """One building script in index form (goods and buildings in file order)."""

    source: str
    goods_names: list[str]
    goods_codes: list[int]
    base_price: np.ndarray
    current_price: np.ndarray
    pop_demand: np.ndarray
    building_ids: list[int]
    building_names: list[str]
    level: np.ndarray
    d_goods: np.ndarray
    d_building: np.ndarray
    max_demand: np.ndarray
    s_building: np.ndarray
    s_goods: np.ndarray
    max_supply: np.ndarray
    current_output: np.ndarray

    @cached_property
    def all_prices(self) -> np.ndarray:
        """Prices of every goods for every building raised (rows in file order), computed once."""
        return simulate_prices(self)

    def goods_index(self, goods: str | int) -> int:
        """Index of goods given by name or code; ValueError if absent."""
        for i, (name, code) in enumerate(zip(self.goods_names, self.goods_codes)):
            if goods == name or (isinstance(goods, int) and goods == code) or str(goods).strip().lower() == name.lower():
                return i
        raise ValueError(f"goods {goods!r} is not in {self.source}")


def scenario_from_data(data: GraphData) -> BuildingScenario:
    """Build a scenario from a parsed script; an edge to unknown goods or building names its line."""
    goods: list[tuple[Any, ...]] = []
    buildings: list[tuple[Any, ...]] = []
    demand: list[tuple[Any, ...]] = []
    supply: list[tuple[Any, ...]] = []
    num = lambda props, *keys: [float(props.get(k) or 0) for k in keys]  # noqa: E731  (a missing number is 0)
    for label, props, line in data.nodes:
        if label in ("Goods", "Building") and props.get("code" if label == "Goods" else "id") is None:
            raise ScriptError(data.source, line, f"a {label} node without its {'code' if label == 'Goods' else 'id'}")
        if label == "Goods":
            goods.append((str(props.get("name")), props["code"],
                          *num(props, "base_price", "current_price", "pop_demand")))
        elif label == "Building":
            buildings.append((props["id"], str(props.get("name", "")), *num(props, "level")))
    for rtype, _, src_key, _, dst_key, props, line in data.rels:
        if rtype == "Demand":
            demand.append((src_key.get("code"), dst_key.get("id"), *num(props, "max_demand"), line))
        elif rtype == "Supply":
            supply.append((src_key.get("id"), dst_key.get("code"), *num(props, "max_supply", "current_output"), line))
    columns = (_columns(rows, n) for rows, n in ((goods, 5), (buildings, 3), (demand, 4), (supply, 5)))
    return _scenario(data.source, *columns)


def _columns(rows: list[tuple[Any, ...]], width: int) -> list[tuple[Any, ...]]:
    return list(zip(*rows)) or [()] * width


def _positions(keys: Sequence[Any], position: dict[int, int], lines: Sequence[int], source: str) -> np.ndarray:
    """The positions of ``keys`` (read as integers) in ``position``; the line of an unknown key is named."""
    try:
        return np.fromiter(map(position.__getitem__, map(int, keys)), np.int64, len(keys))
    except (KeyError, TypeError, ValueError):
        for key, line in zip(keys, lines):
            try:
                position[int(key)]
            except (KeyError, TypeError, ValueError) as exc:
                raise ScriptError(source, line, f"relationship refers to unknown goods or building ({exc})") from exc
        raise


def _scenario(source: str, goods: Sequence[Sequence[Any]], buildings: Sequence[Sequence[Any]],
              demand: Sequence[Sequence[Any]], supply: Sequence[Sequence[Any]]) -> BuildingScenario:
    """The scenario of a script's columns in file order: goods (name, code, base_price, current_price, pop_demand),
    buildings (id, name, level), demand (code, id, max_demand, line), supply (id, code, max_supply, current_output,
    line); numbers as numbers or their text."""
    floats = lambda col: np.asarray(col, dtype=float)  # noqa: E731
    g_codes, b_ids = list(map(int, goods[1])), list(map(int, buildings[0]))
    g_at, b_at = {c: i for i, c in enumerate(g_codes)}, {b: i for i, b in enumerate(b_ids)}
    return BuildingScenario(
        source, list(goods[0]), g_codes, floats(goods[2]), floats(goods[3]), floats(goods[4]), b_ids,
        list(buildings[1]), floats(buildings[2]), _positions(demand[0], g_at, demand[3], source),
        _positions(demand[1], b_at, demand[3], source), floats(demand[2]),
        _positions(supply[0], b_at, supply[4], source), _positions(supply[1], g_at, supply[4], source),
        floats(supply[2]), floats(supply[3]),
    )


_S = r"[ \t]*+"  # spacing inside one line
_NUM = r"(?:\d++\.?\d*+|\.\d++)(?:[eE][-+]?\d++)?"  # an unsigned number, as parse_map reads it
_STR = r'"([^"\\\n{}]*+)"'  # a string without escapes or braces
_END = rf"{_S}(;?){_S}(?=\n)"  # the end of a line and its ``;``


def _map(*props: tuple[str, str]) -> str:
    """A ``{key: value, …}`` pattern with exactly these keys in this order."""
    return r"\{" + ",".join(rf"{_S}{key}{_S}:{_S}{value}{_S}" for key, value in props) + r"\}"


def _node(var: str, label: str, *props: tuple[str, str]) -> str:
    return rf"\({_S}{var}{_S}:{_S}{label}{_S}{_map(*props)}{_S}\)"


def _edge(src: str, rtype: str, props: tuple[tuple[str, str], ...], dst: str) -> str:
    """``(src)-[r:rtype{props}]->(dst)``."""
    return rf"\({_S}{src}{_S}\){_S}-{_S}\[{_S}\w*+{_S}:{_S}{rtype}{_S}{_map(*props)}{_S}\]{_S}->{_S}\({_S}{dst}{_S}\)"


#: The lines of a building script in the official form (DQA.md's lines: its keys in its order, no escapes), one
#: pattern a kind: Goods (name, code, base_price, current_price, pop_demand, ``;``), Building (id, name, level, ``;``),
#: Demand or Supply (goods variable and code, building variable and id, max_demand | max_supply and current_output,
#: ``;``), and blank or comment lines.
_OFFICIAL = tuple(re.compile(pattern, re.ASCII) for pattern in (
    rf"\nCREATE{_S}" + _node(r"\w*+", "Goods", ("name", _STR), ("code", r"(\d++)"), ("base_price", f"({_NUM})"),
                             ("current_price", f"({_NUM})"), ("pop_demand", f"({_NUM})")) + _END,
    rf"\nCREATE{_S}" + _node(r"\w*+", "Building", ("id", r"(\d++)"), ("name", _STR), ("level", f"({_NUM})")) + _END,
    rf"\nMATCH{_S}" + _node(r"(\w++)", "Goods", ("code", r"(\d++)")) + rf"{_S},{_S}(?!\1\b)"
    + _node(r"(\w++)", "Building", ("id", r"(\d++)")) + rf"{_S}CREATE{_S}(?:"
    + _edge(r"\1", "Demand", (("max_demand", f"({_NUM})"), ("current_input", _NUM), ("level", _NUM)), r"\3") + "|"
    + _edge(r"\3", "Supply", (("max_supply", f"({_NUM})"), ("current_output", f"({_NUM})"), ("level", _NUM)), r"\1")
    + ")" + _END,
    rf"\n{_S}(?://[^\n]*+)?(?=\n)",
))


def official_scenario(text: str, source: str = "<script>") -> BuildingScenario | None:
    """The scenario of a script whose every line is in the official form, read by one regex pass per kind of line
    without the general parser (the same scenario it gives); None for any other script."""
    padded = "\n" + text + "\n"
    goods, buildings, edges, blank = (pattern.findall(padded) for pattern in _OFFICIAL)
    statements = len(goods) + len(buildings) + len(edges)
    if "\r" in text or statements + len(blank) != text.count("\n") + 1 or not (goods or buildings):
        return None
    semis = sum(1 for rows in (goods, buildings, edges) for row in rows if row[-1])
    if semis and semis * 2 < statements:
        return None  # a file the statement splitter reads in semicolon mode
    d, s = _columns([e for e in edges if e[4]], 8), _columns([e for e in edges if not e[4]], 8)
    try:
        return _scenario(source, _columns(goods, 6), _columns(buildings, 4), (d[1], d[3], d[4], ()),
                         (s[3], s[1], s[5], s[6], ()))
    except (ValueError, KeyError):  # an edge to unknown goods or building: the general parser names its line
        return None


def simulate_prices(sc: BuildingScenario, raised: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """Prices of every goods (columns) with building ``raised[row]`` raised (-1: none; default: each in turn)."""
    nb, ng = len(sc.building_ids), len(sc.goods_names)
    raised = np.arange(nb) if raised is None else np.asarray(raised, dtype=np.int64)
    rb = np.maximum(raised, 0)  # (a row without a raise reads building 0 times a zero gain)
    gain = np.where(raised >= 0, (sc.level[rb] + RAISE_LEVELS) / np.maximum(sc.level[rb], 1.0) - 1, 0.0)[:, None]
    per_bg = lambda b, g, w: np.bincount(b * ng + g, w, nb * ng).reshape(nb, ng)  # noqa: E731  (building x goods sums)
    demand_of, supply_of = per_bg(sc.d_building, sc.d_goods, sc.max_demand), per_bg(sc.s_building, sc.s_goods, sc.max_supply)
    # the state from the script, then rule 1 (added to, not reset) with the raised building's demand and supply scaled
    bdem0 = np.bincount(sc.d_goods, sc.max_demand, ng)
    building_demand = (bdem0 + bdem0)[None, :] + gain * demand_of[rb]
    supply = (np.bincount(sc.s_goods, sc.current_output, ng) + np.bincount(sc.s_goods, sc.max_supply, ng))[None, :] \
        + gain * supply_of[rb]
    denom = sc.pop_demand[None, :] + building_demand                   # fixed over the rounds
    inv = np.where(denom > 0, 1.0 / np.where(denom > 0, denom, 1.0), 0.0)  # no demand: no input
    # An input's share is min(supply / demand, 1) of its goods, a building's ratio the mean of its inputs' shares
    # (ratio = share @ inputs + satisfied), supply what buildings with inputs make (ratio @ outputs, the raised one's
    # ratio scaled) plus what buildings without inputs keep: one goods x goods product per round for every option.
    n_inputs = np.bincount(sc.d_building, minlength=nb)
    per_input = 1.0 / np.maximum(n_inputs, 1)
    positive = sc.max_demand > 0
    inputs = np.bincount(sc.d_goods[positive] * nb + sc.d_building[positive], minlength=ng * nb).reshape(ng, nb) * per_input
    satisfied = np.bincount(sc.d_building[~positive], minlength=nb) * per_input
    outputs = supply_of * (n_inputs > 0)[:, None]
    kept_edges = n_inputs[sc.s_building] == 0
    constant = satisfied @ outputs + np.bincount(sc.s_goods[kept_edges], sc.current_output[kept_edges], ng)
    through = inputs @ outputs                                         # goods' shares -> goods' supply
    raised_inputs, raised_outputs = inputs[:, rb].T, gain * outputs[rb]
    raised_satisfied = satisfied[rb]
    for _ in range(ROUNDS):
        share = np.minimum(supply * inv, 1.0)
        raised_ratio = np.einsum("rg,rg->r", share, raised_inputs) + raised_satisfied
        supply = share @ through + constant + raised_ratio[:, None] * raised_outputs
    demand = sc.pop_demand[None, :] + building_demand
    both_zero = (demand == 0) & (supply == 0)
    top = np.maximum(demand, supply)
    price = sc.base_price[None, :] * (1 + 0.75 * (demand - supply) / np.where(top > 0, top, 1.0))
    return np.where(both_zero, sc.base_price[None, :], price)


def sequential_prices(sc: BuildingScenario, raised: int = -1) -> list[float]:
    """Prices of every goods with building index ``raised`` raised (-1: none), one number at a time in the
    annotator's order (file order, left to right): the slow reference, and the decider of near-ties."""
    nb, ng = len(sc.building_ids), len(sc.goods_names)
    inputs: list[list[list[Any]]] = [[] for _ in range(nb)]   # per building: [goods, max_demand, current_input]
    outputs: list[list[list[Any]]] = [[] for _ in range(nb)]  # per building: [goods, max_supply, current_output]
    for g, b, md in zip(sc.d_goods.tolist(), sc.d_building.tolist(), sc.max_demand.tolist()):
        inputs[b].append([g, md, 0.0])
    for b, g, ms, co in zip(sc.s_building.tolist(), sc.s_goods.tolist(), sc.max_supply.tolist(), sc.current_output.tolist()):
        outputs[b].append([g, ms, co])
    pop, base = sc.pop_demand.tolist(), sc.base_price.tolist()
    building_demand, supply = [0.0] * ng, [0.0] * ng
    for rule_one in (False, True):  # the state from the script, then rule 1 (added to, not reset) after the raise
        if rule_one and raised >= 0:
            level = float(sc.level[raised])
            for e in inputs[raised] + outputs[raised]:
                e[1] *= (level + RAISE_LEVELS) / max(level, 1.0)
        for b in range(nb):
            for g, md, _ in inputs[b]:
                building_demand[g] += md
            for g, ms, co in outputs[b]:
                supply[g] += ms if rule_one else co
    for _ in range(ROUNDS):
        for b in range(nb):
            for e in inputs[b]:
                g = e[0]
                denom = pop[g] + building_demand[g]
                e[2] = e[1] * supply[g] / denom if denom else 0.0
        supply = [0.0] * ng
        for b in range(nb):
            if inputs[b]:
                total = 0.0
                for _, md, ci in inputs[b]:
                    total += min(ci, md) / md if md else 1.0
                r = total / len(inputs[b])
                for e in outputs[b]:
                    e[2] = e[1] * r
            for g, _, co in outputs[b]:
                supply[g] += co
    prices = []
    for g in range(ng):
        demand, sup = pop[g] + building_demand[g], supply[g]
        if demand == 0 and sup == 0:
            prices.append(base[g])
        else:
            prices.append(base[g] * (1 + 0.75 * (demand - sup) / max(demand, sup)))
    return prices


@dataclass
class BuildingOption:
    """The market price of the goods after raising one building."""

    building_id: int
    building_name: str
    price: float
    change_pct: float


@dataclass
class BuildingSolution:
    """Every building ranked by the price it leads to, and the annotator's best decision."""

    goods: str
    script_price: float
    options: list[BuildingOption]
    best: int | None

    def option(self, building_id: int) -> BuildingOption | None:
        return next((o for o in self.options if o.building_id == building_id), None)

    def ranked(self) -> list[BuildingOption]:
        """Options from lowest to highest price (file order among equals)."""
        return sorted(self.options, key=lambda o: o.price)


def _decide_near_ties(sc: BuildingScenario, g: int, column: list[float], script_price: float) -> list[float]:
    """``column`` (one fast price per building) with the near-tied candidates for the best re-simulated sequentially."""
    if not column:
        return column
    low = min(column)
    tol = NEAR_TIE_REL * max(abs(low), abs(script_price), 1e-300)
    near = [b for b, p in enumerate(column) if p - low <= tol]
    if len(near) == 1 and abs(low - script_price) > tol:
        return column  # one clear best: the order of operations cannot change the decision
    column = list(column)
    for b in near:
        column[b] = sequential_prices(sc, b)[g]
    return column


def solve_building(sc: BuildingScenario, goods: str | int, prices: np.ndarray | None = None) -> BuildingSolution:
    """Rank every building for ``goods`` by the annotator's rule; ``prices`` from :func:`simulate_prices` may be reused."""
    g = sc.goods_index(goods)
    prices = sc.all_prices if prices is None else prices
    script_price = float(sc.current_price[g])
    column = _decide_near_ties(sc, g, prices[:, g].tolist(), script_price)
    options, best, best_price = [], None, script_price
    for b, bid in enumerate(sc.building_ids):
        p = column[b]
        change = (p - script_price) / script_price * 100 if script_price else 0.0
        options.append(BuildingOption(bid, sc.building_names[b], p, change))
        if p < best_price:
            best, best_price = bid, p
    return BuildingSolution(sc.goods_names[g], script_price, options, best)
