"""The DQA clone loader (``ragplan.methods.planrag.data``) and the grader (``ragplan.methods.planrag.grade``).

Clones are either written by hand (for the loader's error paths) or generated with
``ragplan.methods.planrag.generate.generate_clone`` (whose gold answers come from the simulator). The simulation rules
themselves are checked in tests/test_dqa_simulators.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ragplan.methods.planrag import data as dqa_data
from ragplan.methods.planrag.building import BuildingScenario
from ragplan.methods.planrag.data import (
    BUILDING_QUESTIONS, BUILDING_SCRIPTS, LOCATING_QUESTIONS, LOCATING_SCRIPTS, DQAError, data_root, load_questions,
    load_scenario,
)
from ragplan.methods.planrag.generate import generate_clone
from ragplan.methods.planrag.grade import Verdict, grade, normalise_building, normalise_node, solve_question
from ragplan.methods.planrag.locating import LocatingScenario, solve_locating
from ragplan.tools.graphdb.script import ScriptError

LOC_Q = {
    "question_num": 1, "country": "SWE", "home": "baltic_sea", "year": 1445,
    "business_rules": "Trade flows downstream.", "question": "Where should the merchant go?",
    "goal": "Maximise the profit of SWE.", "answer": "lubeck", "target_gdb": "q1",
}
BLD_Q = {
    "question_num": 1, "country": "USA1836", "goods": "furniture",
    "question": "Which building id should we increase a level by 5 to maximally decrease the market price of furniture?",
    "business_rules": "Prices follow demand and supply.", "answer": 1485, "target_gdb": "USA1836",
}


def _write(root: Path, rel: str, content: object) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(content if isinstance(content, str) else json.dumps(content))
    return p


# --------------------------------------------------------------------------------------------- loader


def test_clone_root_and_its_data_folder_are_both_accepted(tmp_path):
    _write(tmp_path, LOCATING_QUESTIONS, [LOC_Q])
    assert data_root(tmp_path) == tmp_path
    assert data_root(tmp_path / "data") == tmp_path
    via_root = load_questions(tmp_path, "locating")
    via_data = load_questions(tmp_path / "data", "locating")
    assert [q.id for q in via_root] == [q.id for q in via_data] == ["locating-1"]
    assert via_root[0].script == via_data[0].script == tmp_path / LOCATING_SCRIPTS / "q1.cql"


def test_a_folder_that_is_not_a_clone_is_refused_clearly(tmp_path):
    (tmp_path / "something").mkdir()
    with pytest.raises(DQAError, match="not a clone of the DQA repository") as exc:
        load_questions(tmp_path, "locating")
    assert str(tmp_path) in str(exc.value)
    with pytest.raises(DQAError, match="not a clone"):
        data_root(tmp_path / "does-not-exist")


def test_missing_questions_file_names_it(tmp_path):
    (tmp_path / LOCATING_SCRIPTS).mkdir(parents=True)  # a clone, but without its questions
    with pytest.raises(DQAError, match="missing") as exc:
        load_questions(tmp_path, "locating")
    assert "simulated_question.json" in str(exc.value)
    _write(tmp_path, LOCATING_QUESTIONS, [LOC_Q])  # the building questions are still missing
    with pytest.raises(DQAError, match=r"missing .*simulated_questions\.json"):
        load_questions(tmp_path, "building")


def test_invalid_json_is_a_dqa_error(tmp_path):
    _write(tmp_path, LOCATING_QUESTIONS, '[{"question_num": 1, "country": "SWE",')
    with pytest.raises(DQAError, match=r"line 1 column \d+: not valid JSON") as exc:
        load_questions(tmp_path, "locating")
    assert "simulated_question.json" in str(exc.value)


def test_a_question_without_country_is_named(tmp_path):
    second = {k: v for k, v in LOC_Q.items() if k != "country"} | {"question_num": 2}
    _write(tmp_path, LOCATING_QUESTIONS, [LOC_Q, second])
    with pytest.raises(DQAError) as exc:
        load_questions(tmp_path, "locating")
    msg = str(exc.value)
    assert "question #2" in msg and "country" in msg and "simulated_question.json" in msg


def test_building_questions_under_the_singular_file_name(tmp_path):
    _write(tmp_path, BUILDING_QUESTIONS.replace("simulated_questions", "simulated_question"), [BLD_Q])
    (q,) = load_questions(tmp_path, "building")
    assert q.country == "USA1836" and q.goods == "furniture" and q.answer == "1485"
    assert q.script == tmp_path / BUILDING_SCRIPTS / "USA1836.cql"


def test_year_from_field_or_country_code(tmp_path):
    _write(tmp_path, LOCATING_QUESTIONS, [LOC_Q, LOC_Q | {"question_num": 2, "year": "1600"},
                                          LOC_Q | {"question_num": 3, "year": None}])
    _write(tmp_path, BUILDING_QUESTIONS, [BLD_Q, BLD_Q | {"question_num": 2, "country": "GBR1936"},
                                          BLD_Q | {"question_num": 3, "country": "PRU"}])
    assert [q.year for q in load_questions(tmp_path, "locating")] == [1445, 1600, None]
    assert [q.year for q in load_questions(tmp_path, "building")] == [1836, 1936, None]


def test_prompt_is_rules_question_goal(tmp_path):
    _write(tmp_path, LOCATING_QUESTIONS, [LOC_Q])
    _write(tmp_path, BUILDING_QUESTIONS, [BLD_Q])
    (loc,) = load_questions(tmp_path, "locating")
    assert loc.prompt == "Trade flows downstream.\nWhere should the merchant go?\nMaximise the profit of SWE."
    assert loc.home == "baltic_sea" and loc.answer == "lubeck"
    (bld,) = load_questions(tmp_path, "building")  # building questions have no goal
    assert bld.prompt == BLD_Q["business_rules"] + "\n" + BLD_Q["question"]
    assert bld.id == "building-1"


# ------------------------------------------------------------------------------------------ scripts


def test_load_scenario_parses_each_script_once_and_again_when_modified(tmp_path, monkeypatch):
    generate_clone(tmp_path, "locating", 1, seed=3)
    (q,) = load_questions(tmp_path, "locating")
    dqa_data.clear_scenario_cache()
    calls: list[str] = []
    real = dqa_data.graph_data_from_text
    monkeypatch.setattr(dqa_data, "graph_data_from_text", lambda t, source: calls.append(source) or real(t, source))
    first = load_scenario(q.script, "locating")
    assert isinstance(first, LocatingScenario)
    assert load_scenario(q.script, "locating") is first
    assert load_scenario(str(q.script), "locating") is first
    assert len(calls) == 1
    # a later edit: the bytes change -> parsed again (even when size and mtime stay the same)
    text = q.script.read_text()
    some = first.names[0]
    st = q.script.stat()
    edited = text.replace(f'name:"{some}", local_value:', f'name:"{some}", local_value:123.5, old_lv:', 1)
    q.script.write_text(edited)
    second = load_scenario(q.script, "locating")
    assert second is not first and len(calls) == 2
    assert second.local_value[0] == 123.5 and first.local_value[0] != 123.5
    same_size = edited.replace("synthetic", "SYNTHETIC", 1)  # a comment changes, size and mtime do not
    assert len(same_size) == len(edited) and same_size != edited
    q.script.write_text(same_size)
    os.utime(q.script, ns=(st.st_atime_ns, st.st_mtime_ns))
    third = load_scenario(q.script, "locating")
    assert len(calls) == 3 and third is not second and third.local_value == second.local_value


def test_scripts_with_the_same_bytes_are_parsed_once_and_named_by_their_path(tmp_path, monkeypatch):
    generate_clone(tmp_path, "locating", 1, seed=3)
    (q,) = load_questions(tmp_path, "locating")
    copy = q.script.with_name("q99.cql")
    copy.write_bytes(q.script.read_bytes())
    dqa_data.clear_scenario_cache()
    calls: list[str] = []
    real = dqa_data.graph_data_from_text
    monkeypatch.setattr(dqa_data, "graph_data_from_text", lambda t, source: calls.append(source) or real(t, source))
    a, b = load_scenario(q.script, "locating"), load_scenario(copy, "locating")
    assert len(calls) == 1
    assert a.source == str(q.script.resolve()) and b.source == str(copy.resolve())
    assert a.names == b.names and a.records is b.records  # one compiled script, shown under each name
    with pytest.raises(ValueError, match="q99.cql"):  # messages name the file asked about
        solve_locating(b, "C00", "no_such_node")


def test_scenario_cache_is_bounded(tmp_path, monkeypatch):
    generate_clone(tmp_path, "building", 1, seed=2)
    (q,) = load_questions(tmp_path, "building")
    dqa_data.clear_scenario_cache()
    monkeypatch.setattr(dqa_data, "SCENARIO_CACHE_SIZE", 3)
    text = q.script.read_text()
    paths = []
    for i in range(5):  # five different contents (a comment line differs)
        p = tmp_path / f"s{i}.cql"
        p.write_text(f"// copy {i}\n" + text)
        paths.append(p)
        load_scenario(p, "building")
    assert len(dqa_data._cache) == 3
    calls: list[str] = []
    real = dqa_data._compile  # (a building script in the official form never reaches graph_data_from_text)
    monkeypatch.setattr(dqa_data, "_compile", lambda b, source, scenario: calls.append(source) or real(b, source, scenario))
    load_scenario(paths[4], "building")   # recent: kept
    load_scenario(paths[0], "building")   # oldest: evicted, parsed again
    assert calls == [str(paths[0].resolve())]


def test_building_scenario_is_cached_per_script(tmp_path):
    generate_clone(tmp_path, "building", 4, seed=2)
    qs = load_questions(tmp_path, "building")
    assert 1 < len({q.script for q in qs}) < len(qs)  # some questions share a script, some do not
    scs = [load_scenario(q.script, "building") for q in qs]
    assert all(isinstance(s, BuildingScenario) for s in scs)
    for q, s in zip(qs, scs):  # questions on the same script share one compiled scenario
        assert all((s is t) == (q.script == r.script) for r, t in zip(qs, scs))


def test_missing_script_is_a_dqa_error(tmp_path):
    with pytest.raises(DQAError, match="missing script"):
        load_scenario(tmp_path / "q9.cql", "locating")


def test_non_dqa_statement_names_file_and_line(tmp_path):
    generate_clone(tmp_path, "locating", 1, seed=4)
    (q,) = load_questions(tmp_path, "locating")
    lines = q.script.read_text().split("\n")
    lines.insert(5, "MATCH (n) DETACH DELETE n;")  # line 6
    q.script.write_text("\n".join(lines))
    with pytest.raises(ScriptError) as exc:
        load_scenario(q.script, "locating")
    assert exc.value.line == 6
    assert f"{q.script.resolve()}:6:" in str(exc.value) and "not a DQA statement" in str(exc.value)


def test_relationship_to_an_unknown_trade_node_names_its_line(tmp_path):
    text = """\
CREATE (A:Trade_node {name:"A", local_value:1.0, is_inland:false, total_power:2.0, outgoing:0.0, ingoing:0.0});
CREATE (C:Country {name:"C", home_node:"A", development:3.0});
MATCH (a:Trade_node {name:"A"}), (b:Trade_node {name:"B"}) CREATE (a)-[r:source{flow:1.0}]->(b);
"""
    p = _write(tmp_path, "data/locating/queries/LPG_format/q1.cql", text)
    with pytest.raises(ScriptError) as exc:
        load_scenario(p, "locating")
    assert exc.value.line == 3 and "unknown trade node" in str(exc.value)



def test_goods_or_building_without_its_key_names_its_line(tmp_path):
    text = """\
CREATE (n: Goods {name:"grain", code: 1, base_price:30, current_price:30.0, pop_demand:10.0});
CREATE (n: Goods {name:"fish", base_price:30, current_price:30.0, pop_demand:10.0});
"""
    p = _write(tmp_path, "data/building/queries/LPG_format/X1836.cql", text)
    with pytest.raises(ScriptError) as exc:
        load_scenario(p, "building")
    assert exc.value.line == 2 and "Goods node without its code" in str(exc.value)
    p.write_text('CREATE (n: Building {name:"b", level: 1});\n')
    with pytest.raises(ScriptError, match="Building node without its id"):
        load_scenario(p, "building")


# ------------------------------------------------------------------------------------- normalising

NAMES = ["node_03", "node_05", "kongo", "kongo_estuary", "north_sea"]


@pytest.mark.parametrize("answer, expected", [
    ("node_05", "node_05"),
    ("  'node_05'. ", "node_05"),
    ("NODE_05", "node_05"),
    ("Node 05", "node_05"),
    ("node-05", "node_05"),
    ("North Sea", "north_sea"),
    ("northsea", "north_sea"),
    ("The merchant should be placed in north sea, where we have power.", "north_sea"),
    ("I would send it to node_03 because it feeds our home.", "node_03"),
    ("Place it in the Kongo Estuary trade node (downstream of kongo).", "kongo_estuary"),
    ("kongo estuary", "kongo_estuary"),
    ("Kongo", "kongo"),
    ("node_0", None),
    ("somewhere in the baltic", None),
    ("", None),
])
def test_normalise_node(answer, expected):
    assert normalise_node(answer, NAMES) == expected


@pytest.mark.parametrize("answer, expected", [
    ("1485", 1485),
    ("Building 1485.", 1485),
    ("Raise building 1485 by 5 levels", 1485),  # 5 is no building id
    ("level 3 -> 8 of building_1430, not 1485", 1430),
    ("14850", None),
    ("none of them", None),
    ("", None),
])
def test_normalise_building(answer, expected):
    assert normalise_building(answer, [1430, 1485, 1500]) == expected


# --------------------------------------------------------------------------------------------- grade


def test_verdict_describe():
    assert Verdict("node_03", "node_05", False, 1.3, 16.6, "%").describe() == "node_03: +1.3 % vs best node_05 +16.6 %"
    assert Verdict("node_05", "node_05", True, 16.6, 16.6, "%").describe() == "node_05: +16.6 % best"
    assert Verdict("node_03", "node_05", False, -0.04, 2.0, "%").describe() == "node_03: -0.0 % vs best node_05 +2.0 %"
    assert Verdict("1430", "1485", False, 25.0, 20.5, "price").describe() == "1430: price 25.00 vs best 1485 price 20.50"
    none = Verdict(None, "node_05", False, None, 16.6, "%")
    assert none.describe() == "no option recognised in the answer; best node_05 (+16.6 %)"
    d = none.to_dict()
    assert d["chosen"] is None and d["text"] == none.describe() and d["unit"] == "%"
    json.dumps(d)


def test_grade_locating_on_a_generated_clone(tmp_path):
    generate_clone(tmp_path, "locating", 3, seed=5)
    for q in load_questions(tmp_path, "locating"):
        sol = solve_question(q)
        good = grade(q, q.answer)
        assert good.chosen == good.best == q.answer and good.correct and good.unit == "%"
        assert good.chosen_effect == pytest.approx(sol.option(q.answer).change_pct) and good.chosen_effect > 0
        assert good.best_effect == good.chosen_effect
        assert good.describe() == f"{q.answer}: {good.chosen_effect:+.1f} % best"
        assert grade(q, f"We should place our merchant in {q.answer.replace('_', ' ').title()}.").correct

        worse = sol.ranked()[-1]
        assert worse.profit < sol.option(q.answer).profit
        bad = grade(q, worse.node.upper())
        assert bad.chosen == worse.node and not bad.correct and bad.best == q.answer
        assert bad.chosen_effect == pytest.approx(worse.change_pct) and bad.best_effect == good.best_effect
        assert bad.chosen_effect < bad.best_effect
        assert bad.describe() == (f"{worse.node}: {worse.change_pct:+.1f} % vs best {q.answer} "
                                  f"{good.best_effect:+.1f} %")

        junk = grade(q, "I cannot tell from the data.")
        assert junk.chosen is None and not junk.correct and junk.chosen_effect is None
        assert junk.describe().startswith("no option recognised")
        assert grade(q, q.home).chosen is None  # the home node is not an option


def test_grade_building_on_a_generated_clone(tmp_path):
    generate_clone(tmp_path, "building", 3, seed=5)
    for q in load_questions(tmp_path, "building"):
        sol = solve_question(q)
        good = grade(q, f"Building {q.answer}")
        assert good.chosen == good.best == q.answer and good.correct and good.unit == "price"
        assert good.chosen_effect == pytest.approx(sol.option(int(q.answer)).price)
        assert good.chosen_effect < sol.script_price
        assert good.describe() == f"{q.answer}: price {good.chosen_effect:.2f} best"

        worse = sol.ranked()[-1]
        bad = grade(q, str(worse.building_id))
        assert bad.chosen == str(worse.building_id) and not bad.correct
        assert bad.chosen_effect == pytest.approx(worse.price) and bad.best_effect == pytest.approx(good.chosen_effect)
        assert bad.chosen_effect > bad.best_effect
        assert bad.describe() == f"{worse.building_id}: price {worse.price:.2f} vs best {q.answer} price {good.chosen_effect:.2f}"

        junk = grade(q, "no idea")
        assert junk.chosen is None and not junk.correct and junk.chosen_effect is None
        assert junk.describe().startswith("no option recognised")


# ------------------------------------------------------------------ bugs found and fixed (regression tests)


def test_normalise_node_prefers_the_name_the_answer_chooses():
    assert normalise_node("Place it in node_05 rather than node_03.", ["node_03", "node_05"]) == "node_05"


def test_questions_file_that_is_not_a_list(tmp_path):
    _write(tmp_path, LOCATING_QUESTIONS, "5")
    with pytest.raises(DQAError):
        load_questions(tmp_path, "locating")
