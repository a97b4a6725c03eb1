"""Bad inputs (issue 13 §3): every loader and script reader, given a truncated, empty, wrong-format or
missing-field file, refuses it with one clear error that names the file and the line or record.

Loaders: QA datasets (ragplan/datasets), the DQA questions and scripts (ragplan/methods/planrag), graph-DB scripts,
local-index passages, REAPER's shop, gold set and plan files, InstructRAG's path files, instruction graph
and agents, FuRePA's saved plan assessor (its training data is read by the QA loader) and REAPER's route
classifier.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from ragplan.cli import main

HOT = {"_id": "a1", "question": "Who directed Alien?", "answer": "Ridley Scott", "type": "bridge", "level": "easy",
       "supporting_facts": [["Alien (film)", 0]], "context": [["Alien (film)", ["Alien is a 1979 film by Ridley Scott."]]]}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def refused(fn: Callable[[], Any], error: type[BaseException] | tuple[type[BaseException], ...], where: str) -> str:
    """``fn()`` raises ``error`` whose one message names ``where`` (the file and its line or record); the message."""
    with pytest.raises(error) as info:
        fn()
    message = str(info.value)
    assert re.search(where, message), f"{message!r} does not name {where!r}"
    assert "Traceback" not in message and len(message.splitlines()) <= 3
    return message


# ------------------------------------------------------------------------------------------ QA datasets

@pytest.mark.parametrize("name, text, where", [
    ("empty.json", "", r"empty\.json: the file is empty"),
    ("cut.json", json.dumps([HOT, HOT])[:-40], r"cut\.json: line 1 column \d+: not valid JSON"),
    ("cut.jsonl", json.dumps(HOT) + "\n" + json.dumps(HOT)[:-30] + "\n", r"cut\.jsonl: line 2: not valid JSON"),
    ("table.csv", "question,answer\nwho,bob\n", r"table\.csv: neither JSON nor JSON Lines"),
    ("other.json", json.dumps([{"prompt": "x", "completion": "y"}]), r"other\.json: record 0: cannot tell the dataset format"),
    ("noq.json", json.dumps([HOT, {k: v for k, v in HOT.items() if k != "question"}]), r"noq\.json: record 1: missing 'question'"),
    ("noa.jsonl", json.dumps(HOT) + "\n" + json.dumps({k: v for k, v in HOT.items() if k != "answer"}) + "\n",
     r"noa\.jsonl: record 1 \(line 2\): missing 'answer'"),
])
def test_qa_datasets(tmp_path, name, text, where):
    from ragplan.datasets.example import DatasetError
    from ragplan.datasets.qa import load_qa

    refused(lambda: load_qa(write(tmp_path / name, text)), DatasetError, where)


# ------------------------------------------------------------------------------------------ DQA

@pytest.fixture
def clone(tmp_path):
    from ragplan.methods.planrag.generate import generate_clone

    generate_clone(tmp_path / "clone", "locating", 3, seed=0)
    return tmp_path / "clone"


@pytest.mark.parametrize("case, where", [
    ("empty", r"simulated_question\.json: the file is empty"),
    ("truncated", r"simulated_question\.json: line \d+ column \d+: not valid JSON"),
    ("wrong format", r"simulated_question\.json should hold a JSON list of questions"),
    ("no question", r"simulated_question\.json: question #2 \(question_num 2\) has no 'question'"),
    ("no answer", r"simulated_question\.json: question #2 \(question_num 2\) has no 'answer'"),
])
def test_dqa_questions(clone, case, where):
    from ragplan.methods.planrag.data import LOCATING_QUESTIONS, DQAError, load_questions

    f = clone / LOCATING_QUESTIONS
    good = f.read_text()
    qs = json.loads(good)
    text = {"empty": "", "truncated": good[:-60], "wrong format": '"questions"',
            "no question": json.dumps([qs[0], {k: v for k, v in qs[1].items() if k != "question"}]),
            "no answer": json.dumps([qs[0], {**qs[1], "answer": "  "}])}[case]
    f.write_text(text)
    refused(lambda: load_questions(clone, "locating"), DQAError, where)


@pytest.mark.parametrize("case, where", [
    ("empty", r"q1\.cql:1: the script is empty"),
    ("comments only", r"q1\.cql:1: the script creates no nodes"),
    ("truncated", r"q1\.cql:\d+: unterminated statement"),
    ("wrong format", r"q1\.cql:1: not a DQA statement"),
    ("node without its name", r"q1\.cql:2: a Trade_node node without its name"),
    ("value not a number", r"q1\.cql:2: a Trade_node property is not a number"),
])
def test_dqa_scripts(clone, case, where):
    from ragplan.methods.planrag.data import LOCATING_SCRIPTS, DQAError, clear_scenario_cache, load_scenario
    from ragplan.tools.graphdb.script import ScriptError

    f = clone / LOCATING_SCRIPTS / "q1.cql"
    good = f.read_text()
    first = next(line for line in good.splitlines() if line.startswith("CREATE (node_"))
    text = {"empty": "", "comments only": "// nothing here\n// still nothing\n", "truncated": good[: len(good) // 2],
            "wrong format": json.dumps({"nodes": [{"name": "a"}]}),
            "node without its name": good.replace(first, re.sub(r'name:"node_\d+", ', "", first), 1),
            "value not a number": good.replace(first, re.sub(r"local_value:[\d.]+", 'local_value:"high"', first), 1)}[case]
    f.write_text(text)
    clear_scenario_cache()
    refused(lambda: load_scenario(f, "locating"), (DQAError, ScriptError), where)
    rc = main(["dqa", "verify", "--data", str(clone), "--scenario", "locating"])
    assert rc == 2  # the clone is refused, with the same file and line on stderr


@pytest.mark.parametrize("name, text, where", [
    ("empty.cql", "", r"empty\.cql:1: the script holds no statements"),
    ("cut.cql", 'CREATE (a:X {name: "a"});\nCREATE (b:X {name: "b', r"cut\.cql:2: unterminated statement"),
    ("json.cql", '{"nodes": [1, 2]}', r"json\.cql:1: Cypher syntax error"),
    ("latin1.cql", None, r"latin1\.cql:2: the file is not UTF-8"),
])
def test_graph_db_scripts(tmp_path, name, text, where):
    from ragplan.tools.graphdb import EmbeddedGraphStore
    from ragplan.tools.graphdb.script import ScriptError

    path = tmp_path / name
    if text is None:
        path.write_bytes(b'CREATE (a:X {name: "a"});\nCREATE (b:X {name: "caf\xe9"});\n')
    else:
        write(path, text)
    refused(lambda: EmbeddedGraphStore.from_script(path), ScriptError, where)


@pytest.mark.parametrize("name, text, where", [
    ("empty.jsonl", "", r"no passages in .*empty\.jsonl"),
    ("cut.jsonl", '{"id": "1", "title": "a", "text": "b"}\n{"id": "2", "tit', r"cut\.jsonl:2: not a JSON object"),
    ("table.jsonl", "id,title,text\n1,a,b\n", r"table\.jsonl:1: not a JSON object"),
    ("notext.jsonl", '{"id": "1", "title": "a"}\n', r"notext\.jsonl:1: no 'contents' \(or 'text'\) field"),
])
def test_index_passages(tmp_path, name, text, where):
    from ragplan.tools.textindex import build_index

    refused(lambda: build_index(write(tmp_path / name, text), tmp_path / "index", progress=False), ValueError, where)
    assert not (tmp_path / "index").exists()  # the folder it made, its work folder and .build.lock: gone
    (tmp_path / "kept").mkdir()
    refused(lambda: build_index(tmp_path / name, tmp_path / "kept", progress=False), ValueError, where)
    assert (tmp_path / "kept").is_dir() and not any((tmp_path / "kept").iterdir())  # the user's folder stays, empty


# ------------------------------------------------------------------------------------------ REAPER

@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    from ragplan.tools.retail import generate_shop

    return generate_shop(tmp_path_factory.mktemp("shop") / "shop", seed=0, n_products=20, n_orders=10)


@pytest.mark.parametrize("file, change, where", [
    ("products.jsonl", lambda s: "", r"products\.jsonl: no records"),
    ("products.jsonl", lambda s: s[:-120], r"products\.jsonl:\d+: not valid JSON"),
    ("products.jsonl", lambda s: "product_id,title\nP1,x\n", r"products\.jsonl:1: not valid JSON"),
    ("products.jsonl", lambda s: s.replace('"product_id"', '"pid"', 1), r"products\.jsonl:1: no 'product_id'"),
    ("products.jsonl", lambda s: "[1, 2]\n" + s, r"products\.jsonl:1: expected a JSON object"),
    ("faq.jsonl", lambda s: s.replace('"faq_id"', '"id"', 1), r"faq\.jsonl:1: no 'faq_id'"),
    ("meta.json", lambda s: s[:25], r"meta\.json: line \d+ column \d+: not valid JSON"),
    ("meta.json", lambda s: " \n", r"meta\.json: the file is empty"),
    ("meta.json", lambda s: json.dumps({k: v for k, v in json.loads(s).items() if k != "today"}),
     r"meta\.json: 'today' should be a date"),
])
def test_reaper_shop(shop, tmp_path, file, change, where):
    from ragplan.tools.retail import ShopError
    from ragplan.tools.retail.shop import load_shop

    bad = tmp_path / "shop"
    shutil.copytree(shop, bad)
    (bad / file).write_text(change((bad / file).read_text()))
    refused(lambda: load_shop(bad), ShopError, where)


@pytest.mark.parametrize("case, where", [
    ("empty", r"gold\.jsonl: no gold examples"),
    ("truncated", r"gold\.jsonl:\d+: not valid JSON"),
    ("wrong format", r"gold\.jsonl:1: not valid JSON"),
    ("no question", r"gold\.jsonl:1: no 'question'"),
])
def test_reaper_gold_set(shop, tmp_path, case, where):
    from ragplan.methods.reaper.goldset import generate_goldset, load_goldset, write_goldset

    good = write_goldset(tmp_path / "good.jsonl", generate_goldset(shop, n=8)).read_text()
    first = json.loads(good.splitlines()[0])
    text = {"empty": "", "truncated": good[:-40], "wrong format": "id,question\n1,where is my order\n",
            "no question": json.dumps({k: v for k, v in first.items() if k != "question"}) + "\n"}[case]
    refused(lambda: load_goldset(write(tmp_path / "gold.jsonl", text)), ValueError, where)


def test_a_plan_file_of_prose_is_invalid_with_the_line_named(tmp_path, capsys):
    """Text outside any step is ignored with a note naming its line; with no step at all the file is no plan (a plan
    without steps, REAPER's no-retrieval plan, is written 'No retrieval needed.')."""
    plan = write(tmp_path / "plan.txt", "I would check the order first, then answer.")
    assert main(["reaper", "validate", str(plan)]) == 1
    out = capsys.readouterr()
    assert "line 1: text outside any step ignored" in out.err and "no plan steps" in out.out


@pytest.mark.parametrize("text, where", [
    ('Step 1: Ask the help centre - #E1 = customer_support("how do I ret', r"line 1: step 1: the call is not closed"),
    ("Step 1: Ask the help centre - #E1 = customer_support()", r"line 1: step 1: .*customer_support"),
    ('Step 1: Search - #E1 = web_search("x")', r"line 1: step 1: .*web_search"),
])
def test_reaper_plan_files(tmp_path, capsys, text, where):
    plan = write(tmp_path / "plan.txt", text)
    assert main(["reaper", "validate", str(plan)]) == 1
    out = capsys.readouterr().out
    assert re.search(where, out), out
    assert f"{plan}: invalid" in out


# ------------------------------------------------------------------------------------------ InstructRAG

GOOD_PATH = {"question": "Who directed The Distant Signal?", "path": ["Search[The Distant Signal]", "Finish[Mira Sorensen]"],
             "answer": "Mira Sorensen", "success": True}


@pytest.mark.parametrize("name, text, where", [
    ("empty.jsonl", "", r"empty\.jsonl: the file is empty"),
    ("cut.jsonl", json.dumps(GOOD_PATH)[:-20] + "\n", r"cut\.jsonl:1: "),
    ("table.jsonl", "question,path\nwho,Search[x]\n", r"table\.jsonl:1: "),
    ("nopath.jsonl", json.dumps({k: v for k, v in GOOD_PATH.items() if k != "path"}) + "\n", r"nopath\.jsonl:1: no 'path'"),
    ("noquestion.jsonl", json.dumps({k: v for k, v in GOOD_PATH.items() if k != "question"}) + "\n",
     r"noquestion\.jsonl:1: no 'question'"),
])
def test_instructrag_path_files(tmp_path, capsys, name, text, where):
    from ragplan.methods.instructrag.paths import read_paths

    f = write(tmp_path / name, text)
    with pytest.raises(ValueError, match=where):  # a file that yields no path at all is refused, naming its problem
        read_paths([f])
    for cmd in (["build-graph", "--paths", str(f), "--out", str(tmp_path / "g")],
                ["split", "--paths", str(f), "--out", str(tmp_path / "sets")]):
        assert main(["instructrag", *cmd]) == 2
        assert re.search(where, capsys.readouterr().err)
    assert not (tmp_path / "sets").exists() or not any((tmp_path / "sets").iterdir())  # split wrote nothing
    # one bad line among good ones is refused too, naming its line (as every reader of a JSONL file does)
    mixed = write(tmp_path / f"mixed-{name}", json.dumps(GOOD_PATH) + "\n" + text)
    if text.strip():
        assert main(["instructrag", "build-graph", "--paths", str(mixed), "--out", str(tmp_path / "g")]) == 2
        assert f"mixed-{name}:2: " in capsys.readouterr().err
        assert not (tmp_path / "g").exists()
    else:
        assert len(read_paths([mixed]).successful) == 1


def test_instructrag_graph_and_agents(tmp_path):
    from ragplan.methods.instructrag.graph import GRAPH_FILE, InstructionGraph
    from ragplan.methods.instructrag.rl_agent import RL_FILE, RLAgent

    g = write(tmp_path / "g" / GRAPH_FILE, '{"format": "ragplan-instruction-graph-1", "delta": 0.4, "instru')
    refused(lambda: InstructionGraph.load(g.parent), ValueError, r"graph\.json: line 1 column \d+: not valid JSON")
    g.write_bytes(b'{"format": "ragplan-instruction-graph-1",\n "delta": "\xe9"}')  # not UTF-8: named, no traceback
    refused(lambda: InstructionGraph.load(g.parent), ValueError, r"graph\.json:2: not UTF-8 text")
    write(g, json.dumps({"format": "ragplan-instruction-graph-1", "delta": 0.4}))
    refused(lambda: InstructionGraph.load(g.parent), ValueError, r"graph\.json: no 'instructions'")
    a = tmp_path / "agents"
    write(a / RL_FILE, "not a torch file")
    refused(lambda: RLAgent.load(a), ValueError, r"the RL-Agent at .*agents cannot be read \(rl_agent\.json / rl_agent\.pt\)")


# ------------------------------------------------------------------------------------------ FuRePA, REAPER's classifier

def test_saved_assessor_and_classifier(tmp_path):
    from ragplan.methods.furepa.scorer import AssessorError, load_assessor
    from ragplan.methods.reaper.classifier import load_classifier

    d = tmp_path / "assessor"
    write(d / "meta.json", '{"features": ["a", "b"], "trees": 3')
    refused(lambda: load_assessor(d), AssessorError, r"assessor/meta\.json: line 1 column \d+: not valid JSON")
    write(d / "meta.json", "")
    refused(lambda: load_assessor(d), AssessorError, r"assessor/meta\.json: the file is empty")
    write(d / "meta.json", "[1, 2]")
    refused(lambda: load_assessor(d), AssessorError, r"assessor/meta\.json: expected a JSON object, got list")
    write(d / "meta.json", json.dumps({"features": ["a"]}))
    refused(lambda: load_assessor(d), AssessorError, r"assessor is not a saved plan assessor \(trees\.npz\)")
    c = tmp_path / "classifier"
    write(c / "meta.json", '{"classes": ["a"')
    refused(lambda: load_classifier(c), ValueError, r"classifier is not a saved route classifier")


# ------------------------------------------------------------------------------------------ one rule for every reader

LLM = ["--base-url", "http://127.0.0.1:9/v1", "--model", "openai:stub-model", "--no-progress"]
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8" * 40  # an image given by mistake
LATIN1 = json.dumps(HOT).encode() + b"\n" + json.dumps({**HOT, "_id": "a2"}).encode().replace(b"Alien is", b"Alien \xe9tait") + b"\n"


@pytest.mark.parametrize("content, line", [(BINARY, 1), (LATIN1, 2)])
@pytest.mark.parametrize("command", ["eval", "instructrag", "furepa"])
def test_a_file_that_is_not_utf8_is_refused_naming_its_line(tmp_path, capsys, command, content, line):
    """``eval --data``, ``instructrag --paths`` and ``furepa --data``: exit 2 naming file and line, nothing written."""
    f, out = tmp_path / "data.jsonl", tmp_path / "out"
    f.write_bytes(content)
    argv = {"eval": ["eval", "--method", "standard", "--benchmark", "hotpotqa", "--data", str(f), *LLM],
            "instructrag": ["instructrag", "build-graph", "--paths", str(f)],
            "furepa": ["furepa", "train-assessor", "--data", str(f), "--context-only"]}[command]
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{f}:{line}: not UTF-8 text" in err and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.parametrize("content, where", [
    (BINARY, r"settings\.json:1: not UTF-8 text"),
    (b'{"method": "standard", "bench', r"settings\.json: not a run's settings \(Unterminated string"),
    (b"[1, 2]", r"settings\.json: not a run's settings"),
    (b'{"method": "standard"}', r"settings\.json: not a run's settings \(.*missing 2 required"),
])
def test_eval_report_and_resume_name_an_unreadable_settings_file(tmp_path, capsys, content, where):
    run = tmp_path / "run"
    run.mkdir()
    (run / "settings.json").write_bytes(content)
    (run / "results.jsonl").write_text("")
    for argv in (["eval", "report", str(run)], ["eval", "--resume", str(run), *LLM]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert re.search(where, err) and "Traceback" not in err, err
    assert (run / "settings.json").read_bytes() == content  # left as it was


def test_a_refused_eval_leaves_no_run_folder(tmp_path, capsys):
    claim = {"id": 1, "claim": "Paris is in France.", "label": "SUPPORTS", "evidence": [[[1, 2, "Paris", 0]]]}
    fever, out = write(tmp_path / "fever.jsonl", json.dumps(claim) + "\n"), tmp_path / "run"
    argv = ["eval", "--method", "standard", "--benchmark", "fever", "--data", str(fever), "--context-only", *LLM]
    assert main([*argv, "--out", str(out)]) == 2  # FEVER ships no paragraphs to index
    assert "context_only needs the questions' own context paragraphs" in capsys.readouterr().err
    assert not out.exists()
