"""The fast DQA script parser against the parser it replaced (a frozen copy in tests/dqa_legacy_parser.py).

``graph_data_from_text`` reads plain DQA files with one regex pass and one ``json.loads`` and sends
anything else through the general path (statement splitter + ``parse_statements``). Whatever path a
file takes, the result must be the old parser's: the same :class:`GraphData`, or the same error with
the same file and line. Checked on generated clones of both scenarios, on files mangled the way DQA's
real files are messy, and on a seeded corpus of several thousand small scripts with hostile lines.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from ragplan.methods.planrag import cql
from ragplan.methods.planrag.building import official_scenario, scenario_from_data as building_scenario
from ragplan.methods.planrag.cql import graph_data_from_bytes, graph_data_from_text, read_graph_data
from ragplan.methods.planrag.data import load_questions
from ragplan.methods.planrag.generate import generate_clone
from ragplan.tools.graphdb.script import ScriptError, split_statements
from tests import dqa_legacy_parser as legacy


def _outcome(parse, text: str):
    try:
        return "ok", parse(text, "f.cql")
    except ScriptError as exc:
        return "error", str(exc)


def _plain(text: str) -> bool:
    """Whether the fast path reads ``text`` by itself (without the general path)."""
    return cql._plain_rows(text.replace("\r\n", "\n").replace("\r", "\n"), "f.cql") is not None


@pytest.mark.parametrize("scenario", ["locating", "building"])
@pytest.mark.parametrize("size", ["small", "official"])
def test_generated_clones_parse_to_the_same_graph_data(tmp_path, scenario, size):
    generate_clone(tmp_path, scenario, 3 if size == "small" else 1, seed=13, size=size)
    for q in load_questions(tmp_path, scenario):
        text = q.script.read_text()
        new = read_graph_data(q.script)
        assert new == legacy.legacy_graph_data(text, str(q.script))
        assert _plain(text)  # generated files (messy lines and all) take the fast path
        assert new.nodes and new.rels
        assert graph_data_from_bytes(q.script.read_bytes(), str(q.script)) == new  # what the loader compiles
        assert len({id(r.dst_key) for r in new.rels}) < len(new.rels)  # maps with the same text shared


# The ways DQA's real files are messy (shared/DQA.md): lines without ';', spacing variants, blank
# lines, the has_has_merchant misspelling, "True"/"False" strings; plus a comment line and CRLF.
def _messy(text: str, rng: random.Random) -> str:
    out = []
    for line in text.split("\n"):
        r = rng.random()
        if line.endswith(";") and r < 0.2:
            line = line[:-1]
        elif r < 0.3:
            line = line.replace(":Trade_node {", ": Trade_node{").replace("(n: ", "(n:")
        elif r < 0.4:
            line = line.replace(", ", ",").replace(":", ": ", 1)
        elif r < 0.45:
            line = re.sub(r"(?<!has_)has_merchant:", "has_has_merchant:", line)
        out.append(line)
        if r > 0.95:
            out.append(rng.choice(["", "   ", "// a note", "  // indented note"]))
    return rng.choice(["\n", "\r\n"]).join(out)


@pytest.mark.parametrize("scenario", ["locating", "building"])
def test_messy_lines_parse_to_the_same_graph_data(tmp_path, scenario):
    generate_clone(tmp_path, scenario, 2, seed=17)
    rng = random.Random(5)
    for q in load_questions(tmp_path, scenario):
        text = _messy(q.script.read_text(), rng)
        assert text != q.script.read_text()
        assert graph_data_from_text(text, "f.cql") == legacy.legacy_graph_data(text, "f.cql")
        assert _plain(text)
        data = text.encode("utf-8")
        assert graph_data_from_bytes(b"\xef\xbb\xbf" + data, "f.cql") == legacy.legacy_graph_data(text, "f.cql")  # BOM


BASE = ('CREATE (a:T {name:"a", x: 1});\n'
        'MATCH (a:T {name:"a"}), (b:T {name:"b"}) CREATE (a)-[r:R {w: 2}]->(b);\n')


def test_maps_json_does_not_read_exactly_take_the_general_path():
    variants = {
        "colon in a string": BASE.replace('name:"a", x', 'name:"a: b", x'),
        "number JSON does not read": BASE.replace("x: 1", "x: .5"),
        "upper-case word": BASE.replace("x: 1", "x: TRUE"),
        "repeated key": BASE.replace("x: 1", "x: 1, x: 2"),
        "trailing comma": BASE.replace("x: 1", "x: 1,"),
        "space before a colon": BASE.replace("x: 1", "x : 1"),
        "tab in a string": BASE.replace('name:"a"', 'name:"a\tb"', 1),
        "empty map with a space": BASE.replace("{w: 2}", "{ }"),
    }
    for name, text in variants.items():
        bodies = [b for f in cql._LINE.findall("\n" + text + "\n") for b in (f[1], f[4], f[7], f[10]) if b]
        assert cql._json_maps(list(dict.fromkeys(bodies))) is None, name
        assert not _plain(text), name
        assert _outcome(graph_data_from_text, text) == _outcome(legacy.legacy_graph_data, text), name


def test_files_outside_the_plain_form_take_the_general_path_and_agree():
    variants = {
        "wrapped statement": BASE + 'MATCH (a:T {name:"a"}),\n      (b:T {name:"b"})\nCREATE (a)-[:R]->(b);\n',
        "indented line": BASE + '  CREATE (c:T {name:"c"});\n',
        "trailing comment": BASE.replace('x: 1});', 'x: 1}); // note'),
        "two statements on a line": BASE.replace('x: 1});', 'x: 1}); CREATE (d:T {name:"d"});'),
        "escape in a string": BASE.replace('name:"a", x', 'name:"a\\"q", x'),
        "comma in a string": BASE.replace('name:"a", x', 'name:"a, b", x'),
        "single-quoted string": BASE.replace('name:"a", x', "name:'a', x"),
        "backtick key": BASE.replace("x: 1", "`x y`: 1"),
        "semicolon mode": "CREATE (a:T {n:1})\nCREATE (b:T {n:2})\nCREATE (c:T {n:3});\n",
        "no DQA statement": BASE + "MATCH (n) DETACH DELETE n;\n",
        "unknown variable": BASE.replace("(a)-[r:R", "(c)-[r:R"),
        "malformed map": BASE.replace("x: 1", "x: 1 y: 2"),
        "NaN": BASE.replace("x: 1", "x: NaN"),
        "list value": BASE.replace("x: 1", "x: [1]"),
        "non-ASCII names": BASE.replace("(a:T {name", "(ä:Tä {name", 1),
        "non-ASCII spacing": BASE.replace("(a:T {name", "(a:T\xa0{name", 1),
    }
    for name, text in variants.items():
        assert not _plain(text), name
        assert _outcome(graph_data_from_text, text) == _outcome(legacy.legacy_graph_data, text), name
    for name in ("no DQA statement", "unknown variable", "malformed map", "NaN", "list value"):
        assert _outcome(graph_data_from_text, variants[name])[0] == "error", name


# ----------------------------------------------------------------------------------- a hostile corpus

LINES = [
    'CREATE (kongo:Trade_node {name:"kongo", local_value:2.875, is_inland:true, total_power:606.73, outgoing:0.35, ingoing:0.11});',
    'CREATE (SWE:Country {name:"SWE", home_node:"baltic_sea", development:107.373});',
    'MATCH (a:Trade_node {name:"a"}), (b:Trade_node {name:"b"}) CREATE (a)-[r:source{flow:0.105}]->(b);',
    'MATCH (t:Trade_node {name:"t"}), (SWE:Country {name:"SWE"}) CREATE (SWE)-[r:NodeCountry{is_home: false, '
    'has_merchant: "False",base_trading_power: 4.0,calculated_trading_power: 4.0}]->(t);',
    'CREATE (n: Goods {name:"furniture", code: 9, base_price:30, current_price:24.1, pop_demand:120.0});',
    'CREATE (n: Building {id: 1485, name:"building_furniture_manufacturieslevel", level:3});',
    'MATCH (g: Goods{code: 14}), (b: Building{id:1430}) CREATE (g)-[r:Demand{max_demand: 55.9, current_input: 10.19, level: 6}]->(b);',
    'MATCH (g: Goods{code: 42}), (b: Building{id:1435}) CREATE (b)-[r:Supply{max_supply: 89.64, current_output: 91.43,level: 3}]->(g);',
    'MATCH (a:T {name:"x"}), (b:T {name:"y"}) CREATE (a)-[r:R]->(b);',
    'MATCH (a:T {name:"x"}), (b:T {name:"y"}) CREATE (b)-[:R {}]->(a)',
    'MATCH (a:T {name:"x"}), (a:T {name:"y"}) CREATE (a)-[:R]->(a)',
    "create (n:L {})",
    "// a comment line",
    "",
]
VALUES = ["1", "1.5", ".5", "1.", "+1", "-2", "1e5", "1E-3", "007", "-0", "-.5", "true", "false", "null", "TRUE", "True",
          "NULL", "Null", "NaN", "Infinity", '"s"', '"a,b"', '"a:b"', '"a;b"', '"a//b"', '"a{b"', '"a}b"', '"a(b"', "'q'",
          '"it\'s"', '"a\\"b"', '"a\\nb"', '"tab\there"', '"é"', "[1]", '"x", y:2', "", '""', '"a, b: c"', "1.5.5", "1e",
          "0x10", "1_000", "١٢"]
KEYS = ["k", "name", "_k", "`b k`", "k k", "1k", "kä", "true"]
SPACES = ["", " ", "  ", "\t", "\xa0", "\u2003"]


def _mutate(line: str, rng: random.Random) -> str:
    op = rng.randrange(13)
    if op == 0 and line.endswith(";"):
        return line[:-1]
    if op == 1:
        return line + rng.choice([";", ";;", " ;", "; ", "; // c", " // c", "; CREATE (z:Z {a:1});"])
    if op == 2:
        i = rng.randrange(len(line) + 1)
        return line[:i] + rng.choice(SPACES) + line[i:]
    if op == 3:
        return rng.choice(SPACES[1:]) + line
    if op == 4 and "{" in line:
        i = line.index("{") + 1
        item = f"{rng.choice(KEYS)}{rng.choice(SPACES)}:{rng.choice(SPACES)}{rng.choice(VALUES)}"
        return line[:i] + item + rng.choice([",", ", ", ""]) + line[i:]
    if op == 5 and "}" in line:
        i = line.rindex("}")
        return line[:i] + rng.choice([",", ", ", ",,", " "]) + line[i:]
    if op == 6:
        return line.replace("CREATE", rng.choice(["create", "Create", "CREATe"]), 1).replace("MATCH", "match", 1)
    if op == 7 and "(a)" in line:
        return line.replace("(a)", rng.choice(["(b)", "(c)"]), 1)
    if op == 8:
        i = rng.randrange(len(line) + 1)
        return line[:i] + "\n" + rng.choice(["", "  "]) + line[i:]
    if op == 9 and ":" in line:
        value = re.search(r":\s*([^,}]*)", line[line.find("{"):] if "{" in line else line)
        return line.replace(value.group(1), " " + rng.choice(VALUES), 1) if value and value.group(1) else line
    if op == 10:
        return line.replace('"', "'", 2)
    if op == 11:
        return line.replace("(b:", "(a:", 1)
    return line.replace("{", "{ ", 1)


def _hostile_text(rng: random.Random, lines: list[str], mutations: int, seps: list[str], ends: list[str]) -> str:
    """1–8 lines drawn from ``lines``, up to ``mutations`` of them mutated, joined by a drawn separator and ending."""
    picked = [rng.choice(lines) for _ in range(rng.randint(1, 8))]
    for _ in range(rng.randint(0, mutations)):
        i = rng.randrange(len(picked))
        picked[i] = _mutate(picked[i], rng)
    return rng.choice(seps).join(picked) + rng.choice(ends)


@pytest.mark.parametrize("seed", range(4))
def test_a_hostile_corpus_parses_as_the_old_parser_did(seed):
    rng = random.Random(seed)
    plain = 0
    for _ in range(1500):
        text = _hostile_text(rng, LINES, 6, ["\n", "\n", "\r\n", "\r"], ["", "\n", "\n\n", " "])
        expected = _outcome(legacy.legacy_graph_data, text)
        assert _outcome(graph_data_from_text, text) == expected, repr(text)
        assert _outcome(lambda t, s: graph_data_from_bytes(t.encode("utf-8"), s), text) == expected, repr(text)
        assert _outcome(split_statements, text) == _outcome(legacy.split_statements, text), repr(text)
        plain += _plain(text)
    assert 200 < plain < 1300  # both paths are exercised


# --------------------------------------------------------------------------- the splitter on any Cypher

CYPHER = [
    "MATCH (a:X), (b:Y)", "  CREATE (a)-[:R]->(b)", "CREATE (a)-[:R]->(b);", "MATCH (n) WHERE n.x > 1 AND", "n.y < 2 RETURN n;",
    "WITH 1 AS x", "RETURN x", "MATCH (n)", "OPTIONAL MATCH (n)-[r]->(m)", "RETURN n, m;", "UNWIND [1, 2] AS i",
    "CREATE (:N {i: i});", "MERGE (n:N {name: 'it\\'s'})", "ON CREATE SET n.t = 1;", "CREATE (n {s: \"a; b // c\"});",
    "CREATE (n {`key x`: 1});", "// comment", "  // indented comment", "", "   ", "CREATE (a {x: 1}) // trailing",
    "CREATE (a {x: (1 + 2)});", "RETURN 1 +", "2;", "MATCH (a)-", "[:R]->(b) RETURN b;", "CREATE (a {s: 'multi",
    "line'});", "CREATE (n {set: 1, create: 2});", "MATCH (n) SET n.set = 1", "MATCH (n) RETURN n.x AS", "x;",
    "CREATE (a:X {i: 1}); CREATE (b:X {i: 2});", "CREATE (a:X {i: 1}); // c", "MATCH (n) WHERE n.a = 'x' OR",
    "n.b IN [1] RETURN n;", "MATCH (n) RETURN nOPTIONAL;", "MATCH (n) RETURN n.xand", "CREATE (k:K {v: [1,", "2]});",
    "CALL db.labels()", "MATCH (a) WITH a", "ORDER BY a.x LIMIT 1 RETURN a;", "CREATE (a {s: \"x\\\"y\"});",
]


@pytest.mark.parametrize("seed", range(3))
def test_the_splitter_splits_any_cypher_as_before(seed):
    rng = random.Random(100 + seed)
    for _ in range(800):
        lines = [rng.choice(CYPHER) for _ in range(rng.randint(1, 10))]
        for _ in range(rng.randint(0, 3)):
            i = rng.randrange(len(lines))
            lines[i] = _mutate(lines[i], rng)
        text = rng.choice(["\n", "\r\n"]).join(lines) + rng.choice(["", "\n"])
        assert _outcome(split_statements, text) == _outcome(legacy.split_statements, text), repr(text)


# ------------------------------------------------------------------- building scripts in the official form

def _building_outcome(compile_text, text: str):
    try:
        sc = compile_text(text)
    except ScriptError as exc:
        return "error", str(exc)
    if sc is None:
        return None
    return "ok", {k: (v.dtype.str, v.tolist()) if isinstance(v, np.ndarray) else v
                  for k, v in vars(sc).items() if not k.startswith("_") and k != "all_prices"}


def _general_building(text: str):
    return building_scenario(graph_data_from_text(text, "f.cql"))


@pytest.mark.parametrize("size", ["small", "official"])
def test_official_building_scripts_compile_without_the_general_parser_to_the_same_scenario(tmp_path, size):
    generate_clone(tmp_path, "building", 4, seed=21, size=size)
    for q in load_questions(tmp_path, "building"):
        text = q.script.read_text()
        fast = _building_outcome(lambda t: official_scenario(t, "f.cql"), text)
        assert fast is not None and fast == _building_outcome(_general_building, text)


@pytest.mark.parametrize("seed", range(3))
def test_the_official_building_form_falls_back_or_agrees_on_a_hostile_corpus(seed):
    rng = random.Random(200 + seed)
    lines = [ln for ln in LINES if "Goods" in ln or "Building" in ln or ln.startswith("//") or not ln]
    lines += ['CREATE (n: Goods {name:"tools", code: 42, base_price:30, current_price:24.1, pop_demand:12.5});',
              'CREATE (n: Building {id: 1430, name:"b", level:0});',
              'CREATE (n: Building {id: 1435, name:"a{b", level:2});']
    fast_taken = 0
    for _ in range(1500):
        text = _hostile_text(rng, lines, 4, ["\n", "\n", "\r\n"], ["", "\n", " "])
        fast = _building_outcome(lambda t: official_scenario(t, "f.cql"), text)
        if fast is not None:  # None: the general parser decides
            fast_taken += 1
            assert fast == _building_outcome(_general_building, text), repr(text)
    assert 50 < fast_taken < 1400  # both paths are exercised (an edge to unknown goods or building falls back)
