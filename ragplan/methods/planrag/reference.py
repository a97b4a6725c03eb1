"""The straightforward implementation of DQA's annotator rules: dicts, loops and a deepcopy per option.

This is the plain reading of shared/DQA.md, written for clarity, not speed. It is the baseline of
``benchmarks/dqa_simulator.py`` and the cross-check of the fast simulators in the tests (both must
pick the same decisions and compute the same effects on every generated scenario). Its order of
operations is the annotator's — records, edges and buildings in file order, every sum left to right —
and the fast simulators decide near-ties by it (``ragplan.methods.planrag.building.sequential_prices`` repeats it
for the building options that tie with the best; ``ragplan.methods.planrag.locating`` keeps it throughout).
"""

from __future__ import annotations

import copy
import sys
from typing import Any

from ragplan.methods.planrag.cql import GraphData
from ragplan.methods.planrag.locating import merchant_power, truthy

__all__ = ["locating_state", "reference_locating", "building_state", "reference_building"]


def _left_to_right_sum(values: Any) -> Any:
    total = 0
    for v in values:
        total += v
    return total


#: Left-to-right addition, one value at a time: the annotator's arithmetic. The builtin ``sum`` is
#: exactly that before Python 3.12; from 3.12 on it compensates float rounding, which would decide
#: near-ties differently, so a plain loop stands in for it there.
_sum = sum if sys.version_info < (3, 12) else _left_to_right_sum


def locating_state(data: GraphData) -> dict[str, Any]:
    """The locating graph as nested dicts, in file order."""
    nodes = {n.props["name"]: dict(n.props) for n in data.nodes if n.label == "Trade_node"}
    countries = {n.props["name"]: dict(n.props) for n in data.nodes if n.label == "Country"}
    edges = [(r.src_key["name"], r.dst_key["name"]) for r in data.rels if r.type == "source"]
    records = []
    for r in data.rels:
        if r.type == "NodeCountry":
            rec = dict(r.props)
            rec["country"], rec["node"] = r.src_key["name"], r.dst_key["name"]
            rec["merchant"] = truthy(rec.get("has_merchant", rec.get("has_has_merchant", False)))
            records.append(rec)
    return {"nodes": nodes, "countries": countries, "edges": edges, "records": records}


def _simulate_locating(state: dict[str, Any], country: str, home: str) -> float:
    nodes, countries, edges, records = state["nodes"], state["countries"], state["edges"], state["records"]
    for rec in records:
        c = countries.get(rec["country"], {})
        rec["power"] = (merchant_power(rec["base_trading_power"], c.get("development", 0.0), bool(nodes[rec["node"]]["is_inland"]))
                        if rec["merchant"] else rec["base_trading_power"])
    for name, node in nodes.items():
        node["total"] = node["total_power"] / 2 + _sum(r["power"] for r in records if r["node"] == name)
        node["in"], node["out"] = 0.0, 0.0
    down = {name: [b for a, b in edges if a == name] for name in nodes}
    indeg = {name: sum(1 for _, b in edges if b == name) for name in nodes}
    ready = [name for name in nodes if indeg[name] == 0]
    order = []
    while ready:
        s = ready.pop(0)
        order.append(s)
        for d in down[s]:
            indeg[d] -= 1
            if indeg[d] == 0:
                ready.append(d)

    def reaches(start: str, goal: str) -> bool:
        seen, stack = set(), [start]
        while stack:
            x = stack.pop()
            if x == goal:
                return True
            if x not in seen:
                seen.add(x)
                stack.extend(down[x])
        return False

    for s in order:
        node = nodes[s]
        here = [r for r in records if r["node"] == s]
        p_out = _sum(r["power"] for r in here if not r["is_home"])
        node["out"] = (node["local_value"] + node["in"]) * p_out / node["total"] if node["total"] else 0.0
        steer: dict[str, float] = {}
        for r in here:
            if r["merchant"] and not r["is_home"]:
                h = countries.get(r["country"], {}).get("home_node")
                if h is None:
                    h = next((x["node"] for x in records if x["country"] == r["country"] and x["is_home"]), None)
                target = h if h in down[s] else next((d for d in down[s] if h is not None and reaches(d, h)), None)
                if target is not None:
                    steer[target] = steer.get(target, 0.0) + r["power"]
        for d in down[s]:
            if _sum(steer.values()) > 0:
                flow = node["out"] * steer.get(d, 0.0) / _sum(steer.values())
            else:
                flow = node["out"] / len(down[s])
            nodes[d]["in"] += 1.05 * flow
    mine = next((r for r in records if r["node"] == home and r["country"] == country), None)
    h = nodes[home]
    if mine is None or not h["total"]:
        return 0.0
    return (h["local_value"] - h["out"] + h["in"]) * mine["power"] / h["total"]


def reference_locating(data: GraphData, country: str, home: str) -> tuple[str | None, dict[str, float]]:
    """The annotator's best node and every node's profit, by copying the whole state per option."""
    state = locating_state(data)
    profits: dict[str, float] = {}
    best, best_profit = None, 0.0
    for name in list(state["nodes"]):
        if name == home:
            continue
        trial = copy.deepcopy(state)
        for rec in trial["records"]:
            if rec["country"] == country and rec["node"] == name:
                rec["merchant"] = True
        profits[name] = _simulate_locating(trial, country, home)
        if profits[name] > best_profit:
            best, best_profit = name, profits[name]
    return best, profits


def building_state(data: GraphData) -> dict[str, Any]:
    """The building graph as nested dicts, in file order."""
    goods = {n.props["code"]: dict(n.props) for n in data.nodes if n.label == "Goods"}
    buildings = {n.props["id"]: {**n.props, "inputs": [], "outputs": []} for n in data.nodes if n.label == "Building"}
    for r in data.rels:
        if r.type == "Demand":
            buildings[r.dst_key["id"]]["inputs"].append({"goods": r.src_key["code"], **r.props})
        elif r.type == "Supply":
            buildings[r.src_key["id"]]["outputs"].append({"goods": r.dst_key["code"], **r.props})
    for g in goods.values():
        g["building_demand"] = _sum(i["max_demand"] for b in buildings.values() for i in b["inputs"] if i["goods"] == g["code"])
        g["supply"] = _sum(o["current_output"] for b in buildings.values() for o in b["outputs"] if o["goods"] == g["code"])
    return {"goods": goods, "buildings": buildings}


def _simulate_building(state: dict[str, Any]) -> dict[int, float]:
    goods, buildings = state["goods"], state["buildings"]
    for b in buildings.values():
        for i in b["inputs"]:
            goods[i["goods"]]["building_demand"] += i["max_demand"]
        for o in b["outputs"]:
            goods[o["goods"]]["supply"] += o["max_supply"]
    for _ in range(10):
        for b in buildings.values():
            for i in b["inputs"]:
                g = goods[i["goods"]]
                denom = g["pop_demand"] + g["building_demand"]
                i["current_input"] = i["max_demand"] * g["supply"] / denom if denom else 0.0
        for g in goods.values():
            g["supply"] = 0.0
        for b in buildings.values():
            if b["inputs"]:
                terms = [min(i["current_input"], i["max_demand"]) / i["max_demand"] if i["max_demand"] else 1.0 for i in b["inputs"]]
                r = _sum(terms) / len(terms)
                for o in b["outputs"]:
                    o["current_output"] = o["max_supply"] * r
            for o in b["outputs"]:
                goods[o["goods"]]["supply"] += o["current_output"]
    prices = {}
    for code, g in goods.items():
        demand, supply = g["pop_demand"] + g["building_demand"], g["supply"]
        if demand == 0 and supply == 0:
            prices[code] = g["base_price"]
        else:
            prices[code] = g["base_price"] * (1 + 0.75 * (demand - supply) / max(demand, supply))
    return prices


def reference_building(data: GraphData, goods_name: str) -> tuple[int | None, dict[int, float]]:
    """The annotator's best building id and every building's resulting price of the goods."""
    state = building_state(data)
    code = next(c for c, g in state["goods"].items() if g["name"] == goods_name)
    script_price = state["goods"][code]["current_price"]
    prices: dict[int, float] = {}
    best, best_price = None, script_price
    for bid in list(state["buildings"]):
        trial = copy.deepcopy(state)
        b = trial["buildings"][bid]
        level = b["level"]
        f = (level + 5) / max(level, 1)
        for i in b["inputs"]:
            i["max_demand"] *= f
        for o in b["outputs"]:
            o["max_supply"] *= f
        prices[bid] = _simulate_building(trial)[code]
        if prices[bid] < best_price:
            best, best_price = bid, prices[bid]
    return best, prices
