"""Readable figures and tables (issue 9 §4): ordered categories, EM/F1 bars, labels that never overlap,
PlanRAG's Figure 5 from `ragplan eval report RUN… --plot`.

Figures are checked by what they draw (tick labels in order, legend entries, label boxes), not by pixels.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from ragplan.cli import main
from ragplan.methods.planrag.data import load_questions
from ragplan.methods.planrag.generate import generate_clone
from ragplan.eval.figures import format_table, ordered_categories, plot_retrieval_split, plot_run, plot_sweep
from ragplan.eval.report import summarise, summary_markdown
from ragplan.eval.runfolder import RunSettings
from ragplan.eval.runner import evaluate
from ragplan.nodes.planrag.answer import FinalAnswer
from ragplan.nodes.planrag.plan import Plan
from ragplan.nodes.planrag.replan import ReplanDecision
from ragplan.nodes.planrag.retrieve import RetrievalAction
from tests.openai_server import OpenAIStub


def test_one_table_formatter_prints_every_table_style():
    """Run summaries (markdown), sweep/retrieval tables (md), `ragplan cypher` (grid) and the REAPER/InstructRAG
    figure tables (plain) come from one formatter; each style's bytes are pinned here."""
    head, rows = ["name", "n", "score"], [["alpha", 3, "0.50"], ["b", 12, ""]]
    assert format_table(head, rows) == ("| name  | n  | score |\n|-------|----|-------|\n"
                                        "| alpha | 3  | 0.50  |\n| b     | 12 |       |")
    assert format_table(head, rows, style="md") == "| name | n | score |\n|---|---|---|\n| alpha | 3 | 0.50 |\n| b | 12 |  |"
    assert format_table(head, rows, style="grid") == "name  | n  | score\n------+----+------\nalpha | 3  | 0.50\nb     | 12 |"
    assert format_table(head, rows, style="plain", right=True) == "name    n  score\nalpha   3   0.50\nb      12"
    assert format_table(head, rows, style="plain") == "name   n   score\nalpha  3   0.50\nb      12"


def _ticks(ax) -> list[str]:
    return [t.get_text().replace("\n", " ") for t in ax.get_xticklabels()]


def _legend(ax) -> list[str]:
    leg = ax.get_legend()
    return [t.get_text() for t in leg.get_texts()] if leg else []


def _no_overlap(fig, ax) -> bool:
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()]
    return all(not a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_ordered_categories():
    assert ordered_categories(["hard", "easy", "medium"]) == ["easy", "medium", "hard"]
    assert ordered_categories(["Hard", "Easy"]) == ["Easy", "Hard"]
    assert ordered_categories(["1450", "1445", "None", "1440"]) == ["1440", "1445", "1450", "None"]
    assert ordered_categories(["10", "2", "3"]) == ["2", "3", "10"]
    assert ordered_categories(["3hop1", "4hop", "2hop", "3hop2"]) == ["2hop", "3hop1", "3hop2", "4hop"]
    assert ordered_categories(["MR", "none", "SR"]) == ["none", "SR", "MR"]
    assert ordered_categories(["NOT ENOUGH INFO", "REFUTES", "SUPPORTS"]) == ["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]
    assert ordered_categories(["comparison", "bridge"]) == ["bridge", "comparison"]  # nominal: text order
    assert ordered_categories([2, 1, 1]) == ["1", "2"]
    assert ordered_categories(["item 10", "item 2", "x", "7"]) == ["7", "item 2", "item 10", "x"]


def _text_records() -> list[dict]:
    out = []
    for i, (level, em) in enumerate([("hard", 0), ("easy", 1), ("medium", 1), ("easy", 1), ("hard", 1), ("medium", 0)]):
        out.append({"id": str(i), "level": level, "type": "bridge" if i % 2 else "comparison", "correct": bool(em),
                    "em": float(em), "f1": 0.5 + em / 2, "retrievals": i % 3, "llm_calls": 2})
    return out


def test_summary_tables_and_run_plot_are_in_reading_order_with_em_and_f1(tmp_path):
    s = summarise(_text_records(), ["level", "type"], metrics=["em", "f1"])
    assert list(s["groups"]["level"]) == ["easy", "medium", "hard"]
    assert list(s["retrieval"]) == ["none", "SR", "MR"]
    md = summary_markdown(s)
    rows = [line.split("|")[1].strip() for line in md.split("## accuracy by level")[1].split("##")[0].splitlines() if line.startswith("| ")]
    assert rows[1:] == ["easy", "medium", "hard"]
    s["plot_metrics"] = ["em", "f1"]
    fig = plot_run(s, tmp_path / "plot.png")
    assert (tmp_path / "plot.png").stat().st_size > 1000
    level, typ, retrieval = fig.axes
    assert _ticks(level) == ["easy", "medium", "hard"] and _ticks(retrieval) == ["none", "SR", "MR"]
    assert _legend(level) == ["EM", "F1"]  # text benchmarks: EM and F1 bars, not accuracy alone
    assert len(level.patches) == 6  # 3 levels x (EM, F1)
    heights = [round(p.get_height(), 1) for p in level.patches]
    assert heights[:3] == [100.0, 50.0, 50.0]  # EM per level: easy 2/2, medium 1/2, hard 1/2
    assert "EM" in fig._suptitle.get_text() and "F1" in fig._suptitle.get_text()
    # a summary without plot metrics (DQA, old runs) draws accuracy
    del s["plot_metrics"]
    assert _legend(plot_run(s, tmp_path / "acc.png").axes[0]) in ([], ["accuracy"])


def test_many_long_labels_do_not_overlap(tmp_path):
    names = [f"a fairly long category name number {i}" for i in range(12)]
    recs = [{"id": str(i), "cat": n, "correct": i % 2 == 0, "retrievals": 1} for i, n in enumerate(names)]
    s = summarise(recs, ["cat"])
    fig = plot_run(s, tmp_path / "p.png")
    ax = fig.axes[0]
    assert len(_ticks(ax)) == 12 and _no_overlap(fig, ax)
    assert any(t.get_rotation() for t in ax.get_xticklabels())  # turned when crowded
    few = plot_run(summarise(recs[:3], ["cat"]), tmp_path / "q.png")
    assert _no_overlap(few, few.axes[0]) and not any(t.get_rotation() for t in few.axes[0].get_xticklabels())
    assert fig.get_size_inches()[0] > few.get_size_inches()[0] + 3  # the figure widens with its categories


def test_sweep_figure_axes(tmp_path):
    rows = [{"value": v, "overall": {"em": v / 2, "f1": v / 2 + 0.1, "retrieval_ratio": v, "accuracy": v / 2}}
            for v in (0, 0.25, 0.5, 0.75, 1)]
    fig = plot_sweep(rows, "beta_threshold", ["em", "f1", "retrieval_ratio"], tmp_path / "s.png")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "beta_threshold" and _legend(ax) == ["EM", "F1", "retrieval ratio"]
    assert [list(line.get_xdata()) for line in ax.get_lines()][2] == [0, 0.25, 0.5, 0.75, 1]
    assert list(ax.get_lines()[2].get_ydata()) == [0, 25, 50, 75, 100]
    assert ax.get_lines()[2].get_linestyle() == "--"  # the retrieval ratio is dashed


def test_figure5_split_with_shares(tmp_path):
    both = {"iter_rag": {"SR": 3, "MR": 6}, "planrag": {"SR": 3, "MR": 6}}
    split = {"dqa-locating": {"total": 10, "n": {"SR": 3, "MR": 6}, "counts": both,
                              "methods": {"iter_rag": {"SR": 0.5, "MR": 0.2}, "planrag": {"SR": 1.0, "MR": None}}},
             "dqa-building": {"total": 4, "n": {"SR": 4, "MR": 0}, "counts": {m: {"SR": 4, "MR": 0} for m in both},
                              "methods": {"iter_rag": {"SR": 0.25, "MR": None}, "planrag": {"SR": 0.75, "MR": None}}}}
    fig = plot_retrieval_split(split, tmp_path / "f5.png")
    ax = fig.axes[0]
    assert _ticks(ax) == ["dqa-locating SR (30%)", "dqa-locating MR (60%)", "dqa-building SR (100%)",
                          "dqa-building MR (0%)"]
    assert _legend(ax) == ["iter_rag", "planrag"] and _no_overlap(fig, ax)
    assert [round(p.get_height()) for p in ax.patches] == [50, 20, 25, 100, 75]  # None: no bar
    assert [t.get_text() for t in ax.texts] == ["n=3", "n=6", "n=4", "n=0"] * 2  # each bar's own n


def _dqa_agent(clone: Path, scenario: str, retrievals_of):
    """A PlanRAG / IterRAG player whose retrieval count per question is ``retrievals_of(num)``; right on odd nums."""
    questions = load_questions(clone, scenario)

    def respond(req):
        text, tool = req.prompt_text, req.forced_tool
        q = next(q for q in questions if q.question in text)
        n_ret = retrievals_of(q.num)
        if tool == "Plan":
            return Plan(steps=[f"step {i + 1}" for i in range(n_ret)])
        if tool == "RetrievalAction":
            done = text.count("\nObservation:")
            return (RetrievalAction(thought="enough", action="finish") if done >= n_ret
                    else RetrievalAction(thought="look", action="graph_db", action_input="MATCH (t:Trade_node) RETURN t.name AS n"))
        if tool == "ReplanDecision":
            return ReplanDecision(replan=False, reason="fine")
        return FinalAnswer(answer=q.answer if q.num % 2 else "no idea", rationale="r")

    return respond


def test_report_plot_draws_figure_5_from_iter_rags_retrieval_counts(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    clone = tmp_path / "clone"
    generate_clone(clone, "locating", 6, seed=3)
    runs = {}
    for method, count in (("iter_rag", lambda n: 1 if n <= 2 else 2), ("planrag", lambda n: 1)):
        with OpenAIStub(responder=_dqa_agent(clone, "locating", count)) as stub:
            settings = RunSettings(method=method, benchmark="dqa-locating", data=str(clone), model="openai:stub-model",
                                   base_url=stub.base_url, concurrency=2)
            asyncio.run(evaluate(settings, tmp_path / method))
        runs[method] = [json.loads(x) for x in (tmp_path / method / "results.jsonl").read_text().splitlines()]
    assert sorted(r["retrievals"] for r in runs["iter_rag"]).count(1) == 2
    out_png = tmp_path / "fig5.png"
    assert main(["eval", "report", str(tmp_path / "iter_rag"), str(tmp_path / "planrag"), "--plot", str(out_png)]) == 0
    out = capsys.readouterr().out
    assert f"written: {out_png}" in out and out_png.stat().st_size > 1000
    from ragplan.eval.report import comparison, retrieval_split

    c = comparison([tmp_path / "iter_rag", tmp_path / "planrag"])
    split = retrieval_split(c)["dqa-locating"]
    # planrag retrieved once everywhere, yet its questions are split by iter_rag's counts (2 SR, 4 MR), as in the paper
    assert split["total"] == 6 and split["n"] == {"SR": 2, "MR": 4} and split["split_by"] == "iter_rag"
    sr = {r["question_num"] for r in runs["iter_rag"] if r["retrievals"] == 1}
    odd_sr = sum(1 for n in sr if n % 2) / len(sr)
    assert split["methods"]["planrag"]["SR"] == odd_sr and split["methods"]["iter_rag"]["SR"] == odd_sr
    planrag_row = next(line for line in out.splitlines() if line.startswith("| planrag"))
    assert re.search(r"\(2\) \| [\d.]+% \(4\)", planrag_row)
    # a question the reference run did not answer is in neither class, in the table and in the figure alike
    lines = (tmp_path / "iter_rag" / "results.jsonl").read_text().splitlines()
    (tmp_path / "iter_rag" / "results.jsonl").write_text("\n".join(lines[1:]) + "\n")
    c = comparison([tmp_path / "iter_rag", tmp_path / "planrag"])
    split = retrieval_split(c)["dqa-locating"]
    row = next(r for r in c.rows if r[0] == "planrag")
    sr_n, mr_n = (int(re.search(r"\((\d+)\)", cell).group(1)) for cell in row[-6:-4])
    assert (sr_n, mr_n) == (split["n"]["SR"], split["n"]["MR"]) and sr_n + mr_n == 5
    assert split["counts"]["planrag"] == split["n"]  # the n over planrag's bars is the table's
    # --plot without report: an argparse usage error (exit 2), it is a flag of `eval report` only
    with pytest.raises(SystemExit) as exc:
        main(["eval", "--plot", str(out_png), "--method", "planrag"])
    assert exc.value.code == 2


def _run_folder(path: Path, method: str, records: list[dict], model: str = "openai:m") -> Path:
    """A run folder written by hand: settings and one line per record (HotpotQA)."""
    from ragplan.eval.runfolder import RunFolder, record_line

    folder = RunFolder(path)
    folder.save_settings(RunSettings(method=method, benchmark="hotpotqa", data="hotpot.json", model=model))
    for r in records:
        folder.append_lines([record_line({"method": method, "model": model, "question": f"question {r['id']}?",
                                          "gold": "g", **r})])
    return path


def test_figure5_without_iter_rag_draws_the_runs_that_retrieved_with_each_bars_n(tmp_path, capsys):
    from ragplan.eval.html_report import render_html_report
    from ragplan.eval.report import comparison, retrieval_split

    ids = [f"q{i}" for i in range(10)]
    never = _run_folder(tmp_path / "standard", "standard", [{"id": i, "correct": True, "retrievals": 0} for i in ids])
    tta = _run_folder(tmp_path / "tta", "think_then_act",  # 4 SR, 2 MR, 4 without retrieval
                      [{"id": i, "correct": n % 2 == 0, "retrievals": 1 if n < 4 else 2 if n < 6 else 0}
                       for n, i in enumerate(ids)])
    split = retrieval_split(comparison([never, tta]))["hotpotqa"]
    # the run that never retrieved has no SR/MR split: left out, not the source of the counts ("SR (0%)", n=0)
    assert split["left_out"] == ["standard"] and list(split["methods"]) == ["think_then_act"]
    assert split["counts"]["think_then_act"] == {"SR": 4, "MR": 2} and split["n"] == {}
    assert split["methods"]["think_then_act"] == {"SR": 0.5, "MR": 0.5}
    ax = plot_retrieval_split({"hotpotqa": split}, tmp_path / "f.png").axes[0]
    assert _ticks(ax) == ["SR", "MR"] and [t.get_text() for t in ax.texts] == ["n=4", "n=2"]
    out_png = tmp_path / "fig5.png"
    assert main(["eval", "report", str(never), str(tta), "--plot", str(out_png)]) == 0
    assert f"written: {out_png}" in capsys.readouterr().out and out_png.stat().st_size > 1000
    # no run retrieved: no figure, and the command and the report say why
    assert main(["eval", "report", str(never), "--plot", str(tmp_path / "none.png")]) == 0
    assert "no SR/MR figure: none of the runs retrieved" in capsys.readouterr().out
    assert not (tmp_path / "none.png").exists()
    page = render_html_report([never])
    assert "no SR/MR plot: none of the runs retrieved" in page and "Figure 5" not in page


def test_cost_figure_gives_each_run_its_own_colour(tmp_path):
    from ragplan.eval.figures import plot_costs

    s = summarise(_text_records(), [])
    fig = plot_costs(["standard", "cot", "think_then_act"], [s, s, s], tmp_path / "c.png")
    for ax in fig.axes:
        assert len({tuple(p.get_facecolor()) for p in ax.patches}) == 3


def test_comparison_rows_name_runs_as_the_runs_table_does(tmp_path):
    from ragplan.eval.html_report import render_html_report
    from ragplan.eval.report import compare_runs, comparison

    recs = [{"id": "q1", "correct": True, "retrievals": 1}]
    a = _run_folder(tmp_path / "a", "think_then_act", recs, model="openai:small")
    b = _run_folder(tmp_path / "b", "think_then_act", recs, model="openai:large")
    c = comparison([a, b])
    assert c.headers[0] == "run" and [r[0] for r in c.rows] == c.labels == [
        "think_then_act (openai:small)", "think_then_act (openai:large)"]
    assert "| think_then_act (openai:large) |" in compare_runs([a, b])[0]
    same = _run_folder(tmp_path / "again", "think_then_act", recs, model="openai:small")
    assert [r[0] for r in comparison([a, same]).rows] == ["think_then_act (a)", "think_then_act (again)"]
    page = render_html_report([a, b])
    assert page.count("<td><span>think_then_act (openai:large)</span></td>") == 2  # the Runs and Comparison tables


def test_report_lists_questions_in_the_benchmarks_order(tmp_path):
    from ragplan.eval.html_report import render_html_report

    hexes = ["f3a9", "07bc", "c1d2", "5e6f"]  # the dataset's order; written in another (as questions finished)
    first = _run_folder(tmp_path / "a", "standard", [{"id": hexes[p], "position": p, "correct": True}
                                                     for p in (2, 0, 3, 1)])
    assert re.findall(r'class="qid">([^<]+)<', render_html_report([first])) == hexes
    # a run of an older version has no positions: its questions as written (as run), not sorted by id
    old = _run_folder(tmp_path / "old", "standard", [{"id": i, "correct": True} for i in hexes[::-1]])
    assert re.findall(r'class="qid">([^<]+)<', render_html_report([old])) == hexes[::-1]
