"""The HTML report (``ragplan eval report RUN… --html``) and ``ragplan compare``.

Runs come from the real runner through ``langchain-openai`` and the local OpenAI-compatible stub. The page
is checked as text (self-contained, escaped, filterable without JavaScript, every family's trace drawn by
its own hook) and in a real browser: headless Chromium (Debian's ``chromium``) renders it, its DOM after
the page's script ran must show the table and a question's trace, a filter given in the URL must hide the
other results, and its screenshot must not be blank. Without chromium the browser tests skip, unless
``RAGPLAN_CHROMIUM_EXPECTED`` is set (scripts/test.sh sets it where it can install chromium, as in CI).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ragplan.cli import main
from ragplan.eval.html_report import outcome_of, render_html_report
from ragplan.eval.runfolder import RunFolder, RunSettings, record_line
from ragplan.registry import families
from tests.auto_reply import auto_responder
from tests.openai_server import OpenAIStub

MODEL = "openai:stub-model"


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


# ------------------------------------------------------------------------------------------- ragplan compare (DQA)
@pytest.fixture(scope="module")
def dqa_compare(tmp_path_factory):
    """`ragplan compare` of planrag and iter_rag on 3 questions of a generated DQA clone (right on odd numbers)."""
    from ragplan.methods.planrag.generate import generate_clone
    from tests.test_eval_runner import agent

    root = tmp_path_factory.mktemp("compare")
    clone = root / "clone"
    generate_clone(clone, "locating", 4, seed=5)
    out = root / "cmp"
    argv = ["compare", "--benchmark", "dqa-locating", "--data", str(clone), "--methods", "planrag,iter_rag",
            "--limit", "3", "--model", MODEL, "--out", str(out), "--no-progress"]
    with OpenAIStub(responder=agent(clone, "locating")) as stub:
        os.environ.pop("OPENAI_API_KEY", None)
        first = _capture(main, [*argv, "--base-url", stub.base_url])
        calls = len(stub.requests)
        again = _capture(main, [*argv, "--base-url", stub.base_url])
        calls_again = len(stub.requests) - calls
    return {"root": root, "clone": clone, "out": out, "argv": argv, "first": first, "again": again,
            "calls": calls, "calls_again": calls_again}


def _capture(fn, argv):
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = fn(argv)
    return code, out.getvalue(), err.getvalue()


def test_compare_runs_every_method_on_the_same_items_and_writes_one_report(dqa_compare):
    code, out, err = dqa_compare["first"]
    assert code == 0, err
    cmp_dir = dqa_compare["out"]
    recs = {m: RunFolder(cmp_dir / m).load_records() for m in ("planrag", "iter_rag")}
    assert set(recs["planrag"]) == set(recs["iter_rag"]) and len(recs["planrag"]) == 3  # the same items
    for m, rs in recs.items():
        assert {r["method"] for r in rs.values()} == {m} and {r["model"] for r in rs.values()} == {MODEL}
        assert sum(r["correct"] for r in rs.values()) == 2  # questions 1 and 3 right, 2 wrong
    table = [ln for ln in out.splitlines() if ln.startswith("| ")]
    assert table[0].split("|")[1].strip() == "run"
    assert {ln.split("|")[1].strip() for ln in table[1:]} == {"planrag", "iter_rag"}
    assert "66.7%" in table[1] and f"report: {cmp_dir / 'report.html'}" in out
    assert dqa_compare["calls"] == 3 * 4 + 3 * 3  # planrag: plan, retrieve, replan, answer; iter_rag: retrieve x2, answer
    page = (cmp_dir / "report.html").read_text()
    assert page.count('class="result ') == 6 and "planrag" in page and "iter_rag" in page
    plots = re.findall(r'<img class="plot" alt="([^"]+)" src="data:image/png;base64,', page)
    assert len(plots) == 4 and any("Figure 5" in p for p in plots)  # comparison, SR/MR, each run's plot.png


def test_compare_again_resumes_and_asks_nothing_twice(dqa_compare):
    code, out, err = dqa_compare["again"]
    assert code == 0, err
    assert dqa_compare["calls_again"] == 0  # every question was already in its run folder
    for m in ("planrag", "iter_rag"):
        assert len((dqa_compare["out"] / m / "results.jsonl").read_text().splitlines()) == 3


def test_compare_refuses_a_folder_made_with_other_settings(dqa_compare, capsys):
    argv = [a if a != "3" else "2" for a in dqa_compare["argv"]]  # --limit 2 into the same --out
    code = main([*argv, "--base-url", "http://127.0.0.1:9/v1"])
    err = capsys.readouterr().err
    assert code == 2 and "other settings" in err and "limit (3 there, 2 now)" in err


def test_compare_names_a_failing_benchmark_comparison_and_still_reports(dqa_compare, monkeypatch):
    """The benchmark's own comparison raising is a named error (exit 1), not a traceback; the table and the page stay."""
    from ragplan.methods.planrag.benchmark import DQABenchmark

    def broken(self, runs):
        raise ZeroDivisionError("division by zero in the hook")

    monkeypatch.setattr(DQABenchmark, "compare", broken, raising=False)
    with OpenAIStub(responder=auto_responder()) as stub:  # (every question is recorded: no request goes out)
        code, out, err = _capture(main, [*dqa_compare["argv"], "--base-url", stub.base_url])
    assert code == 1 and "Traceback" not in err and re.search(r"^\| planrag ", out, re.M) and "report: " in out
    assert err.strip().splitlines()[-1] == (f"error: dqa-locating's own comparison of {dqa_compare['out'] / 'planrag'}, "
                                            f"{dqa_compare['out'] / 'iter_rag'} could not be made: ZeroDivisionError: "
                                            "division by zero in the hook")


def test_compare_bad_input_is_a_clear_error(dqa_compare, tmp_path, capsys):
    base = ["compare", "--benchmark", "dqa-locating", "--data", str(dqa_compare["clone"]), "--model", MODEL,
            "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "x"), "--no-progress"]
    assert main([*base, "--methods", "planrag,no_such_graph"]) == 2
    assert "unknown method 'no_such_graph'" in capsys.readouterr().err
    assert main([*base, "--methods", "planrag,planrag"]) == 2
    assert "twice" in capsys.readouterr().err
    assert main([*base, "--methods", "planrag,think_then_act", "--set", "max_replans=1"]) == 2
    err = capsys.readouterr().err
    assert "--set max_replans: not a setting of think_then_act" in err
    assert main([*base[:2], "no-such-benchmark", *base[3:], "--methods", "planrag"]) == 2
    assert "unknown benchmark" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # nothing ran


# ------------------------------------------------------------------------------------------- mixed families
def test_compare_methods_of_two_families_with_context_only(tmp_path):
    """A Think-then-Act baseline and FuRePA's IRCoT baseline on the same HotpotQA questions, offline."""
    from tests.family_data import furepa as fd_furepa
    from tests.test_datasets import HOTPOT, write_json

    data = write_json(tmp_path / "hotpot.json", HOTPOT[:2])
    steer = {"ShortAnswer": {"answer": "yes"}, "Proposal": fd_furepa._proposal, "EvidenceAnswer": {"answer": "yes"}}
    out = tmp_path / "cmp"
    with OpenAIStub(responder=auto_responder(steer, "yes")) as stub:
        code, stdout, err = _capture(main, ["compare", "--benchmark", "hotpotqa", "--data", str(data), "--context-only",
                                            "--methods", "retrieve_then_read,ircot", "--model", MODEL, "--base-url",
                                            stub.base_url, "--out", str(out), "--no-progress"])
    assert code == 0, err
    for m in ("retrieve_then_read", "ircot"):
        rs = RunFolder(out / m).load_records()
        assert len(rs) == 2 and all(r["error"] == "" and r["retrievals"] >= 1 for r in rs.values()), rs
    page = (out / "report.html").read_text()
    assert ">Queries<" in page and ">Iterations<" in page and ">Evidence<" in page  # each family's own drawing
    header = next(ln for ln in stdout.splitlines() if ln.startswith("| run "))
    assert {"em", "f1"} <= {c.strip() for c in header.split("|")}  # the benchmark's own metrics in the table
    assert "| retrieve_then_read" in stdout and "| ircot" in stdout


def test_compare_reports_only_the_methods_that_ran(tmp_path):
    """A method refused before its first question (furepa without a trained assessor) gets no row of zeros in the
    table or the page; the others are reported and the command exits 1 naming it."""
    from tests.test_datasets import HOTPOT, write_json

    data = write_json(tmp_path / "hotpot.json", HOTPOT[:2])
    out = tmp_path / "cmp"
    with OpenAIStub(responder=auto_responder({"ShortAnswer": {"answer": "yes"}}, "yes")) as stub:
        code, stdout, err = _capture(main, ["compare", "--benchmark", "hotpotqa", "--data", str(data), "--context-only",
                                            "--methods", "furepa,retrieve_then_read", "--model", MODEL, "--base-url",
                                            stub.base_url, "--out", str(out), "--no-progress"])
    assert code == 1 and "error: furepa: RunRefused: assessor_mode 'trained' needs a trained plan assessor" in err
    assert "1 method(s) did not run or failed on every question: furepa" in err
    assert "| retrieve_then_read" in stdout and "| furepa" not in stdout
    page = (out / "report.html").read_text()
    assert "retrieve_then_read" in page and 'data-method="furepa"' not in page


def test_compare_a_method_that_failed_on_every_question_is_an_error(tmp_path):
    """An endpoint that answers nothing: every question of each method is a recorded failure, exit 1, the reason shown."""
    from tests.test_datasets import HOTPOT, write_json

    data = write_json(tmp_path / "hotpot.json", HOTPOT[:1])
    code, _, err = _capture(main, ["compare", "--benchmark", "hotpotqa", "--data", str(data), "--context-only",
                                   "--methods", "retrieve_then_read,standard", "--model", MODEL, "--base-url",
                                   "http://127.0.0.1:9/v1", "--set", "llm_max_retries=0", "--out", str(tmp_path / "c"),
                                   "--no-progress"])
    assert code == 1
    assert "error: standard: every question failed (1 of 1); the first: " in err and "(endpoint http://127.0.0.1:9/v1)" in err
    assert "2 method(s) did not run or failed on every question: retrieve_then_read, standard" in err


# ------------------------------------------------------------------------------------------- every family's hook
@pytest.fixture(scope="module")
def family_runs(tmp_path_factory, every_family_data):
    """One question of each family's method graph through `ragplan eval` (the entry-point tests' data)."""
    root = tmp_path_factory.mktemp("families")
    runs = {}
    for fam in families():
        d = every_family_data[fam.name]
        method = fam.graphs[0].name
        run = root / f"run-{method}"
        with OpenAIStub(responder=auto_responder(d.overrides, d.text)) as stub:
            code, _, err = _capture(main, ["eval", "--method", method, *d.eval(method), "--limit", "1", "--model", MODEL,
                                           "--base-url", stub.base_url, "--out", str(run), "--no-progress"])
        assert code == 0, err
        runs[fam.name] = run
    return runs


#: What each family's trace shows (a section title of its own ``trace_sections``).
DRAWN = {"planrag": ["Plan", "Retrieval steps", "Re-plan verdicts", "Decision check (simulator)"],
         "think_then_act": ["Assessment: ", "Queries"], "reaper": ["Planner calls", "Executed plan", "Tool calls"],
         "furepa": ["Iterations", "Evidence"], "instructrag": ["Candidate paths", "Selected path", "Thought / Action / Observation"]}


def test_every_family_draws_its_own_trace(family_runs, tmp_path, capsys):
    assert set(DRAWN) == {f.name for f in families()}, "a new family: say what its trace shows"
    out = tmp_path / "all.html"
    assert main(["eval", "report", *map(str, family_runs.values()), "--html", str(out)]) == 0
    assert f"written: {out}" in capsys.readouterr().out
    page = out.read_text()
    titles = re.findall(r'<div class="sec-title">([^<]*)</div>', page)
    for fam, want in DRAWN.items():
        for t in want:
            assert any(x.startswith(t) for x in titles), (fam, t)
    assert "does not fit" not in page and "report_sections failed" not in page
    assert page.count('class="result ') == len(family_runs)
    reaper = render_html_report([family_runs["reaper"]])  # one benchmark: its own comparison is on the page
    assert "REAPER plan metrics by method (paper Table 1)" in reaper


def test_a_record_that_does_not_fit_its_result_is_shown_as_stored(tmp_path):
    run = _run_folder(tmp_path / "old", "planrag", [{"id": "q1", "question": "Q?", "answer": "a", "correct": True,
                                                    "steps": "not a list of steps", "plan": ["keep me"]}])
    page = render_html_report([run])
    assert "does not fit PlanRAGResult" in page and "keep me" in page and "not a list of steps" in page


def test_fields_a_family_does_not_draw_are_still_shown():
    """A field added to a result later (and not drawn by its trace_sections) still reaches the report."""
    from pydantic import Field

    from ragplan.state.planrag import PlanRAGResult
    from ragplan.state.result import GraphResult

    class Later(PlanRAGResult):
        later_field: list[dict] = Field(default_factory=list, description="Added after the report was written.")

    titles = [s.title for s in Later.report_sections({"plan": ["a"], "later_field": [{"k": "v"}]})]
    assert titles == ["Plan", "later field"]

    class Plain(GraphResult):  # no drawing of its own: every field by its shape
        notes: str = Field(default="", description="Some notes.")

        def retrievals(self) -> int:
            return 0

    (sec,) = Plain.report_sections({"notes": "hello"})
    assert (sec.title, sec.note, sec.value) == ("notes", "Some notes.", "hello")
    for fam in families():  # what a family says it draws are fields its records have
        assert fam.result.drawn_fields() <= set(fam.result().record()), fam.name


def test_a_drawing_that_fails_shows_the_record_as_stored():
    """A family's trace_sections that raises loses nothing: its fields are shown by their shape, the failure named."""
    from ragplan.state.planrag import PlanRAGResult

    class Broken(PlanRAGResult):
        def trace_sections(self):
            raise RuntimeError("a drawing bug")

    first, *rest = Broken.report_sections({"plan": ["keep me"], "answer": "a"})
    assert first.status == "bad" and "Broken.report_sections failed: RuntimeError: a drawing bug" in first.note
    assert [s.value for s in rest if s.title == "plan"] == [["keep me"]]


# ------------------------------------------------------------------------------------------- the page as text
HOSTILE = "<script>alert('pwned')</script>"


def _run_folder(path: Path, method: str, records: list[dict]) -> Path:
    folder = RunFolder(path)
    folder.save_settings(RunSettings(method=method, benchmark="dqa-locating", data="/nowhere", model=MODEL))
    for r in records:
        folder.append_lines([record_line({"method": method, "model": MODEL, "gold": "node_01", "llm_calls": 2,
                                          "input_tokens": 10, "output_tokens": 5, "latency_s": 0.5, "error": "",
                                          "retrievals": 1, "retrieval_errors": 0, **r})])
    return path


@pytest.fixture
def hostile_page(tmp_path) -> str:
    step = {"index": 1, "action": "graph_db", "thought": '"><img src=x onerror=alert(1)>',
            "query": "MATCH (n) RETURN n", "observation": f"</pre>{HOSTILE}<a href='https://evil.example/'>x</a>"}
    a = _run_folder(tmp_path / "a", "planrag", [
        {"id": "q1", "question": f"Which node? {HOSTILE}", "answer": HOSTILE, "correct": False,
         "plan": [f"step <b>{HOSTILE}</b>"], "steps": [step], "verdict": "<i>node_02 vs best</i>"},
        {"id": "q2", "question": "Second?", "answer": "node_01", "correct": True},
        {"id": "q3", "question": "Third?", "answer": "", "correct": False, "error": "LLM endpoint down", "stop_reason": "llm_error"}])
    b = _run_folder(tmp_path / "b", "iter_rag", [{"id": "q1", "question": "Which node?", "answer": "node_01", "correct": True}])
    return render_html_report([a, b])


def _references(page: str) -> list[tuple[str, str, str]]:
    """Every (tag, attribute, value) of a real element that could load something."""
    from html.parser import HTMLParser

    found: list[tuple[str, str, str]] = []

    class Refs(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.extend((tag, k, v or "") for k, v in attrs if k in ("src", "href", "srcset", "action", "data", "poster"))

    Refs().feed(page)
    return found


def test_the_page_is_self_contained(hostile_page):
    refs = _references(hostile_page)
    assert refs and all(t == "img" and a == "src" and v.startswith("data:image/png;base64,") for t, a, v in refs), refs
    assert not re.search(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", hostile_page)
    assert not re.search(r"@import|url\(", hostile_page)  # no fetched CSS or fonts
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', hostile_page).group(1)
    assert "default-src 'none'" in csp and "img-src data:" in csp


def test_record_text_is_escaped(hostile_page):
    assert HOSTILE not in hostile_page and "<img src=x" not in hostile_page and "evil.example/'>" not in hostile_page
    assert "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in hostile_page
    assert "&lt;i&gt;node_02 vs best&lt;/i&gt;" in hostile_page  # the grade's verdict too
    assert hostile_page.count("<script>") == 1  # the page's own filter script, nothing from a record


def test_filters_have_their_data_and_hide_nothing_without_javascript(hostile_page):
    results = re.findall(r'<details class="result (\w+)" data-method="([^"]+)" data-outcome="(\w+)"( open)?>', hostile_page)
    assert sorted((m, o) for _, m, o, _ in results) == [("iter_rag", "correct"), ("planrag", "correct"),
                                                         ("planrag", "failed"), ("planrag", "wrong")]
    assert all(c == o and opened for c, _, o, opened in results)  # small pages start unfolded
    assert '<form id="filters" hidden>' in hostile_page  # controls appear only when the script runs
    assert not re.search(r'class="(?:question|result)[^"]*"[^>]*\bhidden\b', hostile_page)
    for value in ("correct", "wrong", "failed"):
        assert f'name="outcome" value="{value}"' in hostile_page
    assert 'name="method" value="planrag"' in hostile_page and 'name="method" value="iter_rag"' in hostile_page


def test_outcome_of():
    assert outcome_of({"correct": True}) == "correct" and outcome_of({"correct": False}) == "wrong"
    assert outcome_of({"correct": True, "error": "x"}) == "failed" and outcome_of({"grade_error": "bad"}) == "failed"


# ------------------------------------------------------------------------------------------- in a real browser
def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    reason = "chromium is not installed (apt-get install chromium; scripts/test.sh installs it when run as root)"
    if os.environ.get("RAGPLAN_CHROMIUM_EXPECTED"):
        pytest.fail(reason + ", but RAGPLAN_CHROMIUM_EXPECTED is set")
    pytest.skip(reason)


def _browse(page: Path, tmp_path: Path, *args: str, fragment: str = "") -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", *args, page.resolve().as_uri() + fragment]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def rendered(dqa_compare, tmp_path_factory) -> dict:
    """The compare page rendered once by Chromium: its DOM after the page's script ran, and a 1280x2000 screenshot."""
    tmp = tmp_path_factory.mktemp("browser")
    shot = tmp / "shot.png"
    dom = _browse(dqa_compare["out"] / "report.html", tmp, "--dump-dom", f"--screenshot={shot}",
                  "--window-size=1280,2000").stdout
    return {"dom": dom, "shot": shot}


def test_chromium_shows_the_table_and_a_questions_trace(rendered):
    dom = rendered["dom"]
    table = re.search(r'<h2 id="comparison">Comparison</h2>(.*?)</table>', dom, re.S).group(1)
    heads = re.findall(r"<th>([^<]*)</th>", table)
    assert heads[:5] == ["run", "model", "benchmark", "questions", "accuracy"]
    assert re.findall(r"<tr><td><span>(\w+)</span></td>", table) == ["planrag", "iter_rag"]
    assert '<form id="filters">' in dom and "6 of 6 results shown" in dom  # the page's script ran
    first = dom.split('<section class="question"')[1]
    assert "Retrieval steps" in first and "MATCH (t:Trade_node) RETURN t.name AS n" in first  # query and observation
    assert "Re-plan verdicts" in first and "node_00" in first and "Decision check (simulator)" in first


def test_chromium_filters_by_outcome_and_method_from_the_address(dqa_compare, tmp_path):
    page = dqa_compare["out"] / "report.html"
    dom = _browse(page, tmp_path, "--dump-dom", fragment="#outcome=wrong&hide=iter_rag").stdout
    shown = re.findall(r'<details class="result \w+" data-method="(\w+)" data-outcome="(\w+)"(?![^>]*hidden)', dom)
    assert shown == [("planrag", "wrong")] and "1 of 6 results shown" in dom


def test_chromium_screenshot_is_not_blank(rendered):
    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(rendered["shot"])[..., :3]
    assert img.shape[:2] == (2000, 1280)
    ink = (img < 0.9).any(axis=2).mean()
    rgb = (img * 255).astype(np.uint8).astype(np.uint32)
    # the distinct (r, g, b) triples, each packed into one number (np.unique(axis=0) over the rows counts the same,
    # sorting 2.5 million rows lexicographically: seconds of CPU)
    colours = len(np.unique((rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]))
    assert ink > 0.03 and colours > 50, (ink, colours)
