"""The locating scenario: where should country C place its merchant to maximise its profit at home? The annotator's
rules of shared/DQA.md, quirks included; compiled once into index form, an option re-sums only its node, every sum
in the annotator's order (profits bit for bit the reference's, near-ties decided as the annotator did)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from ragplan.methods.planrag.cql import GraphData
from ragplan.tools.graphdb.script import ScriptError

__all__ = ["LocatingScenario", "Record", "LocatingOption", "LocatingSolution", "scenario_from_data", "solve_locating",
           "merchant_power", "truthy"]


def truthy(value: Any) -> bool:
    """DQA's merchant flags are the strings "True"/"False" (sometimes booleans); script values are scalars."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true") or value == 1


def merchant_power(base: float, development: float, inland: bool) -> float:
    """Power of a record that has a merchant (the annotator's formula)."""
    return 1.05 * (base + 2 + max(50.0, development)) if inland else 1.05 * (base + 2)


@dataclass(slots=True)
class Record:
    """A NodeCountry relationship: a country's presence in a trade node."""

    country: str
    node: int
    is_home: bool
    has_merchant: bool
    base: float


@dataclass
class LocatingScenario:
    """One locating script, compiled to index form (nodes in file order)."""

    source: str
    names: list[str]
    local_value: list[float]
    inland: list[bool]
    script_total: list[float]
    development: dict[str, float]
    home_of: dict[str, str]
    edges: list[tuple[int, int]]
    records: list[Record]

    def __post_init__(self) -> None:
        """Compile once: the topological order, downstream lists in edge order, records per node, base sums."""
        n = len(self.names)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.down: list[list[int]] = [[] for _ in range(n)]
        self._up: list[list[int]] = [[] for _ in range(n)]  # upstream neighbours, for steer_target's reach search
        indeg = [0] * n
        for a, b in self.edges:
            self.down[a].append(b)
            self._up[b].append(a)
            indeg[b] += 1
        queue = deque(i for i in range(n) if indeg[i] == 0)
        self.order: list[int] = []
        while queue:  # Kahn: nodes on a cycle never become ready, so they are never processed
            s = queue.popleft()
            self.order.append(s)
            for d in self.down[s]:
                indeg[d] -= 1
                if indeg[d] == 0:
                    queue.append(d)
        self._reach: dict[int, list[bool]] = {}
        self.at_node: list[list[int]] = [[] for _ in range(n)]
        for k, rec in enumerate(self.records):
            self.at_node[rec.node].append(k)
        self.outward = [not rec.is_home for rec in self.records]  # the record is not anyone's home
        start = [self.with_merchant(rec) if rec.has_merchant else (rec.base, None) for rec in self.records]
        self.powers: list[float] = [power for power, _ in start]
        self.targets: list[int | None] = [target for _, target in start]
        #: :meth:`node_sums` of every node without the decision
        self.base_sums = [self.node_sums(s, self.powers, self.targets) for s in range(n)]

    def with_merchant(self, rec: Record) -> tuple[float, int | None]:
        """The power of ``rec`` with a merchant, and where that merchant steers (None: nowhere, or home)."""
        power = merchant_power(rec.base, self.development.get(rec.country, 0.0), self.inland[rec.node])
        return power, None if rec.is_home else self.steer_target(rec)

    def steer_target(self, rec: Record) -> int | None:
        """The downstream neighbour a merchant of ``rec`` steers toward (None: it cannot steer home)."""
        home = self.index.get(self.home_of.get(rec.country, ""))
        if home is None:
            return None
        down = self.down[rec.node]
        if home in down:
            return home
        if home not in self._reach:  # reach[i]: whether home can be reached from node i along source edges
            reach = self._reach[home] = [False] * len(self.names)
            reach[home] = True
            stack = [home]
            while stack:
                for u in self._up[stack.pop()]:
                    if not reach[u]:
                        reach[u] = True
                        stack.append(u)
        return next((d for d in down if self._reach[home][d]), None)

    def node_sums(self, s: int, powers: list[float], targets: list[int | None]) -> tuple[float, float, dict[int, float], float]:
        """Node ``s``'s total power, outgoing power, steering powers per target and their sum (left to right)."""
        outward = self.outward
        total = p_out = 0.0
        steer: dict[int, float] = {}
        for k in self.at_node[s]:
            power = powers[k]
            total += power
            if outward[k]:
                p_out += power
            t = targets[k]
            if t is not None:
                steer[t] = steer.get(t, 0.0) + power
        weight = 0.0
        for w in steer.values():
            weight += w
        return self.script_total[s] / 2 + total, p_out, steer, weight

    def profit(self, country: str, home: int, placed: int | None) -> float:
        """C's profit at ``home`` with C's merchant on record ``placed`` (None: no merchant; only its node is re-summed)."""
        recs = self.records
        powers, sums = self.powers, self.base_sums
        if placed is not None:
            powers, targets, sums = list(powers), list(self.targets), list(sums)
            powers[placed], targets[placed] = self.with_merchant(recs[placed])
            sums[recs[placed].node] = self.node_sums(recs[placed].node, powers, targets)
        ingoing, outgoing = [0.0] * len(self.names), [0.0] * len(self.names)
        local_value, down_of = self.local_value, self.down
        for s in self.order:
            total, p_out, steer, weight = sums[s]
            out = (local_value[s] + ingoing[s]) * p_out / total if total else 0.0
            outgoing[s] = out
            down = down_of[s]
            if not down:
                continue
            if weight > 0:
                for d in down:  # flow first, then the 1.05: the annotator's order of operations
                    ingoing[d] += 1.05 * (out * steer.get(d, 0.0) / weight)
            else:
                share = out / len(down)
                for d in down:
                    ingoing[d] += 1.05 * share
        mine = next((k for k in self.at_node[home] if recs[k].country == country), None)
        total = sums[home][0]
        if mine is None or not total:
            return 0.0
        return (local_value[home] - outgoing[home] + ingoing[home]) * powers[mine] / total


def scenario_from_data(data: GraphData) -> LocatingScenario:
    """Build a scenario from a parsed script; a relationship to an unknown node names its line."""
    names, lv, inland, tp = [], [], [], []
    dev: dict[str, float] = {}
    home_of: dict[str, str] = {}
    for label, props, line in data.nodes:
        if label not in ("Trade_node", "Country"):
            continue
        if props.get("name") is None:  # every relationship finds its nodes by name
            raise ScriptError(data.source, line, f"a {label} node without its name")
        try:
            if label == "Trade_node":
                names.append(str(props["name"]))
                lv.append(float(props.get("local_value", 0) or 0))
                inland.append(truthy(props.get("is_inland", False)))
                tp.append(float(props.get("total_power", 0) or 0))
            else:
                name = str(props["name"])
                dev[name] = float(props.get("development", 0) or 0)
                if props.get("home_node") is not None:
                    home_of[name] = str(props["home_node"])
        except (TypeError, ValueError) as exc:
            raise ScriptError(data.source, line, f"a {label} property is not a number ({exc})") from exc
    index = {n: i for i, n in enumerate(names)}
    edges: list[tuple[int, int]] = []
    records: list[Record] = []
    for rtype, src_label, src_key, _, dst_key, props, line in data.rels:
        try:
            if rtype == "NodeCountry":
                country, node = (src_key, dst_key) if src_label == "Country" else (dst_key, src_key)
                merchant = props["has_merchant"] if "has_merchant" in props else props.get("has_has_merchant", False)
                records.append(Record(str(country["name"]), index[str(node["name"])], truthy(props.get("is_home", False)),
                                      truthy(merchant), float(props.get("base_trading_power", 0) or 0)))
            elif rtype == "source":
                edges.append((index[str(src_key["name"])], index[str(dst_key["name"])]))
        except KeyError as exc:
            raise ScriptError(data.source, line, f"relationship refers to an unknown trade node or key {exc}") from exc
    for rec in records:  # countries without home_node: the is_home record says it
        if rec.is_home:
            home_of.setdefault(rec.country, names[rec.node])
    return LocatingScenario(data.source, names, lv, inland, tp, dev, home_of, edges, records)


@dataclass
class LocatingOption:
    """The effect of placing the merchant at one node."""

    node: str
    profit: float
    change_pct: float
    has_presence: bool


@dataclass
class LocatingSolution:
    """Every option ranked, the annotator's best decision, and the profit without a merchant."""

    country: str
    home: str
    baseline_profit: float
    options: list[LocatingOption]
    best: str | None

    def option(self, node: str) -> LocatingOption | None:
        return next((o for o in self.options if o.node == node), None)

    def ranked(self) -> list[LocatingOption]:
        """Options from best to worst profit (file order among equals)."""
        return sorted(self.options, key=lambda o: -o.profit)


def solve_locating(sc: LocatingScenario, country: str, home: str) -> LocatingSolution:
    """Try the merchant at every node except ``home`` (file order) and pick the annotator's best."""
    if home not in sc.index:
        raise ValueError(f"home node {home!r} is not a trade node of {sc.source}")
    h = sc.index[home]
    base = sc.profit(country, h, None)
    mine = {rec.node: k for k, rec in enumerate(sc.records) if rec.country == country}
    options: list[LocatingOption] = []
    best, best_profit = None, 0.0
    for o, name in enumerate(sc.names):
        if o == h:
            continue
        k = mine.get(o)
        p = sc.profit(country, h, k) if k is not None else base
        change = (p - base) / base * 100 if base else 0.0
        options.append(LocatingOption(name, p, change, k is not None))
        if p > best_profit:
            best, best_profit = name, p
    return LocatingSolution(country, home, base, options, best)
