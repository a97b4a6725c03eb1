"""``ragplan dqa generate | verify | solve`` through ``ragplan.cli.main``, on generated clones.

Also the DQA parser's tolerance of messy files, end to end: a generated script mangled the way the
real data is messy must give the same answers and effects.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ragplan.cli import main
from ragplan.methods.planrag.data import BUILDING_QUESTIONS, BUILDING_SCRIPTS, LOCATING_QUESTIONS, LOCATING_SCRIPTS, load_questions
from ragplan.methods.planrag.grade import solve_question


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["dqa", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def _generate(capsys, out: Path, scenario: str, n: int, seed: int) -> list[dict]:
    rc, stdout, _ = _run(capsys, "generate", "--scenario", scenario, "--out", out, "--n", n, "--seed", seed)
    assert rc == 0, stdout
    rel = LOCATING_QUESTIONS if scenario == "locating" else BUILDING_QUESTIONS
    return json.loads((out / rel).read_text())


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _last(out: str) -> str:
    return out.rstrip("\n").split("\n")[-1]


def _year_rows(out: str) -> dict[str, list[int]]:
    """The per-year rows of verify's table: year -> [questions, agree, errors]."""
    rows = {}
    for line in out.splitlines():
        m = re.fullmatch(r"(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+%", line)
        if m:
            rows[m.group(1)] = [int(m.group(i)) for i in (2, 3, 4)]
    return rows


# ------------------------------------------------------------------------------------------ generate


@pytest.mark.parametrize("scenario", ["locating", "building"])
def test_generate_is_deterministic_and_writes_the_clone_layout(tmp_path, capsys, scenario):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    qs = _generate(capsys, a, scenario, 4, seed=7)
    _generate(capsys, b, scenario, 4, seed=7)
    _generate(capsys, c, scenario, 4, seed=8)
    assert _files(a) == _files(b)
    assert _files(a) != _files(c)
    assert len(qs) == 4 and [q["question_num"] for q in qs] == [1, 2, 3, 4]
    if scenario == "locating":
        expected = {LOCATING_QUESTIONS} | {f"{LOCATING_SCRIPTS}/q{i}.cql" for i in range(1, 5)}
        assert all({"country", "home", "year", "answer", "business_rules", "question", "goal"} <= q.keys() for q in qs)
    else:
        expected = {BUILDING_QUESTIONS} | {f"{BUILDING_SCRIPTS}/{q['country']}.cql" for q in qs}
        assert all(isinstance(q["answer"], int) and q["goods"] for q in qs)
    assert set(_files(a)) == expected
    capsys.readouterr()
    rc, out, _ = _run(capsys, "generate", "--scenario", scenario, "--out", tmp_path / "d", "--n", 2, "--seed", 1)
    assert rc == 0 and out.startswith(f"wrote 2 {scenario} questions and ") and f"/data/{scenario}" in out


def test_official_size_writes_the_official_layout(tmp_path):
    """A question file per locating question, at most 20 questions (and more than one content) per script; a building
    script per question."""
    from collections import Counter

    from ragplan.methods.planrag.generate import generate_clone

    qs = generate_clone(tmp_path, "locating", 22, seed=0, size="official")
    files = sorted((tmp_path / LOCATING_SCRIPTS).glob("*.cql"), key=lambda p: int(p.stem[1:]))
    assert [p.name for p in files] == [f"q{q['question_num']}.cql" for q in qs] == [f"q{i}.cql" for i in range(1, 23)]
    shared = Counter(p.read_bytes() for p in files)
    assert 1 < len(shared) < 22 and max(shared.values()) <= 20
    assert len({(q["country"], q["home"]) for q in qs}) == 22
    bq = generate_clone(tmp_path, "building", 3, seed=0, size="official")
    assert sorted(p.stem for p in (tmp_path / BUILDING_SCRIPTS).glob("*.cql")) == sorted(q["country"] for q in bq)
    assert len({q["country"] for q in bq}) == 3


def test_verify_starts_without_the_graph_libraries(tmp_path):
    """`ragplan dqa verify` in a fresh process loads NumPy (building) but no pydantic, LangChain, LangGraph, torch,
    kglite, nor the other commands' modules."""
    import os
    import subprocess
    import sys

    from ragplan.methods.planrag.generate import generate_clone

    generate_clone(tmp_path, "building", 2, seed=0)
    root = Path(__file__).resolve().parents[1]
    code = ("import json, sys; from ragplan.cli import main; rc = main(['dqa', 'verify', '--data', sys.argv[1], "
            "'--scenario', 'building']); print(json.dumps([rc, sorted(sys.modules)]))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env, cwd=root)
    rc, modules = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rc == 0 and "agree 2/2" in proc.stdout
    top = {m.split(".")[0] for m in modules}
    assert "numpy" in top and not top & {"pydantic", "langchain_core", "langgraph", "torch", "kglite", "neo4j"}
    assert not [m for m in modules if m.startswith(("ragplan.methods.instructrag", "ragplan.cli.eval"))]


# -------------------------------------------------------------------------------------------- verify


@pytest.mark.parametrize("scenario", ["locating", "building"])
def test_verify_prints_a_table_per_year_and_agree_last(tmp_path, capsys, scenario):
    qs = _generate(capsys, tmp_path, scenario, 5, seed=3)
    rc, out, err = _run(capsys, "verify", "--data", tmp_path, "--scenario", scenario)
    assert rc == 0 and err == ""
    assert _last(out) == "agree 5/5"
    years = {str(q["year"]) if scenario == "locating" else q["country"][-4:] for q in qs}
    rows = _year_rows(out)
    assert set(rows) == years | {"all"}
    assert rows["all"] == [5, 5, 0]
    assert sum(r[0] for k, r in rows.items() if k != "all") == 5

    rc, out, _ = _run(capsys, "verify", "--data", tmp_path / "data", "--scenario", scenario, "--json")
    lines = out.rstrip("\n").split("\n")
    assert rc == 0 and lines[-1] == "agree 5/5" and len(lines) == 6
    rows_json = [json.loads(line) for line in lines[:-1]]
    assert [r["question_num"] for r in rows_json] == [1, 2, 3, 4, 5]
    assert all(r["agree"] and r["simulated"] == r["gold"] == str(q["answer"]) for r, q in zip(rows_json, qs))

    rc, out, _ = _run(capsys, "verify", "--data", tmp_path, "--scenario", scenario, "--limit", 2)
    assert rc == 0 and _last(out) == "agree 2/2" and _year_rows(out)["all"] == [2, 2, 0]
    rc, out, _ = _run(capsys, "verify", "--data", tmp_path, "--scenario", scenario, "--limit", 3, "--json")
    assert rc == 0 and out.count("\n") == 4 and _last(out) == "agree 3/3"


def test_verify_reports_a_wrong_gold_answer(tmp_path, capsys):
    _generate(capsys, tmp_path, "locating", 4, seed=3)
    qfile = tmp_path / LOCATING_QUESTIONS
    qs = json.loads(qfile.read_text())
    q2 = load_questions(tmp_path, "locating")[1]
    wrong = solve_question(q2).ranked()[-1].node
    assert wrong != qs[1]["answer"]
    right = qs[1]["answer"]
    qs[1]["answer"] = wrong
    qfile.write_text(json.dumps(qs))
    rc, out, err = _run(capsys, "verify", "--data", tmp_path, "--scenario", "locating")
    assert rc == 0 and _last(out) == "agree 3/4"
    assert f"q2: gold '{wrong}', simulator '{right}'" in err
    assert len(err.strip().splitlines()) == 1
    rc, out, _ = _run(capsys, "verify", "--data", tmp_path, "--scenario", "locating", "--json")
    rows = [json.loads(line) for line in out.splitlines()[:-1]]
    assert [r["agree"] for r in rows] == [True, False, True, True] and rows[1]["simulated"] == right
    assert _last(out) == "agree 3/4"


def test_verify_counts_a_broken_script_as_an_error_and_finishes(tmp_path, capsys):
    _generate(capsys, tmp_path, "locating", 4, seed=3)
    script = tmp_path / LOCATING_SCRIPTS / "q2.cql"
    lines = script.read_text().split("\n")
    lines.insert(3, "MATCH (n) DETACH DELETE n;")  # line 4
    script.write_text("\n".join(lines))
    rc, out, err = _run(capsys, "verify", "--data", tmp_path, "--scenario", "locating")
    assert rc == 2 and _last(out) == "agree 3/4"  # every question is checked, then the failure is the exit code
    assert _year_rows(out)["all"] == [4, 3, 1]
    assert "q2: gold" in err and "ScriptError" in err and "q2.cql:4:" in err
    rc, out, _ = _run(capsys, "verify", "--data", tmp_path, "--scenario", "locating", "--json")
    rows = [json.loads(line) for line in out.splitlines()[:-1]]
    assert rc == 2 and _last(out) == "agree 3/4"
    assert "error" in rows[1] and rows[1]["simulated"] is None and "q2.cql:4:" in rows[1]["error"]
    assert not any("error" in r for i, r in enumerate(rows) if i != 1)


def test_verify_splits_many_questions_over_two_processes_with_the_same_output(tmp_path, capsys, monkeypatch):
    """From ``SPLIT_FROM`` questions verify solves the second half in a forked process: the same rows, in the same
    order, with the same disagreements and errors as one process gives (also when the child dies)."""
    import os

    from ragplan.methods.planrag import cli as dqa_cli, grade

    qs = _generate(capsys, tmp_path, "building", dqa_cli.SPLIT_FROM + 3, seed=5)
    qs[-1]["answer"] = -1  # a disagreement in the second half
    (tmp_path / BUILDING_QUESTIONS).write_text(json.dumps(qs))
    (tmp_path / BUILDING_SCRIPTS / f"{qs[-4]['country']}.cql").write_text("MATCH (n) DETACH DELETE n;\n")
    pids, solve = tmp_path / "pids", grade.solve_question

    def recording(q):
        with pids.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return solve(q)

    monkeypatch.setattr(grade, "solve_question", recording)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    split = [_run(capsys, "verify", "--data", tmp_path, "--scenario", "building", *f) for f in ((), ("--json",))]
    solved_by = pids.read_text().split()  # two runs: the first half here, the second in a forked process
    assert len(solved_by) == 2 * len(qs) and solved_by.count(str(os.getpid())) == 2 * (len(qs) // 2)
    assert split[0][0] == 2 and "ScriptError" in split[0][2] and "gold '-1'" in split[0][2]
    parent = os.getpid()
    monkeypatch.setattr(grade, "solve_question",  # a worker that dies: its half is solved here
                        lambda q: solve(q) if os.getpid() == parent else os._exit(1))
    assert [_run(capsys, "verify", "--data", tmp_path, "--scenario", "building", *f) for f in ((), ("--json",))] == split
    monkeypatch.setattr(dqa_cli, "SPLIT_FROM", 10**9)
    assert [_run(capsys, "verify", "--data", tmp_path, "--scenario", "building", *f) for f in ((), ("--json",))] == split


def test_verify_on_a_folder_that_is_not_a_clone(tmp_path, capsys):
    rc, out, err = _run(capsys, "verify", "--data", tmp_path, "--scenario", "building")
    assert rc == 2 and out == "" and err.startswith("error: ") and "not a clone" in err


# --------------------------------------------------------------------------------------------- solve


def test_solve_locating_prints_best_and_ranking(tmp_path, capsys):
    qs = _generate(capsys, tmp_path, "locating", 2, seed=9)
    q = load_questions(tmp_path, "locating")[1]
    sol = solve_question(q)
    rc, out, err = _run(capsys, "solve", "--data", tmp_path, "--scenario", "locating", "--question-num", 2)
    assert rc == 0 and err == ""
    assert f"best decision: {sol.best}   gold answer: {qs[1]['answer']}" in out
    rows = [line.split() for line in out.splitlines() if re.match(r"\s*\d+\s+\S+\s+-?[\d.]+\s+[-+][\d.]+%", line)]
    assert len(rows) == len(sol.options) > 1
    assert [r[0] for r in rows] == [str(i) for i in range(1, len(rows) + 1)]
    assert [r[1] for r in rows] == [o.node for o in sol.ranked()] and rows[0][1] == sol.best
    assert rows[0][3] == f"{sol.option(sol.best).change_pct:+.2f}%"
    assert q.home not in [r[1] for r in rows]

    rc, out, _ = _run(capsys, "solve", "--data", tmp_path, "--scenario", "locating", "--question-num", 2, "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["best"] == doc["gold"] == qs[1]["answer"] and doc["home"] == q.home
    assert [o["node"] for o in doc["options"]] == [o.node for o in sol.ranked()]
    assert doc["options"][0]["change_pct"] == pytest.approx(sol.option(sol.best).change_pct, abs=1e-4)
    assert doc["options"][0]["change_pct"] > 0 and doc["profit_without_merchant"] > 0


def test_solve_building_prints_best_and_ranking_by_price(tmp_path, capsys):
    qs = _generate(capsys, tmp_path, "building", 2, seed=9)
    q = load_questions(tmp_path, "building")[0]
    sol = solve_question(q)
    rc, out, _ = _run(capsys, "solve", "--data", tmp_path, "--scenario", "building", "--question-num", 1)
    assert rc == 0 and f"best decision: {sol.best}   gold answer: {qs[0]['answer']}" in out
    assert f"price of {q.goods} in the script: {sol.script_price:.4f}" in out
    rows = [line.split() for line in out.splitlines() if re.match(r"\s*\d+\s+\d+\s+\S+\s+[\d.]+\s+[-+][\d.]+%", line)]
    assert [int(r[1]) for r in rows] == [o.building_id for o in sol.ranked()] and int(rows[0][1]) == sol.best
    assert [r[3] for r in rows] == [f"{o.price:.4f}" for o in sol.ranked()]

    rc, out, _ = _run(capsys, "solve", "--data", tmp_path, "--scenario", "building", "--question-num", 1, "--json")
    doc = json.loads(out)
    # note: "best" is the int id while "gold" is the question's answer as a string (see the report)
    assert rc == 0 and str(doc["best"]) == str(doc["gold"]) == str(qs[0]["answer"]) and doc["goods"] == q.goods
    prices = [o["price"] for o in doc["options"]]
    assert prices == sorted(prices) and len(prices) == len(sol.options)
    assert prices[0] < doc["price_in_script"]


def test_solve_a_missing_question_number(tmp_path, capsys):
    _generate(capsys, tmp_path, "locating", 2, seed=9)
    rc, out, err = _run(capsys, "solve", "--data", tmp_path, "--scenario", "locating", "--question-num", 99)
    assert rc == 2 and out == "" and err.strip() == "error: no locating question number 99"


def test_solve_on_a_broken_script_is_a_clear_error(tmp_path, capsys):
    _generate(capsys, tmp_path, "locating", 1, seed=9)
    script = tmp_path / LOCATING_SCRIPTS / "q1.cql"
    script.write_text(script.read_text() + "MATCH (n) DETACH DELETE n;\n")
    rc, _, err = _run(capsys, "solve", "--data", tmp_path, "--scenario", "locating", "--question-num", 1)
    assert rc == 2 and "q1.cql:" in err


# ----------------------------------------------------------------------------------- messy scripts


def _mangle(text: str) -> str:
    """Make a generated locating script as messy as DQA's real files."""
    out: list[str] = []
    for i, line in enumerate(text.split("\n")):
        if not line or line.startswith("//"):
            out.append(line)
            continue
        if i % 4 == 0:
            line = line.rstrip(";")  # no trailing ';'
        if i % 2:
            line = re.sub(r"\((\w+):(Trade_node|Country) \{", r"(\1: \2 {", line)  # (t: Trade_node {
        else:
            line = re.sub(r":(Trade_node|Country) \{", r":\1{", line)  # Trade_node{name: …}
        if 'has_merchant: "True"' in line or i % 9 == 0:
            line = re.sub(r"(?<!has_)has_merchant:", "has_has_merchant:", line)  # DQA's misspelling
        out.append(line)
        if i % 10 == 0:
            out.extend(["", "  "])  # blank lines
    return "\n".join(out)


def test_messy_scripts_give_the_same_answers(tmp_path, capsys):
    clean, messy = tmp_path / "clean", tmp_path / "messy"
    _generate(capsys, clean, "locating", 4, seed=21)
    _generate(capsys, messy, "locating", 4, seed=21)
    changed = {"semis": 0, "spaced": 0, "nospace": 0, "merchants": 0, "true_merchants": 0}
    for script in sorted((messy / LOCATING_SCRIPTS).glob("*.cql")):
        text = script.read_text()
        mangled = _mangle(text)
        changed["semis"] += sum(1 for ln in mangled.splitlines() if ln.strip() and not ln.endswith(";")) - \
            sum(1 for ln in text.splitlines() if ln.strip() and not ln.startswith("//") and not ln.endswith(";"))
        changed["spaced"] += mangled.count(": Trade_node {")
        changed["nospace"] += mangled.count(":Trade_node{")
        changed["merchants"] += mangled.count("has_has_merchant:") - text.count("has_has_merchant:")
        changed["true_merchants"] += mangled.count('has_has_merchant: "True"') - text.count('has_has_merchant: "True"')
        script.write_text(mangled)
    assert all(v > 0 for v in changed.values()), changed

    _, clean_out, _ = _run(capsys, "verify", "--data", clean, "--scenario", "locating", "--json")
    rc, messy_out, err = _run(capsys, "verify", "--data", messy, "--scenario", "locating", "--json")
    assert rc == 0 and err == "" and _last(messy_out) == "agree 4/4"
    assert messy_out == clean_out
    for n in range(1, 5):  # the same effects too, not only the same best node
        _, a, _ = _run(capsys, "solve", "--data", clean, "--scenario", "locating", "--question-num", n, "--json")
        _, b, _ = _run(capsys, "solve", "--data", messy, "--scenario", "locating", "--question-num", n, "--json")
        assert json.loads(a) == json.loads(b)


def test_mangled_merchant_flags_matter(tmp_path, capsys):
    """The check above is sensitive: dropping the (misspelt) merchant flags changes the effects."""
    clean, broken = tmp_path / "clean", tmp_path / "broken"
    _generate(capsys, clean, "locating", 4, seed=21)
    _generate(capsys, broken, "locating", 4, seed=21)
    for script in (broken / LOCATING_SCRIPTS).glob("*.cql"):
        script.write_text(script.read_text().replace('has_merchant: "True"', 'xx_merchant: "True"'))
    differ = 0
    for n in range(1, 5):
        _, a, _ = _run(capsys, "solve", "--data", clean, "--scenario", "locating", "--question-num", n, "--json")
        _, b, _ = _run(capsys, "solve", "--data", broken, "--scenario", "locating", "--question-num", n, "--json")
        differ += json.loads(a) != json.loads(b)
    assert differ > 0
