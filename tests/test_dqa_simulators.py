"""DQA's annotator rules on hand-checked examples, and the fast simulators against the reference.

The expected numbers below were worked out by hand from shared/DQA.md (the arithmetic is in the
comments), so these tests check the rules, not just that two implementations agree.
"""

from __future__ import annotations

import numpy as np
import pytest

from ragplan.methods.planrag import building
from ragplan.methods.planrag.building import scenario_from_data as building_scenario, sequential_prices, simulate_prices, solve_building
from ragplan.methods.planrag.cql import graph_data_from_text, parse_map
from ragplan.methods.planrag.generate import generate_clone
from ragplan.methods.planrag.data import load_questions
from ragplan.methods.planrag.cql import read_graph_data
from ragplan.methods.planrag.locating import scenario_from_data as locating_scenario, solve_locating
from tests.dqa_reference import reference_building, reference_locating

# A feeds X and H (edge order: X first). C's home is H; D's home is X. No node is inland.
STEERING = """\
CREATE (A:Trade_node {name:"A", local_value:10.0, is_inland:false, total_power:40.0, outgoing:0.0, ingoing:0.0});
CREATE (H:Trade_node {name:"H", local_value:4.0, is_inland:false, total_power:20.0, outgoing:0.0, ingoing:0.0})
CREATE (X:Trade_node {name:"X", local_value:6.0, is_inland:false, total_power:20.0, outgoing:0.0, ingoing:0.0});
CREATE (C:Country {name:"C", home_node:"H", development:10.0});
CREATE (D:Country {name:"D", home_node:"X", development:20.0});
MATCH (a:Trade_node {name:"A"}), (b:Trade_node {name:"X"}) CREATE (a)-[r:source{flow:1.0}]->(b);
MATCH (a:Trade_node {name:"A"}), (b:Trade_node {name:"H"}) CREATE (a)-[r:source{flow:1.0}]->(b);
MATCH (t:Trade_node {name:"H"}), (C:Country {name:"C"}) CREATE (C)-[r:NodeCountry{is_home: true, has_merchant: "False",base_trading_power: 10.0,calculated_trading_power: 10.0}]->(t);
MATCH (t:Trade_node {name:"A"}), (C:Country {name:"C"}) CREATE (C)-[r:NodeCountry{is_home: false, has_merchant: "False",base_trading_power: 5.0,calculated_trading_power: 5.0}]->(t);
MATCH (t:Trade_node {name:"A"}), (D:Country {name:"D"}) CREATE (D)-[r:NodeCountry{is_home: false, %s,base_trading_power: 15.0,calculated_trading_power: 15.0}]->(t);
MATCH (t:Trade_node {name:"X"}), (D:Country {name:"D"}) CREATE (D)-[r:NodeCountry{is_home: true, has_merchant: "False",base_trading_power: 10.0,calculated_trading_power: 10.0}]->(t);
"""


def _locating(d_merchant: str):
    return locating_scenario(graph_data_from_text(STEERING % d_merchant, "steering.cql"))


def test_locating_without_other_merchants_splits_equally_then_steers_home():
    sol = solve_locating(_locating('has_merchant: "False"'), "C", "H")
    # no merchant: totals A=40/2+20=40, H=10+10=20; out(A)=10*20/40=5 split 2.5/2.5; in(H)=1.05*2.5
    assert sol.baseline_profit == pytest.approx((4 + 2.625) * 10 / 20)
    # C's merchant at A (not inland): power 1.05*(5+2)=7.35; total(A)=42.35; out(A)=10*22.35/42.35,
    # all of it steered to H (the only steering merchant): in(H)=1.05*out(A)
    out_a = 10 * 22.35 / 42.35
    expected = (4 + 1.05 * out_a) * 10 / 20
    opt = sol.option("A")
    assert opt.profit == pytest.approx(expected) and opt.has_presence
    assert opt.change_pct == pytest.approx((expected - 3.3125) / 3.3125 * 100)
    assert sol.option("X").profit == pytest.approx(sol.baseline_profit) and not sol.option("X").has_presence
    assert sol.best == "A" and sol.option("H") is None


def test_locating_two_merchants_steer_in_proportion_to_power():
    # DQA's misspelt key is read too: D's merchant at A steers toward X with power 1.05*(15+2)=17.85
    sol = solve_locating(_locating('has_has_merchant: "True"'), "C", "H")
    assert sol.baseline_profit == pytest.approx(4 * 10 / 20)  # everything steered to X: nothing reaches H
    out_a = 10 * (7.35 + 17.85) / (20 + 7.35 + 17.85)
    in_h = 1.05 * out_a * 7.35 / (7.35 + 17.85)
    assert sol.option("A").profit == pytest.approx((4 + in_h) * 10 / 20)


def test_locating_inland_bonus_and_indirect_steering():
    text = """\
CREATE (A:Trade_node {name:"A", local_value:8.0, is_inland:true, total_power:20.0, outgoing:0.0, ingoing:0.0});
CREATE (X:Trade_node {name:"X", local_value:1.0, is_inland:false, total_power:0.0, outgoing:0.0, ingoing:0.0});
CREATE (Y:Trade_node {name:"Y", local_value:1.0, is_inland:false, total_power:0.0, outgoing:0.0, ingoing:0.0});
CREATE (H:Trade_node {name:"H", local_value:2.0, is_inland:false, total_power:8.0, outgoing:0.0, ingoing:0.0});
CREATE (C:Country {name:"C", home_node:"H", development:30.0});
MATCH (a:Trade_node {name:"A"}), (b:Trade_node {name:"X"}) CREATE (a)-[r:source{flow:1.0}]->(b);
MATCH (a:Trade_node {name:"A"}), (b:Trade_node {name:"Y"}) CREATE (a)-[r:source{flow:1.0}]->(b);
MATCH (a:Trade_node {name:"Y"}), (b:Trade_node {name:"H"}) CREATE (a)-[r:source{flow:1.0}]->(b);
MATCH (t:Trade_node {name:"H"}), (C:Country {name:"C"}) CREATE (C)-[r:NodeCountry{is_home: true, has_merchant: "False",base_trading_power: 4.0,calculated_trading_power: 4.0}]->(t);
MATCH (t:Trade_node {name:"A"}), (C:Country {name:"C"}) CREATE (C)-[r:NodeCountry{is_home: false, has_merchant: "False",base_trading_power: 10.0,calculated_trading_power: 10.0}]->(t);
"""
    sol = solve_locating(locating_scenario(graph_data_from_text(text)), "C", "H")
    # merchant at inland A: 1.05*(10+2+max(50,30)) = 65.1; total(A) = 20/2 + 65.1 = 75.1; all non-home
    out_a = 8 * 65.1 / 75.1
    # H is not downstream of A directly: the merchant steers to Y (the first neighbour that reaches H),
    # Y has no power: out(Y)=0, so nothing reaches H -- the annotator's rules, literally
    assert sol.option("A").profit == pytest.approx(sol.baseline_profit)
    # without the merchant A splits equally and Y (total 0) passes nothing on either
    assert sol.baseline_profit == pytest.approx(2 * 4 / (4 + 4))
    assert out_a > 0 and sol.best == "A"  # the first option ties the baseline > 0: file order decides


def test_locating_tie_goes_to_the_earlier_node():
    # P2 and P1 are identical sources of H (P2 first in the file): both merchants give the same profit
    lines = ['CREATE (P2:Trade_node {name:"P2", local_value:5.0, is_inland:false, total_power:10.0, outgoing:0.0, ingoing:0.0});',
             'CREATE (P1:Trade_node {name:"P1", local_value:5.0, is_inland:false, total_power:10.0, outgoing:0.0, ingoing:0.0});',
             'CREATE (H:Trade_node {name:"H", local_value:1.0, is_inland:false, total_power:6.0, outgoing:0.0, ingoing:0.0});',
             'CREATE (C:Country {name:"C", home_node:"H", development:1.0});']
    for p in ("P1", "P2"):
        lines.append(f'MATCH (a:Trade_node {{name:"{p}"}}), (b:Trade_node {{name:"H"}}) CREATE (a)-[r:source{{flow:1.0}}]->(b);')
        lines.append(f'MATCH (t:Trade_node {{name:"{p}"}}), (C:Country {{name:"C"}}) CREATE (C)-[r:NodeCountry{{is_home: false, '
                     f'has_merchant: "False",base_trading_power: 5.0,calculated_trading_power: 5.0}}]->(t);')
    lines.append('MATCH (t:Trade_node {name:"H"}), (C:Country {name:"C"}) CREATE (C)-[r:NodeCountry{is_home: true, '
                 'has_merchant: "False",base_trading_power: 3.0,calculated_trading_power: 3.0}]->(t);')
    sol = solve_locating(locating_scenario(graph_data_from_text("\n".join(lines))), "C", "H")
    assert sol.option("P1").profit == pytest.approx(sol.option("P2").profit)
    assert sol.option("P1").profit > sol.baseline_profit
    assert sol.best == "P2"


# G is the goods asked about; W is an input of B2. B1 and B3 have no inputs.
MARKET = """\
CREATE (n: Goods {name:"gadgets", code: 1, base_price:40, current_price:38.0, pop_demand:10.0});
CREATE (n: Goods {name:"widgets", code: 2, base_price:20, current_price:30.0, pop_demand:0.0})
CREATE (n: Building {id: 11, name:"building_b1", level:2});
CREATE (n: Building {id: 12, name:"building_b2", level:1});
CREATE (n: Building {id: 13, name:"building_b3", level:1});
MATCH (g: Goods{code: 1}), (b: Building{id:11}) CREATE (b)-[r:Supply{max_supply: 10.0, current_output: 8.0,level: 2}]->(g);
MATCH (g: Goods{code: 2}), (b: Building{id:12}) CREATE (g)-[r:Demand{max_demand: 4.0, current_input: 2.0, level: 1}]->(b);
MATCH (g: Goods{code: 1}), (b: Building{id:12}) CREATE (b)-[r:Supply{max_supply: 6.0, current_output: 3.0,level: 1}]->(g);
MATCH (g: Goods{code: 2}), (b: Building{id:13}) CREATE (b)-[r:Supply{max_supply: 5.0, current_output: 5.0,level: 1}]->(g);
"""


def test_building_rules_by_hand():
    sol = solve_building(building_scenario(graph_data_from_text(MARKET)), "gadgets")
    # raise B1 (x3.5): rounds settle at in(W)=4*5/8=2.5, r=0.625, supply(G)=8 (B1 keeps) + 6*0.625 = 11.75
    assert sol.option(11).price == pytest.approx(40 * (1 + 0.75 * (10 - 11.75) / 11.75))
    # raise B2 (x6): bd(W)=4+24=28, settles at in(W)=24*5/28, r=5/28, supply(G)=8+36*5/28
    s = 8 + 36 * 5 / 28
    assert sol.option(12).price == pytest.approx(40 * (1 + 0.75 * (10 - s) / s))
    # raise B3 (x6): a building with no inputs keeps its script output after step 1 -> same as B1
    assert sol.option(13).price == pytest.approx(sol.option(11).price)
    assert sol.best == 12 and [o.building_id for o in sol.ranked()] == [12, 11, 13]


# Every kind of building: level 0 (raised x5), an input of max_demand 0 next to a real one, two inputs on one goods,
# outputs to two goods, inputs without outputs, and (B6) outputs without inputs; "idle" is neither bought nor made.
EDGE_MARKET = MARKET + """\
CREATE (n: Goods {name:"idle", code: 3, base_price:15, current_price:15, pop_demand:0.0});
CREATE (n: Building {id: 14, name:"zero", level:0});
CREATE (n: Building {id: 15, name:"sink", level:4});
CREATE (n: Building {id: 16, name:"mine", level:2});
MATCH (g: Goods{code: 1}), (b: Building{id:14}) CREATE (g)-[r:Demand{max_demand: 0, current_input: 0, level: 0}]->(b);
MATCH (g: Goods{code: 2}), (b: Building{id:14}) CREATE (g)-[r:Demand{max_demand: 3.0, current_input: 1, level: 0}]->(b);
MATCH (g: Goods{code: 2}), (b: Building{id:14}) CREATE (g)-[r:Demand{max_demand: 2.5, current_input: 1, level: 0}]->(b);
MATCH (g: Goods{code: 1}), (b: Building{id:14}) CREATE (b)-[r:Supply{max_supply: 7.0, current_output: 1.0,level: 0}]->(g);
MATCH (g: Goods{code: 2}), (b: Building{id:14}) CREATE (b)-[r:Supply{max_supply: 1.5, current_output: 1.0,level: 0}]->(g);
MATCH (g: Goods{code: 1}), (b: Building{id:15}) CREATE (g)-[r:Demand{max_demand: 9.0, current_input: 4, level: 4}]->(b);
MATCH (g: Goods{code: 2}), (b: Building{id:16}) CREATE (b)-[r:Supply{max_supply: 2.0, current_output: 1.5,level: 2}]->(g);
"""


@pytest.mark.parametrize("size", ["edge cases", "official"])
def test_all_options_at_once_are_each_options_sequential_prices(tmp_path, size):
    """The vectorised pass (every option in one goods x goods product per round) gives, row by row, the prices the
    annotator's one-number-at-a-time order gives, with nothing raised and with each building raised."""
    if size == "official":
        generate_clone(tmp_path, "building", 1, seed=7, size=size)
        sc = building_scenario(read_graph_data(load_questions(tmp_path, "building")[0].script))
        raised = [-1, *range(0, len(sc.building_ids), 7)]
    else:
        sc = building_scenario(graph_data_from_text(EDGE_MARKET))
        raised = [-1, *range(len(sc.building_ids))]
    fast = simulate_prices(sc, raised)
    assert fast.shape == (len(raised), len(sc.goods_names))
    for row, b in zip(fast.tolist(), raised):
        assert row == pytest.approx(sequential_prices(sc, b), rel=1e-12, abs=1e-12)
    assert len({tuple(row) for row in fast.tolist()}) > len(raised) // 2  # raising really changes the market


def test_building_tie_and_strictly_below_script_price():
    sc = building_scenario(graph_data_from_text(MARKET))
    sol = solve_building(sc, "widgets")
    # B1 and B3 both give 20*(1+0.75*(8-5)/8) = 25.625 < 30: the earlier one (B1) wins
    assert sol.option(11).price == pytest.approx(25.625) and sol.option(13).price == pytest.approx(25.625)
    assert sol.best == 11
    high = building_scenario(graph_data_from_text(MARKET.replace("current_price:30.0", "current_price:25.0")))
    assert solve_building(high, "widgets").best is None  # nothing is strictly below the script's price


def test_parse_map_variants():
    assert parse_map('name:"a b", x: 1.5, n:3, ok:true, no: FALSE, e: -2e3, s: \'q\'') == {
        "name": "a b", "x": 1.5, "n": 3, "ok": True, "no": False, "e": -2000.0, "s": "q"}
    with pytest.raises(ValueError):
        parse_map("name: ")


@pytest.mark.parametrize("scenario", ["locating", "building"])
def test_fast_simulators_match_reference_on_generated_scenarios(tmp_path, scenario):
    generate_clone(tmp_path, scenario, 6, seed=11)
    for q in load_questions(tmp_path, scenario):
        data = read_graph_data(q.script)
        if scenario == "locating":
            sol = solve_locating(locating_scenario(data), q.country, q.home)
            best, effects = reference_locating(data, q.country, q.home)
            assert {o.node: o.profit for o in sol.options} == pytest.approx(effects)
        else:
            sol = solve_building(building_scenario(data), q.goods)
            best, effects = reference_building(data, q.goods)
            assert {o.building_id: o.price for o in sol.options} == pytest.approx(effects)
        assert sol.best == best and str(best) == q.answer


# ------------------------------------------------------------------------------------------ near-ties

# Three producers of gadgets (B1, B2, B3, all fed from the sawmill's surplus of wood, so each makes its
# full max_supply) and a demand of exactly 1.0. Raising B1 or B2 (level 1 -> 6) turns its 0.1 into
# 0.1 * 6 = 0.6000000000000001: supply 0.6 + 0.1 + 0.3 = 1.0 = demand on paper, price = base price 10.
# The annotator adds building by building (B1, B2, B3): (0.6000000000000001 + 0.1) + 0.3 == 1.0 for
# both, a tie, and the earlier building, B1, wins. A vectorised pass that adds the Supply edges in
# file order (B2's, B3's, B1's) gets (0.1 + 0.3) + 0.6000000000000001 == 1.0 for B1 but
# (0.6000000000000001 + 0.3) + 0.1 == 1.0000000000000002 for B2, a price of 9.999999999999998, and
# would answer B2. (The simulator's own arithmetic is another order again — it divides supply by
# demand once per goods — so the test puts this file-order sum in its place to show the disagreement.)
NEAR_TIE = """\
CREATE (n: Goods {name:"gadgets", code: 1, base_price:10, current_price:20, pop_demand:1.0});
CREATE (n: Goods {name:"wood", code: 2, base_price:10, current_price:10, pop_demand:0});
CREATE (n: Building {id: 11, name:"b1", level:1});
CREATE (n: Building {id: 12, name:"b2", level:1});
CREATE (n: Building {id: 13, name:"b3", level:3});
CREATE (n: Building {id: 19, name:"sawmill", level:1});
MATCH (g: Goods{code: 2}), (b: Building{id:19}) CREATE (b)-[r:Supply{max_supply: 100, current_output: 100,level: 1}]->(g);
MATCH (g: Goods{code: 2}), (b: Building{id:11}) CREATE (g)-[r:Demand{max_demand: 1, current_input: 1, level: 1}]->(b);
MATCH (g: Goods{code: 2}), (b: Building{id:12}) CREATE (g)-[r:Demand{max_demand: 1, current_input: 1, level: 1}]->(b);
MATCH (g: Goods{code: 2}), (b: Building{id:13}) CREATE (g)-[r:Demand{max_demand: 1, current_input: 1, level: 1}]->(b);
MATCH (g: Goods{code: 1}), (b: Building{id:12}) CREATE (b)-[r:Supply{max_supply: 0.1, current_output: 0.1,level: 1}]->(g);
MATCH (g: Goods{code: 1}), (b: Building{id:13}) CREATE (b)-[r:Supply{max_supply: 0.3, current_output: 0.3,level: 1}]->(g);
MATCH (g: Goods{code: 1}), (b: Building{id:11}) CREATE (b)-[r:Supply{max_supply: 0.1, current_output: 0.1,level: 1}]->(g);
"""


def _annotator_pick(prices: list[float], ids: list[int], script_price: float) -> int | None:
    best, best_price = None, script_price
    for bid, p in zip(ids, prices):
        if p < best_price:
            best, best_price = bid, p
    return best


def _file_order_prices(sc) -> np.ndarray:
    """The simulator's prices with gadgets' for B1 and B2 raised as a pass adding edges in file order gets them."""
    def price(supply: float) -> float:
        return 10 * (1 + 0.75 * (1.0 - supply) / max(1.0, supply))
    raised = 0.1 * 6
    prices = simulate_prices(sc)
    prices[0, 0], prices[1, 0] = price((0.1 + 0.3) + raised), price((raised + 0.3) + 0.1)
    return prices


def test_building_near_tie_is_decided_by_the_annotators_order_of_operations():
    data = graph_data_from_text(NEAR_TIE)
    sc = building_scenario(data)
    assert sc.goods_index("gadgets") == 0
    # the premise: the two orders of operations really disagree on the winner
    fast = _file_order_prices(sc)
    assert fast[:2, 0].tolist() == [10.0, 9.999999999999998]
    assert _annotator_pick(fast[:, 0].tolist(), sc.building_ids, 20.0) == 12
    assert [sequential_prices(sc, b)[0] for b in range(2)] == [10.0, 10.0]
    ref_best, ref_prices = reference_building(data, "gadgets")
    assert ref_best == 11 and ref_prices[11] == ref_prices[12] == 10.0
    # the fix: the near-tied candidates are re-simulated sequentially, the annotator's rule picks B1
    sol = solve_building(sc, "gadgets", fast)
    assert sol.best == 11
    assert sol.option(11).price == sol.option(12).price == 10.0
    # and with the simulator's own arithmetic
    own = solve_building(building_scenario(data), "gadgets")
    assert own.best == 11 and own.option(11).price == own.option(12).price == 10.0
    assert {o.building_id: o.price for o in own.options} == pytest.approx(ref_prices, rel=1e-12)


def test_building_near_tie_with_the_script_price():
    # with the script's price at 10.0, nothing is strictly below it for the annotator; the file-order
    # arithmetic alone would answer B2 (9.999999999999998 < 10)
    data = graph_data_from_text(NEAR_TIE.replace("current_price:20", "current_price:10.0"))
    sc = building_scenario(data)
    fast = _file_order_prices(sc)
    assert _annotator_pick(fast[:, 0].tolist(), sc.building_ids, 10.0) == 12
    assert reference_building(data, "gadgets")[0] is None
    assert solve_building(sc, "gadgets", fast).best is None
    assert solve_building(building_scenario(data), "gadgets").best is None


def test_building_clear_best_skips_the_sequential_check(monkeypatch):
    rechecked: list[int] = []
    monkeypatch.setattr(building, "sequential_prices", lambda sc, raised=-1: rechecked.append(raised) or [])
    sc = building_scenario(graph_data_from_text(MARKET))
    assert solve_building(sc, "gadgets").best == 12
    assert rechecked == []  # one clear best: nothing re-simulated


# P1 and P2 feed H and X; D's merchants steer toward X, C's merchant (the option) toward H. On paper
# C's merchant brings the same value to H from either node (5 × 2.73 / 5.59 = 5 × 3.255 / 6.665), so
# the options tie and the earlier node, P1, wins. The annotator computes each flow first and then
# multiplies by 1.05, which gives both options the same bits; (1.05 × outgoing) × steer / weight, an
# equally valid order, would give P2 one ulp more and answer P2.
LOCATING_NEAR_TIE = """\
CREATE (P1:Trade_node {name:"P1", local_value:5.0, is_inland:false, total_power:1.1, outgoing:0.0, ingoing:0.0});
CREATE (P2:Trade_node {name:"P2", local_value:5.0, is_inland:false, total_power:2.2, outgoing:0.0, ingoing:0.0});
CREATE (H:Trade_node {name:"H", local_value:1.0, is_inland:false, total_power:2.0, outgoing:0.0, ingoing:0.0});
CREATE (X:Trade_node {name:"X", local_value:1.0, is_inland:false, total_power:2.0, outgoing:0.0, ingoing:0.0});
CREATE (C:Country {name:"C", home_node:"H", development:1.0});
CREATE (D:Country {name:"D", home_node:"X", development:1.0});
MATCH (a:Trade_node {name:"P1"}), (b:Trade_node {name:"H"}) CREATE (a)-[r:source{flow:1.0}]->(b);
MATCH (a:Trade_node {name:"P1"}), (b:Trade_node {name:"X"}) CREATE (a)-[r:source{flow:1.0}]->(b);
MATCH (a:Trade_node {name:"P2"}), (b:Trade_node {name:"H"}) CREATE (a)-[r:source{flow:1.0}]->(b);
MATCH (a:Trade_node {name:"P2"}), (b:Trade_node {name:"X"}) CREATE (a)-[r:source{flow:1.0}]->(b);
MATCH (t:Trade_node {name:"P1"}), (C:Country {name:"C"}) CREATE (C)-[r:NodeCountry{is_home: false, has_merchant: "False",base_trading_power: 0.6,calculated_trading_power: 0.6}]->(t);
MATCH (t:Trade_node {name:"P1"}), (D:Country {name:"D"}) CREATE (D)-[r:NodeCountry{is_home: false, has_merchant: "True",base_trading_power: 0.2,calculated_trading_power: 2.31}]->(t);
MATCH (t:Trade_node {name:"P2"}), (C:Country {name:"C"}) CREATE (C)-[r:NodeCountry{is_home: false, has_merchant: "False",base_trading_power: 1.1,calculated_trading_power: 1.1}]->(t);
MATCH (t:Trade_node {name:"P2"}), (D:Country {name:"D"}) CREATE (D)-[r:NodeCountry{is_home: false, has_merchant: "True",base_trading_power: 0.2,calculated_trading_power: 2.31}]->(t);
MATCH (t:Trade_node {name:"H"}), (C:Country {name:"C"}) CREATE (C)-[r:NodeCountry{is_home: true, has_merchant: "False",base_trading_power: 1.0,calculated_trading_power: 1.0}]->(t);
"""


def test_locating_near_tie_is_decided_by_the_annotators_order_of_operations():
    # the premise: the two orders of operations give the tied options different bits
    def flows(lv: float, tp: float, c_base: float) -> tuple[float, float]:
        c, d = 1.05 * (c_base + 2), 1.05 * (0.2 + 2)
        out = lv * (c + d) / (tp / 2 + c + d)
        return 1.05 * (out * c / (c + d)), 1.05 * out * c / (c + d)
    (seq1, other1), (seq2, other2) = flows(5.0, 1.1, 0.6), flows(5.0, 2.2, 1.1)
    assert seq1 == seq2 and other1 < other2
    data = graph_data_from_text(LOCATING_NEAR_TIE)
    ref_best, ref_profits = reference_locating(data, "C", "H")
    sol = solve_locating(locating_scenario(data), "C", "H")
    assert ref_best == sol.best == "P1"
    assert sol.option("P1").profit == sol.option("P2").profit
    assert {o.node: o.profit for o in sol.options} == ref_profits


@pytest.mark.parametrize("size", ["small", "official"])
def test_fast_locating_is_bit_for_bit_the_sequential_reference(tmp_path, size):
    """Exact equality, not approx: the fast simulator keeps the annotator's order of operations."""
    generate_clone(tmp_path, "locating", 3 if size == "small" else 1, seed=5, size=size)
    for q in load_questions(tmp_path, "locating"):
        data = read_graph_data(q.script)
        sol = solve_locating(locating_scenario(data), q.country, q.home)
        best, effects = reference_locating(data, q.country, q.home)
        assert {o.node: o.profit for o in sol.options} == effects and sol.best == best
