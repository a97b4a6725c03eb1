"""The straightforward reading of DQA's annotator rules, for clarity, not speed.

The baseline of ``benchmarks/dqa_simulator.py`` and the cross-check of the fast simulators in the
tests. Locating: dicts, loops and a deepcopy per option; building: every option simulated one number
at a time (:func:`~ragplan.methods.planrag.building.sequential_prices`). The order of operations is
the annotator's — records, edges and buildings in file order, every sum left to right.
"""

from __future__ import annotations

import copy
from typing import Any

from ragplan.methods.planrag.building import scenario_from_data as building_scenario, sequential_prices
from ragplan.methods.planrag.cql import GraphData
from ragplan.methods.planrag.locating import merchant_power, truthy

__all__ = ["locating_state", "reference_locating", "reference_building"]


def _sum(values: Any) -> Any:
    """Left-to-right addition, one value at a time: the annotator's arithmetic (the builtin ``sum``
    compensates float rounding from Python 3.12 on, which would decide near-ties differently)."""
    total = 0
    for v in values:
        total += v
    return total


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


def reference_building(data: GraphData, goods_name: str) -> tuple[int | None, dict[int, float]]:
    """The annotator's best building id and every building's resulting price of the goods.

    Each option is simulated by :func:`~ragplan.methods.planrag.building.sequential_prices`, the
    annotator's rules one number at a time in the annotator's order.
    """
    sc = building_scenario(data)
    g = sc.goods_index(goods_name)
    script_price = float(sc.current_price[g])
    prices: dict[int, float] = {}
    best, best_price = None, script_price
    for b, bid in enumerate(sc.building_ids):
        prices[bid] = sequential_prices(sc, b)[g]
        if prices[bid] < best_price:
            best, best_price = bid, prices[bid]
    return best, prices
